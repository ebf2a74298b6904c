"""The wire protocol, version 2 (docs/protocol.md): constants, the header,
status names and the tags of a keyed instance (SipHash-2-4).  Nothing here
sends or waits: the request engine is client.py."""

from __future__ import annotations

import errno
import os
import socket
import struct
from dataclasses import dataclass

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
# export_id, then (servers with queues=, from 0.4) queues
INFO_PAYLOAD = struct.Struct(">QIIIIIIIIIIQ")
INFO_SIZE = INFO_PAYLOAD.size  # 56: what every server sends
INFO_QUEUES = struct.Struct(">I")  # at INFO_SIZE, when the answer is longer
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
    errno.EALREADY: "served as often as one number is: ask again under a new number",
    errno.EEXIST: "the sequence number was used for another request: not executed",
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
