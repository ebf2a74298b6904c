#!/usr/bin/python3
"""netblk demo: boot the test guest and serve one partition on 127.0.0.1.

    ci/demo.py --port N      (make demo PORT=N)
        builds what is missing, boots the guest with UDP 127.0.0.1:N ->
        guest N, runs `modprobe netblk` and `netblkctl start /dev/nvme0n1p1 N`
        in it, then stays in the foreground until SIGINT/SIGTERM, when it
        stops the instance and powers the guest off.
    ci/demo.py --exec "CMD"  (make demo-exec CMD='netblkctl list')
        runs CMD in the running demo's guest through its second agent port,
        build/guest/demo.<pid>.agent2.sock, prints the output and exits with
        CMD's status.

The demo's console log is build/guest/console-demo.<pid>.log, its pid in
build/guest/demo.pid.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from guest import BUILD, ROOT, Guest, GuestError, run_on_socket  # noqa: E402

NAME = "demo"
PIDFILE = BUILD / f"{NAME}.pid"


def demo_running() -> int | None:
    try:
        pid = int(PIDFILE.read_text())
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError):
        return None


def do_exec(cmd: str, timeout: int) -> int:
    pid = demo_running()
    sock = Guest(NAME, pid=pid).agent2_sock if pid else None
    if not sock or not sock.exists():
        print("demo-exec: no demo is running (start one with `make demo`)", file=sys.stderr)
        return 2
    try:
        rc, out = run_on_socket(sock, cmd, timeout)
    except (OSError, GuestError) as e:
        print(f"demo-exec: cannot reach the demo's guest through {sock}: {e}", file=sys.stderr)
        return 2
    sys.stdout.write(out)
    sys.stdout.flush()
    return rc


def do_demo(port: int) -> int:
    if not 1024 <= port <= 65535:
        print("demo: --port wants 1024..65535", file=sys.stderr)
        return 2
    if (pid := demo_running()):
        print(f"demo: a demo already runs (pid {pid})", file=sys.stderr)
        return 2
    # `make demo` has built the module and netblkctl; build them when run alone.
    ko, ctl = ROOT / "kmod/netblk.ko", ROOT / "tools/netblkctl/netblkctl"
    if not ko.exists() or not ctl.exists():
        subprocess.run(["make", "-C", str(ROOT), "bench-module", "netblkctl"], check=True,
                       stdin=subprocess.DEVNULL)

    stop = threading.Event()
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, lambda *_: stop.set())

    g = Guest(NAME, checks=False, forwards=[(port, port)], require_project=True)
    try:
        g.start()
        PIDFILE.write_text(str(os.getpid()))
        g.check("modprobe netblk")
        out = g.check(f"netblkctl start /dev/nvme0n1p1 {port}")
        print(out.rstrip())
        print(f"demo: /dev/nvme0n1p1 of the guest is served on 127.0.0.1:{port} (UDP)")
        print(f"demo: run commands in the guest with: make demo-exec CMD='netblkctl list'")
        print(f"demo: console log {g.console_log}; stop with Ctrl-C or kill {os.getpid()}", flush=True)
        while not stop.wait(1):
            if not g.alive():
                print(f"demo: the guest died; console:\n{g.console_tail()}", file=sys.stderr)
                return 1
        print("demo: stopping", flush=True)
        rc, out = g.run(f"netblkctl stop {port}", timeout=30)
        sys.stdout.write(out)
        return 0
    except GuestError as e:
        print(f"demo: {e}", file=sys.stderr)
        return 1
    finally:
        PIDFILE.unlink(missing_ok=True)
        g.shutdown()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    grp = ap.add_mutually_exclusive_group(required=True)
    grp.add_argument("--port", type=int)
    grp.add_argument("--exec", dest="cmd")
    ap.add_argument("--timeout", type=int, default=120, help="for --exec (seconds)")
    a = ap.parse_args()
    if a.cmd is not None:
        return do_exec(a.cmd, a.timeout)
    return do_demo(a.port)


if __name__ == "__main__":
    sys.exit(main())
