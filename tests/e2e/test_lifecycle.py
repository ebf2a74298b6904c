"""Start, load, stop, rmmod -- over and over, under load from four clients:
nothing leaks (slots, frames, memory: kmemleak where the kernel has it),
nothing the clients were told is written is lost, and the kernel reports
nothing.  NETBLK_LIFECYCLE_LOOPS rounds (10 by default; make check-debug
runs 100 on the KASAN/lockdep kernel)."""

from __future__ import annotations

import os
import random
import threading
import time

import pytest

from nbtest import client, kthreads, leaked, start
import netblk as nbc

GUEST_FORWARDS = [7000, 7001]
P1, P2 = "/dev/nvme0n1p1", "/dev/nvme0n1p2"
LOOPS = int(os.environ.get("NETBLK_LIFECYCLE_LOOPS", "10"))


class Client(threading.Thread):
    """Writes its own range and reads it back (rw), or reads a range nobody
    writes (ro), whenever an instance answers.  What a write was acknowledged
    with must be what the next read returns, across restarts; a write that
    got no answer leaves the range unknown until the next one."""

    def __init__(self, host_port, offset, writes):
        super().__init__(daemon=True)
        self.host_port, self.offset, self.writes = host_port, offset, writes
        self.ops = 0
        self.known: bytes | None = None
        self.mismatch: str | None = None
        self.halt = threading.Event()

    def run(self):
        rng = random.Random(self.offset)
        c = nbc.Client("127.0.0.1", self.host_port, timeout=0.2, tries=2)
        while not self.halt.is_set() and not self.mismatch:
            try:
                if self.writes:
                    data = rng.randbytes(4096 + 512 * rng.randrange(8))
                    self.known = None
                    c.write(self.offset, data, window=8)
                    self.known = data
                back = c.read(self.offset, 8192, window=8)
                if self.known is None and not self.writes:
                    self.known = back
                if self.known is not None and back[:len(self.known)] != self.known:
                    self.mismatch = f"range {self.offset}: read back is not what was written"
                self.ops += 1
            except nbc.NetblkError:
                time.sleep(0.05)	# no instance now: try again
        c.close()


def wait_for_ops(clients, more, seconds=60):
    want = [c.ops + more for c in clients]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if all(c.ops >= w for c, w in zip(clients, want)):
            return
        assert not [c.mismatch for c in clients if c.mismatch], [c.mismatch for c in clients]
        time.sleep(0.05)
    pytest.fail(f"no progress in {seconds} s: {[c.ops for c in clients]} (wanted {want})")


def kmemleak(g) -> str:
    """What kmemleak finds now ('' when the kernel has none, or nothing leaked)."""
    if g.run("grep -q debugfs /proc/mounts || mount -t debugfs none /sys/kernel/debug; "
             "test -e /sys/kernel/debug/kmemleak")[0] != 0:
        return ""
    # an object is reported once it is unreferenced and older than 5 s
    g.check("echo scan > /sys/kernel/debug/kmemleak; sleep 6; echo scan > /sys/kernel/debug/kmemleak",
            timeout=600)
    return g.check("cat /sys/kernel/debug/kmemleak")


def test_start_load_stop_rmmod_over_and_over(netblk):
    g = netblk
    kmemleak(g)	# a clean slate
    g.run("echo clear > /sys/kernel/debug/kmemleak 2>/dev/null")
    clients = [Client(g.host_port(7000), 8 << 20, True), Client(g.host_port(7000), 16 << 20, True),
               Client(g.host_port(7001), 4096, False), Client(g.host_port(7001), 1 << 20, False)]
    for c in clients:
        c.start()
    try:
        for i in range(LOOPS):
            g.check("grep -q '^netblk ' /proc/modules || modprobe netblk")
            start(g, P1, 7000)
            start(g, P2, 7001, "ro")
            wait_for_ops(clients, 2)
            if i % 2 == 0:
                g.check("netblkctl stop all", timeout=120)
                assert leaked(g) == {"leaked_slots": 0, "leaked_frames": 0}, f"round {i}"
            g.check("rmmod netblk", timeout=120)	# under load, on odd rounds
            assert "netblk" not in g.check("cat /proc/modules"), f"round {i}"
            assert kthreads(g) == [], f"round {i}"
    finally:
        for c in clients:
            c.halt.set()
        for c in clients:
            c.join(30)
    assert [c.mismatch for c in clients] == [None] * 4
    # what was last acknowledged is on the disk
    g.check("modprobe netblk")
    start(g, P1, 7000)
    with client(g, 7000, timeout=0.5, tries=10) as c:
        for cl in clients[:2]:
            if cl.known is not None:
                assert c.read(cl.offset, len(cl.known)) == cl.known
    g.check("netblkctl stop all && rmmod netblk")
    assert kmemleak(g) == "", "kmemleak found leaks"
