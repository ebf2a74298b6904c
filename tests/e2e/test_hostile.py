"""A hostile network, end to end: frames no socket would send -- forged
sources, wrong checksums, VLAN tags, other addresses on the same port --
sent with nbraw (ci/guest-files/nbraw.c) from one end of a veth pair in the
guest to an instance on the other end, nbv0 (veth's native XDP), and what
comes back read at nbv1.  Also what a NIC does under an instance: one that
cannot transmit, one that starts hiding VLAN tags, a lowered MTU, and the
instance's own netblk<port> device taken down by hand.

    nbv1 (no address; frames from 10.9.0.2, the "client")  <-->  nbv0 10.9.0.1/24

(nbtest.Rig: the client at nbv1.)
"""

from __future__ import annotations

import json
import os
import re
import time

import pytest

import rawframes as rf
from nbtest import Rig, ctl, host_elf, instances, refused, start, stats, wait_stopped
from netblk import HEADER_SIZE, OP_HELLO, OP_INFO, OP_READ, OP_REPLY, pack_header, unpack_header

_PROGRAMS = {f"/usr/sbin/{name}-full" if name == "ip" else f"/usr/sbin/{name}": p
             for name in ("ip", "ethtool") if (p := host_elf(name))}
GUEST_OPTIONS = {"modules": ["veth", "8021q", "macvlan"], "extra_programs": _PROGRAMS}
pytestmark = pytest.mark.skipif(len(_PROGRAMS) < 2, reason="needs iproute2's ip and ethtool "
                                "on the host (ci/install-deps.sh)")

P1, P2 = "/dev/nvme0n1p1", "/dev/nvme0n1p2"
PORT, SERVER_IP, CLIENT_IP = Rig.PORT, Rig.SERVER_IP, Rig.CLIENT_IP


@pytest.fixture
def rig(netblk):
    g = netblk
    g.check("ip-full link del nbv0 2>/dev/null; ip-full link add nbv0 type veth peer name nbv1 && "
            "ip link set nbv0 up && ip link set nbv1 up && ip addr add 10.9.0.1/24 dev nbv0 && "
            # veth strips VLAN tags from skbs it is handed: XDP must see them
            "ethtool -K nbv0 rxvlan off rx-vlan-stag-hw-parse off && "
            # veth transmits XDP frames only to a peer with NAPI, which GRO gives it
            "ethtool -K nbv1 gro on")
    yield Rig(g)
    g.run("killall nbudp sleep 2>/dev/null; netblkctl stop all >/dev/null 2>&1; "
          "ip-full link del nbv0 2>/dev/null; true", timeout=60)


# --------------------------------------------------------------------------
# sources, addresses, checksums
# --------------------------------------------------------------------------
def test_answers_from_the_nics_own_address(rig):
    g = rig.g
    start(g, P1, PORT, "dev=nbv0")
    r = rig.replies(rig.request(handle=7))
    assert len(r) == 1 and r[0]["op"] == OP_HELLO | OP_REPLY and r[0]["status"] == 0, r
    assert r[0]["handle"] == 7 and r[0]["token"], "a cookie for this nonce"
    assert len(r[0]["frame"].payload) == HEADER_SIZE, "no larger than the HELLO"
    f = r[0]["frame"]
    assert (f.src_mac, f.dst_mac) == (rig.server_mac, rig.client_mac)
    assert (f.src_ip, f.dst_ip, f.dst_port) == (SERVER_IP, CLIENT_IP, 40000)
    assert instances(g)[PORT]["driver"] == "veth"


def test_forged_sources_are_dropped_unanswered_and_counted(rig):
    g = rig.g
    start(g, P1, PORT, "dev=nbv0")
    before = stats(g, PORT)
    forged = [
        # one datagram that would broadcast 16 KiB of the disk to the segment
        rig.request(OP_READ, 0, 16384, src_mac="ff:ff:ff:ff:ff:ff"),
        rig.request(src_mac="01:00:5e:00:00:01"),
        rig.request(src_ip="0.1.2.3"),
        rig.request(src_ip="127.0.0.1"),
        rig.request(src_ip="224.0.0.1"),
        rig.request(src_ip="255.255.255.255"),
        rig.request(src_ip=SERVER_IP),
        rig.request(src_port=0),
    ]
    got = rig.exchange(*forged)
    assert not [p for p in got if p.src_port == PORT], got
    s = stats(g, PORT)
    assert s["dropped_source"] - before["dropped_source"] == len(forged), s
    assert s["bad"] - before["bad"] == len(forged) and s["requests"] == before["requests"], s
    assert s["frames_tx"] == before["frames_tx"]
    # and the real client is still answered
    assert len(rig.replies(rig.request())) == 1


def test_requests_not_to_the_nics_mac_are_dropped(rig):
    g = rig.g
    start(g, P1, PORT, "dev=nbv0")
    before = stats(g, PORT)
    assert rig.replies(rig.request(dst_mac="ff:ff:ff:ff:ff:ff")) == []
    s = stats(g, PORT)
    assert s["dropped_misaddressed"] - before["dropped_misaddressed"] == 1, s


def test_udp_checksums_are_verified_when_there(rig):
    g = rig.g
    start(g, P1, PORT, "dev=nbv0")
    before = stats(g, PORT)
    assert rig.replies(rig.request(udp_checksum="bad", handle=1)) == []
    good = rig.replies(rig.request(udp_checksum="good", handle=2),
                       rig.request(udp_checksum="none", handle=3))
    assert sorted(r["handle"] for r in good) == [2, 3], good
    s = stats(g, PORT)
    assert s["dropped_checksum"] - before["dropped_checksum"] == 1, s
    assert s["requests"] - before["requests"] == 2, s


def test_a_reply_the_network_still_holds_keeps_its_bytes(rig):
    """A READ's reply goes out from its slot's own page, and the slot serves
    again once each of the others (256) has.  A client slow to read -- here a
    packet socket that holds every reply unread -- still holds the page when
    its slot takes another READ: the page is left to it and a fresh one takes
    its place (pages_replaced), so each held reply carries its own offset's
    bytes, never a later READ's."""
    g = rig.g
    rounds, per_round, length, base = 3, 200, 512, 4 << 20
    reads = rounds * per_round
    data = os.urandom(reads * length)
    g.write_file("/tmp/held.data", data)
    g.check(f"dd if=/tmp/held.data of={P1} bs={length} seek={base // length} oflag=direct "
            f"conv=notrunc,fsync 2>&1 && rm /tmp/held.data")
    start(g, P1, PORT, "dev=nbv0")
    assert instances(g)[PORT]["slots"] == 256
    s = rig.open_session()

    def frame(i):
        f = rig.request(session=s)
        f.payload = pack_header(OP_READ, base + i * length, length, i + 1, session=s.id,
                                token=s.token)
        return f

    def check(frames) -> list[int]:
        """The READs (0-based) the replies answer, each with its own bytes."""
        seen = []
        for p in frames:
            if not p or p.src_port != PORT:
                continue
            h = unpack_header(p.payload)
            i = h["seq"] - 1
            assert h["status"] == 0 and h["data"] == data[i * length:(i + 1) * length], \
                f"READ {h['seq']}: status {h['status']}, not its own bytes"
            seen.append(i)
        return seen

    before = stats(g, PORT)
    g.check("rm -f /tmp/go /tmp/held /tmp/held.rc && mkfifo /tmp/go && "
            "(nbraw nbv1 -w 3000 -g /tmp/go > /tmp/held 2>&1; echo $? > /tmp/held.rc) "
            ">/dev/null 2>&1 &")
    for r in range(rounds):
        # a slot each at most, and a round served whole before the next
        check(rig.exchange(*(frame(r * per_round + i) for i in range(per_round)),
                                  wait_ms=200))
        deadline = time.monotonic() + 120
        while stats(g, PORT)["reads"] - before["reads"] < (r + 1) * per_round:
            assert time.monotonic() < deadline, f"round {r}: {stats(g, PORT)}"
            time.sleep(0.2)
    d = {k: stats(g, PORT)[k] - before[k] for k in ("reads", "busy", "pages_replaced")}
    assert d["reads"] == reads and d["busy"] == 0, d

    t0 = time.monotonic()
    g.check("echo go > /tmp/go; while [ ! -f /tmp/held.rc ]; do sleep 0.1; done", timeout=120)
    assert g.check("cat /tmp/held.rc").strip() == "0", g.check("cat /tmp/held")
    held = check(rf.parse(bytes.fromhex(line)) for line in g.check("cat /tmp/held").split())
    # a held reply its slot's next READ wrote over reads as that READ's
    assert sorted(held) == list(range(reads)), \
        f"the held socket's {len(held)} replies answer {len(set(held))} of the {reads} READs " \
        f"({time.monotonic() - t0:.1f} s after it began to read)"
    # the first READ on each slot found its page free; every later one, held
    assert reads - 256 <= d["pages_replaced"] <= reads, d


def test_the_port_on_another_address_goes_to_the_stack(rig):
    """A container's macvlan address on the same NIC, same UDP port: its
    datagrams reach its socket, not the instance."""
    g = rig.g
    start(g, P1, PORT, "dev=nbv0")
    g.check("unshare -n sleep 300 & echo $! > /tmp/ns.pid; sleep 0.5; "
            "ip-full link add mv0 link nbv0 type macvlan mode bridge && "
            "ip-full link set mv0 netns $(cat /tmp/ns.pid)")
    pid = g.check("cat /tmp/ns.pid").strip()
    g.check(f"nsenter -t {pid} -n sh -c 'ip link set mv0 up && ip addr add 10.9.0.7/24 dev mv0'")
    mv_mac = re.search(r"link/ether (\S+)", g.check(f"nsenter -t {pid} -n ip link show mv0")).group(1)
    g.check(f"(nsenter -t {pid} -n nbudp listen {PORT} -n 1 > /tmp/mv.out 2>/dev/null &); sleep 0.5")
    before = stats(g, PORT)
    rig.exchange(rig.request(dst_mac=mv_mac, dst_ip="10.9.0.7", payload=b"for the container"))
    assert g.check("cat /tmp/mv.out").strip() == "for the container"
    assert stats(g, PORT)["frames_rx"] == before["frames_rx"], "the instance took it"


# --------------------------------------------------------------------------
# VLANs
# --------------------------------------------------------------------------
def test_a_nic_that_strips_vlan_tags_is_refused(rig):
    g = rig.g
    g.check("ethtool -K nbv0 rxvlan on")
    refused(g, r"^netblkctl: nbv0 strips VLAN tags from XDP: ethtool -K nbv0 rxvlan off$",
            "start", P1, PORT, "dev=nbv0")
    g.check("ethtool -K nbv0 rxvlan off")
    start(g, P1, PORT, "dev=nbv0")
    # turned on under the instance: it stops, and says why
    g.check("ethtool -K nbv0 rxvlan on")
    wait_stopped(g, PORT, r"nbv0 strips VLAN tags from XDP now: ethtool -K nbv0 rxvlan off")


def test_tagged_requests_are_not_an_untagged_instances(rig):
    g = rig.g
    start(g, P1, PORT, "dev=nbv0")
    before = stats(g, PORT)
    assert rig.replies(rig.request(vlan=5)) == []
    assert stats(g, PORT)["frames_rx"] == before["frames_rx"], "steered a tagged frame"


@pytest.mark.parametrize("how", ["vlan=5", "dev=nbv0.5"])
def test_an_instance_serves_its_own_vlan_only(rig, how):
    g = rig.g
    g.check("ip-full link add link nbv0 name nbv0.5 type vlan id 5 && ip link set nbv0.5 up && "
            "ip addr add 10.9.5.1/24 dev nbv0.5")
    opts = ["ro", "vlan=5", "dev=nbv0"] if how == "vlan=5" else ["ro", "dev=nbv0.5"]
    out = start(g, P2, PORT, *opts)
    assert "on nbv0 vlan 5 10.9.5.1:" in out, out
    e = instances(g)[PORT]
    assert (e["vlan"], e["addr"], e["ifname"]) == (5, "10.9.5.1", "nbv0"), e
    to_vlan = dict(dst_ip="10.9.5.1", src_ip="10.9.5.2")
    r = rig.replies(rig.request(vlan=5, handle=5, **to_vlan))
    assert len(r) == 1 and r[0]["frame"].vlan == 5 and r[0]["status"] == 0, r
    assert rig.replies(rig.request(vlan=6, **to_vlan)) == []
    assert rig.replies(rig.request(**to_vlan)) == [], "answered an untagged request"
    assert stats(g, PORT)["dropped_vlan"] == 0, "the XDP program passes the others on"


def test_vlan_option_errors(rig):
    g = rig.g
    refused(g, r"nbv0 has no VLAN 9 device: ip link add link nbv0 type vlan id 9$",
            "start", P1, PORT, "dev=nbv0", "vlan=9")
    g.check("ip-full link add link nbv0 name nbv0.5 type vlan id 5 && ip link set nbv0.5 up && "
            "ip addr add 10.9.5.1/24 dev nbv0.5")
    refused(g, r"VLAN 5, not vlan=6", "start", P1, PORT, "dev=nbv0.5", "vlan=6")
    refused(g, r"vlan=.*1\.\.4094", "start", P1, PORT, "vlan=4095")


# --------------------------------------------------------------------------
# the allowlist
# --------------------------------------------------------------------------
def test_allowlist_is_enforced_in_xdp_and_counted(rig):
    g = rig.g
    start(g, P1, PORT, "dev=nbv0", "allow=10.9.0.2,10.9.1.0/24")
    e = instances(g)[PORT]
    assert e["allow"] == ["10.9.0.2", "10.9.1.0/24"], e
    before = e["stats"]
    assert len(rig.replies(rig.request(handle=1))) == 1
    assert len(rig.replies(rig.request(handle=2, src_ip="10.9.1.77"))) == 1
    assert rig.replies(rig.request(handle=3, src_ip="10.9.0.3"),
                       rig.request(handle=4, src_ip="10.9.2.1")) == []
    s = stats(g, PORT)
    assert s["not_allowed"] == 2, s
    # dropped by the XDP program: the module never saw them
    assert s["frames_rx"] - before["frames_rx"] == 2 and s["bad"] == before["bad"], s
    assert "sources: 10.9.0.2, 10.9.1.0/24 (2 others dropped)" in g.check("netblkctl list")
    prom = g.check("netblkctl stats --prometheus")
    assert re.search(r'netblk_not_allowed_total\{port="7100",[^}]*\} 2\n', prom), prom


def test_allowlist_of_a_new_instance_replaces_the_old(rig):
    g = rig.g
    start(g, P1, PORT, "dev=nbv0", "allow=10.9.0.3")
    g.check(f"netblkctl stop {PORT}")
    start(g, P1, PORT, "dev=nbv0")
    assert len(rig.replies(rig.request())) == 1, "the old allowlist still applies"
    assert stats(g, PORT)["not_allowed"] is None, "no allowlist: no count"


@pytest.mark.parametrize("allow, pattern", [
    ("10.9.0.3/24", r"host bits set: did you mean 10\.9\.0\.0/24\?"),
    ("10.9.0.0/33", r"prefix length.*0\.\.32"),
    ("10.9.0", r"bad address"),
    ("", r"needs a prefix"),
])
def test_allowlist_errors(netblk, allow, pattern):
    rc, out, err = ctl(netblk, "start", P1, PORT, f"allow={allow}")
    assert rc == 2 and re.search(pattern, err), (rc, err)


# --------------------------------------------------------------------------
# what the NIC does under an instance
# --------------------------------------------------------------------------
def test_a_nic_that_cannot_transmit_stops_the_instance(rig):
    """veth's ndo_xdp_xmit answers -ENXIO while its peer has no NAPI (no GRO,
    no XDP program), as mlx5 or i40e do on a CPU they have no XDP queue for:
    the instance stops and says why, rather than drop every reply."""
    g = rig.g
    start(g, P1, PORT, "dev=nbv0")
    # a session first, while the NIC can still answer (HELLO's answers come
    # from the receive path; what the worker sends is what is watched)
    session = rig.open_session()
    g.check("ethtool -K nbv1 gro off")
    hexed = rig.request(OP_INFO, handle=5, session=session).build().hex()
    g.check(f"for i in $(seq 20); do nbraw nbv1 -w 100 {hexed} >/dev/null; "
            f"netblkctl list | grep -q 'port {PORT}' || break; done", timeout=120)
    line = wait_stopped(g, PORT, r"nbv0 refused every reply for 1 s \(error -6\)")
    assert "cpu" in line, line


def test_the_handoff_device_is_the_instances(rig):
    g = rig.g
    start(g, P1, PORT, "dev=nbv0")
    g.check("unshare -n sleep 300 & echo $! > /tmp/ns.pid; sleep 0.5")
    rc, out = g.run(f"ip-full link set netblk{PORT} netns $(cat /tmp/ns.pid) 2>&1")
    assert rc != 0, "moved to another namespace"
    assert f"netblk{PORT}" in g.check("ls /sys/class/net")
    rc, out = g.run(f"ip link del netblk{PORT} 2>&1")
    assert rc != 0, "deleted by hand"
    assert len(rig.replies(rig.request())) == 1, "no longer serves"
    g.check(f"ip link set netblk{PORT} down")
    wait_stopped(g, PORT, rf"netblk{PORT}, the instance's own device, was taken down by hand")


def test_a_lowered_mtu_stops_the_instance(rig):
    g = rig.g
    start(g, P1, PORT, "dev=nbv0", "nic-loss=stop")
    g.check("(netblkctl watch --json --interval 5 --count 2 > /tmp/watch-mtu.out 2>&1 &); sleep 1")
    g.check("ip link set nbv0 mtu 1200")
    wait_stopped(g, PORT, r"nbv0's mtu fell to 1200, below the instance's 1500: start it with mtu=1200")
    g.check("sleep 5")
    events = [json.loads(l) for l in g.check("cat /tmp/watch-mtu.out").splitlines() if l.strip()]
    stops = [e for e in events if e["type"] == "event" and e["event"] == "stopped"]
    assert stops and stops[0]["reason"] == "nic_mtu", events
    start(g, P1, PORT, "dev=nbv0", "mtu=1200")
    r = rig.replies(rig.request(OP_READ, 0, 16384, handle=1, session=rig.open_session()))
    assert r and all(len(x["frame"].payload) + 28 <= 1200 for x in r), [len(x["data"]) for x in r]
