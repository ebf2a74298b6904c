"""The client's --no-checksum (SO_NO_CHECK): its datagrams carry UDP
checksum 0, which the server takes as the sender's choice and does not
verify; without it they carry one.  Seen on the wire: a packet socket on
loopback (needs CAP_NET_RAW)."""

from __future__ import annotations

import socket
import struct
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "client"))
sys.path.insert(0, str(HERE))

import netblk  # noqa: E402
from netblk_fake import FakeServer  # noqa: E402

ETH_P_ALL = 0x0003


def sniffer():
    try:
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    except PermissionError:
        pytest.skip("a packet socket needs CAP_NET_RAW")
    s.bind(("lo", 0))
    s.settimeout(2)
    return s


def udp_checksums_to(s, port, want):
    """The UDP checksum fields of the first `want` datagrams to `port` seen on lo."""
    sums = []
    while len(sums) < want:
        frame, addr = s.recvfrom(65536)
        if addr[2] == socket.PACKET_OUTGOING or len(frame) < 42 or frame[12:14] != b"\x08\x00":
            continue
        ihl = (frame[14] & 0xF) * 4
        if frame[23] != 17:
            continue
        dport, csum = struct.unpack_from(">H2xH", frame, 14 + ihl + 2)
        if dport == port:
            sums.append(csum)
    return sums


@pytest.mark.parametrize("checksum", [True, False])
def test_no_checksum_sends_zero(checksum):
    srv = FakeServer().start()
    s = sniffer()
    try:
        with netblk.Client("127.0.0.1", srv.port, timeout=2, tries=3, checksum=checksum) as c:
            c.write(0, b"\x5a" * 1024)
        sums = udp_checksums_to(s, srv.port, 2)	# INFO, WRITE
    finally:
        s.close()
        srv.stop()
    if checksum:
        assert all(x != 0 for x in sums), sums
    else:
        assert sums == [0, 0], sums


def test_no_checksum_option(capsys):
    srv = FakeServer().start()
    s = sniffer()
    try:
        assert netblk.main(["127.0.0.1", str(srv.port), "info", "--no-checksum"]) == 0
        assert udp_checksums_to(s, srv.port, 1) == [0]
    finally:
        s.close()
        srv.stop()
    out = capsys.readouterr().out
    assert "bytes" in out or "MiB" in out, out
