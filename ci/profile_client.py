#!/usr/bin/python3
"""Where one fio row of the two-guest benchmark spends its time, per system:
boot the server and client guests of ci/bench_client.py, serve the disk
with each system in turn, run one fio job on the client's block device,
and meanwhile record `perf` in both guests and the host CPU time of each
QEMU thread (vCPUs, the main loop that emulates the NVMe disk and the NICs,
the block-I/O workers).

    ci/profile_client.py [--systems netblk,nvme-tcp] [--rw write] [--bs 131072]
                         [--depth 8] [--seconds 5] [--no-perf] [--callers SYMBOL]

Needs `perf` on the host (Debian: linux-perf; copied into the guests) and
what ci/bench_client.py needs.  Under TCG the time QEMU spends emulating a
device access lands on the guest instruction that made it (perf in the
guest), and in the QEMU thread that emulates it (the host threads).  The
host threads' CPU a request is their CPU time over the window divided by
fio's IOPS times the window: read it as a ratio between systems of one run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "ci"))

import bench_client as bc  # noqa: E402
from guest import Guest  # noqa: E402

# the systems whose servers and clients are all in the kernel (and netblkctl): no program to copy in
SETUPS = ("netblk", "netblk-9000", "nvme-tcp", "nvme-tcp-9000")


def qemu_threads(pid: int) -> dict[str, int]:
    """CPU ticks (user + system) of each thread of QEMU process @pid, summed by thread name."""
    out: dict[str, int] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            name = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
            fields = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the thread ended meanwhile
        out[name] = out.get(name, 0) + int(fields[11]) + int(fields[12])
    return out


def thread_line(before: dict[str, int], after: dict[str, int], requests: float) -> str:
    hz = os.sysconf("SC_CLK_TCK")
    parts = []
    for name in sorted(after, key=lambda n: before.get(n, 0) - after[n]):
        ticks = after[name] - before.get(name, 0)
        if ticks:
            parts.append(f"{name} {ticks / hz * 1e6 / requests:.0f}")
    total = sum(after.values()) - sum(before.values())
    return f"total {total / hz * 1e6 / requests:.0f} us a request: " + ", ".join(parts)


def profile(link: bc.Link, system: str, a, record: str, report: str) -> None:
    setup, teardown = {"netblk": (link.netblk_setup, link.netblk_teardown),
                       "netblk-9000": (link.jumbo_setup, link.jumbo_teardown),
                       "nvme-tcp": (link.nvme_setup, link.nvme_teardown),
                       "nvme-tcp-9000": (link.nvme_jumbo_setup, link.nvme_jumbo_teardown)}[system]
    guest, dev = setup()
    try:
        link.warm_up(system, guest, dev, 2)
        job = bc.fio_job(dev, a.rw, a.bs, a.depth, a.seconds + 4)
        guest.check(f"({job} --output=/tmp/fio.json >/tmp/fio.log 2>&1 &); sleep 2")
        pids = {"server": link.server.proc.pid, "client": link.client.proc.pid}
        before = {n: qemu_threads(p) for n, p in pids.items()}
        t0 = time.monotonic()
        perf_out: dict[str, str] = {}

        def run_perf(g: Guest, name: str) -> None:
            perf_out[name] = g.check(f"cd /tmp && {record}; {report}", timeout=a.seconds + 300)

        workers = [threading.Thread(target=run_perf, args=(g, n))
                   for g, n in ((link.server, "server"), (link.client, "client"))]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        wall = time.monotonic() - t0
        after = {n: qemu_threads(p) for n, p in pids.items()}
        guest.check("sleep 3; while pgrep fio >/dev/null; do sleep 1; done", timeout=120)
        job_out = bc.extract_json(guest.check("cat /tmp/fio.json"))["jobs"][0]
        side = job_out["write"] if "write" in a.rw else job_out["read"]
        iops = side["iops"]
        print(f"===== {system}: fio {a.rw} {a.bs} QD{a.depth}: {iops:.1f} IOPS, "
              f"{side['bw'] / 1024:.1f} MiB/s")
        for n in ("server", "client"):
            print(f"host QEMU threads, {n} guest, over {wall:.1f} s: "
                  f"{thread_line(before[n], after[n], max(iops * wall, 1))}")
            if perf_out[n].strip():
                print(f"--- perf in the {n} guest\n{perf_out[n]}")
        if system.startswith("netblk"):
            print(link.client.check("netblkctl list --attached"))
            print(link.server.check("netblkctl list"))
    finally:
        teardown()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--systems", default="netblk,nvme-tcp", help="of " + ", ".join(SETUPS))
    ap.add_argument("--rw", default="write", help="fio --rw (write)")
    ap.add_argument("--bs", type=int, default=131072, help="bytes (131072)")
    ap.add_argument("--depth", type=int, default=8, help="fio --iodepth (8)")
    ap.add_argument("--seconds", type=int, default=5, help="the window recorded (5)")
    ap.add_argument("--no-perf", action="store_true",
                    help="the host threads alone: no perf in the guests (it costs them CPU)")
    ap.add_argument("--callers", metavar="SYMBOL", help="perf: SYMBOL's call chains instead")
    ap.add_argument("--lines", type=int, default=40, help="perf: the top this many symbols")
    a = ap.parse_args()
    systems = a.systems.split(",")
    for s in systems:
        if s not in SETUPS:
            ap.error(f"unknown system {s!r} (one of {', '.join(SETUPS)})")
    perf = shutil.which("perf")
    fio = shutil.which("fio")
    if not fio or (not perf and not a.no_perf):
        print("profile_client: needs fio and perf (apt-get install fio linux-perf)",
              file=sys.stderr)
        return 2
    if a.no_perf:
        record, report = f"sleep {a.seconds}", "true"
    else:
        record = f"perf record -a -g -e cpu-clock -F 1000 -o /tmp/p.data -- sleep {a.seconds} " \
                 ">/dev/null 2>&1"
        sort = f"-S {a.callers} -g caller" if a.callers else "--sort sym -g none"
        report = (f"perf report -i /tmp/p.data --no-children --stdio {sort} 2>/dev/null | "
                  f"grep -v '^#' | grep -v '^$' | head -{a.lines}")
    programs = {"/usr/bin/fio": Path(fio)}
    if perf:
        programs["/usr/bin/perf"] = Path(perf)
    server_end, client_end = bc.free_udp_port(), bc.free_udp_port()
    model = bc.NIC_MODELS["virtio"][0]
    rmem = Path("/proc/sys/net/core/rmem_default")
    rmem_old = rmem.read_text().strip()
    rmem.write_text(str(8 << 20))	# as ci/bench_client.py's --host-rmem
    try:
        # debug-threads=on: QEMU names its threads (CPU n/TCG, worker), so they can be told apart
        with Guest("prof-server", checks=False, extra_programs=programs,
                   modules=bc.SERVER_MODULES, require_project=True, memory=2048, nic="virtio",
                   qemu_args=bc.link_args(server_end, client_end, "52:54:00:09:00:01", model) +
                   ["-name", "prof-server,debug-threads=on"]) as server, \
             Guest("prof-client", checks=False, extra_programs=programs,
                   modules=bc.CLIENT_MODULES, require_project=True, memory=2048, nic="virtio",
                   qemu_args=bc.link_args(client_end, server_end, "52:54:00:09:00:02", model) +
                   ["-name", "prof-client,debug-threads=on"]) as client:
            for g, ip in ((server, bc.SERVER_IP), (client, bc.CLIENT_IP)):
                g.check(f"ip link set eth1 up && ip addr add {ip}/24 dev eth1")
            link = bc.Link(server, client, a.seconds)
            for system in systems:
                profile(link, system, a, record, report)
    finally:
        rmem.write_text(rmem_old)
    return 0


if __name__ == "__main__":
    sys.exit(main())
