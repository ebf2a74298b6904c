"""A fake netblk instance for the client's tests: protocol v1 over UDP on
127.0.0.1, served by a thread from a bytearray "disk".

    with FakeServer(size=1 << 20, loss=0.2) as srv:
        c = Client("127.0.0.1", srv.port, timeout=0.02)

Knobs (all attributes, changeable while it runs):
    read_only, volatile, fua     what INFO says (read_only also refuses writes)
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
    busy_each  every handle is answered EAGAIN its first N times
    shuffle    READ chunks go out in random order
    duplicate  every reply datagram is sent twice
    stray      before each reply: a datagram with the wrong magic, one with an
               unknown handle and one that is too short
    silent     answer nothing at all
    eio        [(offset, length), ...]: READ chunks overlapping these fail EIO
    corrupt_at a device offset whose byte READs return inverted (None: off)

What it saw: log (one Request per datagram that was a request), max_in_use
(the most slots held at once), replies_sent.
"""

from __future__ import annotations

import errno
import random
import select
import socket
import struct
import threading
import time
from dataclasses import dataclass

HEADER = struct.Struct(">IBBHQQIH")
MAGIC = 0x4E424C4B
OP_INFO, OP_READ, OP_WRITE, OP_FLUSH = 1, 2, 3, 4
FLAG_FUA = 1


@dataclass
class Request:
    op: int
    status: int
    handle: int
    offset: int
    length: int
    flags: int
    version: int
    payload_len: int
    answer: int  # status it got: 0 served, else the refusal; -1 not answered (silent)


class FakeServer:
    def __init__(self, size: int = 1 << 20, sector: int = 512, max_io: int = 1024,
                 slots: int = 256, read_only: bool = False, volatile: bool = True,
                 fua: bool = True, delay: float = 0.0, loss: float = 0.0, seed: int = 1,
                 busy_first: int = 0, busy_each: int = 0, shuffle: bool = False,
                 duplicate: bool = False, stray: bool = False, silent: bool = False,
                 eio=(), drop=None, corrupt_at: int | None = None,
                 fill: bytes | None = None, gate: int = 0, gate_wait: float = 10.0):
        self.size = size
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
        self.duplicate = duplicate
        self.stray = stray
        self.silent = silent
        self.eio = list(eio)
        self.drop = drop
        self.corrupt_at = corrupt_at
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
        for _, datagrams, cost in due:
            self.in_use -= cost
            for dgram, addr in datagrams:
                self._emit(dgram, addr)

    def _emit(self, dgram: bytes, addr) -> None:
        hdr = HEADER.unpack_from(dgram)
        if self.drop is not None and self.drop(hdr):
            return
        if self.loss and self.rng.random() < self.loss:
            return
        if self.stray:
            bad = bytearray(dgram)
            bad[0:4] = b"XBLK"
            self._sendto(bytes(bad), addr)
            self._sendto(HEADER.pack(MAGIC, 1, hdr[2], 0, hdr[4] ^ 0x5A5A, hdr[5], hdr[6], 0)
                         + b"\0" * min(hdr[6], 1024), addr)
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

    def _header(self, op, status, handle, offset, length, flags=0) -> bytes:
        return HEADER.pack(MAGIC, 1, op | 0x80, status, handle, offset, length, flags)

    def _validate(self, data: bytes, h) -> int | None:
        """None: drop; 0: serve; else the refusal (the order protocol.cpp uses)."""
        magic, version, op, status, handle, offset, length, flags = h
        if magic != MAGIC or op & 0x80:
            return None
        if version != 1:
            return errno.EPROTONOSUPPORT
        if op < OP_INFO or op > OP_FLUSH:
            return errno.EOPNOTSUPP
        if flags & ~FLAG_FUA:
            return errno.EINVAL
        if flags & FLAG_FUA and op != OP_WRITE:
            return errno.EINVAL
        if self.read_only and op in (OP_WRITE, OP_FLUSH):
            return errno.EROFS
        if op == OP_INFO:
            return 0
        if op == OP_FLUSH:
            return errno.EINVAL if offset or length else 0
        limit = self.max_read if op == OP_READ else self.max_io
        if length == 0:
            return errno.EINVAL
        if length > limit:
            return errno.EMSGSIZE
        if offset % self.sector or length % self.sector:
            return errno.EINVAL
        if offset > self.size or length > self.size - offset:
            return errno.ERANGE
        if op == OP_WRITE and len(data) != 30 + length:
            return errno.EINVAL
        return 0

    def _handle(self, data: bytes, addr) -> None:
        if len(data) < 30:
            return
        h = HEADER.unpack_from(data)
        magic, version, op, status, handle, offset, length, flags = h
        verdict = self._validate(data, h)
        if verdict is None:
            return
        req = Request(op, status, handle, offset, length, flags, version, len(data) - 30, verdict)
        self.log.append(req)
        if self.silent:
            req.answer = -1
            return
        if verdict:
            self._emit(self._header(op, verdict, handle, offset, length, flags), addr)
            return

        self._requests += 1
        busy = self._requests <= self.busy_first
        if self.busy_each:
            n = self._busy_counts.get(handle, 0)
            if n < self.busy_each:
                self._busy_counts[handle] = n + 1
                busy = True
        cost = -(-length // self.max_io) if op == OP_READ else 1
        holding = bool(self.delay or self.gate)
        if holding and self.in_use + cost > self.slots:
            busy = True
        if busy:
            req.answer = errno.EAGAIN
            self._emit(self._header(op, errno.EAGAIN, handle, offset, length, flags), addr)
            return

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
            iflags = (1 if self.read_only else 0) | (2 if self.volatile else 0) | \
                (4 if self.fua else 0)
            body = struct.pack(">QIIIIII", self.size, self.sector, self.max_io, self.max_read,
                               iflags, self.slots, 0)
            return [self._header(op, 0, handle, 0, len(body)) + body]
        if op == OP_FLUSH:
            return [self._header(op, 0, handle, 0, 0)]
        if op == OP_WRITE:
            self.disk[offset:offset + length] = data[30:30 + length]
            return [self._header(op, 0, handle, offset, length, flags)]
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
