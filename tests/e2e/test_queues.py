"""An instance of several queues (start queues=N): a worker a queue, each on a
CPU of its own with its own slots and sessions; a session is served by the
queue that opened it, whatever CPU its datagrams arrive on.

The NIC is a veth pair with two queues a side in the guest:

    nbv1 (frames from 10.9.0.2, sent by nbraw)  <-->  nbv0 10.9.0.1/24, queues=2

veth receives on the CPU that sends, so `taskset -c N nbraw` decides where a
datagram arrives -- as a NIC's RSS would put a flow on CPU N."""

from __future__ import annotations

import errno
import os
import re
import struct
from types import SimpleNamespace

import pytest

from nbtest import Rig, ctl, host_elf, instances, leaked, refused, start, stats
from netblk import OP_HELLO, OP_INFO, OP_READ, OP_REPLY, OP_WRITE, pack_header

_PROGRAMS = {f"/usr/sbin/{name}-full" if name == "ip" else f"/usr/sbin/{name}": p
             for name in ("ip", "ethtool") if (p := host_elf(name))}
GUEST_OPTIONS = {"modules": ["veth"], "extra_programs": _PROGRAMS}
pytestmark = pytest.mark.skipif(len(_PROGRAMS) < 2, reason="needs iproute2's ip and ethtool "
                                "on the host (ci/install-deps.sh)")

P1, P2 = "/dev/nvme0n1p1", "/dev/nvme0n1p2"
PORT = Rig.PORT


@pytest.fixture
def qrig(netblk):
    g = netblk
    g.check("ip-full link del nbv0 2>/dev/null; "
            "ip-full link add nbv0 numtxqueues 2 numrxqueues 2 type veth "
            "peer name nbv1 numtxqueues 2 numrxqueues 2 && "
            "ip link set nbv0 up && ip link set nbv1 up && ip addr add 10.9.0.1/24 dev nbv0 && "
            "ethtool -K nbv0 rxvlan off rx-vlan-stag-hw-parse off && ethtool -K nbv1 gro on")
    yield Rig(g)
    g.run("netblkctl stop all >/dev/null 2>&1; ip-full link del nbv0 2>/dev/null; true",
          timeout=60)


def workers(g, port):
    """{name: cpu} of the instance's worker threads (netblk/<port>-<queue>)."""
    out = {}
    for pid, name in re.findall(r"^\s*(\d+)\s+\S+\s+\[(netblk/[^\]]*)\]", g.check("ps"), re.M):
        if re.fullmatch(rf"netblk/{port}(-\d+)?", name):
            mask = int(g.check(f"taskset -p {pid}").split(":")[-1].strip(), 16)
            out[name] = mask.bit_length() - 1 if mask & (mask - 1) == 0 else None
    return out


def queue_of(session) -> int:
    """The queue a session id says it is of (docs/protocol.md): (id - 1) % queues."""
    return (session.id - 1) % 2


def write(rig, session, offset, data, seq, cpu):
    f = rig.request(session=session, src_port=session.port)
    f.payload = pack_header(OP_WRITE, offset, len(data), seq, session=session.id,
                            token=session.token) + data
    r = rig.replies(f, cpu=cpu)
    assert len(r) == 1 and r[0]["op"] == OP_WRITE | OP_REPLY, r
    return r[0]


def read(rig, session, offset, length, seq, cpu):
    """A READ of one datagram's data."""
    f = rig.request(session=session, src_port=session.port)
    f.payload = pack_header(OP_READ, offset, length, seq, session=session.id,
                            token=session.token)
    r = rig.replies(f, cpu=cpu)
    assert len(r) == 1 and r[0]["status"] == 0, r
    return r[0]["data"]


def test_two_queues_serve_each_session_on_its_own(qrig):
    """queues=2: two workers on two CPUs; sessions opened from each CPU land on
    different queues; a session's WRITE arriving on the other queue's CPU is
    served by its own queue (counted: steered) exactly once, and every byte
    reads back from either CPU."""
    g = qrig.g
    start(g, P1, PORT, "dev=nbv0", "queues=2")
    inst = instances(g)[PORT]
    assert inst["queues"] == 2, inst
    assert inst["slots"] == 2 * 256, inst
    w = workers(g, PORT)
    assert sorted(w) == [f"netblk/{PORT}-0", f"netblk/{PORT}-1"], w
    assert sorted(w.values()) == [0, 1], f"a CPU each: {w}"
    assert inst["cpu"] == w[f"netblk/{PORT}-0"], (inst["cpu"], w)

    a = qrig.open_session(cpu=0, src_port=40000)
    a.port = 40000
    b = qrig.open_session(cpu=1, src_port=40001)
    b.port = 40001
    assert {queue_of(a), queue_of(b)} == {0, 1}, (a, b)
    assert stats(g, PORT)["sessions_open"] == 2
    # INFO tells a client the queues, each with its own slots
    f = qrig.request(session=a, src_port=a.port)
    f.payload = pack_header(OP_INFO, 0, 0, 5, session=a.id, token=a.token)
    r = qrig.replies(f, cpu=0)
    assert len(r) == 1 and r[0]["status"] == 0 and len(r[0]["data"]) == 60, r
    slots, = struct.unpack_from(">I", r[0]["data"], 32)
    queues, = struct.unpack_from(">I", r[0]["data"], 56)
    assert (slots, queues) == (256, 2), (slots, queues)

    before = stats(g, PORT)
    data_a, data_b = os.urandom(512), os.urandom(512)
    # a's WRITE from b's CPU, b's from a's: each taken to its own queue
    assert write(qrig, a, 8192, data_a, 1, cpu=1)["status"] == 0
    assert write(qrig, b, 12288, data_b, 1, cpu=0)["status"] == 0
    # a's WRITE again (the network duplicated it), from its own CPU: answered, not done again
    assert write(qrig, a, 8192, data_a, 1, cpu=0)["status"] == 0
    after = stats(g, PORT)
    assert after["steered"] - before["steered"] == 2, (before, after)
    assert after["duplicates"] - before["duplicates"] == 1, (before, after)
    assert after["writes"] - before["writes"] == 2, (before, after)

    for cpu in (0, 1):
        assert read(qrig, a, 8192, 512, 10 + cpu, cpu=cpu) == data_a
        assert read(qrig, b, 12288, 512, 10 + cpu, cpu=cpu) == data_b
    # list says each queue's share: both carried traffic, a session each
    inst = instances(g)[PORT]
    ql = inst["queue_list"]
    assert [q["cpu"] for q in ql] == [w[f"netblk/{PORT}-0"], w[f"netblk/{PORT}-1"]], (ql, w)
    assert all(q["requests"] > 0 and q["sessions_open"] == 1 for q in ql), ql
    for k in ("requests", "steered", "frames_tx", "sessions_open"):
        assert sum(q[k] for q in ql) == inst["stats"][k], (k, ql, inst["stats"])
    rc, out, err = ctl(g, "list")
    assert rc == 0 and re.search(r"queues: 0 on cpu \d: requests \d+, sessions 1, steered \d+; "
                                 r"1 on cpu \d: requests \d+, sessions 1", out), (out, err)
    ctl(g, "stop", str(PORT))
    assert PORT not in instances(g)
    assert not workers(g, PORT)
    assert leaked(g) == {"leaked_slots": 0, "leaked_frames": 0}


def hello(rig, cpu, src_port, nonce=99, **kw) -> dict:
    """A HELLO with its cookie from `src_port`, arriving on `cpu`: the answer.
    The same `nonce` from the same port is the same HELLO (its cookie too)."""
    cookie = rig.replies(rig.request(handle=nonce, src_port=src_port, **kw), cpu=cpu)[0]["token"]
    f = rig.request(handle=nonce, src_port=src_port, **kw)
    f.payload = pack_header(OP_HELLO, 0, 0, nonce, token=cookie)
    r = rig.replies(f, cpu=cpu)
    assert len(r) == 1, r
    return r[0]


def test_per_source_holds_over_all_the_queues(qrig):
    """per-source=2 on two queues: one address's HELLOs land on both (RSS
    spreads its ports), and it holds two sessions in all -- not two on each
    queue (an instance of 64 queues would let one address take every
    session).  The third and fourth are refused EUSERS, counted, and another
    address still finds room."""
    g = qrig.g
    start(g, P1, PORT, "dev=nbv0", "queues=2", "per-source=2")
    assert instances(g)[PORT]["per_source"] == 2
    answers = [hello(qrig, cpu, 41000 + i) for i, cpu in enumerate((0, 1, 0, 1))]
    opened = [a for a in answers if a["status"] == 0 and a["session"]]
    assert len(opened) == 2, answers
    assert [a["status"] for a in answers if a not in opened] == [errno.EUSERS] * 2, answers
    s = stats(g, PORT)
    assert s["sessions_open"] == 2 and s["refused_eusers"] == 2, s
    r = hello(qrig, 1, 41010, src_ip="10.9.0.3")
    assert r["status"] == 0 and r["session"], r
    assert stats(g, PORT)["sessions_open"] == 3


def test_the_same_hello_on_the_other_queue_gets_the_same_session(qrig):
    """A HELLO whose answer was lost, sent again after the NIC's RSS table
    moved its flow to the other queue: the session it opened, not a second
    one (which would stay a minute and count against per-source=)."""
    g = qrig.g
    start(g, P1, PORT, "dev=nbv0", "queues=2")
    first = hello(qrig, 0, 42000, nonce=5)
    again = hello(qrig, 1, 42000, nonce=5)
    assert first["session"] and first["status"] == 0, first
    assert again["status"] == 0, again
    assert (again["session"], again["token"]) == (first["session"], first["token"])
    assert stats(g, PORT)["sessions_open"] == 1
    s = SimpleNamespace(id=first["session"], token=first["token"], port=42000)
    data = os.urandom(512)
    assert write(qrig, s, 4096, data, 1, cpu=1)["status"] == 0
    assert read(qrig, s, 4096, 512, 2, cpu=0) == data


def test_queues_default_to_the_nics_rx_queues(qrig):
    """Without queues=: as many as the NIC's RX queues, at most its XDP CPUs --
    2 on the two-queue veth, 1 on the guest's one-queue virtio NIC."""
    g = qrig.g
    start(g, P1, PORT, "dev=nbv0")
    start(g, P2, 7101)
    inst = instances(g)
    assert inst[PORT]["queues"] == 2 and inst[7101]["queues"] == 1, inst
    assert sorted(workers(g, PORT)) == [f"netblk/{PORT}-0", f"netblk/{PORT}-1"]
    assert list(workers(g, 7101)) == ["netblk/7101"]
    # what runs is said, and saved, when more than one
    rc, out, err = ctl(g, "list")
    assert rc == 0 and out.count("options: queues=2") == 1 and "queues=1" not in out, out
    saved = g.check("netblkctl save /tmp/q.conf && cat /tmp/q.conf")
    assert saved.count("queues=") == 1 and "queues=2" in saved, saved


def test_queues_refused(qrig):
    """More queues than CPUs to put their workers on, and numbers out of range,
    are refused with what to change."""
    g = qrig.g
    refused(g, r"^netblkctl: queues=3: nbv0 sends XDP from 2 CPUs \(0-1\): at most queues=2$",
            "start", P1, PORT, "dev=nbv0", "queues=3")
    refused(g, r"bad queues= '65'", "start", P1, PORT, "dev=nbv0", "queues=65")
    refused(g, r"bad queues= '0'", "start", P1, PORT, "dev=nbv0", "queues=0")
    assert PORT not in instances(g)


def test_cpu_names_the_first_queues(qrig):
    """cpu= is the first queue's CPU; the others take the CPUs left."""
    g = qrig.g
    start(g, P1, PORT, "dev=nbv0", "queues=2", "cpu=0")
    assert instances(g)[PORT]["cpu"] == 0
    assert workers(g, PORT) == {f"netblk/{PORT}-0": 0, f"netblk/{PORT}-1": 1}


def test_stop_under_load_drains_every_queue(qrig):
    """Both queues busy (READs and WRITEs of a session on each, sent from both
    CPUs without pause) when the instance stops: every worker drains and
    leaves, nothing is leaked, the port is free for a new instance at once."""
    g = qrig.g
    start(g, P1, PORT, "dev=nbv0", "queues=2")
    sessions = []
    for cpu in (0, 1):
        s = qrig.open_session(cpu=cpu, src_port=40000 + cpu)
        s.port = 40000 + cpu
        sessions.append(s)
    assert {queue_of(s) for s in sessions} == {0, 1}
    loops = []
    for cpu, s in enumerate(sessions):
        frames = []
        for i in range(16):
            f = qrig.request(session=s, src_port=s.port)
            if i % 2:
                f.payload = pack_header(OP_WRITE, 4096 * i, 512, 100 + i, session=s.id,
                                        token=s.token) + bytes(512)
            else:
                f.payload = pack_header(OP_READ, 4096 * i, 4096, 100 + i, session=s.id,
                                        token=s.token)
            frames.append(f.build().hex())
        # both sessions' datagrams from both CPUs: each queue serves its own and steers the other's
        for on in (0, 1):
            loops.append(f"(while :; do taskset -c {on} nbraw nbv1 -w 1 {' '.join(frames)}; "
                         f"done) >/dev/null 2>&1 & echo $! >> /tmp/qloops;")
    g.check("rm -f /tmp/qloops; " + " ".join(loops) + " sleep 3")
    busy = stats(g, PORT)
    assert busy["requests"] > 50 and busy["steered"] > 0, busy
    ctl(g, "stop", str(PORT))
    g.check("kill $(cat /tmp/qloops); sleep 0.2; killall nbraw 2>/dev/null; true")
    assert PORT not in instances(g)
    assert not workers(g, PORT)
    assert leaked(g) == {"leaked_slots": 0, "leaked_frames": 0}
    start(g, P1, PORT, "dev=nbv0", "queues=2")
