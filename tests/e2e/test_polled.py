"""poll= on a device with polled queues (NVMe booted with nvme.poll_queues=1):
the worker reaps completions itself, so the disk raises no interrupt for
netblk's I/O -- and nothing is lost when it stops with I/O in flight."""

from __future__ import annotations

import json
import os
import threading
import time

from nbtest import client
import netblk as nbc

GUEST_FORWARDS = [7000]
GUEST_OPTIONS = {"cmdline": "nvme.poll_queues=1"}
P1 = "/dev/nvme0n1p1"


def nvme0_interrupts(g) -> int:
    total = 0
    for line in g.check("grep 'nvme0q[1-9]' /proc/interrupts").splitlines():
        fields = line.split()
        total += sum(int(f) for f in fields[1:] if f.isdigit())
    return total


def test_polled_completions_serve_without_disk_interrupts(netblk):
    g = netblk
    assert g.check("cat /sys/block/nvme0n1/queue/io_poll").strip() == "1"
    g.check(f"netblkctl start {P1} 7000 poll=1000")
    c = client(g, 7000)
    before = nvme0_interrupts(g)
    data = os.urandom(256 << 10)
    c.write(1 << 20, data, window=64)
    assert c.read(1 << 20, len(data), window=64) == data
    assert c.read(1 << 20, 4096, window=1) == data[:4096]
    assert nvme0_interrupts(g) == before, "polled I/O raised disk interrupts"
    s = {e["port"]: e for e in json.loads(g.check("netblkctl list --json"))}[7000]
    assert s["stats"]["io_errors"] == 0


def test_polled_instance_stops_under_load(netblk):
    g = netblk
    g.check(f"netblkctl start {P1} 7000 poll=1000")
    stop = threading.Event()
    ops = [0, 0]

    def load(i):
        # 5 s of silence ends it: soon after the stop, not before it on a busy host
        c = client(g, 7000, timeout=1.0, tries=5)
        while not stop.is_set():
            try:
                c.read(0, 64 << 10, window=64)
            except nbc.NetblkError:
                return
            ops[i] += 1

    threads = [threading.Thread(target=load, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    try:
        # under load: both clients have been served, and go on
        deadline = time.monotonic() + 120
        while min(ops) < 2 and time.monotonic() < deadline and all(t.is_alive() for t in threads):
            time.sleep(0.1)
        assert min(ops) >= 2, f"the clients made no progress before the stop: {ops}"
        g.check("netblkctl stop 7000 && rmmod netblk", timeout=60)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
    assert "netblk" not in g.check("cat /proc/modules")
    g.check("modprobe netblk")


def test_flush_as_the_last_request_is_answered_and_stop_is_prompt(netblk):
    """A data-less FLUSH goes through blk-flush's own request, which polling
    the FLUSH's bio never reaps: it must not be marked polled, or it is never
    answered and stop waits for it forever."""
    g = netblk
    g.check(f"netblkctl start {P1} 7000 poll=1000")
    c = client(g, 7000)
    c.write(1 << 20, os.urandom(4096), window=4)
    c.flush()
    s = {e["port"]: e for e in json.loads(g.check("netblkctl list --json"))}[7000]
    assert s["stats"]["flushes"] == 1 and s["stats"]["inflight_disk"] == 0, s["stats"]
    rc, out = g.run("netblkctl stop 7000 2>&1", timeout=60)
    assert rc == 0 and "stopped serving on port 7000" in out, out
    g.check("rmmod netblk && modprobe netblk", timeout=60)
