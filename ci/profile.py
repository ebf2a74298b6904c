#!/usr/bin/python3
"""Where a netblk instance's guest CPU goes: boot the test guest, serve
/dev/nvme0n1p1, load it from the host with tools/netblk-load, and run
`perf record -a` in the guest meanwhile; print perf's top symbols, the
guest's CPU split (/proc/stat) and the instance's counters.

    ci/profile.py [--mode randwrite] [--size 1k] [--window 64] [--seconds 6]
                  [--poll US] [--callers SYMBOL]

Needs `perf` on the host (Debian: linux-perf); its binary and libraries are
copied into the guest.  Under TCG the time QEMU spends emulating a device
access (an NVMe doorbell, a virtio notify) lands on the guest instruction
that made it.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "ci"))

from guest import Guest  # noqa: E402

LOAD = ROOT / "tools" / "netblk-load" / "netblk-load"
PORT = 7000
CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def cpu_jiffies(g: Guest) -> list[int]:
    return [int(v) for v in g.check("head -1 /proc/stat").split()[1:1 + len(CPU_FIELDS)]]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", default="randwrite")
    ap.add_argument("--size", default="1k")
    ap.add_argument("--window", type=int, default=64)
    ap.add_argument("--seconds", type=int, default=6)
    ap.add_argument("--poll", type=int, default=0)
    ap.add_argument("--callers", metavar="SYMBOL", help="show SYMBOL's call chains instead")
    a = ap.parse_args()

    perf = shutil.which("perf")
    if not perf or not LOAD.exists():
        print("profile: needs perf (apt-get install linux-perf) and `make load`", file=sys.stderr)
        return 2
    if a.callers:
        report = f"perf report -i /tmp/p.data --no-children --stdio -S {a.callers} -g caller"
    else:
        report = "perf report -i /tmp/p.data --no-children --sort sym --stdio"
    record = f"perf record -a {'-g ' if a.callers else ''}-e cpu-clock -F 1000 -o /tmp/p.data"

    with Guest("profile", checks=False, forwards=[PORT], memory=2048,
               extra_programs={"/usr/bin/perf": Path(perf)}) as g:
        g.check(f"modprobe netblk && netblkctl start /dev/nvme0n1p1 {PORT} poll={a.poll}")
        load = subprocess.Popen([str(LOAD), "127.0.0.1", str(g.host_port(PORT)), "--mode", a.mode,
                                 "--size", a.size, "--window", str(a.window), "--seconds",
                                 str(a.seconds), "--range", "0:256m", "--json"],
                                stdout=subprocess.PIPE, text=True)
        time.sleep(1)
        before = cpu_jiffies(g)
        out = g.check(f"cd /tmp && {record} -- sleep {max(1, a.seconds - 3)} >/dev/null 2>&1; "
                      f"{report} 2>/dev/null | grep -v '^#' | grep -v '^$' | head -40",
                      timeout=a.seconds + 120)
        after = cpu_jiffies(g)
        result = json.loads(load.communicate(timeout=a.seconds + 60)[0])
        print(out)
        split = {f: b - a_ for f, a_, b in zip(CPU_FIELDS, before, after)}
        print("guest CPU while recording (jiffies, all CPUs):", split)
        print(f"netblk-load: {result['iops']:.0f} IOPS, latency us {result['latency_us']}")
        print(g.check("netblkctl list"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
