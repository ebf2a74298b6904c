"""ci/guest.py's host ports: a process never names one port for two forwards
(CI once failed 48 tests on a guest QEMU refused: `hostfwd=udp:...:33463-:7000,
hostfwd=udp:...:33463-:7001`), and a port another process took before QEMU
bound it is picked again, while a port the caller named is kept.

Run: /usr/bin/python3 -m pytest tests/client/test_guest_ports.py
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "ci"))

import guest  # noqa: E402

REFUSED = ("qemu-system-x86_64: -netdev user,id=n0,hostfwd=udp:127.0.0.1:{port}-:7000: "
           "Could not set up host forwarding rule 'udp:127.0.0.1:{port}-:7000'\n")


def test_a_process_never_gets_the_same_port_twice():
    # the kernel's pick for bind(port 0) repeats well within 2000 picks
    # (about 28000 ephemeral ports: a repeat is all but certain by chance)
    ports = [guest.free_udp_port() for _ in range(2000)]
    assert len(set(ports)) == len(ports)
    assert all(p >= 1024 for p in ports)


def test_a_taken_forward_is_picked_again_and_a_named_one_kept(tmp_path):
    g = guest.Guest("portcheck", forwards=[7000, (5555, 7001), ("tcp", 0, 10809)])
    before = dict(((p, gp), h) for p, h, gp in g.fwd)
    assert before[("udp", 7001)] == 5555
    g.qemu_log = tmp_path / "qemu.log"
    g.qemu_log.write_text(REFUSED.format(port=before[("udp", 7000)]))
    assert g._pick_forwards_again()
    after = dict(((p, gp), h) for p, h, gp in g.fwd)
    assert after[("udp", 7001)] == 5555
    assert after[("udp", 7000)] != before[("udp", 7000)]
    assert after[("tcp", 10809)] != before[("tcp", 10809)]
    assert g.host_port(7000) == after[("udp", 7000)]


def test_a_guest_that_failed_otherwise_is_not_retried_for_ports(tmp_path):
    g = guest.Guest("portcheck", forwards=[7000])
    port = g.host_port(7000)
    g.qemu_log = tmp_path / "qemu.log"
    g.qemu_log.write_text("qemu-system-x86_64: -drive file=x: Could not open 'x'\n")
    assert not g._pick_forwards_again()
    assert g.host_port(7000) == port


def test_a_guest_whose_ports_were_all_named_keeps_its_failure(tmp_path):
    g = guest.Guest("portcheck", forwards=[(5555, 7000)])
    g.qemu_log = tmp_path / "qemu.log"
    g.qemu_log.write_text(REFUSED.format(port=5555))
    assert not g._pick_forwards_again()
    assert g.host_port(7000) == 5555
