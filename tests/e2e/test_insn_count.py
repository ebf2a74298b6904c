"""ci/insn_count.py and its QEMU plugin (ci/qemu-plugin/insn_count.c), from
which `make bench` states what a request costs each guest: each vCPU's count
is of what that vCPU executed, and the same work counts the same twice."""

from __future__ import annotations

import time

import pytest

from guest import FLAVOUR
from insn_count import InsnCounter

COUNTER = InsnCounter("insn_count")
GUEST_OPTIONS = {"qemu_args": COUNTER.qemu_args(), "smp": 2}

# What this checks is QEMU's plugin, the same whatever the guest runs; the
# debug kernel keeps each vCPU busy with its own checking (vCPU 0 ran 470 M
# instructions while the loop's ran 864 M on vCPU 1, 2026-12-07), so no
# loop stands out from the rest there, and make bench never counts on it.
pytestmark = pytest.mark.skipif(FLAVOUR == "debug", reason="the plugin is checked on the "
                                "guests make bench counts on; the debug kernel's own work "
                                "drowns a loop's count")

# about 5 * 10^8 instructions of busybox sh on vCPU 1: a few seconds under TCG
SPIN = "taskset -c 1 sh -c 'i=0; while [ $i -lt 40000 ]; do i=$((i+1)); done'"


def idle_rates(seconds: float = 2.0) -> list[float]:
    """Instructions a second each vCPU executes while the guest does nothing."""
    before, t0 = COUNTER.per_vcpu(), time.monotonic()
    time.sleep(seconds)
    after, t1 = COUNTER.per_vcpu(), time.monotonic()
    return [(b - a) / (t1 - t0) for a, b in zip(before, after)]


def spin_counts(g, idle: list[float]) -> list[int]:
    """What each vCPU executed while vCPU 1 ran SPIN; vCPU 0's less what it
    would have idling as long (a busy host stretches the loop's wall time,
    and the guest's timers tick by the wall clock)."""
    before, t0 = COUNTER.per_vcpu(), time.monotonic()
    g.check(SPIN, timeout=300)
    after, t1 = COUNTER.per_vcpu(), time.monotonic()
    d = [b - a for a, b in zip(before, after)]
    d[0] = max(0, d[0] - int(idle[0] * (t1 - t0)))
    return d


def test_each_vcpu_counts_what_it_ran_and_the_same_work_counts_the_same(guest):
    g = guest
    assert len(COUNTER.per_vcpu()) == 2
    rates = idle_rates(2.0)
    idle = sum(rates)
    assert idle > 0, "an idle guest still runs its timers: nothing counted"
    first, second = spin_counts(g, rates), spin_counts(g, rates)
    for d in (first, second):
        # the agent that ran the command and the timers ran on vCPU 0
        assert d[1] > 10 * d[0], f"vCPU 1 ran the loop, yet the counts are {d}"
    assert abs(first[1] - second[1]) < 0.05 * first[1], \
        f"the same loop counted {first[1]} and {second[1]} instructions on vCPU 1"
    print(f"idle {idle / 1e6:.1f} M/s; the loop on vCPU 1: {first[1]} and {second[1]} "
          f"instructions; vCPU 0 meanwhile {first[0]} and {second[0]}")
