#!/usr/bin/python3
"""Which file of the module calls which: the link graph of kmod/'s objects.

    ci/kmod_graph.py [--dot] [KMOD_DIR]

A file A calls a file B when A's object leaves a symbol undefined that B's
object defines (nm), so only direct calls and data references count: a
call through an ops table, a work item or a notifier is no edge, which is
how a lower layer hands events up: the server's core reaches its disk and
transport through target_ops.h's tables, the instances raise their events
on a notifier chain (target/instance.c) and kick the reaper by the work
item each keeps.  Prints each file's callees, then every
circle (a strongly connected set of two or more files); exits 1 if there
is one.  Run it after a build of the module (`make bench-module`).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

DEFINED = set("TDBRGSVW")


def symbols(obj: Path) -> tuple[set[str], set[str]]:
    out = subprocess.run(["nm", str(obj)], capture_output=True, text=True, check=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            undefined.add(parts[1])
        elif len(parts) == 3 and parts[1] in DEFINED:
            defined.add(parts[2])
    return defined, undefined


def module_objects(kmod: Path) -> list[Path]:
    """The objects kmod/Kbuild links into netblk.ko (its netblk-y list)."""
    text = (kmod / "Kbuild").read_text().replace("\\\n", " ")
    for line in text.splitlines():
        if line.startswith("netblk-y"):
            return [kmod / o for o in line.split(":=", 1)[1].split()]
    raise SystemExit(f"{kmod}/Kbuild: no netblk-y list")


def graph(kmod: Path) -> dict[str, set[str]]:
    objs = module_objects(kmod)
    missing = [str(o) for o in objs if not o.exists()]
    if missing:
        raise SystemExit(f"not built: {' '.join(missing)} -- run `make bench-module` first")
    owner, needs = {}, {}
    for o in objs:
        name = str(o.relative_to(kmod).with_suffix(""))
        defined, undefined = symbols(o)
        for s in defined:
            owner[s] = name
        needs[name] = undefined
    return {a: {owner[s] for s in u if s in owner and owner[s] != a} for a, u in needs.items()}


def circles(g: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of two or more nodes."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(g[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                out.append(sorted(scc))

    sys.setrecursionlimit(10000)
    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kmod", nargs="?", default=str(Path(__file__).resolve().parents[1] / "kmod"))
    ap.add_argument("--dot", action="store_true", help="print the graph for graphviz instead")
    args = ap.parse_args()
    g = graph(Path(args.kmod))
    if args.dot:
        print("digraph kmod {")
        for a in sorted(g):
            for b in sorted(g[a]):
                print(f'  "{a}" -> "{b}";')
        print("}")
        return 0
    for a in sorted(g):
        print(f"{a} -> {' '.join(sorted(g[a])) or '(nothing)'}")
    found = circles(g)
    for c in found:
        print(f"circle: {' '.join(c)}")
    print(f"{len(g)} files, {len(found)} circle(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
