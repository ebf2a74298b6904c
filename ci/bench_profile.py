#!/usr/bin/python3
"""Where the server guest's instructions for a request go (or the
client's: --guest client), by kernel symbol: ci/bench_client.py's two
guests and systems, that guest's TCG plugin in its pcs=on mode
(ci/qemu-plugin/insn_count.c), each row's table of executed blocks over
the same window bench_client counts, its idle table taken off, named by
that guest's /proc/kallsyms (ci/insn_profile.py).  Standard library only.

    ci/bench_profile.py [--systems netblk,netblk-9000,nvme-tcp,nvme-tcp-9000]
                        [--workloads randwrite:4k:32,randread:4k:32] [--seconds 6]
                        [--top 25] [--out bench/profile/profile.json]
                        [--server-cmdline 'init_on_alloc=0']
                        [--base-module OLD/netblk.ko] [--rounds 1]
                        [--guest server|client]

Prints, per row, the top symbols and the groups in instructions a request
(Ki/req); writes every symbol's to --out.  A request here is one the
server's disk served inside the counted window (its sectors of the row's
direction over the block size), not fio's IOPS over the whole row, which
bench_client divides by: a resend stall inside or outside the window
moves that by 20-60 % under a busy host.

--base-module: a netblk.ko to compare with (the tree's before a change):
the server guest runs each netblk system's rows with it and with the
tree's own in turn, --rounds times (so that a busy host's slower rounds,
with fewer completions a wakeup, fall on both alike), and a last table
puts the two side by side (medians).  The client guest keeps the tree's.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import fmt_size, log  # noqa: E402
from bench_client import (CLIENT_IP, CLIENT_MODULES, SERVER_IP, SERVER_MODULES,  # noqa: E402
                          Link, parse_workloads)
from guest import NIC, NIC_MODELS, ROOT, Guest, free_udp_port, link_args  # noqa: E402
from insn_count import PLUGIN, InsnCounter  # noqa: E402
import insn_profile  # noqa: E402

SYSTEMS = ("netblk", "netblk-9000", "nvme-tcp", "nvme-tcp-9000")
DISK = "nvme0n1"  # the server's disk, whose partition every system serves


class ProfiledLink(Link):
    """bench_client's Link that also takes the server's block tables at the
    edges of each row's window and of its idle measurement."""

    profiled = "bench-server"  # the guest whose blocks are counted (--guest)

    def blocks_at(self) -> tuple[dict, float]:
        t0 = time.monotonic()
        table = self.insns[self.profiled].blocks()
        return table, (t0 + time.monotonic()) / 2

    def measure_idle(self, seconds: float = 3.0) -> dict[str, float]:
        """The idle table and counts over one window, after as long again
        for the warm-up's tail (its last completions, fio's exit) to pass:
        an idle window that catches some of it takes too much off."""
        time.sleep(seconds)
        b0, t0 = self.blocks_at()
        n0, ta = self.insns_now(), time.monotonic()
        time.sleep(seconds)
        n1, tb = self.insns_now(), time.monotonic()
        b1, t1 = self.blocks_at()
        self.idle_blocks = (insn_profile.delta(b0, b1), t1 - t0)
        self.idle = {name: (n1[name] - n0[name]) / (tb - ta) for name in n0}
        return self.idle

    def disk_sectors(self) -> tuple[list[int], float]:
        """The server disk's sectors read and written so far (its stat)."""
        f = self.server.check(f"cat /sys/block/{DISK}/stat").split()
        return [int(f[2]), int(f[6])], time.monotonic()

    def count_window(self, t0: float):
        start, end = (t0 + f * self.seconds for f in self.WINDOW)
        time.sleep(max(0.0, start - time.monotonic()))
        s0, sa = self.disk_sectors()
        b0, ta = self.blocks_at()
        n0, na = self.insns_now(), time.monotonic()
        time.sleep(max(0.0, end - na))
        n1, nb = self.insns_now(), time.monotonic()
        b1, tb = self.blocks_at()
        s1, sb = self.disk_sectors()
        self.window_blocks = (insn_profile.delta(b0, b1), tb - ta)
        self.window_sectors = ([b - a for a, b in zip(s0, s1)], sb - sa)
        return n0, n1, nb - na

    def disk_iops(self, rw: str, bs: int) -> float:
        """Requests a second the disk served over the last window: its
        sectors of the row's direction over the request's."""
        sectors, seconds = self.window_sectors
        return sectors[1 if rw.endswith("write") else 0] / (bs // 512) / seconds


def report(name: str, side: str, per_sym: dict[str, float], total: float | None,
           top: int) -> str:
    lines = [f"== {name}: {side} {sum(per_sym.values()) / 1000:.2f} Ki/req in symbols"
             + (f" (bench_client's count, over fio's IOPS: {total:.2f})" if total is not None
                else "")]
    for sym, v in sorted(per_sym.items(), key=lambda kv: -kv[1])[:top]:
        lines.append(f"  {v / 1000:8.2f}  {insn_profile.group(sym):22} {sym}")
    lines.append("  groups:")
    for g, v in sorted(insn_profile.groups(per_sym).items(), key=lambda kv: -kv[1]):
        lines.append(f"  {v / 1000:8.2f}  {g}")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--workloads", default="randwrite:4k:32,randread:4k:32")
    ap.add_argument("--seconds", type=float, default=6)
    ap.add_argument("--warm-up", type=float, default=2)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--nic", default=NIC, choices=sorted(NIC_MODELS))
    ap.add_argument("--out", default=str(ROOT / "bench" / "profile" / "profile.json"))
    ap.add_argument("--server-cmdline", default="",
                    help="more of the server guest's kernel command line")
    ap.add_argument("--base-module", default=None, help="a netblk.ko to compare with")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--guest", default="server", choices=("server", "client"),
                    help="the guest whose instructions are split by symbol")
    a = ap.parse_args()
    if a.base_module and a.guest != "server":
        ap.error("--base-module swaps the server's module: profile --guest server")
    systems = a.systems.split(",")
    if any(s not in SYSTEMS for s in systems):
        ap.error(f"--systems: of {', '.join(SYSTEMS)}")
    workloads = parse_workloads(a.workloads)
    fio = shutil.which("fio")
    if not fio or not PLUGIN.exists():
        ap.error("needs fio and the plugin (make insn-plugin)")
    rmem = Path("/proc/sys/net/core/rmem_default")
    rmem_old = rmem.read_text().strip()
    rmem.write_text(str(8 << 20))
    try:
        return run(a, systems, workloads, fio)
    finally:
        rmem.write_text(rmem_old)


BASE_KO = "/root/netblk-base.ko"


def run_system(a, link, steps, system, workloads) -> tuple[list[dict], list[str]]:
    """@system's setup, warm-up, idle table and rows, teardown."""
    setup, teardown = steps
    profiled = link.server if a.guest == "server" else link.client
    results, texts = [], []
    fio_guest, dev = setup()
    # after the setup: the modules it loaded are in kallsyms
    syms = insn_profile.Kallsyms(profiled.check("cat /proc/kallsyms", timeout=120))
    if a.warm_up > 0:
        link.warm_up(system, fio_guest, dev, a.warm_up)
    link.measure_idle()
    idle = insn_profile.by_symbol(link.idle_blocks[0], syms)
    for rw, bs, depth in workloads:
        what = f"{system} {rw} {fmt_size(bs)} qd{depth}"
        log(f"profile: {what}")
        res = link.run(system, fio_guest, dev, rw, bs, depth)
        busy = insn_profile.by_symbol(link.window_blocks[0], syms)
        # by the requests the disk served in the window, not fio's IOPS over
        # the whole row: a stall inside the window (a resend timeout) would
        # make too few instructions a request of it, and one outside it
        # too many
        iops = link.disk_iops(rw, bs)
        per_sym = insn_profile.per_request(busy, link.window_blocks[1], idle,
                                           link.idle_blocks[1], iops)
        text = report(f"{what}: {res['iops']:.0f} IOPS (fio), {iops:.0f} in the window (disk)",
                      a.guest, per_sym, res.get(f"{a.guest}_kinsn_per_req"), a.top)
        print(text, flush=True)
        texts.append(text)
        results.append({"system": system, "workload": rw, "bs": bs, "depth": depth,
                        "iops": res["iops"], "window_disk_iops": round(iops, 1),
                        "server_kinsn_per_req": res.get("server_kinsn_per_req"),
                        "guest": a.guest,
                        f"{a.guest}_kinsn_per_disk_req": round(sum(per_sym.values()) / 1000, 2),
                        "client_kinsn_per_req": res.get("client_kinsn_per_req"),
                        "groups": {g: round(v, 1) for g, v in
                                   insn_profile.groups(per_sym).items()},
                        "symbols": {s: round(v, 1) for s, v in
                                    sorted(per_sym.items(), key=lambda kv: -kv[1])
                                    if abs(v) >= 1}})
    if system.startswith("netblk"):
        results[-1]["netblk_counters"] = link.netblk_counters()
    teardown()
    return results, texts


def side_by_side(rows: list[dict]) -> str:
    """base and new module, each row's median server Ki/req and its groups'."""
    keys = list(dict.fromkeys((r["system"], r["workload"], r["bs"], r["depth"]) for r in rows))
    out = ["server Ki/req (a request: what the disk served in the window), median over "
           "rounds: base module -> new module"]
    for key in keys:
        by = {m: [r for r in rows if (r["system"], r["workload"], r["bs"], r["depth"]) == key
                  and r.get("module") == m] for m in ("base", "new")}
        if not by["base"] or not by["new"]:
            continue

        def med(rs, f):
            vals = [f(r) for r in rs if f(r) is not None]
            return statistics.median(vals) / 1000 if vals else float("nan")

        b = med(by["base"], lambda r: r[f"{r['guest']}_kinsn_per_disk_req"] * 1000)
        n = med(by["new"], lambda r: r[f"{r['guest']}_kinsn_per_disk_req"] * 1000)
        out.append(f"{key[0]:12} {key[1]:9} {fmt_size(key[2]):>4} qd{key[3]:<3} "
                   f"{b:7.2f} -> {n:7.2f}  ({n / b:.3f}x; rounds "
                   + ", ".join(f"{r['server_kinsn_per_disk_req']:.2f}" for r in by["base"]) + " / "
                   + ", ".join(f"{r['server_kinsn_per_disk_req']:.2f}" for r in by["new"]) + ")")
        groups = sorted({g for r in by["base"] + by["new"] for g in r["groups"]})
        for g in groups:
            gb = med(by["base"], lambda r: r["groups"].get(g, 0))
            gn = med(by["new"], lambda r: r["groups"].get(g, 0))
            if abs(gb) >= 0.05 or abs(gn) >= 0.05:
                out.append(f"    {g:24} {gb:7.2f} -> {gn:7.2f}")
        syms = {}
        for m in ("base", "new"):
            for r in by[m]:
                for sym in r["symbols"]:
                    syms[sym] = 1
        diffs = []
        for sym in syms:
            sb = med(by["base"], lambda r: r["symbols"].get(sym, 0))
            sn = med(by["new"], lambda r: r["symbols"].get(sym, 0))
            diffs.append((sn - sb, sym, sb, sn))
        diffs.sort()
        out.append("    symbols that moved most:")
        for d, sym, sb, sn in diffs[:8] + diffs[-4:]:
            out.append(f"    {sb:7.2f} -> {sn:7.2f}  {sym[:90]}")
    return "\n".join(out)


def run(a, systems, workloads, fio) -> int:
    server_end, client_end = free_udp_port(), free_udp_port()
    model = NIC_MODELS[a.nic][0]
    insns = {"bench-server": InsnCounter("bench-server", pcs=a.guest == "server"),
             "bench-client": InsnCounter("bench-client", pcs=a.guest == "client")}
    programs = {"/usr/bin/fio": Path(fio)}
    files = {BASE_KO: Path(a.base_module)} if a.base_module else {}
    results, texts = [], []
    with Guest("bench-server", checks=False, extra_programs=programs, modules=SERVER_MODULES,
               extra_files=files,
               require_project=True, memory=2048, nic=a.nic, cmdline=a.server_cmdline,
               qemu_args=link_args(server_end, client_end, "52:54:00:09:00:01", model) +
               insns["bench-server"].qemu_args()) as server, \
         Guest("bench-client", checks=False, extra_programs=programs, modules=CLIENT_MODULES,
               require_project=True, memory=2048, nic=a.nic,
               qemu_args=link_args(client_end, server_end, "52:54:00:09:00:02", model) +
               insns["bench-client"].qemu_args()) as client:
        for g, ip in ((server, SERVER_IP), (client, CLIENT_IP)):
            g.check(f"ip link set eth1 up && ip addr add {ip}/24 dev eth1")
        link = ProfiledLink(server, client, a.seconds, insns)
        link.profiled = f"bench-{a.guest}"
        steps = {"netblk": (link.netblk_setup, link.netblk_teardown),
                 "netblk-9000": (link.jumbo_setup, link.jumbo_teardown),
                 "nvme-tcp": (link.nvme_setup, link.nvme_teardown),
                 "nvme-tcp-9000": (link.nvme_jumbo_setup, link.nvme_jumbo_teardown)}
        for system in systems:
            variants = ("base", "new") if a.base_module and system.startswith("netblk") \
                else ("new",)
            for rnd in range(a.rounds):
                for module in variants:
                    if system.startswith("netblk"):
                        server.check(f"rmmod netblk 2>/dev/null; " +
                                     (f"insmod {BASE_KO}" if module == "base" else
                                      "modprobe netblk"))
                    rows, row_texts = run_system(a, link, steps[system], system, workloads)
                    for r, t in zip(rows, row_texts):
                        r.update(module=module, round=rnd)
                        texts.append(f"[{module} module, round {rnd + 1}] {t}")
                    results += rows
    if a.base_module:
        texts.append(side_by_side(results))
        print(texts[-1])
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"rows": results, "seconds": a.seconds,
                               "server_cmdline": a.server_cmdline}, indent=1) + "\n")
    out.with_suffix(".txt").write_text("\n\n".join(texts) + "\n")
    log(f"profile: wrote {out} and {out.with_suffix('.txt')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
