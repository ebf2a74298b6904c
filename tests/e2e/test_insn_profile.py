"""The plugin's pcs=on mode (ci/qemu-plugin/insn_count.c) and its reader
ci/insn_profile.py, which ci/bench_profile.py names a guest's instructions
by: the table's blocks add up to the counts, and the guest's kallsyms names
the kernel's."""

from __future__ import annotations

import pytest

import insn_profile
from guest import FLAVOUR
from insn_count import InsnCounter

COUNTER = InsnCounter("insn_profile", pcs=True)
GUEST_OPTIONS = {"qemu_args": COUNTER.qemu_args(), "smp": 2}

pytestmark = pytest.mark.skipif(FLAVOUR == "debug", reason="as test_insn_count: make bench "
                                "never counts on the debug kernel")

# the kernel copying zeros to a pipe and out of it: its own functions, busy
WORK = "dd if=/dev/zero bs=64k count=2000 2>/dev/null | cat >/dev/null"


def test_the_table_adds_up_to_the_counts_and_names_the_kernels_work(guest):
    g = guest
    syms = insn_profile.Kallsyms(g.check("cat /proc/kallsyms", timeout=120))
    n0, b0 = COUNTER.total(), COUNTER.blocks()
    g.check(WORK, timeout=300)
    b1, n1 = COUNTER.blocks(), COUNTER.total()
    table = sum(n * e for (_, n), e in insn_profile.delta(b0, b1).items())
    counted = n1 - n0
    # the table was read inside the counts' interval: a little less, never more
    assert 0.9 * counted < table <= counted, f"table {table}, counts {counted}"
    per_sym = insn_profile.by_symbol(insn_profile.delta(b0, b1), syms)
    kernel = {s: v for s, v in per_sym.items() if s != insn_profile.USER}
    unknown = kernel.get("[unknown]", 0)
    assert unknown < 0.01 * sum(kernel.values()), f"{unknown} of the kernel's unnamed"
    top = sorted(kernel.items(), key=lambda kv: -kv[1])[:5]
    print(f"counts {counted}, table {table}; the kernel's top: {top}")
    # moving 128 MB through a pipe: the copies are the kernel's biggest part
    assert any(insn_profile.group(s) == "copy" or "clear_user" in s or "copy" in s
               for s, _ in top), top
