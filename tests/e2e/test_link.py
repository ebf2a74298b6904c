"""Two guests on a private link (ci/guest.py link_args: QEMU's dgram netdev
between them over 127.0.0.1): one serves a partition on its link NIC, the
other is a client host of its own -- the test bench the block-device client
(issue 10) grows on.  Here the client host runs netblk-load: a remote
Linux host reads and writes the disk through XDP, and no byte is copied."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "ci"))

from guest import Guest, GuestError, free_udp_port, kernel_trouble, link_args  # noqa: E402

LOAD = ROOT / "tools" / "netblk-load" / "netblk-load"
SERVER_END, CLIENT_END = free_udp_port(), free_udp_port()
SERVER_IP, CLIENT_IP = "10.9.0.1", "10.9.0.2"
PORT = 7000
GUEST_OPTIONS = {"qemu_args": link_args(SERVER_END, CLIENT_END, "52:54:00:09:00:01")}


def link_up(g: Guest, ip: str) -> None:
    g.check(f"ip link set eth1 up && (ip addr show eth1 | grep -q '{ip}/' || "
            f"ip addr add {ip}/24 dev eth1)")


@pytest.fixture(scope="module")
def client_host():
    if not LOAD.exists():
        pytest.fail(f"not built: {LOAD.relative_to(ROOT)} -- run `make load`", pytrace=False)
    g = Guest("link-client", qemu_args=link_args(CLIENT_END, SERVER_END, "52:54:00:09:00:02"),
              extra_programs={"/usr/bin/netblk-load": LOAD})
    try:
        g.start()
    except GuestError as e:
        pytest.fail(str(e), pytrace=False)
    link_up(g, CLIENT_IP)
    yield g
    g.shutdown()
    trouble = kernel_trouble(g.console_log.read_text(errors="replace"))
    assert not trouble, f"the client guest's kernel reported trouble ({g.console_log}):\n" + \
        "\n".join(trouble[:40])


@pytest.fixture
def server(netblk):
    link_up(netblk, SERVER_IP)
    return netblk


def load(client: Guest, *args: str) -> dict:
    rc, out = client.run(f"netblk-load {SERVER_IP} {PORT} --json {' '.join(args)}", timeout=120)
    assert rc == 0, out
    return json.loads(out[out.index("{"):])


def test_the_link_carries_ip_both_ways(server, client_host):
    client_host.check(f"ping -c 3 -W 10 {SERVER_IP}", timeout=60)
    server.check(f"ping -c 3 -W 10 {CLIENT_IP}", timeout=60)


def test_a_remote_host_reads_and_writes_through_xdp_without_a_copy(server, client_host):
    server.check(f"netblkctl start /dev/nvme0n1p1 {PORT} dev=eth1")
    w = load(client_host, "--mode randwrite --size 4k --range 0:16m --seconds 2 --seed 3")
    r = load(client_host, "--mode randread --size 4k --range 0:16m --seconds 2 --seed 4")
    for out in (w, r):
        assert out["ops"] > 0 and out["errors"] == 0, out
    inst = [i for i in json.loads(server.check("netblkctl list --json")) if i["port"] == PORT][0]
    st = inst["stats"]
    assert inst["ifname"] == "eth1"
    assert st["bytes_copied"] == 0
    assert st["bytes_zerocopy"] >= (w["ops"] + r["ops"]) * 4096
    assert st["sessions_opened"] >= 2  # one a netblk-load run
