"""Two NICs: one XDP program a NIC, shared by that NIC's instances; a port
is served once whatever the NIC; an instance answers on its own NIC's
address only; stopping one NIC's last instance takes only that NIC's
program away."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from guest import NIC, NIC_MODELS, free_udp_port
from nbtest import client, ctl, host_elf, instances
import netblk as nbc

ETH1_HOST_PORT = free_udp_port()
ETH1_PORT = 7100
GUEST_FORWARDS = [7000, 7001]
_BPFTOOL = host_elf("bpftool")  # the guest architecture's (nbtest)
GUEST_OPTIONS = {
    "qemu_args": ["-netdev", f"user,id=n1,net=10.0.3.0/24,hostfwd=udp:127.0.0.1:"
                             f"{ETH1_HOST_PORT}-:{ETH1_PORT}",
                  # the model of eth0's (NETBLK_NIC): its driver is the guest's
                  "-device", f"{NIC_MODELS[NIC][0]},netdev=n1,mac=52:54:00:12:34:57"],
    "extra_programs": {"/usr/sbin/bpftool": Path(_BPFTOOL)} if _BPFTOOL else {},
}
P1, P2 = "/dev/nvme0n1p1", "/dev/nvme0n1p2"


@pytest.fixture
def eth1(netblk):
    g = netblk
    g.check("ip link set eth1 up && (ip addr show eth1 | grep -q 10.0.3.15 || "
            "ip addr add 10.0.3.15/24 dev eth1)")
    return g


def xdp_programs(g) -> dict[str, str]:
    """NIC -> the id of the XDP program it runs in driver mode."""
    out = g.check("bpftool net show").split("xdp:", 1)[1].split("tc:", 1)[0]
    progs = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[1] == "driver":
            progs[parts[0].split("(")[0]] = parts[3]
    return progs


def wait_programs(g, nics, seconds=30.0):
    """The NICs running an XDP program come to be exactly `nics` (a program
    goes when its NIC's last instance has stopped)."""
    deadline = time.monotonic() + seconds
    while True:
        progs = xdp_programs(g)
        if set(progs) == set(nics):
            return progs
        if time.monotonic() > deadline:
            pytest.fail(f"XDP programs on {sorted(progs)}, not {sorted(nics)}, {seconds} s after "
                        f"the stop: {progs}")
        g.run("sleep 0.2")


@pytest.mark.skipif(not _BPFTOOL, reason="bpftool is a build dependency (ci/install-deps.sh)")
def test_one_program_a_nic_and_a_port_once(eth1):
    g = eth1
    g.check(f"netblkctl start {P1} 7000")
    g.check(f"netblkctl start {P2} 7001 ro")
    g.check(f"netblkctl start {P2} {ETH1_PORT} ro dev=eth1")
    progs = xdp_programs(g)
    assert set(progs) == {"eth0", "eth1"} and progs["eth0"] != progs["eth1"], progs

    # a port is served once, whatever the NIC
    rc, out, err = ctl(g, "start", P2, 7000, "ro", "dev=eth1")
    assert rc != 0 and "already served" in out + err, out + err

    listing = instances(g)
    assert listing[ETH1_PORT]["ifname"] == "eth1" and listing[ETH1_PORT]["addr"] == "10.0.3.15"

    # patient (timeout 2 s, 5 tries): answered in milliseconds, but a busy
    # host may make it long; eth1's forward is its own (qemu_args), at
    # ETH1_HOST_PORT, not one of the guest's host_port() knows
    info = nbc.Client("127.0.0.1", ETH1_HOST_PORT, timeout=2.0, tries=5).info()
    assert info.read_only and info.size == listing[ETH1_PORT]["size_bytes"]
    assert client(g, 7000, timeout=2.0, tries=5).info().slots == 256

    # stopping eth1's only instance takes eth1's program, and only it
    g.check(f"netblkctl stop {ETH1_PORT}")
    assert wait_programs(g, {"eth0"})["eth0"] == progs["eth0"]
    assert client(g, 7001, timeout=2.0, tries=5).info().read_only
    g.check("netblkctl stop all")
    assert wait_programs(g, set()) == {}


def test_an_instance_answers_only_on_its_own_nic(eth1):
    """A datagram for eth1's instance that arrives on eth0 (to eth0's
    address) is not that instance's: eth0's program has no entry for the
    port, and the port's holding socket swallows it."""
    g = eth1
    g.check(f"netblkctl start {P2} {ETH1_PORT} ro dev=eth1")
    g.check(f"netblkctl start {P1} 7000")
    c = client(g, 7001, timeout=0.3, tries=2)
    # 7001 is forwarded to eth0 but served by nobody: no answer
    with pytest.raises(nbc.NetblkTimeout):
        c.info()
    g.check(f"netblkctl stop {ETH1_PORT}")
    g.check(f"netblkctl start {P2} 7001 ro dev=eth1")
    with pytest.raises(nbc.NetblkTimeout):
        c.info()	# 7001 now served, but on eth1: eth0's datagrams are not its
    s = instances(g)[7001]["stats"]
    assert s["requests"] == 0 and s["frames_rx"] == 0, s
