#!/usr/bin/python3
"""netblk client: talk to a netblk instance over UDP (wire protocol v2).

Command line:

    netblk.py --version
    netblk.py HOST PORT info [--json]
    netblk.py HOST PORT read OFFSET LENGTH FILE        (FILE '-' = stdout)
    netblk.py HOST PORT write OFFSET FILE [--fua]      (FILE '-' = stdin)
    netblk.py HOST PORT flush
    netblk.py HOST PORT trim OFFSET LENGTH             (the device may forget the range)
    netblk.py HOST PORT zero OFFSET LENGTH             (reads back zeros)
    netblk.py HOST PORT verify OFFSET LENGTH           (destroys the range)
    netblk.py HOST PORT bench --mode randread|randwrite|read|write
              [--size 1k] [--window 64] [--seconds 5] [--range OFFSET:LENGTH] [--json]

    common options: --timeout S (0.25) --tries N (20) --window N (64)
                    --key FILE [--auth header|full] (a keyed instance's key)

Every request goes in a session, opened with a HELLO when the client first
needs one and opened again when the instance has forgotten it (it was
started again): a resend reuses the request's sequence number, so the
instance executes a request that changes the disk at most once.

Sizes and offsets take k/m/g/t suffixes (powers of 1024) or plain bytes.

As a module:

    from netblk import Client, NetblkError
    c = Client("127.0.0.1", 7000)
    info = c.info()                 # Info dataclass
    data = c.read(0, 1 << 20)       # bytes
    c.write(0, data, fua=True)
    c.flush()
    c.trim(0, 1 << 20); c.write_zeroes(0, 4096)
    r = c.request(OP_READ, 0, 512)  # raw Reply, status not interpreted

Python 3.11, standard library only.
"""

from __future__ import annotations

import argparse
import errno
import heapq
import json
import math
import os
import random
import re
import select
import socket
import stat
import struct
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Iterable, Iterator

# The release, as kmod/uapi/netblk_version.h says (tests/client/test_release.py
# holds them together); the wire protocol's own version is VERSION below.
__version__ = "0.2.0"

# ---- protocol v2 (docs/protocol.md) --------------------------------------------

MAGIC = 0x4E424C4B  # "NBLK"
VERSION = 2

OP_INFO = 1
OP_READ = 2
OP_WRITE = 3
OP_FLUSH = 4
OP_TRIM = 5
OP_WRITE_ZEROES = 6
OP_HELLO = 7
OP_REPLY = 0x80

OP_NAMES = {OP_INFO: "INFO", OP_READ: "READ", OP_WRITE: "WRITE", OP_FLUSH: "FLUSH",
            OP_TRIM: "TRIM", OP_WRITE_ZEROES: "WRITE_ZEROES", OP_HELLO: "HELLO"}

FLAG_FUA = 1 << 0
# In an EKEYREJECTED answer: what the instance wants.
FLAG_AUTH_KEY = 1 << 8
FLAG_AUTH_DATA = 1 << 9

INFO_READ_ONLY = 1 << 0
INFO_VOLATILE_CACHE = 1 << 1
INFO_FUA = 1 << 2
INFO_TRIM = 1 << 3
INFO_WRITE_ZEROES = 1 << 4

# magic version op status flags session token seq offset length reserved tag
HEADER = struct.Struct(">IBBHHIQQQIIQ")
HEADER_SIZE = HEADER.size  # 54
TAG_OFFSET = 46  # the tag covers the header's bytes before it
# size sector physical io_opt max_io max_read flags slots granularity max_trim max_zeroes
# export_id
INFO_PAYLOAD = struct.Struct(">QIIIIIIIIIIQ")
INFO_SIZE = INFO_PAYLOAD.size  # 56
# Version 1's header: what an instance answers a datagram of another version in.
V1_HEADER = struct.Struct(">IBBHQQIH")  # magic version op status handle offset length flags

assert HEADER_SIZE == 54 and INFO_SIZE == 56 and V1_HEADER.size == 30

REPLAY_WINDOW = 1024  # sequence numbers an instance remembers a session's answers for
# The client never has a request outstanding this far behind its newest, so
# no resend of it can fall out of the window (ESTALE) or the newest run
# ahead of it (EOVERFLOW).
SEQ_SPAN = REPLAY_WINDOW // 2
# A request still unanswered when one sent `gap` datagrams after it was
# answered is taken as lost and sent again at once (as TCP's fast
# retransmit), before its timer: else one lost datagram stops the window at
# SEQ_SPAN for the rest of its timeout.  The gap is the window (a disk may
# complete what is in flight in any order: that is not loss), at least
# FAST_RESEND_MIN and at most FAST_RESEND_MAX, well inside SEQ_SPAN.
FAST_RESEND_MIN = 8
FAST_RESEND_MAX = SEQ_SPAN // 4
REOPENS_MAX = 8  # sessions one request may be sent in before the client gives up

STATUS_OK = 0
# What each status means coming from a netblk instance.
STATUS_TEXT = {
    errno.EIO: "I/O error on the device",
    errno.EAGAIN: "busy: no free slot",
    errno.EINVAL: "invalid request: misaligned, empty, bad flags or payload size",
    errno.EROFS: "the instance is read-only",
    errno.ERANGE: "beyond the end of the device",
    errno.EMSGSIZE: "longer than one request may be",
    errno.EPROTONOSUPPORT: "protocol version not supported",
    errno.EOPNOTSUPP: "operation not supported by the instance or its device",
    errno.ENOTCONN: "no such session (the instance was started again?)",
    errno.ESTALE: "older than the session's replay window: not executed",
    errno.EOVERFLOW: "too far ahead of the session's replay window: not executed",
    errno.EUSERS: "the instance holds as many active sessions as it can",
    errno.EKEYREJECTED: "no valid tag: the instance wants another key (or auth mode)",
}

RECV_BUFFER = 65536
SO_NO_CHECK = getattr(socket, "SO_NO_CHECK", 11)  # Linux: send UDP checksum 0
SOCKET_BUFFER = 8 << 20  # a window of 256 x 9 KB replies fits with room to spare

# ---- SipHash-2-4 (the tags of a keyed instance) -----------------------------------
# Written out here: the standard library has no keyed SipHash, and this
# client is standard library only.  Checked against the reference vectors
# in tests/client/test_client.py.

_M64 = (1 << 64) - 1


def _rotl(x: int, b: int) -> int:
    return ((x << b) | (x >> (64 - b))) & _M64


def siphash24(key: bytes, data: bytes) -> int:
    """SipHash-2-4 of data under a 16-byte key, as an integer."""
    k0, k1 = struct.unpack("<QQ", key)
    v0 = k0 ^ 0x736F6D6570736575
    v1 = k1 ^ 0x646F72616E646F6D
    v2 = k0 ^ 0x6C7967656E657261
    v3 = k1 ^ 0x7465646279746573
    n = len(data)
    tail = n & ~7
    words = list(struct.unpack_from(f"<{tail // 8}Q", data)) if tail else []
    last = int.from_bytes(bytes(data[tail:]), "little") | ((n & 0xFF) << 56)
    words.append(last)
    for i, m in enumerate(words):
        v3 ^= m
        for _ in range(2):
            v0 = (v0 + v1) & _M64; v1 = _rotl(v1, 13); v1 ^= v0; v0 = _rotl(v0, 32)
            v2 = (v2 + v3) & _M64; v3 = _rotl(v3, 16); v3 ^= v2
            v0 = (v0 + v3) & _M64; v3 = _rotl(v3, 21); v3 ^= v0
            v2 = (v2 + v1) & _M64; v1 = _rotl(v1, 17); v1 ^= v2; v2 = _rotl(v2, 32)
        v0 ^= m
    v2 ^= 0xFF
    for _ in range(4):
        v0 = (v0 + v1) & _M64; v1 = _rotl(v1, 13); v1 ^= v0; v0 = _rotl(v0, 32)
        v2 = (v2 + v3) & _M64; v3 = _rotl(v3, 16); v3 ^= v2
        v0 = (v0 + v3) & _M64; v3 = _rotl(v3, 21); v3 ^= v0
        v2 = (v2 + v1) & _M64; v1 = _rotl(v1, 17); v1 ^= v2; v2 = _rotl(v2, 32)
    return v0 ^ v1 ^ v2 ^ v3


@dataclass(frozen=True)
class Auth:
    """A keyed instance's key, and whether its tags cover the data (auth=full)."""

    key: bytes
    data: bool = False

    def tag(self, header: bytes, data=b"") -> int:
        """The tag of a header (its first TAG_OFFSET bytes count) and its data."""
        msg = bytes(header[:TAG_OFFSET])
        if self.data and len(data):
            msg += bytes(data)
        return siphash24(self.key, msg)


def parse_key(text: str) -> bytes:
    """A key file's text (32 hexadecimal digits, whitespace anywhere ignored, as
    `netblkctl genkey` writes it) -> the 16-byte key."""
    digits = "".join(text.split())
    if len(digits) != 32:
        raise ValueError(f"{len(digits)} hexadecimal digits: a key is 32 of them "
                         f"(128 bits; netblkctl genkey makes one)")
    try:
        return bytes.fromhex(digits)
    except ValueError:
        raise ValueError("not all hexadecimal digits (netblkctl genkey makes a key)") from None


def read_key_file(path: str) -> bytes:
    try:
        with open(path) as f:
            text = f.read(4096)
    except OSError as e:
        raise ValueError(f"cannot read key file {path}: {e.strerror}") from None
    try:
        return parse_key(text)
    except ValueError as e:
        raise ValueError(f"key file {path}: {e}") from None


def status_name(status: int) -> str:
    return errno.errorcode.get(status, f"errno {status}")


def status_text(status: int) -> str:
    if status in STATUS_TEXT:
        return STATUS_TEXT[status]
    try:
        return os.strerror(status)
    except (ValueError, OverflowError):
        return "unknown status"


def op_name(op: int) -> str:
    return OP_NAMES.get(op & ~OP_REPLY, f"op {op & ~OP_REPLY}")


def pack_header(op: int, offset: int, length: int, seq: int, flags: int = 0,
                status: int = 0, version: int = VERSION, magic: int = MAGIC,
                session: int = 0, token: int = 0, auth: Auth | None = None,
                data=b"") -> bytes:
    """A v2 header, tagged when auth is given (over data too with auth=full)."""
    hdr = HEADER.pack(magic, version, op, status, flags, session, token, seq, offset, length,
                      0, 0)
    if auth is not None:
        hdr = hdr[:TAG_OFFSET] + auth.tag(hdr, data).to_bytes(8, "big")
    return hdr


def unpack_header(d) -> dict:
    """A datagram's v2 header as a dict (data: what follows it)."""
    (magic, version, op, status, flags, session, token, seq, off, length, reserved,
     tag) = HEADER.unpack_from(d)
    return dict(magic=magic, version=version, op=op, status=status, flags=flags,
                session=session, token=token, seq=seq, offset=off, length=length,
                reserved=reserved, tag=tag, data=bytes(d[HEADER_SIZE:]))


@dataclass
class Session:
    """An open session: what every request but HELLO carries."""

    id: int
    token: int


def hello(sock: socket.socket, timeout: float = 1.0, tries: int = 10,
          auth: Auth | None = None) -> Session:
    """Open a session on a connected UDP socket: HELLO, then HELLO with the
    cookie the first answer brought.  For tests and tools that send their
    own datagrams; Client does this itself."""
    nonce = random.getrandbits(63) | 1
    cookie = 0
    for _ in range(2 * tries):
        sock.send(pack_header(OP_HELLO, 0, 0, nonce, token=cookie, auth=auth))
        end = time.monotonic() + timeout
        while True:
            left = end - time.monotonic()
            if left <= 0:
                break
            ready = select.select([sock], [], [], left)[0]
            if not ready:
                break
            d = sock.recv(RECV_BUFFER)
            if len(d) < HEADER_SIZE:
                continue
            r = unpack_header(d)
            if r["op"] != OP_HELLO | OP_REPLY or r["seq"] != nonce:
                continue
            if r["status"]:
                raise NetblkError(f"HELLO refused: {status_name(r['status'])} "
                                  f"({status_text(r['status'])})", r["status"], OP_HELLO)
            if r["session"]:
                return Session(r["session"], r["token"])
            cookie = r["token"]
            break
    raise NetblkTimeout(f"HELLO: no session after {tries} tries", None, OP_HELLO)


# ---- errors ------------------------------------------------------------------


class NetblkError(Exception):
    """A request that failed.  `status` is the errno the instance answered
    (errno.ERANGE, ...), or None when the client gave up (NetblkTimeout) or the
    reply made no sense."""

    def __init__(self, message: str, status: int | None = None, op: int | None = None,
                 offset: int | None = None, length: int | None = None):
        super().__init__(message)
        self.status = status
        self.op = op
        self.offset = offset
        self.length = length

    @property
    def status_name(self) -> str | None:
        return None if self.status is None else status_name(self.status)


class NetblkTimeout(NetblkError):
    """No (complete) answer after `tries` sends, or busy (EAGAIN) for too long."""


# ---- replies and INFO ----------------------------------------------------------


@dataclass
class Reply:
    """A reply as it came.  For a READ of several datagrams: op/status/seq are
    the reply's, offset/length the request's, status the first non-zero status
    of any chunk (0 when all were ok), data the reassembled bytes (only the
    chunks that were ok are filled in), chunks every datagram that counted, in
    the order they came (duplicates left out)."""

    magic: int
    version: int
    op: int
    status: int
    seq: int
    offset: int
    length: int
    flags: int
    data: bytes = field(default=b"", repr=False)
    chunks: list[Reply] = field(default_factory=list, repr=False)
    session: int = 0
    token: int = field(default=0, repr=False)

    def __repr__(self) -> str:
        return (f"Reply(op={op_name(self.op)}|0x80, status={self.status_name}, "
                f"seq={self.seq}, offset={self.offset}, length={self.length}, "
                f"flags={self.flags:#x}, data=<{len(self.data)} bytes>, "
                f"chunks={len(self.chunks)})")

    @property
    def ok(self) -> bool:
        return self.status == STATUS_OK

    @property
    def status_name(self) -> str:
        return "OK" if self.status == 0 else status_name(self.status)


@dataclass
class Info:
    size: int  # bytes
    sector_size: int
    physical_block_size: int
    io_opt: int  # optimal I/O size; 0: none given
    max_io: int  # data bytes one datagram carries
    max_read: int  # the most one READ asks for
    flags: int
    slots: int  # requests the instance holds at once
    discard_granularity: int
    max_trim: int  # bytes one TRIM may cover; 0: no TRIM
    max_write_zeroes: int  # bytes one WRITE_ZEROES may cover; 0: none
    export_id: int  # which device: the same across the instance's restarts on it

    @property
    def read_only(self) -> bool:
        return bool(self.flags & INFO_READ_ONLY)

    @property
    def volatile_cache(self) -> bool:
        return bool(self.flags & INFO_VOLATILE_CACHE)

    @property
    def fua(self) -> bool:
        return bool(self.flags & INFO_FUA)

    @property
    def trim(self) -> bool:
        return bool(self.flags & INFO_TRIM)

    @property
    def write_zeroes(self) -> bool:
        return bool(self.flags & INFO_WRITE_ZEROES)

    @classmethod
    def unpack(cls, data: bytes) -> Info:
        if len(data) < INFO_SIZE:
            raise NetblkError(f"INFO reply carries {len(data)} bytes, not {INFO_SIZE}", op=OP_INFO)
        return cls(*INFO_PAYLOAD.unpack_from(data))

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(read_only=self.read_only, volatile_cache=self.volatile_cache, fua=self.fua,
                 trim=self.trim, write_zeroes=self.write_zeroes)
        return d


@dataclass
class Stats:
    """What a Client has seen since it was made (or stats were reset)."""

    requests: int = 0  # requests completed
    sends: int = 0  # datagrams sent, resends included
    retries: int = 0  # resends after no (complete) answer in time
    fast_resends: int = 0  # of those, sent as soon as later requests were answered
    busy: int = 0  # resends after EAGAIN
    errors: int = 0  # requests that failed
    duplicates: int = 0  # reply datagrams seen twice
    stray: int = 0  # datagrams ignored: wrong magic, unknown seq, malformed, bad tag
    icmp_refused: int = 0  # "port unreachable" errors from the socket
    sessions: int = 0  # sessions opened (again after ENOTCONN: the instance restarted)
    resent_in_new_session: int = 0  # requests sent again in a session opened anew


# ---- the request engine --------------------------------------------------------

_WAIT_REPLY = 0
_WAIT_BACKOFF = 1


class _Job:
    """One request on its way, with everything needed to resend it."""

    __slots__ = ("op", "offset", "length", "payload", "flags", "version", "magic", "seq",
                 "cost", "tries", "busy", "first_sent", "sent_no", "done_at", "gen", "state", "got",
                 "seen",
                 "buf", "buf_off", "raw", "reply", "tag", "hello_token", "sess_gen", "reopens")

    def __init__(self, op: int, offset: int, length: int, payload=b"", flags: int = 0,
                 seq: int | None = None, cost: int = 1, buf=None, buf_off: int = 0,
                 raw: bool = False, version: int = VERSION, magic: int = MAGIC, tag=None,
                 hello_token: int | None = None):
        self.op = op
        self.offset = offset
        self.length = length
        self.payload = payload
        self.flags = flags
        self.version = version
        self.magic = magic
        self.seq = seq  # its number in the session, kept for every resend
        self.hello_token = hello_token  # a HELLO: sent outside any session, with this token
        self.sess_gen = 0  # the session (Client._sess_gen) it was numbered in
        self.reopens = 0  # sessions opened again for it
        self.cost = cost  # server slots it takes: datagrams of its answer
        self.tries = 0  # sends that waited for an answer
        self.busy = 0  # EAGAIN answers
        self.first_sent = 0.0
        self.sent_no = 0  # Client._sent_no at its latest send
        self.done_at = 0.0
        self.gen = 0  # bumps whenever its timer changes: older heap entries are stale
        self.state = _WAIT_REPLY
        self.got = 0  # READ: bytes (or refused bytes) accounted for
        self.seen: set[int] | None = None  # READ: chunk offsets already taken
        self.buf = buf  # READ: where the data goes (a writable buffer)...
        self.buf_off = buf_off  # ...and at which index the request's first byte lands
        self.raw = raw  # request(): any status completes, nothing raised
        self.reply: Reply | None = None
        self.tag = tag

    def describe(self) -> str:
        if self.op in (OP_READ, OP_WRITE, OP_TRIM, OP_WRITE_ZEROES):
            return f"{op_name(self.op)} {self.offset}+{self.length}"
        if self.offset or self.length:
            return f"{op_name(self.op)} {self.offset}+{self.length}"
        return op_name(self.op)


class Client:
    """A netblk client: one UDP socket to one instance.

    timeout: seconds to wait for an answer before resending a request.
    tries: sends of one request before giving up with NetblkTimeout.
    EAGAIN (busy) answers are resent after a short randomised back-off; they do
    not use up `tries`, but a request still busy after `busy_tries` (10 x tries)
    answers fails too.
    checksum: False sends datagrams with UDP checksum 0 (SO_NO_CHECK), which
    spares the server reading a write's data to verify it: for a link that
    protects the data itself (each hop's Ethernet CRC) and is trusted.
    auth: a keyed instance's key (and mode): every datagram is tagged, and a
    reply without a valid tag is ignored.
    """

    def __init__(self, host: str, port: int, timeout: float = 0.25, tries: int = 20,
                 checksum: bool = True, auth: Auth | None = None):
        if timeout <= 0:
            raise ValueError("timeout must be > 0")
        if tries < 1:
            raise ValueError("tries must be >= 1")
        self.host = host
        self.port = int(port)
        self.timeout = float(timeout)
        self.tries = int(tries)
        self.busy_tries = 10 * self.tries
        self.backoff_min = 0.0005
        self.backoff_max = 0.05
        self.stats = Stats()
        self._info: Info | None = None
        self.auth = auth
        self.session: Session | None = None
        self._sess_gen = 0  # sessions opened so far: which one a job was numbered in
        self._next_seq = 1
        self._sent_no = 0  # datagrams this client sent, numbered
        self._answered_no = 0  # the newest of them (by that number) answered
        infos = socket.getaddrinfo(host, self.port, socket.AF_INET, socket.SOCK_DGRAM)
        if not infos:
            raise OSError(f"cannot resolve {host}")
        self.address = infos[0][4]
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.checksum = checksum
        if not checksum:
            self.sock.setsockopt(socket.SOL_SOCKET, SO_NO_CHECK, 1)
        # A window of answers arrives in a burst: room for all of it.  The
        # FORCE options pass net.core.rmem_max where we may (CAP_NET_ADMIN).
        for force, plain in ((getattr(socket, "SO_RCVBUFFORCE", None), socket.SO_RCVBUF),
                             (getattr(socket, "SO_SNDBUFFORCE", None), socket.SO_SNDBUF)):
            for opt in (force, plain):
                if opt is None:
                    continue
                try:
                    self.sock.setsockopt(socket.SOL_SOCKET, opt, SOCKET_BUFFER)
                    break
                except OSError:
                    continue
        # Connected: the kernel keeps other senders' datagrams away from us and
        # reports ICMP port unreachable (nothing listening) as ECONNREFUSED.
        self.sock.connect(self.address)
        self.sock.setblocking(False)
        self._poll = select.poll()
        self._poll.register(self.sock, select.POLLIN)
        self._rbuf = bytearray(RECV_BUFFER)
        self._rview = memoryview(self._rbuf)

    # -- housekeeping

    def close(self) -> None:
        if self.sock is not None:
            try:
                self._poll.unregister(self.sock)
            except (KeyError, ValueError):
                pass
            self.sock.close()
            self.sock = None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Client({self.host!r}, {self.port}, timeout={self.timeout}, tries={self.tries})"

    @property
    def where(self) -> str:
        return f"{self.address[0]}:{self.address[1]}"

    def open_session(self) -> Session:
        """HELLO, then HELLO with the cookie its answer brought: a new session,
        numbered from 1.  Done by the first request, and again when the
        instance answers ENOTCONN (it forgot the session: it was started again)."""
        nonce = random.getrandbits(63) | 1
        first = _Job(OP_HELLO, 0, 0, seq=nonce, raw=True, hello_token=0)
        self._run([first], 1, hello=True)
        r = first.reply
        busy = 0
        while r.status == STATUS_OK and not r.session:
            # the cookie back; it takes one of the instance's slots, which a
            # busy instance may have none of (EAGAIN): again after a back-off
            again = _Job(OP_HELLO, 0, 0, seq=nonce, raw=True, hello_token=r.token)
            self._run([again], 1, hello=True)
            if again.reply.status != errno.EAGAIN or busy >= self.busy_tries:
                r = again.reply
                break
            busy += 1
            self.stats.busy += 1
            time.sleep(min(self.backoff_min * (2 ** min(busy - 1, 16)), self.backoff_max) *
                       random.uniform(0.5, 1.5))
        if r.status != STATUS_OK:
            raise self._refused(first, r.status, 0, 0, r.flags)
        if not r.session:
            raise NetblkError(f"HELLO: {self.where} answered a cookie twice, no session",
                              None, OP_HELLO)
        wants_data = bool(r.flags & FLAG_AUTH_DATA)
        if self.auth is not None and wants_data != self.auth.data:
            raise NetblkError(f"HELLO: the instance at {self.where} tags "
                              + ("header and data: --auth full" if wants_data else
                                 "headers only: --auth header"), errno.EKEYREJECTED, OP_HELLO)
        if self.auth is None and r.flags & FLAG_AUTH_KEY:
            raise NetblkError(f"HELLO: the instance at {self.where} is keyed: give its key "
                              f"(--key FILE)", errno.EKEYREJECTED, OP_HELLO)
        self.session = Session(r.session, r.token)
        self._sess_gen += 1
        self._next_seq = 1
        self.stats.sessions += 1
        return self.session

    # -- the public operations

    def info(self) -> Info:
        """Ask the instance what it serves (and remember it for read/write)."""
        job = _Job(OP_INFO, 0, 0)
        self._run([job], 1)
        self._info = Info.unpack(job.reply.data)
        return self._info

    @property
    def geometry(self) -> Info:
        """The instance's INFO, asked once and remembered."""
        if self._info is None:
            self.info()
        return self._info

    def read(self, offset: int, length: int, window: int = 64) -> bytes:
        """Read length bytes at offset: READs of max_read bytes, window of them in flight."""
        if length < 0 or offset < 0:
            raise ValueError("offset and length must be >= 0")
        if length == 0:
            return b""
        out = bytearray(length)
        self.read_into(offset, out, window)
        return bytes(out)

    def read_into(self, offset: int, buf, window: int = 64) -> None:
        """Fill the writable buffer buf (len(buf) bytes) from offset."""
        view = memoryview(buf).cast("B")
        length = len(view)
        if length == 0:
            return
        piece = self.read_piece()
        jobs = []
        pos = 0
        while pos < length:
            n = min(piece, length - pos)
            jobs.append(_Job(OP_READ, offset + pos, n, cost=self._read_cost(n), buf=view,
                             buf_off=pos))
            pos += n
        self._run(jobs, window)

    def read_piece(self) -> int:
        """Bytes one READ asks for: max_read, less where the instance has fewer
        slots than one READ's datagrams."""
        g = self.geometry
        piece = g.max_read
        if g.slots and g.max_io and g.slots * g.max_io < piece:
            piece = g.slots * g.max_io
        return max(piece, g.max_io, 1)

    def write(self, offset: int, data, window: int = 64, fua: bool = False) -> None:
        """Write data at offset: WRITEs of max_io bytes, window of them in flight."""
        view = memoryview(data).cast("B")
        length = len(view)
        if offset < 0:
            raise ValueError("offset must be >= 0")
        if length == 0:
            return
        g = self.geometry
        step = max(g.max_io, 1)
        flags = FLAG_FUA if fua else 0
        jobs = (_Job(OP_WRITE, offset + pos, min(step, length - pos),
                     payload=view[pos:pos + step], flags=flags)
                for pos in range(0, length, step))
        self._run(jobs, window)

    def flush(self) -> None:
        """Ask the instance to write its device's volatile cache out."""
        self._run([_Job(OP_FLUSH, 0, 0)], 1)

    def trim(self, offset: int, length: int, window: int = 64) -> None:
        """Tell the device it may forget length bytes at offset (TRIM, in pieces of
        max_trim); what it reads back afterwards is the device's business."""
        self._extent_op(OP_TRIM, offset, length, window)

    def write_zeroes(self, offset: int, length: int, window: int = 64) -> None:
        """Make length bytes at offset read back as zeros (WRITE_ZEROES, in pieces of
        max_write_zeroes), without sending them."""
        self._extent_op(OP_WRITE_ZEROES, offset, length, window)

    def _extent_op(self, op: int, offset: int, length: int, window: int) -> None:
        if offset < 0 or length < 0:
            raise ValueError("offset and length must be >= 0")
        if length == 0:
            return
        g = self.geometry
        step = g.max_trim if op == OP_TRIM else g.max_write_zeroes
        if not step:
            raise NetblkError(f"{op_name(op)} {offset}+{length}: the instance at {self.where} "
                              f"does not offer {op_name(op)} (its device cannot)",
                              errno.EOPNOTSUPP, op, offset, length)
        jobs = (_Job(op, offset + pos, min(step, length - pos))
                for pos in range(0, length, step))
        self._run(jobs, window)

    def request(self, op: int, offset: int, length: int, payload: bytes = b"", flags: int = 0,
                seq: int | None = None, *, version: int = VERSION,
                magic: int = MAGIC) -> Reply:
        """Send one request as given (no checks, no splitting) and return its reply.

        Silence is met by resending (NetblkTimeout after `tries`); any status,
        EAGAIN included, is returned, not raised.  A READ waits for datagrams
        covering its whole length (a refusal or EIO chunk covers its extent)."""
        job = _Job(op, offset, length, payload=payload, flags=flags, seq=seq, raw=True,
                   version=version, magic=magic)
        if op == OP_READ:
            job.buf = bytearray(length)
            job.cost = self._read_cost(length) if self._info else 1
        self._run([job], 1)
        return job.reply

    # -- the engine

    def _read_cost(self, length: int) -> int:
        g = self._info
        if g is None or not g.max_io:
            return 1
        return max(1, -(-length // g.max_io))

    def effective_window(self, window: int, cost: int = 1) -> int:
        """Requests of `cost` datagrams each that can be in flight at once."""
        window = max(1, int(window))
        return max(1, min(window, self._slots() // max(cost, 1)))

    def _slots(self) -> int:
        g = self._info
        return g.slots if g is not None and g.slots > 0 else 1 << 30

    def _send(self, job: _Job) -> None:
        if job.hello_token is not None:
            session, token = 0, job.hello_token
        else:
            session, token = self.session.id, self.session.token
        hdr = HEADER.pack(job.magic, job.version, job.op, 0, job.flags, session, token, job.seq,
                          job.offset, job.length, 0, 0)
        if self.auth is not None:
            hdr = hdr[:TAG_OFFSET] + self.auth.tag(hdr, job.payload or b"").to_bytes(8, "big")
        self.stats.sends += 1
        self._sent_no += 1
        job.sent_no = self._sent_no
        try:
            if job.payload is not None and len(job.payload):
                self.sock.sendmsg([hdr, job.payload])
            else:
                self.sock.send(hdr)
        except (BlockingIOError, InterruptedError):
            pass  # treated as lost: the timer resends it
        except ConnectionRefusedError:
            self.stats.icmp_refused += 1  # an earlier datagram was refused; retry anyway
        except OSError as e:
            if e.errno in (errno.ENOBUFS, errno.ENOMEM, errno.EHOSTUNREACH, errno.ENETUNREACH):
                return
            raise

    def _give_up(self, job: _Job, busy: bool = False) -> NetblkTimeout:
        what = job.describe()
        if busy:
            msg = f"{what}: instance at {self.where} still busy (EAGAIN) after {job.busy} tries"
        else:
            msg = (f"{what}: no answer from {self.where} after {job.tries} tries "
                   f"({self.timeout:g} s apart)")
            if job.op == OP_READ and job.got:
                msg += f"; had {job.got} of {job.length} bytes"
            if self.stats.icmp_refused:
                msg += " -- port unreachable: is an instance serving that port?"
        return NetblkTimeout(msg, None, job.op, job.offset, job.length)

    def _refused(self, job: _Job, status: int, off: int, length: int,
                 flags: int = 0) -> NetblkError:
        verb = "failed" if status == errno.EIO else "refused"
        what = job.describe()
        where = ""
        if status == errno.EIO and job.op == OP_READ and (off, length) != (job.offset, job.length):
            where = f" at {off}+{length}"
        text = status_text(status)
        if status == errno.EKEYREJECTED:
            if not flags & FLAG_AUTH_KEY:
                text = "no valid tag"
            elif self.auth is None:
                text = "the instance is keyed: give its key (--key FILE)"
            elif bool(flags & FLAG_AUTH_DATA) != self.auth.data:
                text = ("the instance tags header and data: --auth full"
                        if flags & FLAG_AUTH_DATA else "the instance tags headers only: --auth header")
            else:
                text = "wrong key"
        msg = f"{what} {verb}: {status_name(status)} ({text}){where}"
        return NetblkError(msg, status, job.op, job.offset, job.length)

    def _run(self, jobs: Iterable[_Job], window: int,
             on_done: Callable[[_Job], None] | None = None,
             on_error: Callable[[_Job, NetblkError], None] | None = None,
             hello: bool = False) -> None:
        """Carry jobs out, keeping at most `window` requests and `slots` datagrams
        of answers in flight, and no request outstanding SEQ_SPAN numbers behind
        the newest.  A failure raises, or goes to on_error and the rest go on.
        hello: the jobs are HELLOs, numbered by their nonce, in no session."""
        if self.sock is None:
            raise NetblkError("client is closed")
        if not hello and self.session is None:
            self.open_session()
        window = max(1, int(window))
        slots = self._slots()
        it: Iterator[_Job] = iter(jobs)
        waiting: _Job | None = None
        exhausted = False
        flight: dict[int, _Job] = {}
        used = 0
        heap: list = []
        seq = 0
        timeout = self.timeout
        stats = self.stats
        now = time.monotonic()
        gap = min(max(window, FAST_RESEND_MIN), FAST_RESEND_MAX)
        scanned = self._answered_no

        def arm(job: _Job, when: float) -> None:
            nonlocal seq
            job.gen += 1
            seq += 1
            heapq.heappush(heap, (when, seq, job.gen, job))

        def remove(job: _Job) -> None:
            nonlocal used
            del flight[job.seq]
            used -= job.cost
            job.gen += 1
            job.done_at = time.monotonic()

        def number(job: _Job) -> None:
            job.seq = self._next_seq
            self._next_seq += 1
            job.sess_gen = self._sess_gen

        def again_in_new_session(job: _Job) -> None:
            # The instance forgot the session (it was started again): open a
            # new one and send every request in flight again in it, under
            # new numbers.  Answers still on their way from the old session
            # are ignored (their session's token is not the new one's).
            if job.reopens >= REOPENS_MAX:
                fail(job, NetblkError(f"{job.describe()}: {self.where} forgot its session "
                                      f"{job.reopens} times (ENOTCONN)", errno.ENOTCONN,
                                      job.op, job.offset, job.length))
                return
            self.open_session()
            moved = sorted(flight.values(), key=lambda j: j.seq)
            flight.clear()
            now = time.monotonic()
            for j in moved:
                j.reopens += 1
                stats.resent_in_new_session += 1
                number(j)
                flight[j.seq] = j
                self._send(j)
                arm(j, now + timeout)

        def fast_resend(now: float) -> None:
            # Send again each request a datagram sent `gap` after it overtook
            # (its answer came, this one's did not): as good as lost.  A
            # try like any other; duplicates are harmless (the window).
            newest = self._answered_no - gap
            for j in flight.values():
                if j.state == _WAIT_REPLY and j.sent_no <= newest and j.tries < self.tries:
                    j.tries += 1
                    stats.retries += 1
                    stats.fast_resends += 1
                    self._send(j)
                    arm(j, now + timeout)

        def finish(job: _Job) -> None:
            remove(job)
            stats.requests += 1
            if on_done is not None:
                on_done(job)

        def fail(job: _Job, exc: NetblkError) -> None:
            stats.errors += 1
            remove(job)
            if on_error is None:
                raise exc
            on_error(job, exc)

        while True:
            # Fill the window.
            while not exhausted and len(flight) < window:
                if waiting is None:
                    try:
                        waiting = next(it)
                    except StopIteration:
                        exhausted = True
                        break
                job = waiting
                if flight and used + job.cost > slots:
                    break
                if flight and not hello and self._next_seq - min(flight) >= SEQ_SPAN:
                    break  # the oldest would fall behind: wait for it
                waiting = None
                if hello:
                    pass  # numbered by its nonce
                elif job.seq is None or job.seq in flight:
                    number(job)
                else:
                    job.sess_gen = self._sess_gen
                    self._next_seq = max(self._next_seq, job.seq + 1)
                if job.op == OP_READ and job.seen is None:
                    job.seen = set()
                flight[job.seq] = job
                used += job.cost
                now = time.monotonic()
                job.first_sent = now
                job.tries = 1
                self._send(job)
                arm(job, now + timeout)
            if not flight:
                if exhausted:
                    return
                continue

            # Wait for a datagram or the first timer.
            while heap and heap[0][2] != heap[0][3].gen:
                heapq.heappop(heap)
            now = time.monotonic()
            wait = heap[0][0] - now if heap else timeout
            if wait > 0:
                try:
                    self._poll.poll(math.ceil(wait * 1000))
                except InterruptedError:
                    pass

            # Take every datagram there is.
            lost = self._drain(flight, finish, fail, arm)
            if lost and flight.get(lost[0].seq) is lost[0]:
                again_in_new_session(lost[0])

            # Fast resends: every gap / 2 answers, whatever was overtaken.
            now = time.monotonic()
            if not hello and self._answered_no - scanned >= gap // 2:
                scanned = self._answered_no
                fast_resend(now)

            # Timers: resend after silence or back-off; give up after `tries`.
            while heap and heap[0][0] <= now:
                when, _, gen, job = heapq.heappop(heap)
                if gen != job.gen:
                    continue
                if job.state == _WAIT_BACKOFF:
                    job.state = _WAIT_REPLY
                    self._send(job)
                    arm(job, now + timeout)
                    continue
                if job.tries >= self.tries:
                    fail(job, self._give_up(job))
                    continue
                job.tries += 1
                stats.retries += 1
                self._send(job)
                arm(job, now + timeout)

    def _v1_answer(self, flight: dict[int, _Job], n: int):
        """A short answer in version 1's header: EPROTONOSUPPORT from an instance
        of another protocol version (which cannot name the request it answers:
        the first in flight takes it)."""
        magic, version, op, status, handle, off, length, flags = V1_HEADER.unpack_from(self._rbuf)
        if magic != MAGIC or not op & OP_REPLY or status != errno.EPROTONOSUPPORT:
            return None
        job = next(iter(flight.values()), None)
        if job is None:
            return None
        return job, NetblkError(f"{job.describe()}: the instance at {self.where} does not "
                                f"speak this client's protocol version {job.version} "
                                f"(EPROTONOSUPPORT)", errno.EPROTONOSUPPORT, job.op,
                                job.offset, job.length)

    def _drain(self, flight: dict[int, _Job], finish, fail, arm) -> list[_Job]:
        """Take every datagram there is; return the jobs answered ENOTCONN."""
        sock = self.sock
        buf = self._rbuf
        view = self._rview
        stats = self.stats
        unpack = HEADER.unpack_from
        auth = self.auth
        lost: list[_Job] = []
        while True:
            try:
                n = sock.recv_into(buf)
            except (BlockingIOError, InterruptedError):
                return lost
            except ConnectionRefusedError:
                stats.icmp_refused += 1
                continue
            if n < HEADER_SIZE:
                old = self._v1_answer(flight, n) if n >= V1_HEADER.size else None
                if old is None:
                    stats.stray += 1
                elif old[0].raw:
                    job = old[0]
                    v1 = V1_HEADER.unpack_from(buf)
                    job.reply = Reply(MAGIC, v1[1], v1[2], v1[3], job.seq, job.offset,
                                      job.length, v1[7])
                    finish(job)
                else:
                    fail(*old)
                continue
            (magic, version, op, status, flags, session, token, seq, off, length, _,
             tag) = unpack(buf)
            job = flight.get(seq)
            if magic != MAGIC or not op & OP_REPLY or job is None or op != (job.op | OP_REPLY):
                stats.stray += 1
                continue
            if job.hello_token is None and (session != self.session.id or
                                            token != self.session.token):
                stats.stray += 1  # of a session before this one
                continue
            if job.hello_token and not session and not status:
                stats.duplicates += 1  # the cookie's answer again: wait for the session's
                continue
            if auth is not None and status != errno.EKEYREJECTED and \
                    tag != auth.tag(view[:HEADER_SIZE], view[HEADER_SIZE:n]):
                stats.stray += 1  # not from the instance: a forgery, or another key
                continue
            if job.sent_no > self._answered_no:
                self._answered_no = job.sent_no
            data_len = n - HEADER_SIZE

            if status == errno.ENOTCONN and job.hello_token is None:
                lost.append(job)
                continue
            if job.raw:
                self._take_raw(job, view, n, version, op, status, seq, off, length, flags,
                               finish, session, token)
                continue

            if status == STATUS_OK:
                if job.op != OP_READ:
                    if job.op == OP_INFO:
                        job.reply = Reply(magic, version, op, status, seq, off, length, flags,
                                          bytes(view[HEADER_SIZE:n]))
                    finish(job)
                    continue
                rel = off - job.offset
                if rel < 0 or length != data_len or length == 0 or rel + length > job.length:
                    stats.stray += 1
                    continue
                if off in job.seen:
                    stats.duplicates += 1
                    continue
                job.seen.add(off)
                start = job.buf_off + rel
                job.buf[start:start + length] = view[HEADER_SIZE:n]
                job.got += length
                if job.got >= job.length:
                    finish(job)
                continue

            if status == errno.EAGAIN:
                if job.state == _WAIT_BACKOFF:
                    continue  # one back-off per send
                job.busy += 1
                stats.busy += 1
                if job.busy > self.busy_tries:
                    fail(job, self._give_up(job, busy=True))
                    continue
                job.state = _WAIT_BACKOFF
                delay = min(self.backoff_min * (2 ** min(job.busy - 1, 16)), self.backoff_max)
                arm(job, time.monotonic() + delay * random.uniform(0.5, 1.5))
                continue

            fail(job, self._refused(job, status, off, length, flags))

    def _take_raw(self, job: _Job, view, n, version, op, status, seq, off, length, flags,
                  finish, session=0, token=0) -> None:
        data = bytes(view[HEADER_SIZE:n])
        chunk = Reply(MAGIC, version, op, status, seq, off, length, flags, data, [], session,
                      token)
        if job.op != OP_READ:
            job.reply = Reply(MAGIC, version, op, status, seq, off, length, flags, data,
                              [chunk], session, token)
            finish(job)
            return
        if job.reply is None:
            job.reply = Reply(MAGIC, version, op, status, seq, job.offset, job.length, flags,
                              b"")
        r = job.reply
        key = (off, length)
        if key in job.seen:
            self.stats.duplicates += 1
            return
        job.seen.add(key)
        r.chunks.append(chunk)
        if status and not r.status:
            r.status = status
        lo = max(off, job.offset)
        hi = min(off + length, job.offset + job.length)
        if status == STATUS_OK:
            if lo < hi and length == len(data):
                job.buf[lo - job.offset:hi - job.offset] = data[lo - off:hi - off]
            job.got += max(0, hi - lo)
        else:
            job.got += max(0, hi - lo)
        # A refusal covers the request; a malformed one still ends the wait.
        if job.got >= job.length or (status and (length == 0 or key == (job.offset, job.length))):
            r.data = bytes(job.buf)
            finish(job)


# ---- sizes ---------------------------------------------------------------------

_SIZE_RE = re.compile(r"^\s*(\d+)\s*([kmgt]?)(i?b)?\s*$", re.IGNORECASE)
_SHIFT = {"": 0, "k": 10, "m": 20, "g": 30, "t": 40}


def parse_size(text: str) -> int:
    """'4096', '4k', '1M', '2g', '0x1000' -> bytes (suffixes are powers of 1024)."""
    s = str(text).strip()
    if s.lower().startswith("0x"):
        try:
            return int(s, 16)
        except ValueError:
            pass
    m = _SIZE_RE.match(s)
    if not m:
        raise ValueError(f"not a size: {text!r} (use bytes or a k/m/g suffix, e.g. 4k)")
    return int(m.group(1)) << _SHIFT[m.group(2).lower()]


def format_size(n: int) -> str:
    """1073741824 -> '1 GiB', 1536 -> '1.5 KiB', 1000 -> '1000 B'."""
    for shift, unit in ((40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")):
        if n >= 1 << shift:
            v = n / (1 << shift)
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.3g} {unit}"
    return f"{n} B"


def parse_range(text: str) -> tuple[int, int]:
    if ":" not in text:
        raise ValueError(f"not a range: {text!r} (use OFFSET:LENGTH, e.g. 1g:64m)")
    a, b = text.split(":", 1)
    return parse_size(a), parse_size(b)


# ---- bench -----------------------------------------------------------------------


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of an ascending list."""
    if not sorted_values:
        return 0.0
    k = max(0, min(len(sorted_values) - 1, math.ceil(q / 100 * len(sorted_values)) - 1))
    return sorted_values[k]


def bench(client: Client, mode: str, size: int, seconds: float, window: int = 64,
          rng: tuple[int, int] | None = None, seed: int | None = None) -> dict:
    """Run one benchmark: requests of `size` bytes for `seconds`, `window` in flight,
    never outside rng (offset, length); writes need rng.  Returns the results."""
    if mode not in ("randread", "randwrite", "read", "write"):
        raise ValueError(f"unknown bench mode {mode!r}")
    writing = mode.endswith("write")
    if writing and rng is None:
        raise ValueError(f"bench --mode {mode} writes: say where with --range OFFSET:LENGTH "
                         f"(it overwrites that range)")
    g = client.geometry
    if writing and g.read_only:
        raise ValueError(f"bench --mode {mode}: the instance is read-only")
    base, span = rng if rng is not None else (0, g.size)
    sector = max(g.sector_size, 1)
    if size <= 0 or size % sector:
        raise ValueError(f"--size {size} is not a whole number of {sector}-byte sectors")
    limit = g.max_io if writing else client.read_piece()
    if size > limit:
        raise ValueError(f"--size {size} is more than one {'WRITE' if writing else 'READ'} "
                         f"carries here ({limit})")
    if base % sector or span % sector:
        raise ValueError(f"--range {base}:{span} is not sector-aligned ({sector})")
    if base + span > g.size:
        raise ValueError(f"--range {base}:{span} ends beyond the device ({g.size} bytes)")
    if span < size:
        raise ValueError(f"--range {base}:{span} is smaller than --size {size}")
    if seconds <= 0:
        raise ValueError("--seconds must be > 0")

    count = span // size  # whole requests that fit the range
    r = random.Random(seed)
    payload = os.urandom(size) if writing else b""
    op = OP_WRITE if writing else OP_READ
    cost = client._read_cost(size) if op == OP_READ else 1
    sink = bytearray(size) if not writing else None
    latencies: list[float] = []
    errors: list[str] = []
    before = Stats(**asdict(client.stats))

    start = time.monotonic()
    end = start + seconds

    def jobs() -> Iterator[_Job]:
        i = 0
        while time.monotonic() < end:
            k = r.randrange(count) if mode.startswith("rand") else i % count
            i += 1
            off = base + k * size
            assert base <= off and off + size <= base + span
            yield _Job(op, off, size, payload=payload, cost=cost, buf=sink)

    def done(job: _Job) -> None:
        latencies.append(job.done_at - job.first_sent)

    def error(job: _Job, exc: NetblkError) -> None:
        errors.append(str(exc))

    client._run(jobs(), window, on_done=done, on_error=error)
    elapsed = time.monotonic() - start

    latencies.sort()
    ops = len(latencies)
    s = client.stats
    us = [x * 1e6 for x in latencies]
    return {
        "mode": mode,
        "size": size,
        "window": client.effective_window(window, cost),
        "seconds": round(elapsed, 6),
        "range": {"offset": base, "length": span},
        "ops": ops,
        "bytes": ops * size,
        "iops": round(ops / elapsed, 1) if elapsed > 0 else 0.0,
        "mib_s": round(ops * size / elapsed / (1 << 20), 3) if elapsed > 0 else 0.0,
        "latency_us": {
            "p50": round(percentile(us, 50), 1),
            "p99": round(percentile(us, 99), 1),
            "p99.9": round(percentile(us, 99.9), 1),
            "max": round(us[-1], 1) if us else 0.0,
        },
        "retries": s.retries - before.retries,
        "busy": s.busy - before.busy,
        "errors": len(errors),
        "first_error": errors[0] if errors else None,
    }


# ---- command line ----------------------------------------------------------------

PIECE = 64 << 20  # read/write/verify go through memory this much at a time


class UsageError(Exception):
    """A command line that cannot be carried out as given (exit 2)."""


def _size_arg(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _range_arg(text: str) -> tuple[int, int]:
    try:
        return parse_range(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1: {text}")
    return v


def _port(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 1 <= v <= 65535:
        raise argparse.ArgumentTypeError(f"not a port number (1..65535): {text}")
    return v


def _positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not v > 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {text}")
    return v


COMMON_DEFAULTS = {"timeout": 0.25, "tries": 20, "window": 64, "json": False, "checksum": True,
                   "key": None, "auth": None}


def _common_options(parser: argparse.ArgumentParser) -> None:
    # SUPPRESS: an option given before or after the command both count.
    parser.add_argument("--timeout", type=_positive_float, default=argparse.SUPPRESS,
                        help="seconds to wait for an answer before resending (0.25)")
    parser.add_argument("--tries", type=_positive_int, default=argparse.SUPPRESS,
                        help="sends of one request before giving up (20)")
    parser.add_argument("--window", type=_positive_int, default=argparse.SUPPRESS,
                        help="requests in flight at once, capped by the instance's slots (64)")
    parser.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="machine-readable output (info, bench)")
    parser.add_argument("--no-checksum", dest="checksum", action="store_false",
                        default=argparse.SUPPRESS,
                        help="send UDP checksum 0: the server then need not read a write's "
                             "data to verify it (a trusted link whose frames carry a CRC)")
    parser.add_argument("--key", metavar="FILE", default=argparse.SUPPRESS,
                        help="the key of a keyed instance (netblkctl start ... key=FILE)")
    parser.add_argument("--auth", choices=["header", "full"], default=argparse.SUPPRESS,
                        help="what the instance's tags cover, as its auth= says (header)")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description="Client of a netblk instance (block device over UDP, protocol v2). "
                    "Sizes and offsets take k/m/g suffixes (powers of 1024) or plain bytes.")
    p.add_argument("--version", action="version", version=f"netblk {__version__}")
    p.add_argument("host", help="the instance's IPv4 address or name")
    p.add_argument("port", type=_port, help="the instance's UDP port")
    _common_options(p)
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    s = sub.add_parser("info", help="print what the instance serves")
    _common_options(s)

    s = sub.add_parser("read", help="read LENGTH bytes at OFFSET into FILE ('-': stdout)")
    s.add_argument("offset", type=_size_arg)
    s.add_argument("length", type=_size_arg)
    s.add_argument("file")
    _common_options(s)

    s = sub.add_parser("write", help="write FILE ('-': stdin) at OFFSET")
    s.add_argument("offset", type=_size_arg)
    s.add_argument("file")
    s.add_argument("--fua", action="store_true", help="force unit access: on stable media")
    _common_options(s)

    s = sub.add_parser("flush", help="write the device's volatile cache out")
    _common_options(s)

    s = sub.add_parser("trim", help="tell the device it may forget LENGTH bytes at OFFSET")
    s.add_argument("offset", type=_size_arg)
    s.add_argument("length", type=_size_arg)
    _common_options(s)

    s = sub.add_parser("zero", help="make LENGTH bytes at OFFSET read back as zeros "
                                    "(WRITE_ZEROES: no data is sent)")
    s.add_argument("offset", type=_size_arg)
    s.add_argument("length", type=_size_arg)
    _common_options(s)

    s = sub.add_parser("verify", help="DESTRUCTIVE: write random data over the range, "
                                      "read it back and compare")
    s.add_argument("offset", type=_size_arg)
    s.add_argument("length", type=_size_arg)
    _common_options(s)

    s = sub.add_parser("bench", help="measure IOPS, MiB/s and latency")
    s.add_argument("--mode", required=True, choices=["randread", "randwrite", "read", "write"])
    s.add_argument("--size", type=_size_arg, default=1024, help="bytes per request (1k)")
    s.add_argument("--seconds", type=_positive_float, default=5.0, help="how long (5)")
    s.add_argument("--range", type=_range_arg, default=None, metavar="OFFSET:LENGTH",
                   help="where requests go; required for writes (reads: the whole device)")
    s.add_argument("--seed", type=int, default=None, help="seed of the random offsets")
    _common_options(s)
    return p


def _info_text(info: Info, where: str) -> str:
    known = ((INFO_READ_ONLY, "read-only"), (INFO_VOLATILE_CACHE, "volatile write cache"),
             (INFO_FUA, "FUA honoured"), (INFO_TRIM, "TRIM"),
             (INFO_WRITE_ZEROES, "WRITE_ZEROES"))
    flags = [name for bit, name in known if info.flags & bit]
    unknown = info.flags & ~sum(bit for bit, _ in known)
    if unknown:
        flags.append(f"unknown 0x{unknown:x}")
    lines = [
        f"instance     {where}",
        f"size         {info.size} bytes ({format_size(info.size)})",
        f"sector size  {info.sector_size} bytes (physical {info.physical_block_size}, "
        f"optimal I/O {info.io_opt or 'not given'})",
        f"max io       {info.max_io} bytes per datagram",
        f"max read     {info.max_read} bytes per READ",
        f"slots        {info.slots}",
        f"trim         " + (f"up to {info.max_trim} bytes a request, granularity "
                            f"{info.discard_granularity}" if info.trim else "no"),
        f"write zeroes " + (f"up to {info.max_write_zeroes} bytes a request"
                            if info.write_zeroes else "no"),
        f"access       {'read-only' if info.read_only else 'read-write'}",
        f"flags        0x{info.flags:x} ({', '.join(flags) if flags else 'none'})",
        f"export id    {info.export_id:016x}",
    ]
    return "\n".join(lines)


def _bench_text(r: dict) -> str:
    lat = r["latency_us"]
    rng = r["range"]
    text = (f"bench {r['mode']}: {r['size']}-byte requests, window {r['window']}, "
            f"range {rng['offset']}+{rng['length']}, {r['seconds']:.2f} s\n"
            f"  {r['ops']} ops  {r['iops']:.1f} IOPS  {r['mib_s']:.2f} MiB/s\n"
            f"  latency (us): p50 {lat['p50']:.1f}  p99 {lat['p99']:.1f}  "
            f"p99.9 {lat['p99.9']:.1f}  max {lat['max']:.1f}\n"
            f"  retries {r['retries']}  busy {r['busy']}  errors {r['errors']}")
    if r.get("first_error"):
        text += f"\n  first error: {r['first_error']}"
    return text


def _first_difference(a, b) -> int:
    """Index of the first byte where a and b differ (they are known to)."""
    step = 4096
    for i in range(0, min(len(a), len(b)), step):
        if a[i:i + step] != b[i:i + step]:
            for j in range(i, min(i + step, len(a), len(b))):
                if a[j] != b[j]:
                    return j
    return min(len(a), len(b))


def _cmd_read(c: Client, a) -> int:
    out = sys.stdout.buffer if a.file == "-" else open(a.file, "wb")
    try:
        piece = max(PIECE // c.read_piece(), 1) * c.read_piece()
        buf = bytearray(min(piece, a.length))
        pos = 0
        t0 = time.monotonic()
        while pos < a.length:
            n = min(piece, a.length - pos)
            view = memoryview(buf)[:n]
            c.read_into(a.offset + pos, view, a.window)
            out.write(view)
            pos += n
        out.flush()
    finally:
        if out is not sys.stdout.buffer:
            out.close()
    dt = time.monotonic() - t0
    print(f"netblk: read {a.length} bytes at {a.offset} in {dt:.3f} s "
          f"({a.length / max(dt, 1e-9) / (1 << 20):.1f} MiB/s)", file=sys.stderr)
    return 0


def _cmd_write(c: Client, a) -> int:
    g = c.geometry
    sector = max(g.sector_size, 1)
    src = sys.stdin.buffer if a.file == "-" else open(a.file, "rb")
    try:
        if src is not sys.stdin.buffer:
            st = os.fstat(src.fileno())
            if stat.S_ISREG(st.st_mode) and st.st_size % sector:
                raise UsageError(f"write: {a.file} is {st.st_size} bytes, not a whole number "
                                 f"of {sector}-byte sectors")
        piece = max(PIECE // max(g.max_io, 1), 1) * max(g.max_io, 1)
        pos = 0
        t0 = time.monotonic()
        while True:
            data = src.read(piece)
            if not data:
                break
            if len(data) % sector:
                raise UsageError(f"write: the input ends {pos + len(data)} bytes in, not on a "
                                 f"{sector}-byte sector boundary; {pos} bytes were written")
            c.write(a.offset + pos, data, a.window, a.fua)
            pos += len(data)
    finally:
        if src is not sys.stdin.buffer:
            src.close()
    dt = time.monotonic() - t0
    print(f"netblk: wrote {pos} bytes at {a.offset}{' (FUA)' if a.fua else ''} in {dt:.3f} s "
          f"({pos / max(dt, 1e-9) / (1 << 20):.1f} MiB/s)", file=sys.stderr)
    return 0


def _cmd_verify(c: Client, a) -> int:
    print(f"verify: this overwrites {a.offset}..{a.offset + a.length} on the device", flush=True)
    g = c.geometry
    unit = max(g.max_io, 1) * max(c.read_piece() // max(g.max_io, 1), 1)
    piece = max(PIECE // unit, 1) * unit
    pos = 0
    while pos < a.length:
        n = min(piece, a.length - pos)
        data = os.urandom(n)
        c.write(a.offset + pos, data, a.window)
        back = c.read(a.offset + pos, n, a.window)
        if back != data:
            i = _first_difference(data, back)
            print(f"verify: MISMATCH at offset {a.offset + pos + i}: wrote 0x{data[i]:02x}, "
                  f"read 0x{back[i]:02x}" if i < len(back) else
                  f"verify: MISMATCH at offset {a.offset + pos + i}: short read")
            return 1
        pos += n
    print(f"verify: OK ({a.length} bytes at {a.offset} read back as written)")
    return 0


def _cmd_bench(c: Client, a) -> int:
    try:
        r = bench(c, a.mode, a.size, a.seconds, a.window, a.range, a.seed)
    except ValueError as e:
        raise UsageError(str(e)) from None
    print(json.dumps(r) if a.json else _bench_text(r))
    return 1 if r["errors"] else 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    a = parser.parse_args(argv)
    for k, v in COMMON_DEFAULTS.items():
        if not hasattr(a, k):
            setattr(a, k, v)
    try:
        auth = None
        if a.key is not None:
            try:
                auth = Auth(read_key_file(a.key), a.auth == "full")
            except ValueError as e:
                raise UsageError(str(e)) from None
        elif a.auth is not None:
            raise UsageError("--auth needs the key: --key FILE")
        with Client(a.host, a.port, timeout=a.timeout, tries=a.tries, checksum=a.checksum,
                    auth=auth) as c:
            if a.command == "info":
                info = c.info()
                print(json.dumps(info.to_dict()) if a.json else _info_text(info, c.where))
                return 0
            if a.command == "read":
                return _cmd_read(c, a)
            if a.command == "write":
                return _cmd_write(c, a)
            if a.command == "flush":
                c.flush()
                print("netblk: flushed", file=sys.stderr)
                return 0
            if a.command in ("trim", "zero"):
                (c.trim if a.command == "trim" else c.write_zeroes)(a.offset, a.length, a.window)
                print(f"netblk: {'trimmed' if a.command == 'trim' else 'zeroed'} {a.length} "
                      f"bytes at {a.offset}", file=sys.stderr)
                return 0
            if a.command == "verify":
                return _cmd_verify(c, a)
            if a.command == "bench":
                return _cmd_bench(c, a)
            parser.error(f"unknown command {a.command}")
    except UsageError as e:
        print(f"netblk: {e}", file=sys.stderr)
        return 2
    except NetblkError as e:
        print(f"netblk: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"netblk: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


def run() -> int:
    """The netblk command: main() with the command line's exit habits."""
    try:
        return main()
    except BrokenPipeError:
        # the reader of stdout went away (e.g. `| head`)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(run())
