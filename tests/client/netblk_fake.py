"""A fake netblk instance for the client's tests: protocol v2 over UDP on
127.0.0.1, served by a thread from a bytearray "disk".  Sessions (HELLO with
a cookie, then a session id and token), a replay window for what changes
the disk (a duplicate of an answered one is answered the same, not
executed; a READ or INFO number served SERVES_MAX times, then EALREADY; a
number used again for another request EEXIST), TRIM and WRITE_ZEROES, and
tags when it has a key.

    with FakeServer(size=1 << 20, loss=0.2) as srv:
        c = Client("127.0.0.1", srv.port, timeout=0.02)

Knobs (all attributes, changeable while it runs):
    read_only, volatile, fua     what INFO says (read_only also refuses writes,
               and, as an instance does, offers no write cache, FUA, TRIM
               or WRITE_ZEROES)
    sector, max_io, max_read, slots
    delay      seconds each request holds its slots before it is answered;
               a request that finds too few free slots is answered EAGAIN
    gate       answers are held (with their slots) until at least this many
               slots are held at once; then every held answer goes out after
               `delay`.  One held gate_wait seconds (default 10) goes out
               anyway.  A window the client keeps in flight is seen whole
               however slowly its datagrams come.  0: off.
    loss       probability that a reply datagram is dropped (seeded)
    drop       callable(header tuple) -> bool: drop this reply datagram
    busy_first the first N requests are answered EAGAIN
    busy_each  every request (session, seq) is answered EAGAIN its first N times
    shuffle    READ chunks go out in random order
    reverse    answers held (delay, gate) go out newest first, as a disk may
               complete what it was given
    duplicate  every reply datagram is sent twice
    stray      before each reply: a datagram with the wrong magic, one with an
               unknown seq and one that is too short
    key, auth_data  a keyed instance (16 bytes), tags over the data too
    forged_rejections  before the answers of the next N requests of a session, an
                 untagged EKEYREJECTED for each, as a forger of the instance's address sends
    busy_hellos  the first N HELLOs that bring their cookie are answered EAGAIN
                 (the module's take a slot, which a busy instance may not have)
    silent     answer nothing at all
    eio        [(offset, length), ...]: READ chunks overlapping these fail EIO
    corrupt_at a device offset whose byte READs return inverted (None: off)

What it saw: log (one Request per datagram that was a request), max_in_use
(the most slots held at once), replies_sent, executed (requests that changed
the disk, each once), duplicates (answered again without executing),
already (READs and INFOs answered EALREADY).
forget_sessions() does what an instance started again does to its sessions.
"""

from __future__ import annotations

import errno
import random
import select
import socket
import struct
import threading
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "client"))
from netblk import Auth, siphash24  # noqa: E402  (the tag is the client's; the codec is this file's)

HEADER = struct.Struct(">IBBHHIQQQIIQ")
HEADER_SIZE = HEADER.size  # 54
TAG_OFFSET = 46
MAGIC = 0x4E424C4B
OP_INFO, OP_READ, OP_WRITE, OP_FLUSH, OP_TRIM, OP_WRITE_ZEROES, OP_HELLO = 1, 2, 3, 4, 5, 6, 7
CHANGES_DISK = (OP_WRITE, OP_FLUSH, OP_TRIM, OP_WRITE_ZEROES)
FLAG_FUA = 1
FLAG_AUTH_KEY, FLAG_AUTH_DATA = 1 << 8, 1 << 9
WINDOW = 1024
SERVES_MAX = 4  # a READ or INFO number is served this often at most, then EALREADY


@dataclass
class Request:
    op: int
    status: int
    seq: int
    offset: int
    length: int
    flags: int
    version: int
    payload_len: int
    answer: int  # status it got: 0 served, else the refusal; -1 not answered (silent)
    session: int = 0


class _Session:
    def __init__(self, sid: int, token: int, addr):
        self.id = sid
        self.token = token
        self.addr = addr
        self.top = 0
        self.done: dict[int, int] = {}  # seq -> status, for what changes the disk
        self.asked: dict[int, tuple] = {}  # seq -> (op, offset, length, flags) it was taken by
        self.served: dict[int, int] = {}  # seq -> times a READ or INFO was served


def lose_first_answer(op: int):
    """A drop= that loses the first answer to @op and no other; its .lost
    holds that answer's sequence number once it was lost."""
    lost: list[int] = []

    def drop(hdr) -> bool:
        if hdr[2] == op | 0x80 and not lost:
            lost.append(hdr[7])
            return True
        return False

    drop.lost = lost
    return drop


class FakeServer:
    def __init__(self, size: int = 1 << 20, sector: int = 512, max_io: int = 1024,
                 slots: int = 256, read_only: bool = False, volatile: bool = True,
                 fua: bool = True, delay: float = 0.0, loss: float = 0.0, seed: int = 1,
                 busy_first: int = 0, busy_each: int = 0, shuffle: bool = False,
                 duplicate: bool = False, stray: bool = False, silent: bool = False,
                 eio=(), drop=None, corrupt_at: int | None = None,
                 fill: bytes | None = None, gate: int = 0, gate_wait: float = 10.0,
                 key: bytes | None = None, auth_data: bool = False, trim: bool = True,
                 busy_hellos: int = 0, reverse: bool = False, forged_rejections: int = 0,
                 queues: int | None = None):
        self.size = size
        self.queues = queues  # INFO's queues; None: a server before queues= (56 bytes)
        self.sector = sector
        self.max_io = max_io
        self.max_read = 16 * max_io
        self.slots = slots
        self.read_only = read_only
        self.volatile = volatile
        self.fua = fua
        self.delay = delay
        self.gate = gate
        self.gate_wait = gate_wait
        self.loss = loss
        self.rng = random.Random(seed)
        self.busy_first = busy_first
        self.busy_each = busy_each
        self.shuffle = shuffle
        self.reverse = reverse
        self.duplicate = duplicate
        self.stray = stray
        self.silent = silent
        self.eio = list(eio)
        self.drop = drop
        self.corrupt_at = corrupt_at
        self.auth = Auth(key, auth_data) if key is not None else None
        self.trim = trim
        self.busy_hellos = busy_hellos
        self.forged_rejections = forged_rejections
        self.secret = random.Random(seed + 2).randbytes(16)
        self.sessions: dict[int, _Session] = {}
        self._next_session = 1
        self.executed = 0
        self.duplicates = 0
        self.already = 0
        if fill is None:
            fill = bytes(random.Random(seed + 1).getrandbits(8) for _ in range(4096))
        self.disk = bytearray((fill * (size // len(fill) + 1))[:size])
        self.log: list[Request] = []
        self.replies_sent = 0
        self.in_use = 0
        self.max_in_use = 0
        self._busy_counts: dict[int, int] = {}
        self._requests = 0
        self._pending: list = []  # [due, [(datagram, addr)], cost]
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.sock.setblocking(False)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="netblk-fake", daemon=True)

    # -- lifecycle

    def start(self) -> FakeServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- what it saw

    def requests(self, op: int | None = None) -> list[Request]:
        return [r for r in list(self.log) if op is None or r.op == op]

    def forget_sessions(self) -> None:
        """As an instance started again: no session, no cookie of before is good."""
        self.sessions = {}
        self.secret = bytes(b ^ 0xFF for b in self.secret)

    # -- serving

    def _serve(self) -> None:
        while not self._stop.is_set():
            now = time.monotonic()
            wait = 0.02
            if self._pending:
                wait = max(0.0, min(wait, min(p[0] for p in self._pending) - now))
            r, _, _ = select.select([self.sock], [], [], wait)
            if r:
                for _ in range(512):
                    try:
                        data, addr = self.sock.recvfrom(65536)
                    except (BlockingIOError, InterruptedError):
                        break
                    self._handle(data, addr)
            self._release(time.monotonic())

    def _release(self, now: float) -> None:
        due = [p for p in self._pending if p[0] <= now]
        if not due:
            return
        self._pending = [p for p in self._pending if p[0] > now]
        if self.reverse:
            due.reverse()
        for _, datagrams, cost in due:
            self.in_use -= cost
            for dgram, addr in datagrams:
                self._emit(dgram, addr)

    def _emit(self, dgram: bytes, addr) -> None:
        hdr = HEADER.unpack_from(dgram)
        if self.auth is not None and hdr[3] != errno.EKEYREJECTED:
            dgram = dgram[:TAG_OFFSET] + self.auth.tag(dgram, dgram[HEADER_SIZE:]).to_bytes(
                8, "big") + dgram[HEADER_SIZE:]
        if self.drop is not None and self.drop(hdr):
            return
        if self.loss and self.rng.random() < self.loss:
            return
        if self.stray:
            bad = bytearray(dgram)
            bad[0:4] = b"XBLK"
            self._sendto(bytes(bad), addr)
            self._sendto(HEADER.pack(MAGIC, 2, hdr[2], 0, 0, hdr[5], hdr[6], hdr[7] ^ 0x5A5A,
                                     hdr[8], hdr[9], 0, 0) + b"\0" * min(hdr[9], 1024), addr)
            self._sendto(dgram[:12], addr)
        self._sendto(dgram, addr)
        self.replies_sent += 1
        if self.duplicate:
            self._sendto(dgram, addr)

    def _sendto(self, dgram: bytes, addr) -> None:
        try:
            self.sock.sendto(dgram, addr)
        except (BlockingIOError, ConnectionRefusedError):
            pass  # as good as lost

    def _header(self, op, status, seq, offset, length, flags=0, session=None,
                token=None) -> bytes:
        h = self._current
        return HEADER.pack(MAGIC, 2, op | 0x80, status, flags,
                           h[5] if session is None else session,
                           h[6] if token is None else token, seq, offset, length, 0, 0)

    def _cookie(self, addr, nonce: int) -> int:
        return siphash24(self.secret, f"{addr}:{nonce}".encode()) or 1

    def _validate(self, data: bytes, h) -> int | None:
        """None: drop; 0: serve; else the refusal (the order protocol.cpp uses)."""
        magic, version, op, status, flags, session, token, seq, offset, length, reserved, tag = h
        if magic != MAGIC or op & 0x80:
            return None
        if self.auth is not None and tag != self.auth.tag(data, data[HEADER_SIZE:]):
            return errno.EKEYREJECTED
        if op < OP_INFO or op > OP_HELLO:
            return errno.EOPNOTSUPP
        if flags & ~FLAG_FUA or reserved:
            return errno.EINVAL
        if flags & FLAG_FUA and op != OP_WRITE:
            return errno.EINVAL
        if op == OP_HELLO:
            return errno.EINVAL if session or not seq or offset or length else 0
        s = self.sessions.get(session)
        if s is None or s.token != token or s.addr != self._addr:
            return errno.ENOTCONN
        if self.read_only and op in CHANGES_DISK:
            return errno.EROFS
        if op == OP_INFO:
            return 0
        if op == OP_FLUSH:
            return errno.EINVAL if offset or length else 0
        limit = {OP_READ: self.max_read, OP_WRITE: self.max_io}.get(op, 1 << 30)
        if op in (OP_TRIM, OP_WRITE_ZEROES) and not self.trim:
            return errno.EOPNOTSUPP
        if length == 0:
            return errno.EINVAL
        if length > limit:
            return errno.EMSGSIZE
        if offset % self.sector or length % self.sector:
            return errno.EINVAL
        if offset > self.size or length > self.size - offset:
            return errno.ERANGE
        if op == OP_WRITE and len(data) != HEADER_SIZE + length:
            return errno.EINVAL
        return 0

    def _hello(self, h, addr) -> None:
        nonce, cookie = h[7], h[6]
        if cookie != self._cookie(addr, nonce):
            self._emit(self._header(OP_HELLO, 0, nonce, 0, 0, self._auth_flags(), 0,
                                    self._cookie(addr, nonce)), addr)
            return
        if self.busy_hellos > 0:
            self.busy_hellos -= 1
            self._emit(self._header(OP_HELLO, errno.EAGAIN, nonce, 0, 0, 0, 0, cookie), addr)
            return
        s = next((s for s in self.sessions.values() if s.addr == addr and s.nonce == nonce),
                 None)
        if s is None:
            s = _Session(self._next_session, random.getrandbits(63) | 1, addr)
            s.nonce = nonce
            self._next_session += 1
            self.sessions[s.id] = s
        self._emit(self._header(OP_HELLO, 0, nonce, 0, 0, self._auth_flags(), s.id, s.token),
                   addr)

    def _auth_flags(self) -> int:
        if self.auth is None:
            return 0
        return FLAG_AUTH_KEY | (FLAG_AUTH_DATA if self.auth.data else 0)

    def _window(self, s: _Session, op: int, seq: int, asked: tuple):
        """None: execute it; else the status to answer without executing it
        (docs/protocol.md, "Exactly once")."""
        if seq > s.top + WINDOW:
            return errno.EOVERFLOW
        if seq + WINDOW <= s.top or seq == 0:
            return errno.ESTALE
        if s.asked.setdefault(seq, asked) != asked:
            return errno.EEXIST
        if op not in CHANGES_DISK:
            s.top = max(s.top, seq)
            s.served[seq] = s.served.get(seq, 0) + 1
            if s.served[seq] > SERVES_MAX:
                self.already += 1
                return errno.EALREADY
            return None
        if seq in s.done:
            self.duplicates += 1
            return s.done[seq]
        s.top = max(s.top, seq)
        return None

    def _handle(self, data: bytes, addr) -> None:
        if len(data) < HEADER_SIZE:
            return
        if data[:4] == struct.pack(">I", MAGIC) and data[4] != 2 and not data[5] & 0x80:
            # another version: answered in version 1's header, as the module does
            self.log.append(Request(data[5], 0, 0, 0, 0, 0, data[4], 0, errno.EPROTONOSUPPORT))
            self._sendto(struct.pack(">IBBH", MAGIC, 2, data[5] | 0x80, errno.EPROTONOSUPPORT)
                         + data[8:28] + b"\0\0", addr)
            return
        h = HEADER.unpack_from(data)
        magic, version, op, status, flags, session, seq_, offset, length = \
            h[0], h[1], h[2], h[3], h[4], h[5], h[7], h[8], h[9]
        self._current = h
        self._addr = addr
        verdict = self._validate(data, h)
        if verdict is None:
            return
        handle = seq_
        req = Request(op, status, handle, offset, length, flags, version,
                      len(data) - HEADER_SIZE, verdict, session)
        self.log.append(req)
        if self.silent:
            req.answer = -1
            return
        if verdict:
            rflags = flags
            if verdict == errno.EKEYREJECTED:
                rflags = FLAG_AUTH_KEY | (FLAG_AUTH_DATA if self.auth.data else 0)
            self._emit(self._header(op, verdict, handle, offset, length, rflags), addr)
            return
        if op == OP_HELLO:
            self._hello(h, addr)
            return
        sess = self.sessions[session]
        again = self._window(sess, op, handle, (op, offset, length, flags))
        if again is not None:
            req.answer = again
            self._emit(self._header(op, again, handle, offset, length, flags), addr)
            return

        self._requests += 1
        busy = self._requests <= self.busy_first
        if self.busy_each:
            n = self._busy_counts.get((session, handle), 0)
            if n < self.busy_each:
                self._busy_counts[(session, handle)] = n + 1
                busy = True
        cost = -(-length // self.max_io) if op == OP_READ else 1
        holding = bool(self.delay or self.gate)
        if holding and self.in_use + cost > self.slots:
            busy = True
        if busy:
            req.answer = errno.EAGAIN
            self._emit(self._header(op, errno.EAGAIN, handle, offset, length, flags), addr)
            return

        if self.forged_rejections and op != OP_HELLO:
            # what anyone who can forge the instance's address can send: an
            # untagged EKEYREJECTED for the request (its numbers seen on the path)
            self.forged_rejections -= 1
            self._sendto(self._header(op, errno.EKEYREJECTED, handle, offset, length,
                                      self._auth_flags()), addr)
        if op in CHANGES_DISK:
            sess.done[handle] = 0
            self.executed += 1
        replies = self._serve_one(op, handle, offset, length, flags, data)
        if holding:
            now = time.monotonic()
            self.in_use += cost
            self.max_in_use = max(self.max_in_use, self.in_use)
            hold = self.gate_wait if self.gate else self.delay
            self._pending.append([now + hold, [(r, addr) for r in replies], cost])
            if self.gate and self.in_use >= self.gate:
                for p in self._pending:
                    p[0] = min(p[0], now + self.delay)
        else:
            self.max_in_use = max(self.max_in_use, cost)
            for r in replies:
                self._emit(r, addr)

    def _serve_one(self, op, handle, offset, length, flags, data) -> list[bytes]:
        if op == OP_INFO:
            # a read-only instance offers nothing a client could write with
            writes = not self.read_only
            trim = self.trim and writes
            iflags = (1 if self.read_only else 0) | (2 if self.volatile and writes else 0) | \
                (4 if self.fua and writes else 0) | (24 if trim else 0)
            big = 1 << 30 if trim else 0
            body = struct.pack(">QIIIIIIIIIIQ", self.size, self.sector, self.sector, 0,
                               self.max_io, self.max_read, iflags, self.slots,
                               self.sector if trim else 0, big, big, 0x5EED)
            if self.queues is not None:
                body += struct.pack(">I", self.queues)
            # replies echo the request's offset and length (docs/protocol.md), 0 for INFO
            return [self._header(op, 0, handle, offset, length) + body]
        if op == OP_FLUSH:
            return [self._header(op, 0, handle, 0, 0)]
        if op == OP_WRITE:
            self.disk[offset:offset + length] = data[HEADER_SIZE:HEADER_SIZE + length]
            return [self._header(op, 0, handle, offset, length, flags)]
        if op in (OP_TRIM, OP_WRITE_ZEROES):
            self.disk[offset:offset + length] = bytes(length)
            return [self._header(op, 0, handle, offset, length)]
        out = []
        for pos in range(offset, offset + length, self.max_io):
            n = min(self.max_io, offset + length - pos)
            if any(pos < eo + el and eo < pos + n for eo, el in self.eio):
                out.append(self._header(op, errno.EIO, handle, pos, n))
            else:
                chunk = bytearray(self.disk[pos:pos + n])
                if self.corrupt_at is not None and pos <= self.corrupt_at < pos + n:
                    chunk[self.corrupt_at - pos] ^= 0xFF
                out.append(self._header(op, 0, handle, pos, n) + bytes(chunk))
        if self.shuffle:
            self.rng.shuffle(out)
        return out
