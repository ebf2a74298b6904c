"""Two guests on a private link (ci/guest.py link_args: QEMU's dgram netdev
between them over 127.0.0.1): one serves a partition on its link NIC, the
other is a client host of its own.  The client host runs netblk-load (a
remote Linux host reads and writes the disk through XDP, and no byte is
copied) and the block-device client: `netblkctl attach` gives it
/dev/netblk0, with a file system on it, through server restarts."""

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
              extra_programs={"/usr/bin/netblk-load": LOAD, "/sbin/mkfs.ext4": Path("/usr/sbin/mkfs.ext4"),
                              "/sbin/e2fsck": Path("/usr/sbin/e2fsck"),
                              "/usr/bin/fio": Path("/usr/bin/fio")},
              modules=["ext4", "crc32c_generic"])
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


# ---- the block-device client: /dev/netblk0 on the client host ----

DEV = "/dev/netblk0"


@pytest.fixture
def attached(server, client_host):
    """An instance on the server's link NIC and the client host's module
    loaded; everything detached and stopped afterwards."""
    server.check(f"netblkctl start /dev/nvme0n1p1 {PORT} dev=eth1")
    client_host.check("grep -q '^netblk ' /proc/modules || modprobe netblk")
    yield client_host
    client_host.run("umount /mnt 2>/dev/null; netblkctl detach all --force", timeout=60)
    server.run("netblkctl stop all", timeout=60)


def attached_stats(client: Guest) -> str:
    return client.check("netblkctl list")


def test_attach_mkfs_mount_and_every_file_reads_back_after_fsck(attached):
    c = attached
    out = c.check(f"netblkctl attach {SERVER_IP} {PORT}", timeout=60)
    assert f"{DEV} is {SERVER_IP}:{PORT} (256 MiB, read-write)" in out, out
    assert c.check("cat /sys/block/netblk0/size").strip() == str((256 << 20) // 512)
    c.check(f"mkfs.ext4 -q -F {DEV}", timeout=300)
    c.check(f"mkdir -p /mnt && mount -t ext4 {DEV} /mnt", timeout=60)
    # a tree of files of assorted sizes, their checksums kept off the device
    c.check("mkdir -p /mnt/a/b /mnt/c && i=0; for s in 1 7 64 300 1024 4096; do "
            "i=$((i+1)); dd if=/dev/urandom of=/mnt/a/f$i bs=1k count=$s 2>/dev/null; "
            "dd if=/dev/urandom of=/mnt/a/b/g$i bs=512 count=$((s+3)) 2>/dev/null; "
            "echo hello$i > /mnt/c/h$i; done && "
            "cd /mnt && find . -type f | sort | xargs sha256sum > /tmp/sums && sync",
            timeout=300)
    # mounted: detach is refused, and says what to do
    rc, out = c.run("netblkctl detach netblk0", timeout=60)
    assert rc == 1 and "is open" in out and "--force" in out, out
    c.check("umount /mnt", timeout=120)
    rc, out = c.run(f"e2fsck -f -n {DEV}", timeout=300)
    assert rc == 0, out
    c.check(f"mount -t ext4 {DEV} /mnt && cd /mnt && sha256sum -c /tmp/sums >/dev/null && "
            "cd / && umount /mnt", timeout=300)
    text = attached_stats(c)
    assert "/dev/netblk0: " + SERVER_IP in text, text
    assert "write data sent in place 0 B" not in text, text
    c.check("netblkctl detach netblk0", timeout=60)
    assert not c.run(f"test -e {DEV}")[0] == 0
    assert "netblk0" not in c.check("cat /proc/partitions")


def test_a_read_only_attach_reads_and_refuses_writes(attached):
    c = attached
    c.check(f"netblkctl attach {SERVER_IP} {PORT}", timeout=60)
    c.check(f"dd if=/dev/urandom of=/tmp/src bs=64k count=16 2>/dev/null && "
            f"dd if=/tmp/src of={DEV} bs=64k oflag=direct 2>/dev/null && "
            "netblkctl detach netblk0", timeout=120)
    out = c.check(f"netblkctl attach {SERVER_IP} {PORT} ro", timeout=60)
    assert "read-only" in out, out
    assert c.check("cat /sys/block/netblk0/ro").strip() == "1"
    c.check(f"dd if={DEV} bs=64k count=16 2>/dev/null | cmp /tmp/src -", timeout=120)
    rc, out = c.run(f"dd if=/tmp/src of={DEV} bs=64k count=1 oflag=direct", timeout=60)
    assert rc != 0, out


def test_io_waits_out_a_server_restart_and_goes_on(attached, server):
    c = attached
    c.check(f"netblkctl attach {SERVER_IP} {PORT}", timeout=60)
    c.check("dd if=/dev/urandom of=/tmp/src bs=1M count=4 2>/dev/null")
    # the writer runs while the instance is stopped and started again
    c.check(f"(dd if=/tmp/src of={DEV} bs=4k oflag=direct 2>/tmp/dd.err; echo $? > /tmp/dd.rc) "
            "> /dev/null 2>&1 &")
    server.check(f"sleep 1; netblkctl stop {PORT}; sleep 3; "
                 f"netblkctl start /dev/nvme0n1p1 {PORT} dev=eth1", timeout=60)
    c.check("for i in $(seq 600); do test -s /tmp/dd.rc && break; sleep 0.5; done; "
            "cat /tmp/dd.rc /tmp/dd.err; test $(cat /tmp/dd.rc) = 0", timeout=400)
    c.check(f"dd if={DEV} bs=1M count=4 2>/dev/null | cmp /tmp/src -", timeout=120)
    text = attached_stats(c)
    assert "sessions opened 1 " not in text, text  # a second session, after the restart


def test_with_a_timeout_io_fails_eio_while_the_server_is_away(attached, server):
    c = attached
    c.check(f"netblkctl attach {SERVER_IP} {PORT} timeout=5", timeout=60)
    server.check(f"netblkctl stop {PORT}")
    rc, out = c.run(f"time dd if=/dev/zero of={DEV} bs=4k count=1 oflag=direct", timeout=120)
    assert rc != 0 and ("Input/output error" in out or "I/O error" in out), out
    c.check("netblkctl detach netblk0", timeout=60)


def test_attach_refuses_a_server_that_does_not_answer(attached):
    rc, out = attached.run(f"netblkctl attach {SERVER_IP} {PORT + 1}", timeout=60)
    assert rc == 1 and "did not answer INFO" in out, out
    rc, out = attached.run(f"netblkctl attach {SERVER_IP} {PORT} queue-depth=0", timeout=60)
    assert rc == 2 and "queue-depth" in out, out
    rc, out = attached.run("netblkctl detach netblk7", timeout=60)
    assert rc == 1 and "not attached" in out, out
