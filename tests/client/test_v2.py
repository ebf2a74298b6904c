"""Protocol v2 in the client (client/netblk/) against the fake instance:
SipHash-2-4's published vectors, sessions opened and opened again, resends
that the instance's replay window keeps from executing twice, keyed
instances, TRIM and WRITE_ZEROES, key files.

Run: /usr/bin/python3 -m pytest tests/client
"""

from __future__ import annotations

import errno
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "client"))
sys.path.insert(0, str(HERE))

import netblk  # noqa: E402
from netblk import (  # noqa: E402
    OP_HELLO, OP_READ, OP_TRIM, OP_WRITE, OP_WRITE_ZEROES, Auth, Client, NetblkError,
)
from netblk_fake import FakeServer, lose_first_answer  # noqa: E402

KEY = bytes(range(16))

# https://github.com/veorq/SipHash vectors.h: key 00..0f, message 00..(n-1)
SIPHASH_VECTORS = [
    0x726fdb47dd0e0e31, 0x74f839c593dc67fd, 0x0d6c8009d9a94f5a, 0x85676696d7fb7e2d,
    0xcf2794e0277187b7, 0x18765564cd99a68d, 0xcbc9466e58fee3ce, 0xab0200f58b01d137,
    0x93f5f5799a932462, 0x9e0082df0ba9e4b0, 0x7a5dbbc594ddb9f3, 0xf4b32f46226bada7,
    0x751e8fbc860ee5fb, 0x14ea5627c0843d90, 0xf723ca908e7af2ee, 0xa129ca6149be45e5,
    0x3f2acc7f57c29bdb, 0x699ae9f52cbe4794, 0x4bc1b3f0968dd39c, 0xbb6dc91da77961bd,
    0xbed65cf21aa2ee98, 0xd0f2cbb02e3b67c7, 0x93536795e3a33e88, 0xa80c038ccd5ccec8,
    0xb8ad50c6f649af94, 0xbce192de8a85b8ea, 0x17d835b85bbb15f3, 0x2f2e6163076bcfad,
    0xde4daaaca71dc9a5, 0xa6a2506687956571, 0xad87a3535c49ef28, 0x32d892fad841c342,
    0x7127512f72f27cce, 0xa7f32346f95978e3, 0x12e0b01abb051238, 0x15e034d40fa197ae,
    0x314dffbe0815a3b4, 0x027990f029623981, 0xcadcd4e59ef40c4d, 0x9abfd8766a33735c,
    0x0e3ea96b5304a7d0, 0xad0c42d6fc585992, 0x187306c89bc215a9, 0xd4a60abcf3792b95,
    0xf935451de4f21df2, 0xa9538f0419755787, 0xdb9acddff56ca510, 0xd06c98cd5c0975eb,
    0xe612a3cb9ecba951, 0xc766e62cfcadaf96, 0xee64435a9752fe72, 0xa192d576b245165a,
    0x0a8787bf8ecb74b2, 0x81b3e73d20b49b6f, 0x7fa8220ba3b2ecea, 0x245731c13ca42499,
    0xb78dbfaf3a8d83bd, 0xea1ad565322a1a0b, 0x60e61c23a3795013, 0x6606d7e446282b93,
    0x6ca4ecb15c5f91e1, 0x9f626da15c9625f3, 0xe51b38608ef25f57, 0x958a324ceb064572,
]


def test_siphash_published_vectors():
    for n, want in enumerate(SIPHASH_VECTORS):
        assert netblk.siphash24(KEY, bytes(range(n))) == want, n


def client_for(srv, **kw) -> Client:
    kw.setdefault("timeout", 5.0)
    kw.setdefault("tries", 4)
    return Client("127.0.0.1", srv.port, **kw)


def test_a_session_is_opened_once_then_every_request_carries_it():
    with FakeServer() as srv, client_for(srv) as c:
        c.write(0, b"a" * 4096)
        assert c.read(0, 4096) == b"a" * 4096
        hellos = srv.requests(OP_HELLO)
        assert len(hellos) == 2, "HELLO, then HELLO with the cookie"
        others = [r for r in srv.log if r.op != OP_HELLO]
        assert {r.session for r in others} == {c.session.id}
        seqs = [r.seq for r in others]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs) and seqs[0] == 1
        assert c.stats.sessions == 1


def test_a_busy_instance_answers_hello_eagain_and_the_client_tries_again():
    with FakeServer(busy_hellos=3) as srv, client_for(srv) as c:
        assert c.read(0, 512) == bytes(srv.disk[:512])
        assert c.stats.busy == 3 and c.stats.sessions == 1


def test_an_instance_started_again_gets_a_new_session_and_the_requests_again():
    with FakeServer() as srv, client_for(srv) as c:
        c.write(0, b"1" * 1024)
        first = c.session
        srv.forget_sessions()
        c.write(1024, b"2" * 1024)
        assert c.session != first and c.stats.sessions == 2
        assert c.stats.resent_in_new_session == 1
        assert bytes(srv.disk[1024:2048]) == b"2" * 1024
        refused = [r for r in srv.log if r.answer == errno.ENOTCONN]
        assert len(refused) == 1 and refused[0].session == first.id


def test_a_resend_of_an_answered_write_is_answered_and_not_executed_again():
    lose_first_write_answer = lose_first_answer(OP_WRITE)
    lost = lose_first_write_answer.lost
    with FakeServer(drop=lose_first_write_answer) as srv, client_for(srv, timeout=0.05) as c:
        c.write(0, b"w" * 4096)
        writes = srv.requests(OP_WRITE)
        assert len(writes) == 5, "four WRITEs, the first sent twice"
        assert sum(w.seq == lost[0] for w in writes) == 2, "the resend kept its number"
        assert srv.executed == 4 and srv.duplicates == 1


def test_never_a_request_outstanding_half_a_window_behind():
    # one READ unanswered for a while, the others answered: the client waits
    # rather than let the slow one fall out of the instance's replay window
    def slow_first(hdr, seen=set()):
        if hdr[8] == 0 and hdr[2] & 0x7f == 2 and len(seen) < 3:
            seen.add(len(seen))
            return True
        return False

    with FakeServer(size=8 << 20, drop=slow_first) as srv, client_for(srv, timeout=0.05) as c:
        c.read(0, 8 << 20, window=64)
        seqs = [r.seq for r in srv.log if r.op != OP_HELLO]
        first_answered = max(i for i, r in enumerate(srv.log) if r.op != OP_HELLO and
                             r.offset == 0)
        later = [r.seq for r in srv.log[:first_answered] if r.op != OP_HELLO]
        assert max(later) - min(seqs) <= netblk.SEQ_SPAN
        assert c.stats.retries >= 3
        assert not [r for r in srv.log if r.answer in (errno.ESTALE, errno.EOVERFLOW)]


def test_a_lost_datagram_is_sent_again_once_later_ones_are_answered():
    # Fast resend: the first WRITE's answer is lost; 600 more go by.  The
    # timer (30 s) never fires: the WRITE is sent again as soon as one sent a
    # window after it is answered, so the window never stops at SEQ_SPAN.
    lose_first_write_answer = lose_first_answer(OP_WRITE)
    lost = lose_first_write_answer.lost
    with FakeServer(size=1 << 20, drop=lose_first_write_answer) as srv, \
            client_for(srv, timeout=30.0, tries=2) as c:
        c.write(0, b"f" * (600 << 10), window=64)
        assert c.stats.fast_resends == 1 and c.stats.retries == 1
        writes = srv.requests(OP_WRITE)
        assert len(writes) == 601
        resent = [i for i, w in enumerate(writes) if w.seq == lost[0]]
        assert len(resent) == 2
        # sent again once a window (64) of later WRITEs was answered, well
        # before it could hold the others back (SEQ_SPAN)
        assert 64 <= resent[1] - resent[0] < netblk.SEQ_SPAN
        assert srv.executed == 600 and srv.duplicates == 1
        assert c.read(0, 1024) == b"f" * 1024


def test_answers_out_of_order_within_the_window_are_not_taken_for_loss():
    # the instance answers each window of 64 newest first: nothing is lost,
    # nothing may be sent twice
    with FakeServer(size=1 << 20, gate=64, reverse=True) as srv, \
            client_for(srv, timeout=30.0, tries=2) as c:
        c.write(0, b"r" * (640 << 10), window=64)
        assert c.stats.retries == 0 and c.stats.fast_resends == 0
        assert srv.executed == 640 and srv.duplicates == 0
        assert srv.max_in_use == 64


def test_keyed_instance():
    with FakeServer(key=KEY) as srv:
        with client_for(srv, auth=Auth(KEY)) as c:
            c.write(0, b"k" * 1024)
            assert c.read(0, 1024) == b"k" * 1024
        with client_for(srv) as c, pytest.raises(NetblkError) as ei:
            c.info()
        assert ei.value.status == errno.EKEYREJECTED
        assert "give its key (--key FILE)" in str(ei.value)
        with client_for(srv, auth=Auth(bytes(16))) as c, pytest.raises(NetblkError) as ei:
            c.info()
        assert "wrong key" in str(ei.value)
        with client_for(srv, auth=Auth(KEY, data=True)) as c, pytest.raises(NetblkError) as ei:
            c.info()
        assert "--auth header" in str(ei.value)


def test_a_keyed_session_ignores_an_untagged_ekeyrejected():
    """Anyone who can forge the instance's address can send a keyed client an
    untagged EKEYREJECTED: in a session it is ignored (counted), and the
    request completes with the instance's own, tagged, answer."""
    with FakeServer(key=KEY, forged_rejections=2) as srv, \
            client_for(srv, auth=Auth(KEY)) as c:
        c.write(0, b"f" * 1024)
        assert c.read(0, 1024) == b"f" * 1024
        assert c.stats.key_rejected == 2
        assert c.stats.errors == 0


def test_a_read_served_as_often_as_one_number_is_goes_again_under_a_new_one():
    """Every answer to the READ's first number is lost: the client resends it
    until the instance has served it SERVES_MAX times and says EALREADY, then
    asks again under a new number, whose answers come."""
    first: list[int] = []

    def lose_first_read(hdr) -> bool:
        if hdr[2] != OP_READ | 0x80:
            return False
        if not first:
            first.append(hdr[7])
        return hdr[7] == first[0] and hdr[3] == 0

    with FakeServer(drop=lose_first_read) as srv, \
            client_for(srv, timeout=0.05, tries=10) as c:
        want = bytes(srv.disk[4096:4096 + 4096])
        assert c.read(4096, 4096) == want
        assert srv.already == 1
        assert c.stats.renumbered == 1
        reads = [r for r in srv.requests(OP_READ)]
        assert [r.answer for r in reads].count(errno.EALREADY) == 1
        assert len({r.seq for r in reads}) == 2, "the second number is a new one"


def test_auth_full_covers_the_data():
    with FakeServer(key=KEY, auth_data=True) as srv, client_for(srv, auth=Auth(KEY, True)) as c:
        c.write(0, bytes(range(256)) * 4)
        assert c.read(0, 1024) == bytes(range(256)) * 4


def test_trim_and_write_zeroes():
    with FakeServer() as srv, client_for(srv) as c:
        c.write(0, b"z" * 8192)
        c.write_zeroes(0, 4096)
        c.trim(4096, 4096)
        assert bytes(srv.disk[:8192]) == bytes(8192)
        assert len(srv.requests(OP_WRITE_ZEROES)) == 1 and len(srv.requests(OP_TRIM)) == 1
        with pytest.raises(NetblkError, match="TRIM 100\\+512 refused: EINVAL"):
            c.trim(100, 512)
    with FakeServer(trim=False) as srv, client_for(srv) as c:
        with pytest.raises(NetblkError) as ei:
            c.trim(0, 512)
        assert ei.value.status == errno.EOPNOTSUPP and "does not offer TRIM" in str(ei.value)


def test_cli_trim_zero_and_key(tmp_path, capsys):
    key_file = tmp_path / "key"
    key_file.write_text(KEY.hex() + "\n")
    with FakeServer(key=KEY) as srv:
        srv.disk[0:4096] = b"x" * 4096
        rc = netblk.main(["127.0.0.1", str(srv.port), "zero", "0", "4k", "--key", str(key_file)])
        assert rc == 0 and bytes(srv.disk[:4096]) == bytes(4096)
        assert "zeroed 4096 bytes at 0" in capsys.readouterr().err
        rc = netblk.main(["127.0.0.1", str(srv.port), "--tries", "2", "info"])
        assert rc == 1 and "EKEYREJECTED" in capsys.readouterr().err
    bad = tmp_path / "bad"
    bad.write_text("0123")
    rc = netblk.main(["127.0.0.1", "7000", "info", "--key", str(bad)])
    assert rc == 2 and "4 hexadecimal digits" in capsys.readouterr().err
    rc = netblk.main(["127.0.0.1", "7000", "info", "--auth", "full"])
    assert rc == 2 and "--auth needs the key" in capsys.readouterr().err


@pytest.mark.parametrize("text,err", [
    ("00" * 16, None), (" 0001 0203\n0405060708090a0b0c0d0e0f ", None),
    ("00" * 15, "30 hexadecimal digits"), ("zz" * 16, "not all hexadecimal"),
])
def test_parse_key(text, err):
    if err is None:
        assert len(netblk.parse_key(text)) == 16
    else:
        with pytest.raises(ValueError, match=err):
            netblk.parse_key(text)
