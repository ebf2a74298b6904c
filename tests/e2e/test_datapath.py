"""Data path, end to end: the Python client (client/netblk/) and raw UDP
sockets talking wire protocol v1 to netblk.ko in the test guest.

Guest (ci/guest.py): /dev/nvme0n1p1 256 MiB raw (served read-write here),
/dev/nvme0n1p2 ext4 (served read-only), eth0 virtio-net (or vmxnet3,
NETBLK_NIC) 10.0.2.15 mtu 1500
(native XDP), so an instance has max_io 1024, max_read 16384, 256 slots.
Guest port G is reached at 127.0.0.1:guest.host_port(G).

Counters come from `netblkctl list --json`; every test checks afterwards
that dmesg got no warning and that no slot or frame leaked.
"""

from __future__ import annotations

import errno
import hashlib
import os
import random
import re
import select
import socket
import threading
import time
from pathlib import Path

import pytest

from guest import kernel_trouble
from nbtest import (ROOT, TRIPLET, arch_file, client, ctl, delta, host_elf, instances, kthreads,
                    leaked, raw_socket, settled_stats, start, stop, wait_counted)
from netblk import (
    FLAG_FUA, HEADER_SIZE, INFO_FUA, INFO_READ_ONLY, INFO_TRIM, INFO_VOLATILE_CACHE,
    INFO_WRITE_ZEROES, MAGIC, OP_FLUSH, OP_INFO, OP_READ, OP_REPLY, OP_TRIM, OP_WRITE,
    OP_WRITE_ZEROES, Client, NetblkError, NetblkTimeout, hello, pack_header, unpack_header,
)

P1, P2 = "/dev/nvme0n1p1", "/dev/nvme0n1p2"
RW, RO, SPARE = 7000, 7001, 7002
GUEST_FORWARDS = [RW, RO, SPARE]

SECTOR = 512
MAX_IO = 1024
MAX_READ = 16384
SLOTS = 256


# busybox ip does not show a link's XDP program; iproute2's ip ("prog/xdp")
# and bpftool (a build dependency) do.
_IP_FULL, _BPFTOOL = host_elf("ip"), host_elf("bpftool")
_PROGRAMS = {}
if _IP_FULL:
    _PROGRAMS["/usr/sbin/ip-full"] = _IP_FULL
if _BPFTOOL:
    _PROGRAMS["/usr/sbin/bpftool"] = _BPFTOOL
# Another program to share the NIC with: xdp-filter's allow-all program
# (Debian's xdp-tools), loaded through libxdp's dispatcher by xdp-loader.
_XDP_LOADER = host_elf("xdp-loader")
_OTHER_XDP = Path(f"/usr/lib/{TRIPLET}/bpf/xdpfilt_alw_all.o")
# netblk's own object, which xdp-loader attaches without multi-buffer
# support (as an older netblk's program was)
_NETBLK_XDP = "/root/netblk.bpf.o"
_FILES = {}
if _XDP_LOADER and arch_file(str(_OTHER_XDP)).exists():
    _PROGRAMS["/usr/sbin/xdp-loader"] = _XDP_LOADER
    _FILES[str(_OTHER_XDP)] = arch_file(str(_OTHER_XDP))
    _FILES[_NETBLK_XDP] = ROOT / "build/bpf/netblk.bpf.o"
GUEST_OPTIONS = {"extra_programs": _PROGRAMS, "extra_files": _FILES}



# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------
def recv_all(s, quiet=0.5, limit=10.0, until=None):
    """Datagrams until none came for `quiet` s (or `until(got)` holds and then
    `quiet` s of silence), at most `limit` s."""
    got = []
    end = time.monotonic() + limit
    while time.monotonic() < end:
        s.settimeout(max(0.01, min(quiet, end - time.monotonic())))
        try:
            got.append(s.recv(65536))
        except socket.timeout:
            if until is None or until(got):
                break
        except ConnectionRefusedError:
            continue
    return got


def parse(d):
    assert len(d) >= HEADER_SIZE, f"reply of {len(d)} bytes: {d!r}"
    r = unpack_header(d)
    r["handle"] = r["seq"]  # what the tests match replies by
    return r


def md5(b):
    return hashlib.md5(b).hexdigest()


def guest_md5(g, dev, offset, length):
    """md5 of the range as the guest kernel reads it (O_DIRECT: no page cache)."""
    assert offset % SECTOR == 0 and length % SECTOR == 0
    out = g.check(f"dd if={dev} bs={SECTOR} skip={offset // SECTOR} count={length // SECTOR} "
                  f"iflag=direct 2>/dev/null | md5sum", timeout=60)
    return out.split()[0]


def guest_write_random(g, dev, offset, length):
    """Write random data to the device from inside the guest (O_DIRECT, then
    fsync); returns its md5."""
    assert offset % SECTOR == 0 and length % SECTOR == 0
    out = g.check(f"dd if=/dev/urandom of=/tmp/blob bs={SECTOR} count={length // SECTOR} "
                  f"2>/dev/null && dd if=/tmp/blob of={dev} bs={SECTOR} seek={offset // SECTOR} "
                  f"oflag=direct conv=notrunc,fsync 2>&1 && md5sum /tmp/blob && rm /tmp/blob",
                  timeout=60)
    return out.split()[-2]


def net_devices(g):
    return g.check("ls /sys/class/net").split()


def xdp_on_eth0(g) -> str:
    """What shows that eth0 runs an XDP program ('' when none)."""
    if _IP_FULL:
        out = g.check("ip-full -d link show dev eth0")
        return " ".join(re.findall(r"\bxdp\b.*|prog/xdp.*", out))
    if _BPFTOOL:
        out = g.check("bpftool net show dev eth0")
        return out.split("xdp:", 1)[1].split("tc:", 1)[0].strip()
    # last resort: the program is still loaded (JIT symbols)
    return g.run("grep netblk_xdp /proc/kallsyms")[1].strip()


def wait_xdp_gone(g, seconds=30.0):
    deadline = time.monotonic() + seconds
    while True:
        shown = xdp_on_eth0(g)
        if not shown:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"eth0 still runs XDP {seconds} s after the last instance stopped: {shown}")
        time.sleep(0.2)


def dmesg_lines(g):
    return g.check("dmesg").splitlines()


def wait_kthreads_gone(g, port=None, seconds=30.0):
    """The worker threads (of the instance on `port`, or all) are gone.  A stop
    returns once its worker has ended; ps may list it a moment longer, while the
    thread finishes exiting."""
    deadline = time.monotonic() + seconds
    while True:
        left = [t for t in kthreads(g) if port is None or str(port) in t]
        if not left:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"worker threads {left} still there {seconds} s after their instance "
                        f"stopped")
        time.sleep(0.2)


class Hammer(threading.Thread):
    """A client looping reads (and writes, in its own range) until told to
    stop or until the instance stops answering (5 s of silence: it ends soon
    after, and a slow guest on a busy host does not end it before).  Reads of
    the prefilled range must match `known`.  `seconds`: a bound against a
    test that forgets to halt it, far beyond any test's run."""

    def __init__(self, host_port, known_off, known, write_off=None, seconds=600):
        super().__init__(daemon=True)
        self.host_port, self.known_off, self.known = host_port, known_off, known
        self.write_off, self.seconds = write_off, seconds
        self.ops = 0
        self.error: Exception | None = None
        self.mismatch: str | None = None
        self.halt = threading.Event()

    def run(self):
        c = Client("127.0.0.1", self.host_port, timeout=1.0, tries=5)
        rng = random.Random(self.host_port ^ (self.write_off or 0))
        end = time.monotonic() + self.seconds
        try:
            while not self.halt.is_set() and time.monotonic() < end:
                if self.write_off is not None:
                    data = rng.randbytes(8192 + 512 * rng.randrange(16))
                    c.write(self.write_off, data, window=8)
                    back = c.read(self.write_off, len(data), window=8)
                    if back != data:
                        self.mismatch = f"own range {self.write_off}+{len(data)} read back differs"
                        return
                back = c.read(self.known_off, len(self.known), window=8)
                if back != self.known:
                    self.mismatch = f"prefilled range {self.known_off}+{len(self.known)} differs"
                    return
                self.ops += 1
        except NetblkError as e:
            self.error = e
        except OSError as e:
            self.error = e
        finally:
            c.close()


def wait_progress(hammers, ops=2, seconds=120):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if all(h.ops >= ops for h in hammers):
            return
        for h in hammers:
            assert h.is_alive() or h.ops >= ops, \
                f"a client ended early: ops {h.ops}, error {h.error!r}, mismatch {h.mismatch}"
        time.sleep(0.1)
    pytest.fail(f"clients made no progress: {[(h.ops, repr(h.error)) for h in hammers]}")


def join_ended(hammers, seconds=60, stopped=True):
    """The hammers end; those of a stopped instance with a timeout, none with a mismatch."""
    for h in hammers:
        h.join(seconds)
        assert not h.is_alive(), f"a client still runs {seconds} s after its instance went away"
        assert h.mismatch is None, h.mismatch
        if stopped:
            assert isinstance(h.error, NetblkTimeout), \
                f"client of a stopped instance ended with {h.error!r}, not a timeout"


# --------------------------------------------------------------------------
# INFO
# --------------------------------------------------------------------------
def test_info_matches_device(netblk):
    g = netblk
    start(g, P1, RW)
    start(g, P2, RO, "ro")
    wc = g.check("cat /sys/block/nvme0n1/queue/write_cache").strip()
    fua = g.check("cat /sys/block/nvme0n1/queue/fua").strip()
    dev_flags = (INFO_VOLATILE_CACHE if wc == "write back" else 0) | (INFO_FUA if fua == "1" else 0)
    assert wc == "write back", "QEMU's nvme was expected to have a volatile write cache"

    ids = set()
    for dev, port, ro in ((P1, RW, False), (P2, RO, True)):
        size = int(g.check(f"blockdev --getsize64 {dev}"))
        ss = int(g.check(f"blockdev --getss {dev}"))
        with client(g, port) as c:
            info = c.info()
            assert (info.size, info.sector_size) == (size, ss), (dev, info)
            assert (info.max_io, info.max_read, info.slots) == (MAX_IO, MAX_READ, SLOTS), info
            # QEMU's NVMe discards and writes zeroes (DSM, Write Zeroes); a
            # read-only instance offers nothing a client could write with
            want = INFO_READ_ONLY if ro else dev_flags | INFO_TRIM | INFO_WRITE_ZEROES
            assert info.flags == want, \
                f"{dev} ({'ro' if ro else 'rw'}): INFO flags {info.flags:#x}, not {want:#x}; " \
                f"device says write_cache={wc!r} fua={fua!r}"
            assert info.physical_block_size >= ss, info
            if ro:
                assert (info.max_trim, info.max_write_zeroes, info.discard_granularity) == \
                    (0, 0, 0), info
            else:
                assert info.max_trim and info.max_write_zeroes, info
            # the raw reply: header echoes the seq, payload is 60 bytes (queues last)
            r = c.request(OP_INFO, 0, 0, seq=500)
            assert (r.status, r.op, r.version, r.seq) == (0, OP_INFO | OP_REPLY, 2, 500), r
            # as many queues as run: the NIC's RX queues (vmxnet3 has one a CPU)
            assert len(r.data) == 60 and info.queues == instances(g)[port]["queues"], r
            ids.add(info.export_id)
    # each partition names itself: a client can tell one from the other
    assert len(ids) == 2 and 0 not in ids, ids


# --------------------------------------------------------------------------
# write / read round trips
# --------------------------------------------------------------------------
def extents(size):
    mid = (size // 2) & ~(SECTOR - 1)
    return [
        ("start", 0, 1536),                                  # 1.5 datagrams
        ("unaligned-to-max_io", 1536, 3072),                 # 3 KiB at 1.5 KiB
        ("across-max_read", MAX_READ - 1536, MAX_READ + 2560),
        ("middle", mid - 7 * SECTOR, 100 * 1024 + SECTOR),   # many READs at once
        ("before-last", size - SECTOR - 9216, 9216),
        ("last-sector", size - SECTOR, SECTOR),
    ]


@pytest.mark.parametrize("window", [1, 64])
def test_write_read_back(netblk, window):
    g = netblk
    start(g, P1, RW)
    rng = random.Random(window)
    with client(g, RW) as c:
        size = c.info().size
        written = []
        for name, off, length in extents(size):
            data = rng.randbytes(length)
            c.write(off, data, window=window)
            back = c.read(off, length, window=window)
            assert back == data, f"{name}: {length} bytes at {off} read back differ (window {window})"
            written.append((name, off, length, data))
        # all of them still there (nothing overwrote a neighbour)
        for name, off, length, data in written:
            assert c.read(off, length, window=window) == data, f"{name} changed"
    # the guest kernel reads what the client wrote
    for name, off, length, data in written:
        assert guest_md5(g, P1, off, length) == md5(data), \
            f"{name}: the guest's {P1} holds other data at {off}+{length}"


def test_guest_writes_read_through_netblk(netblk):
    g = netblk
    start(g, P1, RW)
    size = 256 << 20
    places = [(50 << 20, 200 * SECTOR), (size - 3 * SECTOR, 3 * SECTOR), (7 * SECTOR, 5 * SECTOR)]
    sums = [(off, length, guest_write_random(g, P1, off, length)) for off, length in places]
    with client(g, RW) as c:
        for window in (1, 64):
            for off, length, want in sums:
                got = md5(c.read(off, length, window=window))
                assert got == want, f"{length} bytes the guest wrote at {off} read differently " \
                                    f"through netblk (window {window})"


# --------------------------------------------------------------------------
# refusals and drops
# --------------------------------------------------------------------------
E = errno
BIG = 1 << 63


def refusal_cases(size):
    """(name, op, offset, length, payload, flags, version, status)."""
    return [
        ("read misaligned offset", OP_READ, 1, 512, b"", 0, 2, E.EINVAL),
        ("write misaligned offset", OP_WRITE, 100, 512, bytes(512), 0, 2, E.EINVAL),
        ("read misaligned length", OP_READ, 0, 100, b"", 0, 2, E.EINVAL),
        ("write misaligned length", OP_WRITE, 0, 100, bytes(100), 0, 2, E.EINVAL),
        ("read zero length", OP_READ, 0, 0, b"", 0, 2, E.EINVAL),
        ("write zero length", OP_WRITE, 0, 0, b"", 0, 2, E.EINVAL),
        ("write payload short", OP_WRITE, 0, 1024, bytes(512), 0, 2, E.EINVAL),
        ("write payload long", OP_WRITE, 0, 512, bytes(1024), 0, 2, E.EINVAL),
        ("write no payload", OP_WRITE, 0, 512, b"", 0, 2, E.EINVAL),
        ("read unknown flag", OP_READ, 0, 512, b"", 1 << 1, 2, E.EINVAL),
        ("write unknown flag", OP_WRITE, 0, 512, bytes(512), 0x8000, 2, E.EINVAL),
        ("info unknown flag", OP_INFO, 0, 0, b"", 1 << 5, 2, E.EINVAL),
        ("read FUA", OP_READ, 0, 512, b"", FLAG_FUA, 2, E.EINVAL),
        ("flush FUA", OP_FLUSH, 0, 0, b"", FLAG_FUA, 2, E.EINVAL),
        ("info FUA", OP_INFO, 0, 0, b"", FLAG_FUA, 2, E.EINVAL),
        ("flush offset", OP_FLUSH, 512, 0, b"", 0, 2, E.EINVAL),
        ("flush length", OP_FLUSH, 0, 512, b"", 0, 2, E.EINVAL),
        ("read at the end", OP_READ, size, 512, b"", 0, 2, E.ERANGE),
        ("read over the end", OP_READ, size - 512, 1024, b"", 0, 2, E.ERANGE),
        ("write over the end", OP_WRITE, size - 512, 1024, bytes(1024), 0, 2, E.ERANGE),
        ("read far beyond", OP_READ, BIG, 512, b"", 0, 2, E.ERANGE),
        ("write far beyond", OP_WRITE, BIG, 512, bytes(512), 0, 2, E.ERANGE),
        # a WRITE over max_io cannot carry its payload in one frame at mtu 1500
        # (it would arrive fragmented, which is dropped): the header alone says it
        ("write > max_io", OP_WRITE, 0, MAX_IO + 512, bytes(MAX_IO), 0, 2, E.EMSGSIZE),
        ("write >> max_io", OP_WRITE, 0, 1 << 20, b"", 0, 2, E.EMSGSIZE),
        ("read > max_read", OP_READ, 0, MAX_READ + 512, b"", 0, 2, E.EMSGSIZE),
        ("read 1 MiB", OP_READ, 0, 1 << 20, b"", 0, 2, E.EMSGSIZE),
        # answered in version 1's 30-byte header, which an old client reads
        ("version 1", OP_INFO, 0, 0, b"", 0, 1, E.EPROTONOSUPPORT),
        ("version 0 read", OP_READ, 0, 512, b"", 0, 0, E.EPROTONOSUPPORT),
        ("op 9", 9, 0, 0, b"", 0, 2, E.EOPNOTSUPP),
        ("op 0", 0, 0, 512, b"", 0, 2, E.EOPNOTSUPP),
        ("op 0x7f", 0x7F, 0, 0, b"", 0, 2, E.EOPNOTSUPP),
    ]


def check_refused(c, cases):
    """Send each case once (Client.request: resends only on silence); every
    reply is one header with the status and the request's handle, offset and
    length.  Returns the datagrams sent."""
    sends0 = c.stats.sends
    wrong = []
    for i, (name, op, off, length, payload, flags, version, status) in enumerate(cases):
        handle = 100 + i
        try:
            r = c.request(op, off, length, payload, flags, handle, version=version)
        except NetblkError as e:
            wrong.append(f"{name}: no answer ({e})")
            continue
        chunks = r.chunks or [r]
        got = [(ch.status, ch.op, ch.seq, ch.offset, ch.length, len(ch.data)) for ch in chunks]
        want = [(status, op | OP_REPLY, handle, off, length, 0)]
        if got != want:
            wrong.append(f"{name}: sent op {op} {off}+{length} flags {flags:#x} v{version} "
                         f"payload {len(payload)}; want (status, op, handle, offset, length, "
                         f"data) {want}, got {got}")
    assert not wrong, "refusals answered wrongly:\n" + "\n".join(wrong)
    return c.stats.sends - sends0


def test_refusals_answered(netblk):
    g = netblk
    start(g, P1, RW)
    start(g, P2, RO, "ro")
    keys = ("requests", "refused", "busy", "bad", "reads", "writes", "flushes", "frames_rx",
            "frames_tx")
    with client(g, RW) as c:
        size = c.info().size
        before = settled_stats(g, RW)
        sent = check_refused(c, refusal_cases(size))
        d = delta(settled_stats(g, RW), before, *keys)
        n = len(refusal_cases(size))
        assert d == {"requests": sent, "refused": sent, "busy": 0, "bad": 0, "reads": 0,
                     "writes": 0, "flushes": 0, "frames_rx": sent, "frames_tx": sent}, \
            f"{n} refusals ({sent} datagrams sent): counters moved by {d}"

    with client(g, RO) as c:
        size = c.info().size
        before = settled_stats(g, RO)
        cases = [("write on ro", OP_WRITE, 0, 512, bytes(512), 0, 2, E.EROFS),
                 ("FUA write on ro", OP_WRITE, 4096, 1024, bytes(1024), FLAG_FUA, 2, E.EROFS),
                 ("flush on ro", OP_FLUSH, 0, 0, b"", 0, 2, E.EROFS),
                 ("trim on ro", OP_TRIM, 0, 4096, b"", 0, 2, E.EROFS),
                 ("write zeroes on ro", OP_WRITE_ZEROES, 0, 4096, b"", 0, 2, E.EROFS)]
        sent = check_refused(c, cases)
        d = delta(settled_stats(g, RO), before, *keys)
        assert d == {"requests": sent, "refused": sent, "busy": 0, "bad": 0, "reads": 0,
                     "writes": 0, "flushes": 0, "frames_rx": sent, "frames_tx": sent}, \
            f"{len(cases)} refusals on a ro instance ({sent} sent): counters moved by {d}"


def test_drops_unanswered(netblk):
    g = netblk
    start(g, P1, RW)
    s = raw_socket(g, RW)
    try:
        # the path works: a valid INFO is answered on this very socket
        sess = hello(s)
        s.send(pack_header(OP_INFO, 0, 0, 1, session=sess.id, token=sess.token))
        ok = recv_all(s, quiet=0.3, limit=30, until=lambda got: bool(got))
        assert len(ok) == 1 and parse(ok[0])["status"] == 0, ok
        before = settled_stats(g, RW)

        full = pack_header(OP_READ, 0, 512, 7, session=sess.id, token=sess.token)
        drops = [
            ("empty datagram", b""),
            ("1 byte", b"N"),
            ("29 bytes (a v1 header minus one)", full[:29]),
            ("53 bytes (the header minus one)", full[:53]),
            ("wrong magic INFO", pack_header(OP_INFO, 0, 0, 8, magic=0x4E424C4C)),
            ("wrong magic READ", pack_header(OP_READ, 0, 512, 9, magic=0)),
            ("reply bit INFO", pack_header(OP_INFO | OP_REPLY, 0, 0, 10)),
            ("reply bit READ", pack_header(OP_READ | OP_REPLY, 0, 512, 11)),
            ("reply bit WRITE", pack_header(OP_WRITE | OP_REPLY, 0, 512, 12) + bytes(512)),
            ("reply bit and bad version", pack_header(OP_READ | OP_REPLY, 0, 512, 13, version=7)),
        ]
        for _, d in drops:
            s.send(d)
        # all of them reached the instance (it counts each as it comes) before
        # the wait for answers that must not come
        wait_counted(g, RW, before, "frames_rx", len(drops))
        answers = recv_all(s, quiet=0.6)
        assert not answers, f"dropped datagrams were answered: {[parse(a) for a in answers]}"
        d = delta(settled_stats(g, RW), before, "bad", "requests", "refused", "frames_rx",
                  "frames_tx", "reads", "writes")
        assert d == {"bad": len(drops), "requests": 0, "refused": 0, "frames_rx": len(drops),
                     "frames_tx": 0, "reads": 0, "writes": 0}, \
            f"{len(drops)} drops sent ({[n for n, _ in drops]}): counters moved by {d}"
    finally:
        s.close()


# --------------------------------------------------------------------------
# READ at max_read, FLUSH, FUA, counters
# --------------------------------------------------------------------------
def test_max_read_is_16_datagrams(netblk):
    g = netblk
    start(g, P1, RW)
    off = 3 << 20
    data = random.Random(16).randbytes(MAX_READ)
    with client(g, RW) as c:
        c.write(off, data)
    before = settled_stats(g, RW)
    s = raw_socket(g, RW)
    handle = 1
    try:
        sess = hello(s)
        before = settled_stats(g, RW)
        s.send(pack_header(OP_READ, off, MAX_READ, handle, session=sess.id, token=sess.token))
        got = [parse(d) for d in recv_all(s, quiet=0.7, limit=30,
                                          until=lambda got: len(got) >= 16)]
    finally:
        s.close()
    mine = [r for r in got if r["handle"] == handle]
    assert len(mine) == len(got) == 16, \
        f"READ {off}+{MAX_READ}: {len(mine)} datagrams with its handle, {len(got)} in all " \
        f"(offsets {[r['offset'] - off for r in got]})"
    for r in mine:
        assert (r["magic"], r["version"], r["op"], r["status"], r["flags"]) == \
               (MAGIC, 2, OP_READ | OP_REPLY, 0, 0), r
        assert r["length"] == len(r["data"]) == MAX_IO, (r["offset"], r["length"], len(r["data"]))
    assert sorted(r["offset"] for r in mine) == [off + i * MAX_IO for i in range(16)]
    back = b"".join(r["data"] for r in sorted(mine, key=lambda r: r["offset"]))
    assert back == data, "the 16 datagrams do not carry what was written"
    d = delta(settled_stats(g, RW), before, "reads", "read_bytes", "frames_rx", "frames_tx")
    assert d == {"reads": 1, "read_bytes": MAX_READ, "frames_rx": 1, "frames_tx": 16}, d


def test_flush_and_fua(netblk):
    g = netblk
    start(g, P1, RW)
    with client(g, RW) as c:
        info = c.info()
        assert info.fua and info.volatile_cache, info
        before = settled_stats(g, RW)
        s0 = c.stats.sends
        c.flush()
        r = c.request(OP_FLUSH, 0, 0, seq=100)
        assert (r.status, r.op, r.seq, r.offset, r.length) == (0, OP_FLUSH | OP_REPLY, 100, 0, 0), r
        flush_sends = c.stats.sends - s0

        off = 5 << 20
        data = random.Random(5).randbytes(3 * 1024)
        s0 = c.stats.sends
        c.write(off, data, window=1, fua=True)
        r = c.request(OP_WRITE, off + len(data), 512, b"\x5a" * 512, FLAG_FUA, seq=200)
        assert (r.status, r.op, r.seq, r.offset, r.length) == \
               (0, OP_WRITE | OP_REPLY, 200, off + len(data), 512), r
        fua_sends = c.stats.sends - s0
        assert c.read(off, len(data) + 512) == data + b"\x5a" * 512
        after = settled_stats(g, RW)
    d = delta(after, before, "flushes", "fua_writes", "writes", "write_bytes", "io_errors")
    assert flush_sends == 2 and fua_sends == 4, (flush_sends, fua_sends, c.stats)
    assert d == {"flushes": 2, "fua_writes": 4, "writes": 4, "write_bytes": len(data) + 512,
                 "io_errors": 0}, d
    assert guest_md5(g, P1, off, len(data) + 512) == md5(data + b"\x5a" * 512)


def test_counters_exact(netblk):
    g = netblk
    start(g, P1, RW)
    n, k = 12, 4096
    m1, m2 = 9, 3
    with client(g, RW) as c:
        c.info()
        before = settled_stats(g, RW)
        s0 = c.stats.sends
        for i in range(n):
            c.read(i * 40960, k, window=1)
        for i in range(m1):
            c.write((8 << 20) + i * 4096, os.urandom(1024), window=1)
        for i in range(m2):
            c.write((9 << 20) + i * 4096, os.urandom(512), window=1)
        sent = c.stats.sends - s0
        retries = c.stats.retries
        after = settled_stats(g, RW)
    assert sent == n + m1 + m2 and retries == 0, \
        f"the client resent ({c.stats}) after {c.timeout} s of silence: a datagram was " \
        f"lost, counts below cannot be exact"
    wbytes = m1 * 1024 + m2 * 512
    keys = ("requests", "reads", "read_bytes", "writes", "write_bytes", "flushes", "fua_writes",
            "refused", "busy", "bad", "io_errors", "replies_dropped", "frames_rx", "frames_tx",
            "bytes_zerocopy", "bytes_copied")
    d = delta(after, before, *keys)
    want = {"requests": sent, "reads": n, "read_bytes": n * k, "writes": m1 + m2,
            "write_bytes": wbytes, "flushes": 0, "fua_writes": 0, "refused": 0, "busy": 0,
            "bad": 0, "io_errors": 0, "replies_dropped": 0, "frames_rx": sent,
            "frames_tx": n * (k // MAX_IO) + m1 + m2, "bytes_zerocopy": n * k + wbytes,
            "bytes_copied": 0}
    assert d == want, "counters moved by\n" + "\n".join(
        f"  {key}: {d[key]} (expected {want[key]})" for key in keys if d[key] != want[key])
    assert after["bytes_copied"] == 0, "the NIC has native XDP: nothing should be copied"


def test_read_only_instance(netblk):
    g = netblk
    off, length = 1 << 20, 24 * SECTOR
    want = guest_write_random(g, P1, off, length)
    start(g, P1, RO, "ro")
    with client(g, RO) as c:
        info = c.info()
        assert info.read_only and info.flags & INFO_READ_ONLY, info
        assert md5(c.read(off, length)) == want
        before = settled_stats(g, RO)
        for what, call in (("write", lambda: c.write(off, os.urandom(1024))),
                           ("FUA write", lambda: c.write(off, os.urandom(512), fua=True)),
                           ("flush", c.flush)):
            with pytest.raises(NetblkError) as ei:
                call()
            assert ei.value.status == errno.EROFS, f"{what} on a ro instance: {ei.value}"
        d = delta(settled_stats(g, RO), before, "refused", "writes", "flushes", "fua_writes")
        assert d == {"refused": 3, "writes": 0, "flushes": 0, "fua_writes": 0}, d
        assert md5(c.read(off, length, window=1)) == want, "a refused write changed the data"
    assert guest_md5(g, P1, off, length) == want


# --------------------------------------------------------------------------
# concurrency, load, stop
# --------------------------------------------------------------------------
def test_four_clients(netblk):
    g = netblk
    start(g, P1, RW)
    hp = g.host_port(RW)
    shared_off = 64 << 20
    shared = random.Random(4).randbytes(512 * 1024)
    with client(g, RW) as c:
        c.write(shared_off, shared)
    errors: list[str] = []
    finished: list[str] = []
    final: dict[int, bytes] = {}
    barrier = threading.Barrier(4)

    def writer(idx):
        base = (16 + 8 * idx) << 20
        rng = random.Random(100 + idx)
        try:
            with Client("127.0.0.1", hp, timeout=1.0, tries=20) as c:
                barrier.wait(120)
                for it in range(4):
                    data = rng.randbytes(256 * 1024 + 512 * it)
                    c.write(base, data)
                    if c.read(base, len(data)) != data:
                        errors.append(f"writer {idx}: pass {it}: read back differs")
                        return
                final[base] = data
            finished.append(f"writer {idx}")
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(f"writer {idx}: {e!r}")

    def reader(idx):
        try:
            with Client("127.0.0.1", hp, timeout=1.0, tries=20) as c:
                barrier.wait(120)
                for it in range(4):
                    if c.read(shared_off, len(shared)) != shared:
                        errors.append(f"reader {idx}: pass {it}: shared range differs")
                        return
            finished.append(f"reader {idx}")
        except Exception as e:  # noqa: BLE001
            errors.append(f"reader {idx}: {e!r}")

    threads = [threading.Thread(target=writer, args=(i,), daemon=True) for i in range(2)]
    threads += [threading.Thread(target=reader, args=(i,), daemon=True) for i in range(2)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    # a bound against a hang only: under TCG on a busy host this may take minutes
    for t in threads:
        t.join(max(1.0, 600 - (time.monotonic() - t0)))
    assert not any(t.is_alive() for t in threads), f"clients still running after 600 s: {finished}"
    assert not errors, errors
    assert len(finished) == 4, finished
    for base, data in final.items():
        assert guest_md5(g, P1, base, len(data)) == md5(data), f"writer range {base} in the guest"
    assert guest_md5(g, P1, shared_off, len(shared)) == md5(shared)
    s = settled_stats(g, RW)
    assert s["io_errors"] == 0 and s["bytes_copied"] == 0, s


def _prefill(g, port, off, n):
    data = random.Random(off).randbytes(n)
    with client(g, port) as c:
        c.write(off, data)
    return data


def test_stop_under_load(netblk):
    g = netblk
    start(g, P1, RW)
    start(g, P2, RO, "ro")
    assert xdp_on_eth0(g), "eth0 runs no XDP program while instances serve"
    assert {f"netblk{RW}", f"netblk{RO}"} <= set(net_devices(g))
    known_rw = _prefill(g, RW, 32 << 20, 48 * 1024)
    with client(g, RO) as c:
        known_ro = c.read(0, 48 * 1024)
    hammers_rw = [Hammer(g.host_port(RW), 32 << 20, known_rw, write_off=40 << 20),
                  Hammer(g.host_port(RW), 32 << 20, known_rw)]
    hammer_ro = Hammer(g.host_port(RO), 0, known_ro)
    for h in hammers_rw + [hammer_ro]:
        h.start()
    try:
        wait_progress(hammers_rw + [hammer_ro])
        stop(g, RW)  # while its two clients are busy
        join_ended(hammers_rw)
        assert leaked(g) == {"leaked_slots": 0, "leaked_frames": 0}
        assert set(instances(g)) == {RO}
        assert f"netblk{RW}" not in net_devices(g)
        wait_kthreads_gone(g, RW)
        assert xdp_on_eth0(g), "the XDP program went away while an instance still serves"
        # the other instance served on throughout
        ops = hammer_ro.ops
        wait_progress([hammer_ro], ops + 2)
        # the claim on P1 is released: it can be served read-write again
        start(g, P1, SPARE)
        with client(g, SPARE) as c:
            assert c.read(32 << 20, len(known_rw)) == known_rw
        stop(g, SPARE)

        stop(g, RO)  # the last instance, while its client is busy
        join_ended([hammer_ro])
    finally:
        for h in hammers_rw + [hammer_ro]:
            h.halt.set()
    assert leaked(g) == {"leaked_slots": 0, "leaked_frames": 0}
    assert instances(g) == {}
    wait_kthreads_gone(g)
    assert not [d for d in net_devices(g) if d.startswith("netblk")], net_devices(g)
    wait_xdp_gone(g)
    # and it all starts and serves again
    start(g, P1, RW)
    with client(g, RW) as c:
        assert c.read(32 << 20, len(known_rw)) == known_rw


def test_rmmod_under_load(netblk):
    g = netblk
    start(g, P1, RW)
    start(g, P2, RO, "ro")
    known_rw = _prefill(g, RW, 33 << 20, 32 * 1024)
    with client(g, RO) as c:
        known_ro = c.read(4096, 32 * 1024)
    hammers = [Hammer(g.host_port(RW), 33 << 20, known_rw, write_off=41 << 20),
               Hammer(g.host_port(RW), 33 << 20, known_rw),
               Hammer(g.host_port(RO), 4096, known_ro)]
    for h in hammers:
        h.start()
    lines0 = len(dmesg_lines(g))
    try:
        wait_progress(hammers)
        g.check("rmmod netblk", timeout=60)
        join_ended(hammers)
    finally:
        for h in hammers:
            h.halt.set()
    new = dmesg_lines(g)[lines0:]
    assert not kernel_trouble("\n".join(new)), "rmmod under load:\n" + "\n".join(new[-60:])
    assert g.run("grep -q '^netblk ' /proc/modules")[0] != 0, "netblk still loaded"
    wait_kthreads_gone(g)
    assert not [d for d in net_devices(g) if d.startswith("netblk")], net_devices(g)
    # The module holds no BPF object: the program netblkctl added stays,
    # inert (its ports' entries went with the instances' devices), until
    # netblkctl removes it -- stop, here with no module (and not loading it).
    assert xdp_on_eth0(g), "netblkctl's program is netblkctl's to remove"
    out = g.check("netblkctl stop all --exist-ok")
    assert "the module is not loaded: nothing serves (--exist-ok)" in out, out
    assert g.run("grep -q '^netblk ' /proc/modules")[0] != 0, "stop loaded the module"
    wait_xdp_gone(g)
    g.check("modprobe netblk")
    # both claims were released: both partitions can be served read-write
    start(g, P1, RW)
    start(g, P2, RO)
    with client(g, RW) as c:
        assert c.read(33 << 20, len(known_rw)) == known_rw
    with client(g, RO) as c:
        assert c.read(4096, len(known_ro)) == known_ro
    assert leaked(g) == {"leaked_slots": 0, "leaked_frames": 0}


def test_reads_past_the_slots_from_several_clients_carry_their_own_bytes(netblk):
    """Six clients, each its own session, keep 10 READs in flight at once,
    of 2 to 16 datagrams (max_read): about 600 slots' worth against 256, so
    the instance answers some EAGAIN while others' answers fill its transmit
    batches and its slots go round and round (a READ's answers split over
    two transmits by a batch's end or a full NIC ring, its first slots freed
    and taken at once by a READ of two datagrams that reads into their
    pages).  The guest frees pages zeroed
    (init_on_free=1, ci/guest.py): an answer sent from a page freed or
    read into again under it carries other bytes.  Every byte of every
    answer is checked against what was written at its offset.  On
    virtio-net (6.12) READs are gathered into data pages; on vmxnet3 and 6.1
    each datagram is read by its own bio: both passes of CI run it."""
    g = netblk
    start(g, P1, RW)
    base, span = 48 << 20, 4 << 20
    data = random.Random(0x5eed).randbytes(span)
    with client(g, RW) as c:
        c.write(base, data)
    before = settled_stats(g, RW)
    clients, window, reads_each = 6, 10, 120
    sizes = (2 * MAX_IO, 2 * MAX_IO, 5 * MAX_IO, 13 * MAX_IO, MAX_READ)
    rng = random.Random(1)
    socks, sessions, next_seq, flight, done = [], [], [], [], [0] * clients
    mismatches, errors = [], []
    try:
        for _ in range(clients):
            s = raw_socket(g, RW)
            socks.append(s)
            sessions.append(hello(s))
            s.setblocking(False)
            next_seq.append(1)
            flight.append({})  # seq -> [offset, chunks had, due, backoff until, length]

        def send(i, off, size, seq):
            s, sess = socks[i], sessions[i]
            s.send(pack_header(OP_READ, off, size, seq, session=sess.id, token=sess.token))

        def issue(i, now):
            seq = next_seq[i]
            next_seq[i] += 1
            size = rng.choice(sizes)
            off = base + rng.randrange(span // MAX_READ) * MAX_READ
            flight[i][seq] = [off, set(), now + 3.0, 0.0, size]
            send(i, off, size, seq)

        def renumber(i, seq, now):
            """No whole answer in time (slirp drops under a burst): the
            READ goes again under a new number, as a client does after
            EALREADY; the chunks had stay had."""
            f = flight[i].pop(seq)
            new = next_seq[i]
            next_seq[i] += 1
            f[2], f[3] = now + 3.0, 0.0
            flight[i][new] = f
            send(i, f[0], f[4], new)

        t0 = time.monotonic()
        now = t0
        for i in range(clients):
            for _ in range(window):
                issue(i, now)
        while any(flight) and time.monotonic() - t0 < 600:  # a bound against a hang
            ready = select.select(socks, [], [], 0.05)[0]
            now = time.monotonic()
            for s in ready:
                i = socks.index(s)
                while True:
                    try:
                        d = s.recv(65536)
                    except BlockingIOError:
                        break
                    r = parse(d)
                    f = flight[i].get(r["seq"])
                    if f is None:
                        continue  # a late chunk of a READ renumbered or done
                    if r["status"] == errno.EAGAIN:
                        f[3] = now + 0.002 * random.uniform(0.5, 1.5)
                        continue
                    if r["status"]:
                        errors.append(r)
                        continue
                    rel = r["offset"] - base
                    want = data[rel:rel + MAX_IO]
                    if r["length"] != MAX_IO or r["data"] != want:
                        mismatches.append((r["offset"], r["length"],
                                           sum(a != b for a, b in zip(r["data"], want))))
                    f[1].add(r["offset"])
                    if len(f[1]) == -(-f[4] // MAX_IO):
                        del flight[i][r["seq"]]
                        done[i] += 1
                        if done[i] + len(flight[i]) < reads_each:
                            issue(i, now)
            for i in range(clients):
                for seq, f in list(flight[i].items()):
                    if f[3] and now >= f[3]:
                        f[3] = 0.0
                        send(i, f[0], f[4], seq)  # after EAGAIN: not served, same number
                    elif now >= f[2]:
                        renumber(i, seq, now)
    finally:
        for s in socks:
            s.close()
    assert not mismatches, f"{len(mismatches)} answers carry other bytes: {mismatches[:10]}"
    assert not errors, errors[:5]
    assert done == [reads_each] * clients, f"READs done {done} of {reads_each} each"
    d = delta(settled_stats(g, RW), before, "busy", "io_errors", "reads", "reads_gathered",
              "refused_ealready", "refused_eexist", "refused_estale")
    assert d["busy"] > 0, f"{clients * window} READs in flight, no EAGAIN: {d}"
    assert d["io_errors"] == 0 and d["refused_eexist"] == 0 and d["refused_estale"] == 0, d


NULLB_SLOW = "/sys/kernel/config/nullb/nbslow"
SLOW_DEV = "/dev/nbslow"
SLOW_NS = 2_000_000_000  # every request of SLOW_DEV takes this long


@pytest.fixture
def slow_disk(netblk):
    """SLOW_DEV: a 16 MiB null_blk disk (memory backed) on which a timer ends
    every request SLOW_NS after it came; queue depth 256, so that all of an
    instance's slots can be at the disk at once.  Removed afterwards."""
    g = netblk
    d = NULLB_SLOW
    g.check("modprobe null_blk nr_devices=0 && "
            "(grep -q configfs /proc/mounts || mount -t configfs none /sys/kernel/config) && "
            f"mkdir {d} && echo 16 > {d}/size && echo 1 > {d}/memory_backed && "
            f"echo 256 > {d}/hw_queue_depth && echo 2 > {d}/irqmode && "
            f"echo {SLOW_NS} > {d}/completion_nsec && echo 1 > {d}/power && test -b {SLOW_DEV}")
    yield g
    g.run("netblkctl stop all >/dev/null 2>&1; "
          f"for i in $(seq 150); do echo 0 > {d}/power 2>/dev/null; rmdir {d} 2>/dev/null && break; "
          "sleep 0.2; done; rmmod null_blk", timeout=90)


def test_flood_past_slots_is_busy(slow_disk):
    """40 READs of max_read at once: 640 slots' worth, 256 slots.  On a disk
    that takes 2 s a request the first 16 READs hold every slot until the
    whole flood has come (however the host's sends are spaced, short of 2 s
    between two of them): the other 24 are answered EAGAIN at once, every
    one counted."""
    g = slow_disk
    start(g, SLOW_DEV, RW)
    n = 40  # 40 READs x 16 datagrams = 640 slots' worth, 256 slots
    fit = SLOTS // (MAX_READ // MAX_IO)
    before = settled_stats(g, RW)
    s = raw_socket(g, RW)
    handles = {1 + i: i * MAX_READ for i in range(n)}

    def all_answered(got):
        """Every READ answered: EAGAIN, or all 16 of its datagrams."""
        busy, chunks = set(), {}
        for d in got:
            r = parse(d)
            if r["status"] == errno.EAGAIN:
                busy.add(r["handle"])
            else:
                chunks.setdefault(r["handle"], set()).add(r["offset"])
        return all(h in busy or len(chunks.get(h, ())) == MAX_READ // MAX_IO for h in handles)

    try:
        sess = hello(s)
        before = settled_stats(g, RW)
        for h, off in handles.items():
            s.send(pack_header(OP_READ, off, MAX_READ, h, session=sess.id, token=sess.token))
        got = [parse(d) for d in recv_all(s, quiet=1.0, limit=120, until=all_answered)]
    finally:
        s.close()
    after = settled_stats(g, RW)
    d = delta(after, before, "requests", "reads", "busy", "refused", "frames_rx", "bad",
              "replies_dropped", "io_errors")
    assert d["frames_rx"] == n and d["requests"] == n and d["bad"] == 0, d
    assert d["busy"] > 0, f"{n} READs of {MAX_READ} at once: no EAGAIN ({d})"
    assert (d["reads"], d["busy"]) == (fit, n - fit), \
        f"{n} READs of {MAX_READ} at once, room for {fit}: {d}"
    assert d["refused"] == d["busy"] and d["reads"] + d["busy"] == n, d
    assert d["io_errors"] == 0 and d["replies_dropped"] == 0, d
    busy = [r for r in got if r["status"] == errno.EAGAIN]
    for r in busy:
        assert r["handle"] in handles and (r["offset"], r["length"]) == \
               (handles[r["handle"]], MAX_READ) and r["data"] == b"" and r["op"] == OP_READ | OP_REPLY, r
    assert all(r["status"] in (0, errno.EAGAIN) for r in got), [r for r in got if r["status"] not in (0, 11)]
    assert len(busy) == d["busy"], f"{d['busy']} counted busy, {len(busy)} EAGAIN replies came"
    served = {r["handle"] for r in got if r["status"] == 0}
    assert len(served) == d["reads"] and not served & {r["handle"] for r in busy}
    # the instance serves normally afterwards (at the slow disk's pace)
    with client(g, RW) as c:
        assert len(c.read(0, MAX_READ)) == MAX_READ


@pytest.mark.skipif(not _BPFTOOL, reason="bpftool is a build dependency (ci/install-deps.sh)")
def test_program_detached_by_hand_is_attached_again(netblk):
    """Someone takes the NIC's XDP programs off (bpftool net detach): the
    next start adds netblk's program anew, and every instance on the NIC --
    the earlier one too -- is served through it."""
    g = netblk
    start(g, P1, RW)
    g.check("bpftool net detach xdpdrv dev eth0")
    assert not xdp_on_eth0(g)
    start(g, P2, RO, "ro")
    for port in (RW, RO):
        assert client(g, port).info().slots == 256


def xdp_loader(g, *args):
    """xdp-loader ARGS in the guest, its output.  Its time is bounded
    loosely: on the debug kernel (no BTF) libxdp's probes for a dispatcher
    and the verifier under KASAN took more than a minute on a busy host, and
    a load killed at its bound had attached its program already."""
    t0 = time.monotonic()
    out = g.check("xdp-loader " + " ".join(map(str, args)), timeout=600)
    print(f"xdp-loader {args[0]}: {time.monotonic() - t0:.1f} s")
    return out


@pytest.mark.skipif(not _FILES, reason="xdp-tools is a test dependency (ci/install-deps.sh)")
def test_the_nic_is_shared_with_another_xdp_program(netblk):
    """Another XDP program loaded through libxdp (xdp-loader) shares eth0's
    dispatcher with netblk's: instances start and serve beside it, and the
    last stop removes netblk's program only."""
    g = netblk
    try:
        xdp_loader(g, "load -m native eth0", _OTHER_XDP)
        if "xdp_dispatcher" not in xdp_loader(g, "status eth0"):
            # libxdp fell back to attaching it alone (a kernel without BTF,
            # as the debug kernel is): nothing can share it, and netblk
            # says so and what to do
            rc, out, err = ctl(g, "start", P1, RW)
            assert rc != 0 and "without libxdp's dispatcher" in out + err, out + err
            pytest.skip("this kernel runs no libxdp dispatcher: xdp-loader attached alone")
        start(g, P1, RW)
        status = xdp_loader(g, "status eth0")
        assert "xdpfilt_alw_all" in status and "netblk_xdp" in status, status
        data = os.urandom(8192)
        with client(g, RW) as c:
            c.write(4096, data)
            assert c.read(4096, len(data)) == data
        stop(g, RW)
        status = xdp_loader(g, "status eth0")
        assert "xdpfilt_alw_all" in status and "netblk_xdp" not in status, status
    finally:
        g.run("xdp-loader unload eth0 --all", timeout=600)
    wait_xdp_gone(g)


@pytest.mark.skipif(not _FILES, reason="xdp-tools is a test dependency (ci/install-deps.sh)")
def test_a_program_without_multi_buffer_support_is_replaced(netblk):
    """netblk_xdp on the NIC's dispatcher without multi-buffer support (an
    older netblk's; here xdp-loader's, from netblk's own object) would keep
    jumbo frames off the NIC: the next start replaces it with one that has
    it, says so, and steers the NIC's other instances to the new one."""
    g = netblk
    start(g, P1, RW)
    try:
        xdp_loader(g, "unload eth0 --all")	# RW's program: gone
        xdp_loader(g, "load -m native eth0", _NETBLK_XDP)
        status = xdp_loader(g, "status eth0")
        if "xdp_dispatcher" not in status:
            pytest.skip("this kernel runs no libxdp dispatcher: xdp-loader attached alone")
        old = re.search(r"netblk_xdp\D+(\d+)", status)	# its id
        assert old, status
        out = start(g, P2, RO, "ro")
        assert f"netblk's XDP program on eth0 (id {old[1]}) had no multi-buffer support: " \
            "replaced by one with it" in out, out
        status = xdp_loader(g, "status eth0")
        new = re.search(r"netblk_xdp\D+(\d+)", status)
        assert status.count("netblk_xdp") == 1 and new and new[1] != old[1], status
        data = os.urandom(8192)
        with client(g, RW) as c:	# steered to the new program too
            c.write(8192, data)
            assert c.read(8192, len(data)) == data
        assert client(g, RO).info().read_only
    finally:
        ctl(g, "stop", "all")
        g.run("xdp-loader unload eth0 --all", timeout=600)
    wait_xdp_gone(g)


def test_smaller_mtu_carries_less_a_datagram(netblk):
    """mtu=594, the least: whole sectors behind 82 bytes of headers is one
    512-byte sector a datagram; a WRITE of more is refused EMSGSIZE (it
    arrives whole here: the path's MTU is 1500), and reads come back in
    512-byte chunks."""
    g = netblk
    start(g, P1, RW, "mtu=594")
    c = client(g, RW)
    info = c.info()
    assert (info.max_io, info.max_read) == (512, 8192), info
    assert instances(g)[RW]["mtu"] == 594
    data = os.urandom(8192)
    c.write(4096, data)
    r = c.request(OP_READ, 4096, 8192)
    assert r.status == 0 and r.data == data
    assert len(r.chunks) == 16 and all(ch.length == 512 for ch in r.chunks)
    big = c.request(OP_WRITE, 0, 1024, payload=os.urandom(1024))
    assert big.status == errno.EMSGSIZE, big
    assert guest_md5(g, P1, 4096, 8192) == md5(data)
