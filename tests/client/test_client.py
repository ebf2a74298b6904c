"""Tests of the client (client/netblk/) against a fake in-process instance (netblk_fake.py).

Run: /usr/bin/python3 -m pytest tests/client
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "client"))
sys.path.insert(0, str(HERE))
# `python3 -m netblk` from the tree, whatever the current directory
CLIENT_ENV = dict(os.environ, PYTHONPATH=str(ROOT / "client"))

import netblk  # noqa: E402
from netblk import (FLAG_FUA, OP_FLUSH, OP_HELLO, OP_INFO, OP_READ, OP_WRITE, Client,  # noqa: E402
                    NetblkError, NetblkTimeout)
from netblk_fake import FakeServer  # noqa: E402

MiB = 1 << 20


@pytest.fixture
def server(request):
    """A FakeServer; parametrize indirectly with a dict of its knobs."""
    kwargs = getattr(request, "param", {}) or {}
    srv = FakeServer(**kwargs).start()
    yield srv
    srv.stop()


# The fake answers within milliseconds, but this machine may be busy with other
# work: a client that must not resend unless something was really lost waits
# seconds.  Tests of resends give their own short timeouts, and count on what
# was lost (the fake's loss, drop or silence), not on the machine's speed.
PATIENT = 5.0  # seconds: a resend with this timeout means a datagram was lost
PATIENT_TRIES = 4


def client_for(srv: FakeServer, timeout: float = PATIENT, tries: int = PATIENT_TRIES) -> Client:
    return Client("127.0.0.1", srv.port, timeout=timeout, tries=tries)


def cli(srv: FakeServer, *args: str, capsys=None) -> tuple[int, str, str]:
    """Run netblk.main in-process, patient unless args say otherwise (a later
    --timeout/--tries wins); returns (exit status, stdout, stderr)."""
    rc = netblk.main(["127.0.0.1", str(srv.port), "--timeout", str(PATIENT),
                      "--tries", str(PATIENT_TRIES), *args])
    out, err = capsys.readouterr()
    return rc, out, err


# ---- sizes -------------------------------------------------------------------------


@pytest.mark.parametrize("text,value", [
    ("0", 0), ("512", 512), ("4k", 4096), ("4K", 4096), ("1m", MiB), ("2G", 2 << 30),
    ("1t", 1 << 40), ("4KiB", 4096), ("0x1000", 4096), (" 8k ", 8192),
])
def test_parse_size(text, value):
    assert netblk.parse_size(text) == value


@pytest.mark.parametrize("text", ["", "k", "1.5k", "-1", "4x", "4kk"])
def test_parse_size_rejects(text):
    with pytest.raises(ValueError):
        netblk.parse_size(text)


def test_parse_range():
    assert netblk.parse_range("1g:64m") == (1 << 30, 64 * MiB)
    with pytest.raises(ValueError):
        netblk.parse_range("1g")


# ---- INFO --------------------------------------------------------------------------


@pytest.mark.parametrize("server", [dict(size=3 * MiB, sector=4096, max_io=8192, slots=128,
                                         volatile=False, fua=True)],
                         indirect=True)
def test_info_parsing(server, capsys):
    with client_for(server) as c:
        info = c.info()
    assert info == netblk.Info(size=3 * MiB, sector_size=4096, physical_block_size=4096,
                               io_opt=0, max_io=8192, max_read=16 * 8192, flags=0b11100,
                               slots=128, discard_granularity=4096, max_trim=1 << 30,
                               max_write_zeroes=1 << 30, export_id=0x5EED)
    assert not info.read_only and not info.volatile_cache and info.fua
    assert info.trim and info.write_zeroes

    rc, out, _ = cli(server, "info", "--json", capsys=capsys)
    assert rc == 0
    d = json.loads(out)
    assert d["size"] == 3 * MiB and d["max_read"] == 131072 and d["slots"] == 128
    assert d["export_id"] == 0x5EED
    assert d["read_only"] is False and d["volatile_cache"] is False and d["fua"] is True

    rc, out, _ = cli(server, "info", capsys=capsys)
    assert rc == 0
    assert "3145728 bytes (3 MiB)" in out
    assert "read-write" in out and "FUA honoured" in out and "slots        128" in out


@pytest.mark.parametrize("server", [dict(read_only=True)], indirect=True)
def test_info_of_a_read_only_instance(server, capsys):
    with client_for(server) as c:
        info = c.info()
    # nothing a client could write with: no write cache, FUA, TRIM or WRITE_ZEROES
    assert info.flags == netblk.INFO_READ_ONLY, info
    assert (info.max_trim, info.max_write_zeroes, info.discard_granularity) == (0, 0, 0), info
    rc, out, _ = cli(server, "info", capsys=capsys)
    assert rc == 0
    assert "access       read-only" in out and "flags        0x1 (read-only)" in out, out
    assert "trim         no" in out and "write zeroes no" in out, out


@pytest.mark.parametrize("server", [{"queues": 3}], indirect=True)
def test_info_tells_queues(server):
    """INFO's queues (docs/protocol.md), after the export id."""
    with client_for(server) as c:
        assert c.info().queues == 3
        r = c.request(OP_INFO, 0, 0)
    assert len(r.data) == 60


def test_info_of_an_older_server_is_one_queue(server):
    """A server from before queues= sends 56 bytes: one queue."""
    with client_for(server) as c:
        assert c.info().queues == 1


def test_info_reply_too_short(server):
    # a request() sees the raw INFO reply; Info.unpack refuses a short one
    with client_for(server) as c:
        r = c.request(OP_INFO, 0, 0)
    assert r.status == 0 and len(r.data) == 56
    with pytest.raises(NetblkError, match="INFO reply carries 8 bytes"):
        netblk.Info.unpack(r.data[:8])
    with pytest.raises(NetblkError, match="INFO reply carries 58 bytes: cut inside its queues"):
        netblk.Info.unpack(r.data + b"\0\0")


# ---- READ / WRITE round trips --------------------------------------------------------


@pytest.mark.parametrize("window", [1, 64])
def test_round_trip_across_chunks(server, window):
    # 512-aligned but not chunk- or READ-aligned: partial first and last chunks.
    offset, length = 512 + 3 * 1024, 5 * 16384 + 1536
    data = os.urandom(length)
    with client_for(server) as c:
        c.write(offset, data, window=window)
        assert bytes(server.disk[offset:offset + length]) == data
        assert c.read(offset, length, window=window) == data
        before = bytes(server.disk[offset - 512:offset])
        assert c.read(offset - 512, 512) == before
        assert c.stats.retries == 0 and c.stats.busy == 0
    writes = server.requests(OP_WRITE)
    reads = server.requests(OP_READ)
    assert len(writes) == -(-length // 1024) and all(w.length <= 1024 for w in writes)
    assert len(reads) == -(-length // 16384) + 1 and all(r.length <= 16384 for r in reads)
    # every request had its own handle
    handles = [r.seq for r in server.log if r.op != OP_HELLO]
    assert len(set(handles)) == len(handles)


def test_read_whole_device(server):
    with client_for(server) as c:
        assert c.read(0, server.size) == bytes(server.disk)


def test_zero_length_is_a_no_op(server):
    with client_for(server) as c:
        assert c.read(0, 0) == b""
        c.write(0, b"")
    assert server.requests(OP_READ) == [] and server.requests(OP_WRITE) == []


@pytest.mark.parametrize("server", [dict(delay=0.004, slots=64, gate_wait=2.0)], indirect=True)
def test_window_never_exceeds_slots(server):
    # READs of 16 datagrams: 64 of them would need 1024 slots; the client keeps to 64
    # (the fake answers EAGAIN beyond its slots, so busy stays 0 only if it did).
    # The fake holds its answers until `gate` slots are taken, so the whole window
    # is at the fake at once however slowly the client's datagrams come; a client
    # that kept fewer in flight is answered after gate_wait, short of the gate.
    with client_for(server) as c:
        c.info()
        server.gate = 64  # 4 READs of 16 datagrams
        assert c.read(0, 256 * 1024, window=64) == bytes(server.disk[:256 * 1024])
        assert server.max_in_use == 64
        assert c.stats.busy == 0
        server.max_in_use = 0
        server.gate = 8
        c.write(0, os.urandom(64 * 1024), window=8)
        assert server.max_in_use == 8
        server.max_in_use = 0
        server.gate = 16
        c.read(0, 64 * 1024, window=1)
        assert server.max_in_use == 16
        assert c.stats.busy == 0 and c.stats.retries == 0


@pytest.mark.parametrize("server", [dict(slots=8)], indirect=True)
def test_read_smaller_than_slots(server):
    # an instance with fewer slots than one max_read READ's datagrams: READs shrink
    with client_for(server) as c:
        assert c.read_piece() == 8 * 1024
        assert c.read(0, 64 * 1024) == bytes(server.disk[:64 * 1024])
    assert all(r.length <= 8 * 1024 for r in server.requests(OP_READ))


@pytest.mark.parametrize("server", [dict(shuffle=True, duplicate=True, stray=True)],
                         indirect=True)
def test_out_of_order_duplicates_and_strays(server):
    data = os.urandom(200 * 1024)
    with client_for(server) as c:
        c.write(4096, data)
        assert c.read(4096, len(data)) == data
        assert c.stats.duplicates > 0 and c.stats.stray > 0
        assert c.stats.retries == 0


def test_fua_flag(server):
    with client_for(server) as c:
        c.write(0, b"x" * 2048, fua=True)
        c.write(4096, b"y" * 512)
        c.flush()
    w = server.requests(OP_WRITE)
    assert [r.flags for r in w] == [FLAG_FUA, FLAG_FUA, 0]
    f = server.requests(OP_FLUSH)
    assert len(f) == 1 and (f[0].offset, f[0].length, f[0].flags) == (0, 0, 0)


# ---- resends ------------------------------------------------------------------------


@pytest.mark.parametrize("server", [dict(loss=0.25, seed=7)], indirect=True)
def test_resend_on_loss(server):
    data = os.urandom(100 * 1024)
    # a short timeout, and 5 s of silence before a request is given up: the
    # fake's loss makes the resends, a slow machine cannot make them fail
    with client_for(server, timeout=0.1, tries=50) as c:
        c.write(0, data, window=16)
        assert c.read(0, len(data), window=16) == data
        assert c.stats.retries > 0 and c.stats.errors == 0
    # a resend is the same request: same handle, offset, length
    seen: dict[int, tuple] = {}
    resent = 0
    for r in server.log:
        if r.op == OP_HELLO:
            continue
        key = (r.op, r.offset, r.length, r.flags)
        if r.seq in seen:
            assert seen[r.seq] == key
            resent += 1
        seen[r.seq] = key
    assert resent > 0


def test_resend_whole_read_when_a_chunk_is_missing(server):
    dropped = set()

    def drop_once(hdr):
        # the first chunk at offset 5 KiB of the first READ that carries it is lost
        handle, off = hdr[7], hdr[8]
        if hdr[2] == OP_READ | 0x80 and off == 5 * 1024 and not dropped:
            dropped.add(handle)
            return True
        return False

    server.drop = drop_once
    # the one resend comes after the timeout: a longer one only makes it later,
    # and no other can come unless the fake took that long to answer
    with client_for(server, timeout=2.0) as c:
        assert c.read(0, 16 * 1024) == bytes(server.disk[:16 * 1024])
        assert c.stats.retries == 1
        # the resend's chunks before the missing one are duplicates, ignored; it
        # completes the READ, and the chunks after it come for a finished request
        assert c.stats.duplicates == 5
    reads = server.requests(OP_READ)
    assert len(reads) == 2 and reads[0].seq == reads[1].seq
    assert (reads[1].offset, reads[1].length) == (0, 16 * 1024)


@pytest.mark.parametrize("server", [dict(busy_each=3)], indirect=True)
def test_eagain_backoff(server):
    data = os.urandom(8 * 1024)
    # 3 EAGAINs a request and tries=2: only a client whose EAGAIN resends use
    # no tries gets through
    timeout = 10.0
    with client_for(server, timeout=timeout, tries=2) as c:
        t0 = time.monotonic()
        c.write(0, data)
        assert c.read(0, len(data)) == data
        c.flush()
        elapsed = time.monotonic() - t0
        n = 1 + 8 + 1 + 1  # INFO, WRITEs, READ, FLUSH
        assert c.stats.busy == 3 * n
        assert c.stats.retries == 0 and c.stats.errors == 0
    # An EAGAIN is resent after a back-off of milliseconds, not after the resend
    # timeout: 4 rounds (INFO, WRITEs, READ, FLUSH) of 3 back-offs in a row took
    # less than one timeout.  (Back-offs as long as the timeout would take 12
    # timeouts; the bound is the timeout, not how fast this machine is.)
    assert elapsed < timeout, f"{3 * n} EAGAINs took {elapsed:.1f} s to get through"
    # each request was sent 4 times (3 x EAGAIN, then served), after a back-off
    by_seq: dict[int, list] = {}
    for r in server.log:
        if r.op == OP_HELLO:
            continue
        by_seq.setdefault(r.seq, []).append(r.answer)
    assert all(v == [errno.EAGAIN] * 3 + [0] for v in by_seq.values())


def test_eagain_burst(server):
    data = os.urandom(32 * 1024)
    with client_for(server) as c:
        c.info()
        server.busy_first = 1 + 40  # the next 40 requests find the instance busy
        c.write(0, data, window=64)
        assert c.read(0, len(data)) == data
        assert c.stats.busy == 40 and c.stats.errors == 0


def test_eagain_forever_gives_up(server):
    with client_for(server, tries=2) as c:
        c.info()
        server.busy_each = 10 ** 9
        c.busy_tries = 5
        with pytest.raises(NetblkTimeout, match=r"WRITE 0\+512: .* still busy \(EAGAIN\)"):
            c.write(0, b"z" * 512)
    assert len(server.requests(OP_WRITE)) == 6


@pytest.mark.parametrize("server", [dict(silent=True)], indirect=True)
def test_give_up_after_bounded_tries(server, capsys):
    c = client_for(server, timeout=0.01, tries=3)
    c._info = netblk.Info(server.size, 512, 512, 0, 1024, 16384, 0, 256, 0, 0, 0, 0)
    c.session = netblk.Session(1, 1)  # so is HELLO: give up on the READ itself  # INFO would go unanswered too
    t0 = time.monotonic()
    with pytest.raises(NetblkTimeout) as ei:
        c.read(2048, 1024)
    elapsed = time.monotonic() - t0
    # given up after 3 sends, each followed by a whole timeout of silence
    assert (c.stats.sends, c.stats.retries) == (3, 2), c.stats
    assert elapsed >= 3 * 0.01 * 0.99, elapsed
    msg = str(ei.value)
    assert "READ 2048+1024" in msg and "no answer" in msg and "3 tries" in msg
    assert ei.value.status is None and ei.value.op == OP_READ
    assert (ei.value.offset, ei.value.length) == (2048, 1024)
    reads = server.requests(OP_READ)
    assert len(reads) == 3 and len({r.seq for r in reads}) == 1
    c.close()

    rc, out, err = cli(server, "--timeout", "0.01", "--tries", "2", "flush", capsys=capsys)
    assert rc == 1
    # the CLI opens a session first: a silent host fails there, named
    assert "netblk: HELLO: no answer from 127.0.0.1:" in err and "2 tries" in err


def test_port_unreachable():
    srv = FakeServer()
    port = srv.port
    srv.sock.close()  # nothing listens there any more
    # the kernel's ICMP port unreachable must have come back before the client
    # gives up: give it 1.5 s (it comes at once on an idle machine)
    with Client("127.0.0.1", port, timeout=0.5, tries=3) as c:
        with pytest.raises(NetblkTimeout, match="port unreachable"):
            c.info()


# ---- refusals -----------------------------------------------------------------------


def test_refusals_raise_with_errno_names(server):
    size = server.size
    with client_for(server) as c:
        with pytest.raises(NetblkError) as ei:
            c.read(size, 1024)
        assert ei.value.status == errno.ERANGE
        assert str(ei.value) == f"READ {size}+1024 refused: ERANGE (beyond the end of the device)"

        with pytest.raises(NetblkError) as ei:
            c.read(100, 512)
        assert ei.value.status == errno.EINVAL and "READ 100+512 refused: EINVAL" in str(ei.value)

        with pytest.raises(NetblkError) as ei:
            c.write(0, b"a" * 700)  # not whole sectors
        assert ei.value.status == errno.EINVAL

        with pytest.raises(NetblkError) as ei:
            c.write(size - 512, b"a" * 1024)
        assert ei.value.status == errno.ERANGE and "WRITE" in str(ei.value)


def test_raw_statuses(server):
    with client_for(server) as c:
        g = c.info()
        r = c.request(OP_READ, 0, 1024, version=1)
        assert r.status == errno.EPROTONOSUPPORT and r.status_name == "EPROTONOSUPPORT"
        assert r.version == 2, "the answer says which version the instance speaks"
        assert c.request(8, 0, 0).status == errno.EOPNOTSUPP
        r = c.request(OP_READ, 0, g.max_read + 512)
        assert r.status == errno.EMSGSIZE and (r.offset, r.length) == (0, g.max_read + 512)
        assert c.request(OP_WRITE, 0, 1536, b"w" * 1536).status == errno.EMSGSIZE
        assert c.request(OP_WRITE, 0, 1024, b"w" * 512).status == errno.EINVAL
        assert c.request(OP_READ, 0, 512, flags=FLAG_FUA).status == errno.EINVAL
        assert c.request(OP_WRITE, 0, 512, b"w" * 512, flags=2).status == errno.EINVAL
        assert c.request(OP_FLUSH, 512, 0).status == errno.EINVAL
        assert c.request(OP_READ, 0, 0).status == errno.EINVAL
        r = c.request(OP_READ, 1024, 3072, seq=500)
        assert r.ok and r.seq == 500 and len(r.chunks) == 3
        assert r.data == bytes(server.disk[1024:4096])
        assert [ch.offset for ch in sorted(r.chunks, key=lambda x: x.offset)] == [1024, 2048, 3072]
        r = c.request(OP_WRITE, 512, 512, b"q" * 512, seq=42)
        assert r.ok and r.seq == 42 and r.length == 512 and r.data == b""
        assert server.disk[512:1024] == b"q" * 512


@pytest.mark.parametrize("server", [dict(read_only=True)], indirect=True)
def test_read_only_refuses_writes(server, capsys):
    with client_for(server) as c:
        assert c.info().read_only
        with pytest.raises(NetblkError) as ei:
            c.write(0, b"x" * 512)
        assert ei.value.status == errno.EROFS
        assert str(ei.value) == "WRITE 0+512 refused: EROFS (the instance is read-only)"
        with pytest.raises(NetblkError, match="FLUSH refused: EROFS"):
            c.flush()
        # the instance offers neither: the client says why, without asking
        for call, what in ((c.trim, "TRIM"), (c.write_zeroes, "WRITE_ZEROES")):
            with pytest.raises(NetblkError) as ei:
                call(0, 4096)
            assert ei.value.status == errno.EROFS, ei.value
            assert f"{what} 0+4096" in str(ei.value) and "read-only" in str(ei.value), ei.value
        assert c.read(0, 512) == bytes(server.disk[:512])


@pytest.mark.parametrize("server", [dict(eio=[(5000, 1)])], indirect=True)
def test_eio_chunk(server):
    with client_for(server) as c:
        with pytest.raises(NetblkError) as ei:
            c.read(0, 16 * 1024)
        assert ei.value.status == errno.EIO
        assert "READ 0+16384 failed: EIO" in str(ei.value) and "at 4096+1024" in str(ei.value)
        r = c.request(OP_READ, 0, 8192)
        assert r.status == errno.EIO and len(r.chunks) == 8
        assert [ch.status for ch in r.chunks if ch.offset == 4096] == [errno.EIO]
        assert c.read(8192, 1024) == bytes(server.disk[8192:9216])


def test_cli_refusal_message(server, capsys, tmp_path):
    rc, out, err = cli(server, "read", str(server.size), "1k", str(tmp_path / "x"),
                       capsys=capsys)
    assert rc == 1
    assert f"netblk: READ {server.size}+1024 refused: ERANGE (beyond the end of the device)" \
        in err


# ---- CLI read / write / flush ----------------------------------------------------------


def test_cli_read_write_files(server, capsys, tmp_path):
    src = tmp_path / "in"
    data = os.urandom(40 * 1024)
    src.write_bytes(data)
    rc, _, err = cli(server, "write", "8k", str(src), "--fua", "--window", "4", capsys=capsys)
    assert rc == 0, err
    assert bytes(server.disk[8192:8192 + len(data)]) == data
    assert all(w.flags == FLAG_FUA for w in server.requests(OP_WRITE))
    dst = tmp_path / "out"
    rc, _, err = cli(server, "--window", "2", "read", "8k", "40k", str(dst), capsys=capsys)
    assert rc == 0, err
    assert dst.read_bytes() == data
    rc, _, _ = cli(server, "flush", capsys=capsys)
    assert rc == 0 and len(server.requests(OP_FLUSH)) == 1

    bad = tmp_path / "bad"
    bad.write_bytes(b"x" * 1000)
    rc, _, err = cli(server, "write", "0", str(bad), capsys=capsys)
    assert rc == 2 and "not a whole number of 512-byte sectors" in err


def test_cli_stdin_stdout(server):
    data = os.urandom(12 * 1024)
    base = [sys.executable, "-m", "netblk", "127.0.0.1", str(server.port), "--timeout",
            str(PATIENT)]
    # timeout=: only against a hang (a busy machine may take long to start Python)
    p = subprocess.run(base + ["write", "4k", "-"], input=data, env=CLIENT_ENV,
                       capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr
    p = subprocess.run(base + ["read", "4k", "12k", "-"], env=CLIENT_ENV, capture_output=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout == data


# ---- verify ----------------------------------------------------------------------------


def test_verify_ok(server, capsys):
    before = bytes(server.disk)
    rc, out, err = cli(server, "verify", "64k", "100k", capsys=capsys)
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0] == f"verify: this overwrites {64 * 1024}..{164 * 1024} on the device"
    assert "OK" in lines[-1]
    assert bytes(server.disk[:64 * 1024]) == before[:64 * 1024]
    assert bytes(server.disk[164 * 1024:]) == before[164 * 1024:]
    assert bytes(server.disk[64 * 1024:164 * 1024]) != before[64 * 1024:164 * 1024]


@pytest.mark.parametrize("server", [dict(corrupt_at=70000)], indirect=True)
def test_verify_mismatch(server, capsys):
    rc, out, _ = cli(server, "verify", "64k", "64k", capsys=capsys)
    assert rc == 1
    assert out.splitlines()[0].startswith("verify: this overwrites 65536..131072")
    assert "MISMATCH at offset 70000" in out


# ---- bench -----------------------------------------------------------------------------


def test_bench_json(server, capsys):
    rc, out, err = cli(server, "bench", "--mode", "randread", "--size", "4k", "--seconds", "0.2",
                       "--json", capsys=capsys)
    assert rc == 0, err
    r = json.loads(out)
    assert r["mode"] == "randread" and r["size"] == 4096 and r["window"] == 64
    assert r["ops"] > 0 and r["iops"] > 0 and r["mib_s"] > 0
    lat = r["latency_us"]
    assert set(lat) == {"p50", "p99", "p99.9", "max"}
    assert 0 < lat["p50"] <= lat["p99"] <= lat["p99.9"] <= lat["max"]
    assert r["retries"] == 0 and r["errors"] == 0
    assert r["range"] == {"offset": 0, "length": server.size}
    assert server.requests(OP_WRITE) == []
    reads = server.requests(OP_READ)
    assert all(q.length == 4096 and q.offset % 4096 == 0 for q in reads)


def test_bench_text(server, capsys):
    rc, out, err = cli(server, "bench", "--mode", "read", "--seconds", "0.1", "--window", "8",
                       "--range", "0:64k", capsys=capsys)
    assert rc == 0, err
    assert "IOPS" in out and "MiB/s" in out and "p99.9" in out and "retries 0" in out
    assert all(q.offset + q.length <= 65536 for q in server.requests(OP_READ))


@pytest.mark.parametrize("mode", ["randwrite", "write"])
def test_bench_write_needs_range(server, capsys, mode):
    before = bytes(server.disk)
    rc, out, err = cli(server, "bench", "--mode", mode, "--seconds", "0.1", capsys=capsys)
    assert rc != 0 and "--range" in err
    assert server.requests(OP_WRITE) == [] and bytes(server.disk) == before


@pytest.mark.parametrize("mode", ["randwrite", "write"])
def test_bench_write_stays_in_range(server, capsys, mode):
    before = bytes(server.disk)
    lo, hi = 64 * 1024, 96 * 1024
    rc, out, err = cli(server, "bench", "--mode", mode, "--seconds", "0.2", "--range", "64k:32k",
                       "--json", capsys=capsys)
    assert rc == 0, err
    r = json.loads(out)
    writes = server.requests(OP_WRITE)
    assert r["ops"] > 0 and len(writes) >= r["ops"]
    assert all(lo <= w.offset and w.offset + w.length <= hi for w in writes)
    assert bytes(server.disk[:lo]) == before[:lo] and bytes(server.disk[hi:]) == before[hi:]
    assert server.requests(OP_READ) == []


@pytest.mark.parametrize("args,msg", [
    (["--mode", "randread", "--size", "100"], "whole number"),
    (["--mode", "randread", "--size", "32k"], "more than one READ"),
    (["--mode", "randwrite", "--size", "2k", "--range", "0:64k"], "more than one WRITE"),
    (["--mode", "randread", "--range", "1000:4k"], "not sector-aligned"),
    (["--mode", "randread", "--range", "1m:4k"], "beyond the device"),
])
def test_bench_bad_arguments(server, capsys, args, msg):
    rc, _, err = cli(server, "bench", "--seconds", "0.1", *args, capsys=capsys)
    assert rc == 2 and msg in err
    assert server.requests(OP_READ) == [] and server.requests(OP_WRITE) == []


def test_bench_counts_retries(server):
    with client_for(server, timeout=0.1, tries=50) as c:
        c.info()
        lost = []

        def drop_first_read(hdr):
            # the first READ answer is lost for certain, however few the bench makes
            if hdr[2] == OP_READ | 0x80 and not lost:
                lost.append(hdr[7])
                return True
            return False

        server.drop = drop_first_read
        server.loss = 0.05
        r = netblk.bench(c, "randread", 1024, 0.3, window=16, seed=1)
    assert lost and r["ops"] > 0 and r["retries"] > 0 and r["errors"] == 0
    # a resent READ is the same request: the lost one's handle came again
    assert sum(q.seq == lost[0] for q in server.requests(OP_READ)) >= 2
