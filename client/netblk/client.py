"""The client of a netblk instance: sessions, the request engine (a window of
requests in flight over one UDP socket, resends, back-off), and what it
answers with (Reply, Info, Stats, NetblkError)."""

from __future__ import annotations

import errno
import heapq
import math
import random
import select
import socket
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Iterable, Iterator

from .protocol import (FAST_RESEND_MAX, FAST_RESEND_MIN, FLAG_AUTH_DATA, FLAG_AUTH_KEY,
                       FLAG_FUA, HEADER, HEADER_SIZE, INFO_FUA, INFO_PAYLOAD, INFO_QUEUES, INFO_READ_ONLY,
                       INFO_SIZE, INFO_TRIM, INFO_VOLATILE_CACHE, INFO_WRITE_ZEROES, MAGIC,
                       OP_FLUSH, OP_HELLO, OP_INFO, OP_READ, OP_REPLY, OP_TRIM, OP_WRITE,
                       OP_WRITE_ZEROES, RECV_BUFFER, REOPENS_MAX, SEQ_SPAN, SO_NO_CHECK,
                       SOCKET_BUFFER, STATUS_OK, TAG_OFFSET, V1_HEADER, VERSION, Auth, op_name,
                       pack_header, status_name, status_text, unpack_header)

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


class NetblkDeadline(NetblkTimeout):
    """The client's deadline (or, opening its first session, first_contact)
    passed with requests unanswered."""


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
    slots: int  # requests the instance holds at once (each of its queues)
    discard_granularity: int
    max_trim: int  # bytes one TRIM may cover; 0: no TRIM
    max_write_zeroes: int  # bytes one WRITE_ZEROES may cover; 0: none
    export_id: int  # which device: the same across the instance's restarts on it
    queues: int = 1  # the instance's queues (older servers do not say: 1)

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
        queues = 1  # 56 bytes: a server from before queues=
        if INFO_SIZE < len(data) < INFO_SIZE + INFO_QUEUES.size:
            raise NetblkError(f"INFO reply carries {len(data)} bytes: cut inside its queues",
                              op=OP_INFO)
        if len(data) >= INFO_SIZE + INFO_QUEUES.size:
            (queues,) = INFO_QUEUES.unpack_from(data, INFO_SIZE)
        return cls(*INFO_PAYLOAD.unpack_from(data), queues=queues)

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
    renumbered: int = 0  # READs and INFOs sent again under a new number (EALREADY)
    key_rejected: int = 0  # untagged EKEYREJECTED answers to requests of a session: ignored


# ---- the request engine --------------------------------------------------------


def _bytes_done(progress: Callable[[int], None] | None) -> Callable[[_Job], None] | None:
    """_run's on_done for a caller's progress callback: the bytes each job moved."""
    if progress is None:
        return None
    return lambda job: progress(job.length)

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
    deadline: seconds from now after which every operation fails with
    NetblkDeadline instead of waiting on (set_deadline() moves it); None: only
    tries bound a request.
    first_contact: seconds the HELLO that opens the client's first session may
    take in all, however many tries are left: a host that never answered is
    not worth tries x timeout of waiting (None: tries alone bound it).
    """

    def __init__(self, host: str, port: int, timeout: float = 0.25, tries: int = 20,
                 checksum: bool = True, auth: Auth | None = None,
                 deadline: float | None = None, first_contact: float | None = None):
        if timeout <= 0:
            raise ValueError("timeout must be > 0")
        if tries < 1:
            raise ValueError("tries must be >= 1")
        if first_contact is not None and first_contact <= 0:
            raise ValueError("first_contact must be > 0")
        self.first_contact = first_contact
        self._contact_end: float | None = None  # while the first HELLO waits: when it stops
        self.set_deadline(deadline)
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

    def set_deadline(self, seconds: float | None) -> None:
        """Fail every operation still waiting `seconds` from now (None: never)."""
        if seconds is not None and seconds <= 0:
            raise ValueError("deadline must be > 0")
        self.deadline = seconds
        self.deadline_at = None if seconds is None else time.monotonic() + seconds

    def open_session(self) -> Session:
        """HELLO, then HELLO with the cookie its answer brought: a new session,
        numbered from 1.  Done by the first request, and again when the
        instance answers ENOTCONN (it forgot the session: it was started again)."""
        nonce = random.getrandbits(63) | 1
        first = _Job(OP_HELLO, 0, 0, seq=nonce, raw=True, hello_token=0)
        self._first_hello(first)
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

    def _first_hello(self, job: _Job) -> None:
        """Send a session's first HELLO.  Before anything was ever heard from
        the instance, silence is most likely no instance there (a dead host, a
        wrong port): it is bounded by first_contact and named as such."""
        if self.stats.sessions:
            self._run([job], 1, hello=True)
            return
        t0 = time.monotonic()
        if self.first_contact is not None:
            self._contact_end = t0 + self.first_contact
        try:
            self._run([job], 1, hello=True)
        except NetblkTimeout:
            # a raw job completes on any answer: this raise was silence
            raise self._no_contact(job, time.monotonic() - t0) from None
        finally:
            self._contact_end = None

    def _no_contact(self, job: _Job, elapsed: float) -> NetblkTimeout:
        name = self.where if self.host == self.address[0] else f"{self.host} ({self.where})"
        tries = f"{job.tries} {'try' if job.tries == 1 else 'tries'}"
        msg = f"HELLO: no answer from {name} in {elapsed:.1f} s ({tries})"
        start = f"netblkctl start DEV {self.port} on that host"
        if self.stats.icmp_refused:
            msg += (f" -- port unreachable: nothing serves UDP port {self.port} there "
                    f"({start}?)")
        else:
            msg += f" -- is an instance serving there ({start})? is the port right?"
        return NetblkTimeout(msg, None, OP_HELLO)

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

    def read(self, offset: int, length: int, window: int = 64,
             progress: Callable[[int], None] | None = None) -> bytes:
        """Read length bytes at offset: READs of max_read bytes, window of them in flight.
        progress: called with the bytes of each READ as it completes."""
        if length < 0 or offset < 0:
            raise ValueError("offset and length must be >= 0")
        if length == 0:
            return b""
        out = bytearray(length)
        self.read_into(offset, out, window, progress)
        return bytes(out)

    def read_into(self, offset: int, buf, window: int = 64,
                  progress: Callable[[int], None] | None = None) -> None:
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
        self._run(jobs, window, on_done=_bytes_done(progress))

    def read_piece(self) -> int:
        """Bytes one READ asks for: max_read, less where the instance has fewer
        slots than one READ's datagrams."""
        g = self.geometry
        piece = g.max_read
        if g.slots and g.max_io and g.slots * g.max_io < piece:
            piece = g.slots * g.max_io
        return max(piece, g.max_io, 1)

    def write(self, offset: int, data, window: int = 64, fua: bool = False,
              progress: Callable[[int], None] | None = None) -> None:
        """Write data at offset: WRITEs of max_io bytes, window of them in flight.
        progress: called with the bytes of each WRITE as it completes."""
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
        self._run(jobs, window, on_done=_bytes_done(progress))

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
        if g.read_only:
            # it offers no TRIM or WRITE_ZEROES, and would refuse them EROFS
            raise NetblkError(f"{op_name(op)} {offset}+{length}: the instance at {self.where} "
                              f"is read-only", errno.EROFS, op, offset, length)
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
            if self.stats.key_rejected:
                msg += (f" -- {self.stats.key_rejected} untagged EKEYREJECTED answers ignored "
                        f"(a keyed session takes only tagged answers): was the instance started "
                        f"again with another key?")
        return NetblkTimeout(msg, None, job.op, job.offset, job.length)

    def _time_limit(self) -> float | None:
        """When waiting must stop: the deadline, sooner while a first HELLO waits."""
        ends = [t for t in (self.deadline_at, self._contact_end) if t is not None]
        return min(ends) if ends else None

    def _out_of_time(self, flight: dict[int, _Job]) -> NetblkDeadline:
        if self._contact_end is not None and time.monotonic() >= self._contact_end:
            what = f"first contact ({self.first_contact:g} s)"
        else:
            what = f"the deadline ({self.deadline:g} s)"
        if not flight:
            return NetblkDeadline(f"{what} passed before a request to {self.where} was sent")
        job = min(flight.values(), key=lambda j: j.first_sent)
        msg = f"{job.describe()}: {what} passed with no answer from {self.where}"
        if len(flight) > 1:
            msg += f" ({len(flight)} requests unanswered)"
        return NetblkDeadline(msg, None, job.op, job.offset, job.length)

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
        limit = self._time_limit()
        if limit is not None and time.monotonic() >= limit:
            raise self._out_of_time({})
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

        def renumber(job: _Job) -> None:
            # The instance served this READ (or INFO) number as often as it
            # serves one (EALREADY): its answers were lost that often.  Ask
            # again under a new number; the chunks had stay had.
            del flight[job.seq]
            number(job)
            flight[job.seq] = job
            stats.renumbered += 1
            self._send(job)
            arm(job, time.monotonic() + timeout)

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

            # Wait for a datagram or the first timer, not past the time limit.
            while heap and heap[0][2] != heap[0][3].gen:
                heapq.heappop(heap)
            now = time.monotonic()
            wait = heap[0][0] - now if heap else timeout
            if limit is not None:
                if now >= limit:
                    raise self._out_of_time(flight)
                wait = min(wait, limit - now)
            if wait > 0:
                try:
                    self._poll.poll(math.ceil(wait * 1000))
                except InterruptedError:
                    pass

            # Take every datagram there is.
            lost = self._drain(flight, finish, fail, arm, renumber)
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

    def _drain(self, flight: dict[int, _Job], finish, fail, arm, renumber) -> list[_Job]:
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
            if auth is not None and tag != auth.tag(view[:HEADER_SIZE], view[HEADER_SIZE:n]):
                # Not from the key's holder: a forgery, or another key.  An
                # instance's EKEYREJECTED is untagged (it cannot know our
                # key); it counts only in answer to our own HELLO -- in a
                # session, anyone who can forge the instance's address
                # could fail our requests with one.
                if status != errno.EKEYREJECTED:
                    stats.stray += 1
                    continue
                if job.hello_token is None:
                    stats.key_rejected += 1
                    continue
            if job.sent_no > self._answered_no:
                self._answered_no = job.sent_no
            data_len = n - HEADER_SIZE

            if status == errno.ENOTCONN and job.hello_token is None:
                lost.append(job)
                continue
            if status == errno.EALREADY and not job.raw and job.op in (OP_READ, OP_INFO):
                renumber(job)
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
