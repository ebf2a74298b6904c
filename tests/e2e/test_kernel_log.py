"""ci/guest.py's reading of a kernel log (no guest): every report of a bug
counts, except a known one of the kernel's own drivers (FOREIGN_REPORTS),
and that only whole and only while netblk.ko is not on its stack."""
from __future__ import annotations

import pytest

from guest import kernel_trouble


@pytest.fixture(autouse=True)
def kernel_clean():
    """conftest's, which boots a guest to look at after each test: no guest here."""
    yield

VMXNET3_RCU = """\
[   64.237456] 
[   64.238022] =============================
[   64.238199] WARNING: suspicious RCU usage
[   64.239003] 6.12.118-netblk-debug #1 Tainted: G           O      
[   64.239531] -----------------------------
[   64.239704] drivers/net/vmxnet3/vmxnet3_xdp.c:58 suspicious rcu_dereference_check() usage!
[   64.240826] 1 lock held by netblkctl/390:
[   64.243356] Call Trace:
[   64.243445]  <TASK>
[   64.243638]  lockdep_rcu_suspicious+0x1e7/0x280
[   64.243704]  vmxnet3_xdp+0x23c/0x520 [vmxnet3]
[   64.244285]  dev_xdp_install+0x3a6/0xc30
[   64.248369]  </TASK>
"""
OTHER_RCU = VMXNET3_RCU.replace("drivers/net/vmxnet3/vmxnet3_xdp.c:58", "net/core/dev.c:9000")
OURS = VMXNET3_RCU.replace("dev_xdp_install+0x3a6/0xc30", "netblk_start+0x10/0x90 [netblk]")
OOPS = "[   70.000000] BUG: kernel NULL pointer dereference, address: 0000000000000008\n"


def test_vmxnet3s_own_rcu_warning_is_let_pass_whole():
    assert kernel_trouble(VMXNET3_RCU) == []
    # what follows it is read as ever
    assert kernel_trouble(VMXNET3_RCU + OOPS) == [OOPS.rstrip("\n")]


def test_the_same_warning_elsewhere_or_with_netblk_on_the_stack_counts():
    assert any("suspicious RCU usage" in l for l in kernel_trouble(OTHER_RCU))
    assert any("suspicious RCU usage" in l for l in kernel_trouble(OURS))


def test_a_cut_off_report_counts():
    cut = VMXNET3_RCU.split("[   64.243445]")[0]	# no </TASK>: the log ends inside it
    assert kernel_trouble(cut)
