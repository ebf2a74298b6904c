"""Tests of the load generator tools/netblk-load against the fake instance
(netblk_fake.py).  The binary is built with `make load` first.

Run: /usr/bin/python3 -m pytest tests/client/test_load.py
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
LOAD = ROOT / "tools" / "netblk-load" / "netblk-load"
sys.path.insert(0, str(HERE))

from netblk_fake import OP_READ, OP_WRITE, FakeServer, lose_first_answer  # noqa: E402

MiB = 1 << 20


@pytest.fixture(scope="module", autouse=True)
def built():
    subprocess.run(["make", "-s", "-C", str(ROOT), "load"], check=True)


# The fake answers within milliseconds, but this machine may be busy with other
# work: netblk-load waits seconds before it resends (its own 0.25 s default is
# for a network), so a resend means a datagram was lost.  Tests of resends give
# a short --timeout and enough --tries that a slow machine cannot make them fail.
PATIENT = ["--timeout", "5", "--tries", "4"]


def load(srv: FakeServer, *args: str, check: bool = True) -> tuple[int, dict | None, str]:
    """Run netblk-load against srv for --seconds (default 1) with --json, patient
    unless args give --timeout/--tries (the last one given wins)."""
    argv = [str(LOAD), "127.0.0.1", str(srv.port), *PATIENT, *args, "--json"]
    if "--seconds" not in args:
        argv += ["--seconds", "1"]
    # timeout=: only against a hang
    r = subprocess.run(argv, capture_output=True, text=True, timeout=180)
    out = json.loads(r.stdout) if r.stdout.strip() else None
    if check:
        assert r.returncode == 0, r.stderr + r.stdout
    return r.returncode, out, r.stderr


def sane_latency(out: dict) -> None:
    lat = out["latency_us"]
    assert 0 < lat["p50"] <= lat["p99"] <= lat["p99.9"] <= lat["max"]


def test_randread():
    with FakeServer(size=4 * MiB) as srv:
        _, out, _ = load(srv, "--mode", "randread", "--size", "4k", "--window", "16")
    assert out["ops"] > 0 and out["errors"] == 0 and out["retries"] == 0
    assert out["window_decreases"] == 0  # nothing lost: the window stays whole
    assert out["datagrams_per_request"] == 4 and out["window"] == 16
    assert out["iops"] > 0 and out["bytes"] == out["ops"] * 4096
    sane_latency(out)
    # one READ per request (the last INFO aside), each of 4 KiB
    reads = srv.requests(OP_READ)
    assert reads and all(r.length == 4096 and r.offset % 4096 == 0 for r in reads)
    assert len(reads) >= out["ops"]


def test_randwrite_stays_inside_range():
    base, span = 1 * MiB, 256 << 10
    with FakeServer(size=4 * MiB) as srv:
        before = bytes(srv.disk)
        _, out, _ = load(srv, "--mode", "randwrite", "--size", "4k", "--range", f"{base}:{span}")
    assert out["ops"] > 0 and out["errors"] == 0
    assert out["op"] == "WRITE" and out["datagrams_per_request"] == 4
    assert base <= out["touched"]["offset"] and out["touched"]["end"] <= base + span
    writes = srv.requests(OP_WRITE)
    assert len(writes) >= 4 * out["ops"]
    # a 4 KiB write is 4 WRITEs of max_io (1 KiB), every one inside the range
    assert all(w.length == 1024 and w.payload_len == 1024 for w in writes)
    assert all(base <= w.offset and w.offset + w.length <= base + span for w in writes)
    after = bytes(srv.disk)
    assert after[:base] == before[:base] and after[base + span:] == before[base + span:]
    assert after[base:base + span] != before[base:base + span]


def test_sequential_read_two_threads():
    with FakeServer(size=1 * MiB) as srv:
        _, out, _ = load(srv, "--mode", "read", "--size", "16k", "--threads", "2",
                         "--window", "4")
    assert out["ops"] > 0 and out["errors"] == 0 and out["threads"] == 2
    assert out["datagrams_per_request"] == 16


def test_loss_is_retried():
    with FakeServer(size=4 * MiB, loss=0.2) as srv:
        _, out, _ = load(srv, "--mode", "randread", "--size", "2k", "--window", "8",
                         "--timeout", "0.05", "--tries", "100")
    assert out["ops"] > 0 and out["errors"] == 0
    assert out["retries"] > 0
    assert out["sends"] > out["ops"]
    assert out["window_decreases"] > 0  # each loss halves the window


def test_loss_on_writes_is_retried():
    with FakeServer(size=4 * MiB, loss=0.2) as srv:
        _, out, _ = load(srv, "--mode", "randwrite", "--size", "1k", "--window", "8",
                         "--timeout", "0.05", "--tries", "100", "--range", "0:1m")
    assert out["ops"] > 0 and out["errors"] == 0 and out["retries"] > 0
    assert all(w.offset + w.length <= MiB for w in srv.requests(OP_WRITE))


def test_a_lost_datagram_is_sent_again_once_later_ones_are_answered():
    # The first WRITE's answer is lost; its timer (30 s) is not waited for:
    # once a WRITE sent a window (16) after it is answered, it goes again.
    lose_first_write_answer = lose_first_answer(OP_WRITE)
    lost = lose_first_write_answer.lost
    with FakeServer(size=4 * MiB, drop=lose_first_write_answer) as srv:
        _, out, _ = load(srv, "--mode", "write", "--size", "1k", "--window", "16",
                         "--range", "0:1m", "--timeout", "30", "--tries", "2")
    assert out["errors"] == 0 and out["ops"] > 16
    assert out["fast_resends"] == 1 and out["retries"] == 1
    writes = srv.requests(OP_WRITE)
    resent = [i for i, w in enumerate(writes) if w.seq == lost[0]]
    assert len(resent) == 2 and resent[1] - resent[0] >= 16
    assert srv.duplicates == 1


def test_answers_out_of_order_within_the_window_are_not_taken_for_loss():
    # each window of 16 is answered newest first: no datagram is sent twice
    with FakeServer(size=4 * MiB, gate=16, reverse=True) as srv:
        _, out, _ = load(srv, "--mode", "write", "--size", "1k", "--window", "16",
                         "--range", "0:1m", "--timeout", "30", "--tries", "2")
    assert out["errors"] == 0 and out["ops"] > 16
    assert out["fast_resends"] == 0 and out["retries"] == 0 and srv.duplicates == 0


def test_busy_is_backed_off_and_counted():
    with FakeServer(size=4 * MiB, busy_each=2) as srv:
        _, out, _ = load(srv, "--mode", "randread", "--window", "4")
    assert out["ops"] > 0 and out["errors"] == 0
    assert out["busy"] >= 2 * out["ops"] and out["retries"] == 0


def test_window_capped_by_slots():
    # 8 slots, 4 KiB READs take 4 each: two in flight, never EAGAIN
    with FakeServer(size=4 * MiB, slots=8, delay=0.005) as srv:
        _, out, _ = load(srv, "--mode", "randread", "--size", "4k", "--window", "64")
    assert out["window"] == 2 and out["busy"] == 0 and out["errors"] == 0
    assert srv.max_in_use <= 8


def test_odd_replies_are_ignored():
    with FakeServer(size=4 * MiB, shuffle=True, duplicate=True, stray=True) as srv:
        _, out, _ = load(srv, "--mode", "randread", "--size", "8k", "--window", "4")
    assert out["ops"] > 0 and out["errors"] == 0
    assert out["duplicates"] > 0 and out["stray"] > 0


def test_errors_are_counted():
    with FakeServer(size=1 * MiB, eio=[(0, 1 * MiB)]) as srv:
        rc, out, _ = load(srv, "--mode", "randread", "--seconds", "0.3", check=False)
    assert rc == 1 and out["ops"] == 0 and out["errors"] > 0
    assert "EIO" in out["first_error"]


def test_write_needs_a_range():
    with FakeServer(size=1 * MiB) as srv:
        rc, out, err = load(srv, "--mode", "randwrite", check=False)
    assert rc == 2 and out is None and "--range" in err
    assert srv.requests() == []  # refused before a single datagram


def test_write_refused_on_read_only():
    with FakeServer(size=1 * MiB, read_only=True) as srv:
        rc, _, err = load(srv, "--mode", "write", "--range", "0:64k", check=False)
    assert rc == 2 and "read-only" in err
    assert srv.requests(OP_WRITE) == []


@pytest.mark.parametrize("args, message", [
    (["--mode", "randread", "--size", "20k"], "max_read"),
    (["--mode", "randread", "--size", "1000"], "sectors"),
    (["--mode", "randwrite", "--range", "0:2m"], "ends beyond the device"),
])
def test_bad_requests_refused(args, message):
    with FakeServer(size=1 * MiB) as srv:
        rc, _, err = load(srv, *args, check=False)
    assert rc == 2 and message in err
    assert srv.requests(OP_READ) == [] and srv.requests(OP_WRITE) == []


KEY = bytes(range(16))


def test_keyed_instance_with_its_key_file(tmp_path):
    key = tmp_path / "key"
    key.write_text(" ".join(f"{b:02x}" for b in KEY) + "\n")  # whitespace is allowed
    with FakeServer(size=1 * MiB, key=KEY, auth_data=True) as srv:
        _, out, _ = load(srv, "--mode", "randwrite", "--range", "0:64k", "--key", str(key),
                         "--auth", "full")
    assert out["ops"] > 0 and out["errors"] == 0 and out["stray"] == 0


@pytest.mark.parametrize("text, message", [
    ("00" * 15, "30 hexadecimal digits: a key is 32 of them"),
    ("00" * 16 + "00", "more than 32 hexadecimal digits"),
    ("zz" * 16, "not a hexadecimal digit: 'z'"),
])
def test_bad_key_file_refused_as_netblkctl_refuses_it(tmp_path, text, message):
    key = tmp_path / "key"
    key.write_text(text)
    with FakeServer(size=1 * MiB, key=KEY) as srv:
        rc, _, err = load(srv, "--mode", "randread", "--key", str(key), check=False)
    assert rc == 2 and f"key file {key}: {message}" in err
    assert srv.requests() == []


def test_text_output():
    with FakeServer(size=1 * MiB) as srv:
        r = subprocess.run([str(LOAD), "127.0.0.1", str(srv.port), *PATIENT, "--mode",
                            "randread", "--seconds", "0.3"], capture_output=True, text=True,
                           timeout=180)
    assert r.returncode == 0, r.stderr
    assert "IOPS" in r.stdout and "p99.9" in r.stdout and "errors 0" in r.stdout


def test_no_instance():
    # nothing listens: INFO is given up on, with a hint
    import socket
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # the kernel's ICMP port unreachable must come back before netblk-load gives
    # up: 1.5 s for it (it comes at once on an idle machine)
    r = subprocess.run([str(LOAD), "127.0.0.1", str(port), "--mode", "randread",
                        "--timeout", "0.5", "--tries", "3"], capture_output=True, text=True,
                       timeout=180)
    assert r.returncode == 1 and "no answer" in r.stderr and "unreachable" in r.stderr
