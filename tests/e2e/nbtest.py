"""Helpers the end-to-end test modules share: netblkctl in the guest, an
instance's counters, the Python client (client/netblk.py) and plain sockets
at an instance from the host, the veth pair's raw-frame client (Rig), host
programs to copy into the guest, and what netblk leaves behind.

Every e2e module imports from here; importing it puts client/ on sys.path
(conftest.py has put ci/ there), so `import netblk` works after it."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import socket
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "client"))

import rawframes as rf  # noqa: E402
from guest import ARCH, TRIPLET  # noqa: E402, F401 (TRIPLET: the test modules')
from initramfs import sysroot  # noqa: E402
from netblk import HEADER_SIZE, OP_HELLO, Client, pack_header, unpack_header  # noqa: E402


def host_elf(*names: str) -> Path | None:
    """A host ELF program (not a script or busybox link) to copy into the
    guest; for an arm64 guest (NETBLK_ARCH) the arm64 one in
    build/sysroot-arm64 (ci/fetch-sysroot.sh), if it is there."""
    for name in names:
        if ARCH != "amd64":
            root = sysroot(ARCH)
            p = shutil.which(name, path=":".join(str(root / d) for d in ("usr/sbin", "usr/bin",
                                                                         "sbin", "bin")))
        else:
            p = shutil.which(name) or next((str(d / name) for d in (Path("/usr/sbin"), Path("/sbin"))
                                            if (d / name).exists()), None)
        if not p:
            continue
        p = Path(p).resolve()
        try:
            with open(p, "rb") as f:
                if f.read(4) == b"\x7fELF" and "busybox" not in p.name:
                    return p
        except OSError:
            continue
    return None


def arch_file(path: str) -> Path:
    """Where this host has the guest's @path (a file of an :arch package, e.g.
    under /usr/lib/<triplet>): here for amd64, in the sysroot for arm64."""
    return Path(path) if ARCH == "amd64" else sysroot(ARCH) / path.lstrip("/")


def delta(after, before, *keys):
    """How much each counter of @keys grew from @before to @after."""
    return {k: after[k] - before[k] for k in keys}


def ctl(g, *args, timeout=60):
    """netblkctl ARGS in the guest: (exit status, stdout, stderr)."""
    cmd = " ".join(shlex.quote(str(a)) for a in args)
    rc, out = g.run(f"netblkctl {cmd} >/tmp/ctl.out 2>/tmp/ctl.err; rc=$?; "
                    f"cat /tmp/ctl.out; echo @@STDERR@@; cat /tmp/ctl.err; exit $rc", timeout)
    stdout, _, stderr = out.partition("@@STDERR@@\n")
    return rc, stdout, stderr


def start(g, dev, port, *opts):
    rc, out, err = ctl(g, "start", dev, port, *opts)
    assert rc == 0, f"netblkctl start {dev} {port} {' '.join(opts)}: exit {rc}\n{out}{err}"
    assert err == "", f"start wrote on stderr: {err!r}"
    return out


def instances(g):
    rc, out, err = ctl(g, "list", "--json")
    assert rc == 0, f"netblkctl list --json: exit {rc}\n{out}{err}"
    data = json.loads(out)
    assert isinstance(data, list), out
    return {e["port"]: e for e in data}


def stop(g, port):
    rc, out, err = ctl(g, "stop", port)
    assert rc == 0, f"netblkctl stop {port}: exit {rc}\n{out}{err}"


def stats(g, port):
    """The counters of the instance on `port`."""
    inst = instances(g)
    assert port in inst, f"no instance on port {port}: {sorted(inst)}"
    return inst[port]["stats"]


def settled_stats(g, port, seconds=30.0):
    """The counters once nothing is in flight (the worker's counters of the
    last replies may land a moment after the client has them)."""
    deadline = time.monotonic() + seconds
    while True:
        s = stats(g, port)
        if not (s["inflight_queued"] or s["inflight_disk"] or s["inflight_done"]):
            return s
        if time.monotonic() > deadline:
            pytest.fail(f"port {port}: requests still in flight after {seconds} s: {s}")
        time.sleep(0.1)


def wait_counted(g, port, before, key, n, seconds=30.0):
    """The instance's counter `key` moved by at least n since `before` (the
    datagrams sent have all come through QEMU's network to it); its counters."""
    deadline = time.monotonic() + seconds
    while True:
        s = stats(g, port)
        if s[key] - before[key] >= n:
            return s
        if time.monotonic() > deadline:
            pytest.fail(f"port {port}: {key} moved by {s[key] - before[key]}, not {n}, "
                        f"in {seconds} s")
        time.sleep(0.1)


def wait_for(what, cond, seconds=60.0, detail=None):
    """cond() until it returns something true, which is returned; at most
    `seconds` (a bound against a hang, not how fast it should be)."""
    deadline = time.monotonic() + seconds
    while True:
        got = cond()
        if got:
            return got
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {seconds} s" + (f": {detail()}" if detail else ""))
        time.sleep(0.2)


def client(g, port, timeout=5.0, tries=4, **kw):
    """The Python client at the instance on guest port `port` (through its
    host forward); kw: more Client() arguments (auth=...).

    By default it resends only when a datagram was really lost: the guest
    answers in milliseconds, but under TCG on a busy host a reply may take far
    longer, and a resend would be served (and counted) twice.  A test that
    wants resends soon (a disk that stops answering, a port nobody serves)
    says so with timeout= and tries=."""
    return Client("127.0.0.1", g.host_port(port), timeout=timeout, tries=tries, **kw)


def raw_socket(g, port, timeout=0.5):
    """A plain UDP socket connected to the instance, with room for bursts."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for opt in (33, socket.SO_RCVBUF):  # SO_RCVBUFFORCE (root), else capped by rmem_max
        try:
            s.setsockopt(socket.SOL_SOCKET, opt, 8 << 20)
            break
        except OSError:
            continue
    s.connect(("127.0.0.1", g.host_port(port)))
    s.settimeout(timeout)
    return s


def refused(g, pattern, *args):
    """netblkctl ARGS must fail with a message (matching pattern) on stderr."""
    rc, out, err = ctl(g, *args)
    assert rc != 0, f"netblkctl {' '.join(map(str, args))} succeeded: {out}"
    msg = err.strip()
    assert msg, f"netblkctl {' '.join(map(str, args))}: exit {rc} and no message"
    assert re.search(pattern, msg, re.I), f"message {msg!r} does not match {pattern!r}"
    return rc, msg


def kthreads(g):
    """Names of the netblk worker threads (netblk/...)."""
    return re.findall(r"\[(netblk/[^\]]*)\]", g.check("ps"))


def leaked(g) -> dict:
    out = g.check("cat /sys/module/netblk/parameters/leaked_slots "
                  "/sys/module/netblk/parameters/leaked_frames")
    slots, frames = (int(x) for x in out.split())
    return {"leaked_slots": slots, "leaked_frames": frames}


def kernel_log(g) -> str:
    """All the kernel said since the guest booted: what conftest's kernel_clean
    read and cleared before each test (g.dmesg() is the test's own), then dmesg."""
    return "".join(getattr(g, "netblk_kernel_log", [])) + g.dmesg()


def wait_stopped(g, port, why, seconds=15):
    """The instance on `port` stops on its own within `seconds`; the reason
    the kernel gives (dmesg's "stopped serving ... on port P: WHY") matches
    `why`.  Returns that line."""
    deadline = time.monotonic() + seconds
    pattern = re.compile(rf"stopped serving \S+ on port {port}: (.*)")
    while time.monotonic() < deadline:
        if port not in instances(g):
            lines = [m.group(0) for m in map(pattern.search, g.dmesg().splitlines()) if m]
            assert lines and re.search(why, lines[-1]), lines
            return lines[-1]
        g.run("sleep 0.2")
    pytest.fail(f"port {port} still served {seconds} s later: {instances(g).get(port)}")


class Rig:
    """The veth pair's raw-frame client: frames (rawframes) sent with nbraw
    (ci/guest-files/nbraw.c) from nbv1 to an instance on nbv0, and what comes
    back read at nbv1.  The fixture that made the pair (test_hostile's rig,
    test_stuck's vlan_rig) hands it out as it left it:

        nbv1 (no address; frames from 10.9.0.2, the "client")  <-->  nbv0 10.9.0.1/24
    """

    PORT = 7100	# the instance's port the requests go to
    SERVER_IP, CLIENT_IP = "10.9.0.1", "10.9.0.2"

    def __init__(self, g):
        self.g = g
        self.server_mac = g.check("cat /sys/class/net/nbv0/address").strip()
        self.client_mac = g.check("cat /sys/class/net/nbv1/address").strip()

    def request(self, op=OP_HELLO, offset=0, length=0, handle=1, session=None,
                **kw) -> rf.Frame:
        """A netblk request from the client to the instance; kw overrides any field.
        By default a HELLO (handle: its nonce), which any source gets an answer
        to without a session: a cookie, in a datagram no larger."""
        sid, token = (session.id, session.token) if session else (0, 0)
        f = rf.Frame(dst_mac=self.server_mac, src_mac=self.client_mac, src_ip=self.CLIENT_IP,
                     dst_ip=self.SERVER_IP, src_port=40000, dst_port=self.PORT,
                     payload=pack_header(op, offset, length, handle, session=sid, token=token))
        for k, v in kw.items():
            setattr(f, k, v)
        return f

    def open_session(self, cpu=None, **kw):
        """HELLO, and HELLO with the cookie, from the client: a session for it
        (sent from `cpu`, when given: where veth's receive runs for them)."""
        cookie = self.replies(self.request(handle=99, **kw), cpu=cpu)[0]["token"]
        f = self.request(handle=99, **kw)
        f.payload = pack_header(OP_HELLO, 0, 0, 99, token=cookie)
        r = self.replies(f, cpu=cpu)
        assert r and r[0]["session"], r
        return SimpleNamespace(id=r[0]["session"], token=r[0]["token"])

    def exchange(self, *frames: rf.Frame, wait_ms=600, cpu=None) -> list[rf.Parsed]:
        """Send the frames from nbv1 (on CPU `cpu`, when given: veth receives
        on the CPU that sends); the UDP frames that came back to it."""
        hexes = " ".join(f.build().hex() for f in frames)
        pin = "" if cpu is None else f"taskset -c {cpu} "
        out = self.g.check(f"{pin}nbraw nbv1 -w {wait_ms} {hexes}", timeout=60)
        got = [rf.parse(bytes.fromhex(l)) for l in out.split()]
        return [p for p in got if p is not None]

    def replies(self, *frames: rf.Frame, **kw) -> list[dict]:
        """The netblk replies from the instance's port, as dicts."""
        out = []
        for p in self.exchange(*frames, **kw):
            if p.src_port != self.PORT or len(p.payload) < HEADER_SIZE:
                continue
            h = unpack_header(p.payload)
            out.append(dict(op=h["op"], status=h["status"], handle=h["seq"], length=h["length"],
                            session=h["session"], token=h["token"], data=h["data"], frame=p))
        return out
