#!/usr/bin/python3
"""Where the server guest's instructions for a request go, by kernel
symbol: ci/bench_client.py's two guests and systems, the server's TCG
plugin in its pcs=on mode (ci/qemu-plugin/insn_count.c), each row's table
of executed blocks over the same window bench_client counts, its idle
table taken off, named by the server guest's /proc/kallsyms
(ci/insn_profile.py).  Standard library only.

    ci/bench_profile.py [--systems netblk,netblk-9000,nvme-tcp,nvme-tcp-9000]
                        [--workloads randwrite:4k:32,randread:4k:32] [--seconds 6]
                        [--top 25] [--out bench/profile/profile.json]

Prints, per row, the top symbols and the groups in instructions a request
(Ki/req, as bench_client's srv Ki/req); writes every symbol's to --out.
"""

from __future__ import annotations

import argparse
import json
import shutil
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


class ProfiledLink(Link):
    """bench_client's Link that also takes the server's block tables at the
    edges of each row's window and of its idle measurement."""

    def blocks_at(self) -> tuple[dict, float]:
        t0 = time.monotonic()
        table = self.insns[self.server.name].blocks()
        return table, (t0 + time.monotonic()) / 2

    def measure_idle(self, seconds: float = 3.0) -> dict[str, float]:
        b0, t0 = self.blocks_at()
        time.sleep(seconds)
        b1, t1 = self.blocks_at()
        self.idle_blocks = (insn_profile.delta(b0, b1), t1 - t0)
        return super().measure_idle(seconds)

    def count_window(self, t0: float):
        start, end = (t0 + f * self.seconds for f in self.WINDOW)
        time.sleep(max(0.0, start - time.monotonic()))
        b0, ta = self.blocks_at()
        n0, na = self.insns_now(), time.monotonic()
        time.sleep(max(0.0, end - na))
        n1, nb = self.insns_now(), time.monotonic()
        b1, tb = self.blocks_at()
        self.window_blocks = (insn_profile.delta(b0, b1), tb - ta)
        return n0, n1, nb - na


def report(name: str, per_sym: dict[str, float], total: float | None, top: int) -> str:
    lines = [f"== {name}: server {sum(per_sym.values()) / 1000:.2f} Ki/req in symbols"
             + (f" (bench's count {total:.2f})" if total is not None else "")]
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
    a = ap.parse_args()
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


def run(a, systems, workloads, fio) -> int:
    server_end, client_end = free_udp_port(), free_udp_port()
    model = NIC_MODELS[a.nic][0]
    insns = {"bench-server": InsnCounter("bench-server", pcs=True),
             "bench-client": InsnCounter("bench-client")}
    programs = {"/usr/bin/fio": Path(fio)}
    results, texts = [], []
    with Guest("bench-server", checks=False, extra_programs=programs, modules=SERVER_MODULES,
               require_project=True, memory=2048, nic=a.nic,
               qemu_args=link_args(server_end, client_end, "52:54:00:09:00:01", model) +
               insns["bench-server"].qemu_args()) as server, \
         Guest("bench-client", checks=False, extra_programs=programs, modules=CLIENT_MODULES,
               require_project=True, memory=2048, nic=a.nic,
               qemu_args=link_args(client_end, server_end, "52:54:00:09:00:02", model) +
               insns["bench-client"].qemu_args()) as client:
        for g, ip in ((server, SERVER_IP), (client, CLIENT_IP)):
            g.check(f"ip link set eth1 up && ip addr add {ip}/24 dev eth1")
        link = ProfiledLink(server, client, a.seconds, insns)
        steps = {"netblk": (link.netblk_setup, link.netblk_teardown),
                 "netblk-9000": (link.jumbo_setup, link.jumbo_teardown),
                 "nvme-tcp": (link.nvme_setup, link.nvme_teardown),
                 "nvme-tcp-9000": (link.nvme_jumbo_setup, link.nvme_jumbo_teardown)}
        for system in systems:
            setup, teardown = steps[system]
            fio_guest, dev = setup()
            # after the setup: the modules it loaded are in kallsyms
            syms = insn_profile.Kallsyms(server.check("cat /proc/kallsyms", timeout=120))
            if a.warm_up > 0:
                link.warm_up(system, fio_guest, dev, a.warm_up)
            link.measure_idle()
            idle = insn_profile.by_symbol(link.idle_blocks[0], syms)
            for rw, bs, depth in workloads:
                what = f"{system} {rw} {fmt_size(bs)} qd{depth}"
                log(f"profile: {what}")
                res = link.run(system, fio_guest, dev, rw, bs, depth)
                busy = insn_profile.by_symbol(link.window_blocks[0], syms)
                per_sym = insn_profile.per_request(busy, link.window_blocks[1], idle,
                                                   link.idle_blocks[1], res["iops"])
                text = report(f"{what}: {res['iops']:.0f} IOPS", per_sym,
                              res.get("server_kinsn_per_req"), a.top)
                print(text, flush=True)
                texts.append(text)
                results.append({"system": system, "workload": rw, "bs": bs, "depth": depth,
                                "iops": res["iops"],
                                "server_kinsn_per_req": res.get("server_kinsn_per_req"),
                                "client_kinsn_per_req": res.get("client_kinsn_per_req"),
                                "groups": {g: round(v, 1) for g, v in
                                           insn_profile.groups(per_sym).items()},
                                "symbols": {s: round(v, 1) for s, v in
                                            sorted(per_sym.items(), key=lambda kv: -kv[1])
                                            if abs(v) >= 1}})
            if system.startswith("netblk"):
                results[-1]["netblk_counters"] = link.netblk_counters()
            teardown()
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"rows": results, "seconds": a.seconds}, indent=1) + "\n")
    out.with_suffix(".txt").write_text("\n\n".join(texts) + "\n")
    log(f"profile: wrote {out} and {out.with_suffix('.txt')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
