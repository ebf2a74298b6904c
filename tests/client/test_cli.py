"""The netblk command's newer behaviour against the fake instance
(netblk_fake.py): read to the end of the device, write --flush, the first
contact's bound and --deadline, the progress bar, and the package run as
`python3 -m netblk`.

Run: /usr/bin/python3 -m pytest tests/client
"""

from __future__ import annotations

import io
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "client"))
sys.path.insert(0, str(HERE))

import netblk  # noqa: E402
import netblk.progress  # noqa: E402
from netblk import OP_FLUSH, OP_READ, OP_WRITE, Client, NetblkDeadline, Progress  # noqa: E402
from netblk_fake import FakeServer  # noqa: E402

MiB = 1 << 20
# As test_client.py: a resend with this timeout means a datagram was lost.
PATIENT = 5.0
PATIENT_TRIES = 4
# Bounds on wall time: far above what the new behaviour takes (about 1 to 3
# s), far below what the old took with the same options, so a busy machine
# does not fail them and the old behaviour cannot pass them.
QUICK = 10.0
CLIENT_ENV = dict(os.environ, PYTHONPATH=str(ROOT / "client"))


@pytest.fixture
def server():
    srv = FakeServer(size=MiB).start()
    srv.disk[:] = os.urandom(srv.size)
    yield srv
    srv.stop()


def cli(port: int, *args: str, capsys) -> tuple[int, str, str]:
    """netblk.main in-process, patient unless args say otherwise."""
    rc = netblk.main(["127.0.0.1", str(port), "--timeout", str(PATIENT),
                      "--tries", str(PATIENT_TRIES), *args])
    out, err = capsys.readouterr()
    return rc, out, err


def silent_port():
    """A bound UDP socket that never answers (and, bound, draws no ICMP port
    unreachable): a host that is there but serves nothing on the port."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    return s


# ---- read without LENGTH -------------------------------------------------------------


def test_read_without_length_reads_to_the_end(server, tmp_path, capsys):
    dst = tmp_path / "rest"
    rc, _, err = cli(server.port, "read", "300k", str(dst), capsys=capsys)
    assert rc == 0, err
    assert dst.read_bytes() == bytes(server.disk[300 * 1024:])
    assert f"read {MiB - 300 * 1024} bytes at {300 * 1024}" in err

    # the old form still reads what it is told
    rc, _, err = cli(server.port, "read", "300k", "8k", str(dst), capsys=capsys)
    assert rc == 0, err
    assert dst.read_bytes() == bytes(server.disk[300 * 1024:308 * 1024])


def test_read_without_length_at_and_beyond_the_end(server, tmp_path, capsys):
    dst = tmp_path / "none"
    rc, _, err = cli(server.port, "read", "1m", str(dst), capsys=capsys)
    assert rc == 0, err
    assert dst.read_bytes() == b""
    rc, _, err = cli(server.port, "read", "2m", str(dst), capsys=capsys)
    assert rc == 2 and "beyond the end of the device (1048576 bytes)" in err


def test_read_refuses_a_size_where_the_file_goes(server, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc, _, err = cli(server.port, "read", "0", "4k", capsys=capsys)
    assert rc == 2 and "'4k' looks like a LENGTH" in err
    assert not (tmp_path / "4k").exists()
    assert not server.requests(OP_READ)  # refused before anything was read
    rc, _, err = cli(server.port, "read", "1020k", "./4k", capsys=capsys)
    assert rc == 0, err
    assert (tmp_path / "4k").read_bytes() == bytes(server.disk[1020 * 1024:])


# ---- write --flush ---------------------------------------------------------------------


def test_write_flush_sends_a_flush_after_the_writes(server, tmp_path, capsys):
    src = tmp_path / "src"
    data = os.urandom(64 * 1024)
    src.write_bytes(data)
    rc, _, err = cli(server.port, "write", "128k", str(src), "--flush", capsys=capsys)
    assert rc == 0, err
    assert bytes(server.disk[128 * 1024:192 * 1024]) == data
    ops = [r.op for r in server.requests() if r.op in (OP_WRITE, OP_FLUSH)]
    assert ops.count(OP_WRITE) >= 64 and ops.count(OP_FLUSH) == 1
    assert ops[-1] == OP_FLUSH  # after every WRITE was answered
    assert "wrote 65536 bytes at 131072 and flushed" in err


def test_write_without_flush_sends_none(server, tmp_path, capsys):
    src = tmp_path / "src"
    src.write_bytes(os.urandom(4096))
    rc, _, err = cli(server.port, "write", "0", str(src), capsys=capsys)
    assert rc == 0, err
    assert not server.requests(OP_FLUSH) and "flushed" not in err


# ---- the first contact and --deadline ------------------------------------------------------


def test_a_silent_port_fails_fast_and_named(capsys):
    # --timeout 1 --tries 30: before, 30 s of resending the first HELLO
    with silent_port() as s:
        port = s.getsockname()[1]
        t0 = time.monotonic()
        rc = netblk.main(["127.0.0.1", str(port), "--timeout", "1", "--tries", "30", "info"])
        elapsed = time.monotonic() - t0
    err = capsys.readouterr().err
    assert rc == 1, err
    assert elapsed < QUICK, elapsed
    assert f"netblk: HELLO: no answer from 127.0.0.1:{port} in " in err
    assert "is the port right?" in err and f"netblkctl start DEV {port}" in err


def test_a_closed_port_fails_fast_as_unreachable(capsys):
    with silent_port() as s:
        port = s.getsockname()[1]
    # nothing bound now: the kernel answers ICMP port unreachable
    t0 = time.monotonic()
    rc = netblk.main(["127.0.0.1", str(port), "--timeout", "1", "--tries", "30", "flush"])
    elapsed = time.monotonic() - t0
    err = capsys.readouterr().err
    assert rc == 1 and elapsed < QUICK, (rc, elapsed, err)
    assert f"no answer from 127.0.0.1:{port}" in err and "port unreachable" in err


def test_deadline_stops_a_read_saying_how_far_it_got(tmp_path, capsys):
    # answers of READs past 256k are lost: patient resends would take
    # PATIENT x PATIENT_TRIES = 20 s before giving up
    with FakeServer(size=MiB, drop=lambda h: h[2] == OP_READ | 0x80 and h[8] >= 256 * 1024) \
            as srv:
        t0 = time.monotonic()
        rc, _, err = cli(srv.port, "read", "0", "1m", str(tmp_path / "x"), "--deadline", "1",
                         capsys=capsys)
        elapsed = time.monotonic() - t0
    assert rc == 1, err
    assert elapsed < QUICK, elapsed
    assert "the deadline (1 s) passed with no answer from 127.0.0.1:" in err
    assert "; 262144 of 1048576 bytes read" in err


def test_deadline_in_the_client(server):
    with Client("127.0.0.1", server.port, timeout=PATIENT, tries=PATIENT_TRIES) as c:
        c.info()
        server.silent = True
        c.set_deadline(0.5)
        t0 = time.monotonic()
        with pytest.raises(NetblkDeadline) as ei:
            c.write(0, bytes(8192))
        assert time.monotonic() - t0 < QUICK
    msg = str(ei.value)
    assert msg.startswith("WRITE 0+1024: the deadline (0.5 s) passed") and c.where in msg
    assert ei.value.status is None and ei.value.op == OP_WRITE


def test_first_contact_bounds_only_the_first_hello(server):
    # The fake answers HELLO at once and holds INFO 1.5 s: longer than
    # first_contact, which an INFO in the session opened is not bound by.
    server.delay = 1.5
    with Client("127.0.0.1", server.port, timeout=PATIENT, tries=PATIENT_TRIES,
                first_contact=1.0) as c:
        assert c.info().size == server.size
        assert (c.stats.sessions, c.stats.retries) == (1, 0)
    with pytest.raises(ValueError):
        Client("127.0.0.1", server.port, first_contact=0)


# ---- the progress bar -------------------------------------------------------------------


class Tty(io.StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def bar_lines(err: str) -> list[str]:
    """The bars drawn (each redraw starts with \\r), the last one first."""
    return [p for p in reversed(err.split("\r")) if p.strip()]


def test_progress_forced_draws_a_bar_and_ends_the_line(server, tmp_path, capsys):
    rc, _, err = cli(server.port, "read", "0", "256k", str(tmp_path / "x"), "--progress",
                     capsys=capsys)
    assert rc == 0, err
    assert err.startswith("\r"), err
    last, summary = err.rsplit("\r", 1)[1].split("\n", 1)
    assert re.match(r"read \[#+\] 0\.2 MiB / 0\.2 MiB  100%  [\d.]+ MiB/s  in \d+:\d\d *$",
                    last), last
    assert summary.startswith("netblk: read 262144 bytes at 0")


def test_progress_off_when_stderr_is_not_a_terminal(server, tmp_path, capsys):
    src = tmp_path / "src"
    src.write_bytes(os.urandom(128 * 1024))
    for args in (("read", "0", "256k", str(tmp_path / "x")), ("write", "0", str(src)),
                 ("verify", "0", "64k")):
        rc, _, err = cli(server.port, *args, capsys=capsys)
        assert rc == 0, err
        assert "\r" not in err and "[" not in err, (args, err)


def verify_on_a_terminal(server, monkeypatch, *args: str) -> str:
    tty = Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    rc = netblk.main(["127.0.0.1", str(server.port), "--timeout", str(PATIENT),
                      "verify", "0", "64k", *args])
    assert rc == 0, tty.getvalue()
    return tty.getvalue()


def test_progress_on_a_terminal_after_the_delay(server, monkeypatch):
    # the delay (1 s) made 0: the transfer need not be long
    monkeypatch.setattr(netblk.progress, "DELAY", 0.0)
    err = verify_on_a_terminal(server, monkeypatch)
    assert err.startswith("\rverify [") and err.endswith("\n"), err
    # verify counts each byte out and back: 2 x 64k
    assert "0.1 MiB / 0.1 MiB  100%" in bar_lines(err)[0]
    assert verify_on_a_terminal(server, monkeypatch, "--no-progress") == ""


def test_progress_on_a_terminal_waits_for_a_long_transfer(server, monkeypatch):
    # a verify of 64k takes far less than DELAY (1 s): nothing drawn
    assert verify_on_a_terminal(server, monkeypatch) == ""


def test_progress_bar_text():
    now = [100.0]
    out = io.StringIO()
    p = Progress("read", 100 * MiB, draw=True, stream=out, clock=lambda: now[0])
    now[0] += 5
    p.add(25 * MiB)
    line = p.line(now[0], 79)
    assert len(line) == 79
    inner = line[line.index("[") + 1:line.index("]")]  # a quarter of it filled
    assert line.startswith("read [#") and inner == "#" * (len(inner) // 4) + "." * (
        len(inner) - len(inner) // 4)
    assert "] 25.0 MiB / 100.0 MiB   25%  " in line
    assert line.endswith("5.0 MiB/s  ETA 0:15")
    assert out.getvalue() == "\r" + line
    assert p.so_far() == f"{25 * MiB} of {100 * MiB} bytes read"
    # a total not known (a pipe): bytes and rate only
    q = Progress("write", None, "written", draw=True, stream=out, clock=lambda: now[0])
    now[0] += 2
    q.add(3 * MiB)
    assert q.line(now[0], 79) == "write 3.0 MiB  1.5 MiB/s"
    assert q.so_far() == f"{3 * MiB} bytes written"


def test_progress_redraws_at_most_ten_times_a_second():
    now = [0.0]
    out = io.StringIO()
    p = Progress("write", 1000, draw=True, stream=out, clock=lambda: now[0])
    for i in range(1000):
        now[0] = i * 0.001  # 1000 adds in 1 s
        p.add(1)
    assert 9 <= out.getvalue().count("\r") <= 11
    p.finish()
    assert out.getvalue().endswith("\n")
    assert "100%" in bar_lines(out.getvalue())[0]
    p.finish()  # once only
    assert out.getvalue().count("\n") == 1


def test_progress_never_drawn_draws_nothing():
    out = Tty()
    p = Progress("read", 10, draw=False, stream=out)
    p.add(10)
    p.finish()
    assert out.getvalue() == "" and p.done == 10


# ---- python3 -m netblk --------------------------------------------------------------------


def test_python_m_netblk_version():
    # cwd=/: found by PYTHONPATH alone, as the installed command is
    r = subprocess.run([sys.executable, "-m", "netblk", "--version"], env=CLIENT_ENV, cwd="/",
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"netblk {netblk.__version__}\n"


def test_python_m_netblk_usage_names_the_command():
    r = subprocess.run([sys.executable, "-m", "netblk"], env=CLIENT_ENV, cwd="/",
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.startswith("usage: netblk "), r.stderr


def test_the_package_exports_what_it_lists():
    missing = [name for name in netblk.__all__ if not hasattr(netblk, name)]
    assert not missing
    assert {"Client", "NetblkError", "NetblkTimeout", "main", "run", "build_parser",
            "parse_size", "bench", "hello", "pack_header", "siphash24"} <= set(netblk.__all__)
