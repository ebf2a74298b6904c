"""docs/protocol.md's worked example against the Python client: the key as
the client reads a key file, every datagram as its codec packs it (and the
instance's answers as it unpacks them), every tag as it computes it, and
the cookie, token and export ids as the page says they are made.  The same
blocks are checked against the core by tests/unit/test_protocol_doc.cpp.

Run: /usr/bin/python3 -m pytest tests/client
"""

from __future__ import annotations

import ipaddress
import re
import struct
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "client"))

from netblk.protocol import (  # noqa: E402
    FLAG_AUTH_KEY, HEADER_SIZE, OP_HELLO, OP_READ, OP_REPLY, TAG_OFFSET, Auth, pack_header,
    parse_key, siphash24, unpack_header,
)

DOC = ROOT / "docs" / "protocol.md"
FLAG_FOLD_ANSWERS = 1 << 10


def example_blocks() -> dict[str, list[str]]:
    """Each fenced block after a line `<!-- example: NAME -->`, by NAME."""
    blocks: dict[str, list[str]] = {}
    name = None
    inside = False
    for line in DOC.read_text().splitlines():
        if inside:
            if line.startswith("```"):
                inside, name = False, None
            else:
                blocks[name].append(line)
        elif m := re.match(r"<!-- example: (\S+) -->", line):
            name = m.group(1)
        elif name and line.startswith("```"):
            inside = True
            blocks[name] = []
    return blocks


BLOCKS = example_blocks()


def datagram(name: str) -> bytes:
    """A block of hex bytes, a field a line: the bytes before the first two spaces."""
    assert name in BLOCKS, f"{DOC} has no block <!-- example: {name} -->"
    out = b""
    for line in BLOCKS[name]:
        words = line.split("  ")[0].split()
        assert words and all(re.fullmatch(r"[0-9a-f]{2}", w) for w in words), (name, line)
        out += bytes(int(w, 16) for w in words)
    assert len(out) == HEADER_SIZE, name
    return out


@pytest.fixture(scope="module")
def p() -> dict[str, str]:
    return {line.split()[0]: line.split()[1] for line in BLOCKS["parameters"] if line.split()}


def address(text: str) -> tuple[bytes, int]:
    host, port = text.split(":")
    return ipaddress.IPv4Address(host).packed, int(port)


def made(secret: bytes, label: int, a: int, b: int, c: int) -> int:
    """The page's rule for cookies and tokens: SipHash-2-4 under the secret of
    four 64-bit numbers, 8 little-endian bytes each."""
    return siphash24(secret, struct.pack("<QQQQ", label, a, b, c))


def peer(p) -> int:
    """The client's address and port as one number, as a little-endian CPU reads them."""
    ip, port = address(p["client"])
    return int.from_bytes(ip, "little") << 16 | port


def tag_ok(auth: Auth, d: bytes) -> bool:
    return unpack_header(d)["tag"] == auth.tag(d[:TAG_OFFSET])


def test_the_key_file_digits_are_the_key(p):
    key = parse_key(p["key"])
    assert struct.unpack("<QQ", key) == (int(p["k0"], 0), int(p["k1"], 0))
    assert int(p["time"]) >> 36 == int(p["epoch"])


def test_hello_cookie_and_session_are_the_clients_and_the_pages(p):
    auth = Auth(parse_key(p["key"]))
    secret = bytes.fromhex(p["secret"])
    nonce = int(p["nonce"], 0)

    assert pack_header(OP_HELLO, 0, 0, nonce, auth=auth) == datagram("hello")

    cookie = unpack_header(datagram("cookie"))
    assert (cookie["op"], cookie["status"], cookie["session"], cookie["seq"]) == \
        (OP_HELLO | OP_REPLY, 0, 0, nonce)
    assert cookie["flags"] == FLAG_AUTH_KEY | FLAG_FOLD_ANSWERS
    assert tag_ok(auth, datagram("cookie"))
    assert cookie["token"] == made(secret, 0x636F6F6B6965, int(p["epoch"]), peer(p), nonce)

    assert pack_header(OP_HELLO, 0, 0, nonce, token=cookie["token"], auth=auth) == \
        datagram("hello-cookie")

    opened = unpack_header(datagram("session"))
    assert (opened["op"], opened["status"], opened["session"], opened["seq"]) == \
        (OP_HELLO | OP_REPLY, 0, 1, nonce)
    assert opened["flags"] == FLAG_AUTH_KEY
    assert tag_ok(auth, datagram("session"))
    assert opened["token"] == (made(secret, 0x746F6B656E, 1, peer(p), nonce) or 1)


def test_a_tagged_read_and_its_first_answer(p):
    auth = Auth(parse_key(p["key"]))
    opened = unpack_header(datagram("session"))

    read = pack_header(OP_READ, 4096, 4096, 1, session=opened["session"],
                       token=opened["token"], auth=auth)
    assert read == datagram("read")
    # the tag: SipHash-2-4 of bytes 0-45, the 64-bit result stored big-endian
    assert read[TAG_OFFSET:] == siphash24(auth.key, read[:TAG_OFFSET]).to_bytes(8, "big")

    answer = unpack_header(datagram("read-answer"))
    assert (answer["op"], answer["status"], answer["session"], answer["token"],
            answer["seq"], answer["offset"], answer["length"], answer["reserved"]) == \
        (OP_READ | OP_REPLY, 0, opened["session"], opened["token"], 1, 4096, 1024, 0)
    assert tag_ok(auth, datagram("read-answer"))


def test_export_ids_are_siphash_of_what_names_the_device():
    key = b"netblk export" + bytes(3)
    lines = BLOCKS["export-id"]
    assert len(lines) == 3, lines
    for line in lines:
        kind, value, want = line.split()[:3]
        data = value.encode() if kind == "text" else bytes.fromhex(value)
        assert kind in ("text", "bytes"), line
        assert f"0x{siphash24(key, data):016x}" == want, line
    # the device number's 16 bytes: dev_t (major << 20 | minor), 4 zero bytes, first sector
    assert bytes.fromhex(lines[2].split()[1]) == struct.pack("<IIQ", 253 << 20 | 0, 0, 0)
