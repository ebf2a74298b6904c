"""Two guests on a private link (ci/guest.py link_args: QEMU's dgram netdev
between them over 127.0.0.1): one serves a partition on its link NIC, the
other is a client host of its own.  The client host runs netblk-load (a
remote Linux host reads and writes the disk through XDP, and no byte is
copied) and the block-device client: `netblkctl attach` gives it
/dev/netblk0, with a file system on it, through server restarts.

The client host's link NIC is NETBLK_NIC's model; the server's is virtio-net
wherever it runs multi-buffer XDP (6.12), whatever NETBLK_NIC says.  So the
vmxnet3 pass pairs a client whose NIC takes pages (scatter-gather: WRITE
data leaves from the request's own pages) with a server at MTU 9000 -- the
pair where a datagram in more pieces than an skb holds was refused -- and
the jumbo tests run there too.  vmxnet3's XDP on the server is the
single-guest modules' (eth0), and this module's with
NETBLK_LINK_SERVER_NIC=vmxnet3."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "ci"))

from guest import (ARCH, NIC, NIC_MODELS, TCG_THREADS_PAIR, Guest, GuestError,  # noqa: E402
                   free_udp_port, kernel_has, kernel_trouble, link_args, multibuffer_xdp)
from nbtest import delta, host_elf  # noqa: E402

LOAD = (ROOT / "build" / "arm64" / "netblk-load" if ARCH == "arm64"
        else ROOT / "tools" / "netblk-load" / "netblk-load")


def prog(path: str) -> Path:
    """This host's @path, or on an arm64 guest the arm64 program of that name
    (build/sysroot-arm64)."""
    return Path(path) if ARCH == "amd64" else (host_elf(Path(path).name) or Path(path))


SERVER_END, CLIENT_END = free_udp_port(), free_udp_port()
SERVER_IP, CLIENT_IP = "10.9.0.1", "10.9.0.2"
PORT = 7000
TC = "/usr/sbin/tc.iproute2"  # iproute2's: busybox's tc has no netem or filters
# each end's link NIC (eth1): the module docstring says why they may differ;
# NETBLK_LINK_SERVER_NIC=vmxnet3 puts the server's link on vmxnet3 too
CLIENT_NIC = NIC
SERVER_LINK_NIC = (os.environ.get("NETBLK_LINK_SERVER_NIC") or
                   ("virtio" if multibuffer_xdp("virtio") else NIC))
if SERVER_LINK_NIC not in NIC_MODELS:
    raise SystemExit(f"NETBLK_LINK_SERVER_NIC={SERVER_LINK_NIC!r}: one of {', '.join(NIC_MODELS)}")
# dmsetup (installed by ci/install-deps.sh): a device that grows behind a restart
# both guests' vCPUs take turns on a host thread (ci/guest.py TCG_THREADS_PAIR)
GUEST_OPTIONS = {"qemu_args": link_args(SERVER_END, CLIENT_END, "52:54:00:09:00:01",
                                        model=NIC_MODELS[SERVER_LINK_NIC][0]),
                 "modules": [NIC_MODELS[SERVER_LINK_NIC][1]],
                 "extra_programs": {"/usr/sbin/dmsetup": prog("/usr/sbin/dmsetup")},
                 "tcg_threads": TCG_THREADS_PAIR}
# what the client host's tests use; built in on the debug kernel (ci/debug-kernel.config)
NETEM_MODULES = ["sch_netem", "sch_ingress", "ifb", "act_mirred", "cls_matchall"]
CLIENT_MODULES = ["ext4", "crc32c_generic", "raid1"] + NETEM_MODULES


def need_modules(*names: str) -> None:
    missing = [m for m in names if not kernel_has(m)]
    if missing:
        pytest.fail(f"the guest kernel has no {', '.join(missing)} (a debug kernel built before "
                    f"ci/debug-kernel.config had them: ci/debug-kernel.sh rebuilds it)",
                    pytrace=False)


def link_up(g: Guest, ip: str, nic: str = CLIENT_NIC) -> None:
    """eth1 up with its address.  Its driver is loaded after eth0's (the
    guest's init loads eth0's alone), so where the two differ the link NIC
    is still eth1."""
    g.check(f"modprobe {NIC_MODELS[nic][1]} && for i in $(seq 50); do "
            "[ -e /sys/class/net/eth1 ] && break; sleep 0.1; done && "
            f"ip link set eth1 up && (ip addr show eth1 | grep -q '{ip}/' || "
            f"ip addr add {ip}/24 dev eth1)")


@pytest.fixture(scope="module")
def client_host():
    if not LOAD.exists():
        pytest.fail(f"not built: {LOAD.relative_to(ROOT)} -- run `make load` "
                    f"(arm64: `make load-arm64`)", pytrace=False)
    g = Guest("link-client", qemu_args=link_args(CLIENT_END, SERVER_END, "52:54:00:09:00:02",
                                                   model=NIC_MODELS[CLIENT_NIC][0]),
              extra_programs={"/usr/bin/netblk-load": LOAD, "/sbin/mkfs.ext4": prog("/usr/sbin/mkfs.ext4"),
                              "/sbin/e2fsck": prog("/usr/sbin/e2fsck"),
                              "/usr/bin/fio": prog("/usr/bin/fio"),
                              TC: prog("/sbin/tc"), "/sbin/mdadm": prog("/usr/sbin/mdadm")},
              modules=[m for m in CLIENT_MODULES if kernel_has(m)], tcg_threads=TCG_THREADS_PAIR)
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
    link_up(netblk, SERVER_IP, SERVER_LINK_NIC)
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
    # a 4 KiB READ is 4 datagrams: one disk I/O where the NIC sends a frame's
    # data from a page of its own (virtio-net from 6.3), else one a datagram
    if multibuffer_xdp(SERVER_LINK_NIC):
        assert st["reads_gathered"] >= r["ops"], st
    else:
        assert st["reads_gathered"] == 0, st
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
    # a writer that outlived its disk may have left a regular file at its name,
    # and the next /dev/netblk0 could not be made
    client_host.run("umount /mnt 2>/dev/null; netblkctl detach all --force; "
                    "for f in /dev/netblk*; do [ -b $f ] || rm -f $f; done", timeout=60)
    server.run("netblkctl stop all", timeout=60)


def attached_stats(client: Guest) -> str:
    return client.check("netblkctl list")


def attached_json(client: Guest, disk: str = "netblk0") -> dict:
    for dev in json.loads(client.check("netblkctl list --attached --json")):
        if dev["disk"] == disk:
            return dev
    raise AssertionError(f"{disk} is not in netblkctl list --attached --json")


def gso_sends(client: Guest) -> bool:
    """Whether the client's kernel segments a UDP GSO send for the link NIC:
    6.12 for any NIC, 6.1 only for one with checksum offload (not virtio-net
    on QEMU's dgram netdev)."""
    return CLIENT_NIC == "vmxnet3" or not client.check("uname -r").startswith("6.1.")


def wait_reachable(client: Guest, disk: str) -> None:
    """Until the device has heard from its server again (a HELLO every 2 s
    at the most looks for it)."""
    client.check(f"for i in $(seq 120); do netblkctl list --attached --json | "
                 f"grep -q '\"disk\": \"{disk}\".*\"unreachable\": 0' && exit 0; "
                 "sleep 0.5; done; exit 1", timeout=120)


def test_attach_mkfs_mount_and_every_file_reads_back_after_fsck(attached):
    c = attached
    out = c.check(f"netblkctl attach {SERVER_IP} {PORT}", timeout=60)
    assert f"{DEV} is {SERVER_IP}:{PORT} (256 MiB, read-write)" in out, out
    assert c.check("cat /sys/block/netblk0/size").strip() == str((256 << 20) // 512)
    c.check(f"mkfs.ext4 -q -F {DEV}", timeout=300)
    c.check(f"mkdir -p /mnt && mount -t ext4 {DEV} /mnt", timeout=60)
    # a tree of files of assorted sizes, their checksums kept off the device
    c.check("mkdir -p /mnt/a/b /mnt/c && i=0; for s in 1 7 64 300 1024; do "
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
    dev = json.loads(c.check("netblkctl list --attached --json"))[0]
    assert dev["disk"] == "netblk0" and dev["addr"] == SERVER_IP and dev["port"] == PORT, dev
    st = dev["stats"]
    assert st["errors"] == 0 and st["tx_errors"] == 0, dev
    # WRITE data leaves from the requests' pages where the link NIC takes
    # pages (scatter-gather: vmxnet3); virtio-net on QEMU's dgram netdev
    # offers no checksum offload, so no scatter-gather, and the socket
    # copies -- the counters must say which, not claim what did not happen
    if CLIENT_NIC == "vmxnet3":
        assert st["bytes_in_place"] > 1 << 20, dev
    else:
        assert st["bytes_in_place"] == 0 and st["bytes_copied"] > 1 << 20, dev
    # a multi-datagram WRITE goes down in one UDP GSO send
    assert (st["tx_batched"] > 0) if gso_sends(c) else st["tx_batched"] == 0, json.dumps(st)
    assert dev["latency"]["count"] > 0 and dev["stats"]["completed"] > 0, dev
    prom = c.check("netblkctl stats --prometheus")
    assert f'netblk_host_requests_total{{disk="netblk0",server="{SERVER_IP}:{PORT}"}}' in prom
    c.check("netblkctl detach netblk0", timeout=60)
    assert not c.run(f"test -e {DEV}")[0] == 0
    assert "netblk0" not in c.check("cat /proc/partitions")


def test_a_large_write_leaves_in_gso_sends_and_reads_back(attached):
    """A 128 KiB direct write is 128 datagrams of 1 KiB: they leave in UDP
    GSO sends where the kernel segments for this NIC, and where the NIC
    takes pages their data goes from the request's own pages -- in runs
    small enough for one skb's frags, so that no send is refused and redone
    one datagram at a time."""
    c = attached
    c.check(f"netblkctl attach {SERVER_IP} {PORT}", timeout=60)
    size = 1 << 20  # 1024 datagrams: enough to tell runs from single sends
    c.check(f"head -c {size} /dev/urandom > /tmp/big")
    before = attached_json(c)["stats"]
    c.check(f"dd if=/tmp/big of={DEV} bs=128k oflag=direct 2>/dev/null", timeout=300)
    after = attached_json(c)["stats"]
    c.check(f"dd if={DEV} bs=128k count={size >> 17} iflag=direct 2>/dev/null | cmp /tmp/big -",
            timeout=300)
    d = delta(after, before, "sends", "tx_batched", "tx_errors", "bytes_in_place",
              "bytes_copied", "header_pages")
    assert d["sends"] >= size // 1024 and d["tx_errors"] == 0, d
    # a WRITE's header takes 64 bytes of a page-frag page: 512 a 32 KiB page,
    # 64 a 4 KiB one (no order-3 page to be had).  6.1 took the alignment
    # for a mask, and served two a page before it took another (GFP_ATOMIC).
    print(f"{d['header_pages']} header pages for {d['sends']} datagrams")
    assert d["header_pages"] <= d["sends"] // 32, d
    # resends after a loss may go alone; nearly all the rest went batched
    assert (d["tx_batched"] >= 0.9 * d["sends"]) if gso_sends(c) else d["tx_batched"] == 0, d
    if CLIENT_NIC == "vmxnet3":
        assert d["bytes_in_place"] >= size and d["bytes_copied"] == 0, d
    else:
        assert d["bytes_copied"] >= size and d["bytes_in_place"] == 0, d


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
    # it writes nothing, so it flushes nothing: an fsync sends no FLUSH, which
    # an instance started read-only again later would refuse EROFS
    q = "/sys/block/netblk0/queue"
    assert c.check(f"cat {q}/write_cache {q}/fua").split() == ["write", "through", "0"]
    sends = attached_json(c)["stats"]["sends"]
    rc, out = c.run(f"sync {DEV}", timeout=60)
    assert rc == 0 and attached_json(c)["stats"]["sends"] == sends, out


def test_an_attachment_to_a_read_only_instance_sends_it_nothing_that_writes(attached, server):
    c = attached
    server.check(f"netblkctl stop {PORT} && netblkctl start /dev/nvme0n1p1 {PORT} dev=eth1 ro",
                 timeout=60)
    out = c.check(f"netblkctl attach {SERVER_IP} {PORT}", timeout=60)
    assert "read-only" in out, out
    # an fsync of the device (busybox sync FILE) sends no FLUSH the instance refuses EROFS
    rc, out = c.run(f"sync {DEV}", timeout=60)
    st = attached_json(c)["stats"]
    assert rc == 0 and st["errors"] == 0 and st["refused"] == 0, (out, st)
    # the instance offers no write cache, FUA, TRIM or WRITE_ZEROES: the disk has none
    q = "/sys/block/netblk0/queue"
    got = c.check(f"cat {q}/write_cache {q}/fua {q}/discard_max_bytes "
                  f"{q}/write_zeroes_max_bytes").split("\n")
    assert [v.strip() for v in got[:4]] == ["write through", "0", "0", "0"], got


FIO_VERIFY = ("fio --name=v --filename=/dev/netblk0 --ioengine=libaio --direct=1 "
              "--rw=randwrite --bs=4k --iodepth=32 --size=8m --verify=crc32c --verify_fatal=1 "
              "--do_verify=1 --randrepeat=0 --output-format=terse")


def test_fio_waits_out_a_server_restart_and_a_module_reload(attached, server):
    c = attached
    c.check(f"netblkctl attach {SERVER_IP} {PORT}", timeout=60)
    # fio writes and verifies while the instance is stopped and started again,
    # then while the server's module is reloaded under it
    c.check(f"rm -f /tmp/fio.rc; ({FIO_VERIFY} --loops=4 >/tmp/fio.out 2>&1; echo $? > /tmp/fio.rc) "
            "> /dev/null 2>&1 &")
    server.check(f"sleep 2; netblkctl stop {PORT}; sleep 3; "
                 f"netblkctl start /dev/nvme0n1p1 {PORT} dev=eth1; sleep 3; "
                 f"rmmod netblk && sleep 2 && modprobe netblk && "
                 f"netblkctl start /dev/nvme0n1p1 {PORT} dev=eth1", timeout=120)
    # fio's exit status: 0 only if every block read back as written (--verify_fatal)
    c.check("for i in $(seq 1200); do test -s /tmp/fio.rc && break; sleep 0.5; done; "
            "cat /tmp/fio.rc /tmp/fio.out; test $(cat /tmp/fio.rc) = 0", timeout=700)
    st = attached_json(c)["stats"]
    assert st["sessions_opened"] >= 3 and st["errors"] == 0, st  # after each restart
    assert st["changed"] == 0, st


def wait_state(server: Guest, state: str, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        inst = [i for i in json.loads(server.check("netblkctl list --json")) if i["port"] == PORT]
        if inst and inst[0]["state"] == state:
            return inst[0]
        assert time.monotonic() < deadline, f"port {PORT} never {state}: {inst}"
        time.sleep(0.2)


def test_an_instance_waits_out_its_nic_going_down_and_losing_its_address(attached, server):
    """nic-loss=wait (the default): the server's NIC goes down, then loses its
    address, under fio writing and verifying through /dev/netblk0; each time
    the instance waits holding its disk and port, and serves again by itself
    when the NIC is back -- fio finishes with every block as written.  vmxnet3
    drops its XDP program when it goes down: `netblkctl supervise` (as
    netblk-supervise.service runs it) adds it again."""
    c = attached
    c.check(f"netblkctl attach {SERVER_IP} {PORT}", timeout=60)
    c.check(f"rm -f /tmp/fio.rc; ({FIO_VERIFY} --loops=3 >/tmp/fio.out 2>&1; echo $? > /tmp/fio.rc) "
            "> /dev/null 2>&1 &")
    server.check("(netblkctl watch --json --interval 60 >/tmp/watch-nic.out 2>&1 &); sleep 2")
    drops_xdp = SERVER_LINK_NIC == "vmxnet3"
    if drops_xdp:
        server.check("(netblkctl supervise >/tmp/supervise.out 2>&1 &)")
    outages = 2
    server.check("ip link set eth1 down")
    inst = wait_state(server, "waiting")
    assert inst["waiting_for"] == "eth1 went down" and inst["nic_loss"] == "wait", inst
    assert "WAITING for" in server.check("netblkctl list")
    server.check("sleep 3")
    link_up(server, SERVER_IP, SERVER_LINK_NIC)
    wait_state(server, "serving")
    server.check("sleep 2")
    server.check(f"ip addr del {SERVER_IP}/24 dev eth1")
    inst = wait_state(server, "waiting")
    assert inst["waiting_for"] == f"eth1 lost its address {SERVER_IP}", inst
    server.check("sleep 3")
    link_up(server, SERVER_IP, SERVER_LINK_NIC)
    wait_state(server, "serving")
    rc, out = c.run("for i in $(seq 1200); do test -s /tmp/fio.rc && break; sleep 0.5; done; "
                    "cat /tmp/fio.rc /tmp/fio.out; test $(cat /tmp/fio.rc) = 0", timeout=700)
    assert rc == 0, (f"fio: {out}\n--- server\n{server.check('netblkctl list; dmesg | tail -20')}"
                     f"\n--- client\n{c.check('netblkctl list --attached; dmesg | tail -20')}")
    st = attached_json(c)["stats"]
    assert st["errors"] == 0 and st["changed"] == 0, st
    server.check("killall netblkctl; sleep 0.5")
    events = [json.loads(line)["event"] for line in
              server.check("cat /tmp/watch-nic.out").splitlines()
              if line.startswith("{") and '"type": "event"' in line]
    # vmxnet3, back up before supervise added the program: waiting for that, said too
    waits = (outages, outages + 1) if drops_xdp else (outages,)
    assert events.count("waiting") in waits and events.count("resumed") == outages, events
    if drops_xdp:
        assert "eth1: added netblk's XDP program again" in server.check("cat /tmp/supervise.out")
    assert "stopped" not in events, events
    assert "serves again: eth1 is back after" in server.dmesg()


def test_a_forced_detach_and_rmmod_under_load_leave_nothing_behind(attached):
    c = attached
    sockets = c.check("wc -l < /proc/net/udp").strip()
    c.check(f"netblkctl attach {SERVER_IP} {PORT}", timeout=60)
    assert int(c.check("wc -l < /proc/net/udp")) == int(sockets) + 1  # the client's socket
    c.check("rm -f /tmp/l.rc; (fio --name=l --filename=/dev/netblk0 --ioengine=libaio --direct=1 --rw=randrw "
            "--bs=64k --iodepth=32 --size=64m --time_based --runtime=120 >/tmp/l.out 2>&1; "
            "echo $? > /tmp/l.rc) > /dev/null 2>&1 &")
    # once fio has the disk open and its I/O going (a debug kernel starts it slowly)
    c.check("for i in $(seq 600); do test $(cat /sys/block/netblk0/stat | "
            "awk '{print $1 + $5}') -gt 100 && exit 0; sleep 0.2; done; exit 1", timeout=180)
    rc, out = c.run("netblkctl detach netblk0", timeout=60)
    assert rc == 1 and "is open" in out, out  # in use: refused, still attached
    c.check("netblkctl list --attached --json | grep -q netblk0")
    c.check("netblkctl detach netblk0 --force", timeout=60)
    c.check("for i in $(seq 120); do test -s /tmp/l.rc && break; sleep 0.5; done; "
            "test $(cat /tmp/l.rc) != 0", timeout=120)  # its I/O failed, it ended
    assert "netblk0" not in c.check("cat /proc/partitions")
    assert c.check("wc -l < /proc/net/udp").strip() == sockets  # the client's socket is gone
    # again, ended by rmmod under load this time
    c.check(f"netblkctl attach {SERVER_IP} {PORT}", timeout=60)
    c.check("rm -f /tmp/r.rc; (dd if=/dev/netblk0 of=/dev/null bs=64k iflag=direct 2>/dev/null; "
            "echo $? > /tmp/r.rc) > /dev/null 2>&1 & "
            "for i in $(seq 600); do test $(awk '{print $1}' /sys/block/netblk0/stat) -gt 20 "
            "&& exit 0; sleep 0.2; done; exit 1", timeout=180)
    rc, out = c.run("rmmod netblk", timeout=60)
    assert rc != 0, out  # the open disk holds the module
    c.check("netblkctl detach all --force && for i in $(seq 120); do test -s /tmp/r.rc && "
            "break; sleep 0.5; done && rmmod netblk", timeout=120)
    assert c.check("wc -l < /proc/net/udp").strip() == sockets
    c.check("modprobe netblk")


# ---- attach queues=N: a hardware queue each, with its own socket and session ----

# fio on both CPUs, a job each (so each CPU's hardware queue carries one), each
# writing and verifying 16 MiB of its own
FIO_TWO_CPUS = ("fio --name=v --filename=/dev/netblk0 --ioengine=libaio --direct=1 "
                "--rw=randwrite --bs=16k --iodepth=16 --size=16m --numjobs=2 "
                "--offset_increment=16m --cpus_allowed=0,1 --cpus_allowed_policy=split "
                "--verify=crc32c --verify_fatal=1 --do_verify=1 --randrepeat=0 "
                "--output-format=terse")


def start_two_queues(server: Guest) -> None:
    """The instance again with two queues (a worker each).  Its link NIC has
    one queue (QEMU's dgram netdev): its RSS does not spread the client's
    sessions, the server's handoff takes each to the queue that opened it."""
    server.check(f"netblkctl stop {PORT}", timeout=60)
    server.check(f"netblkctl start /dev/nvme0n1p1 {PORT} dev=eth1 queues=2")


def udp_sockets(c: Guest) -> int:
    return int(c.check("wc -l < /proc/net/udp"))


def test_attach_queues_2_writes_and_reads_back_every_byte_over_two_sessions(attached, server):
    c = attached
    sockets = udp_sockets(c)
    # an instance of one queue: one queue by default, whatever the CPUs
    c.check(f"netblkctl attach {SERVER_IP} {PORT}", timeout=60)
    assert attached_json(c)["queues"] == 1
    assert attached_json(c)["queue_list"] == []  # a device of one queue: its sums say it all
    assert c.check("ls /sys/block/netblk0/mq").split() == ["0"]
    c.check("netblkctl detach netblk0", timeout=60)

    start_two_queues(server)
    out = c.check(f"netblkctl attach {SERVER_IP} {PORT} queues=2", timeout=60)
    assert f"{DEV} is {SERVER_IP}:{PORT}" in out, out
    att = attached_json(c)
    assert att["queues"] == 2, att
    assert att["stats"]["sessions_opened"] == 2, att["stats"]
    assert c.check("ls /sys/block/netblk0/mq").split() == ["0", "1"]
    assert udp_sockets(c) == sockets + 2  # a socket a queue, each its own port
    assert server_stats(server, PORT)["sessions_open"] == 2
    c.check(FIO_TWO_CPUS, timeout=600)  # exit 0: every block read back as written
    # every byte of a file of random bytes, written and read back past fio's
    c.check("dd if=/dev/urandom of=/tmp/r bs=1M count=16 2>/dev/null && "
            "dd if=/tmp/r of=/dev/netblk0 bs=64k seek=512 oflag=direct conv=fsync 2>/dev/null && "
            "dd if=/dev/netblk0 of=/tmp/b bs=64k skip=512 count=256 iflag=direct 2>/dev/null && "
            "cmp /tmp/r /tmp/b", timeout=300)
    st = attached_json(c)["stats"]
    assert st["errors"] == 0 and st["requests"] > 0, st
    # each hardware queue carried its CPU's share, and the shares add up
    ql = attached_json(c)["queue_list"]
    assert len(ql) == 2 and all(q["requests"] > 0 and q["sends"] > 0 for q in ql), ql
    assert sum(q["requests"] for q in ql) == attached_json(c)["stats"]["requests"], ql
    assert all(q["sessions_opened"] == 1 for q in ql), ql
    lat = attached_json(c).get("latency") or {}
    assert not lat or lat.get("count", 0) >= st["requests"] - 16, lat  # both queues' samples
    c.check("netblkctl detach netblk0", timeout=60)
    assert udp_sockets(c) == sockets
    # the default against two queues and two CPUs: two
    c.check(f"netblkctl attach {SERVER_IP} {PORT}", timeout=60)
    assert attached_json(c)["queues"] == 2
    c.check("netblkctl detach netblk0", timeout=60)


def test_two_queues_wait_out_a_server_restart_and_a_forced_detach_under_load(attached, server):
    c = attached
    start_two_queues(server)
    sockets = udp_sockets(c)
    c.check(f"netblkctl attach {SERVER_IP} {PORT} queues=2", timeout=60)
    # each queue's session reopens on its own, its writes verified
    c.check(f"rm -f /tmp/fio.rc; ({FIO_TWO_CPUS} --loops=2 >/tmp/fio.out 2>&1; echo $? > /tmp/fio.rc) "
            "> /dev/null 2>&1 &")
    server.check(f"sleep 2; netblkctl stop {PORT}; sleep 3; "
                 f"netblkctl start /dev/nvme0n1p1 {PORT} dev=eth1 queues=2", timeout=120)
    c.check("for i in $(seq 1200); do test -s /tmp/fio.rc && break; sleep 0.5; done; "
            "cat /tmp/fio.rc /tmp/fio.out; test $(cat /tmp/fio.rc) = 0", timeout=700)
    st = attached_json(c)["stats"]
    assert st["sessions_opened"] >= 4 and st["errors"] == 0, st  # both queues, twice
    assert st["changed"] == 0, st

    done = int(c.check("awk '{print $1 + $5}' /sys/block/netblk0/stat"))
    c.check("rm -f /tmp/l.rc; (fio --name=l --filename=/dev/netblk0 --ioengine=libaio --direct=1 --rw=randrw "
            "--bs=64k --iodepth=32 --size=64m --numjobs=2 --cpus_allowed=0,1 "
            "--cpus_allowed_policy=split --time_based --runtime=120 >/tmp/l.out 2>&1; "
            "echo $? > /tmp/l.rc) > /dev/null 2>&1 &")
    # once fio has the disk open and its I/O going: 100 requests past the first fio's
    c.check(f"for i in $(seq 600); do test $(cat /sys/block/netblk0/stat | "
            f"awk '{{print $1 + $5}}') -gt {done + 100} && exit 0; sleep 0.2; done; exit 1",
            timeout=180)
    c.check("netblkctl detach netblk0 --force", timeout=60)
    rc, out = c.run("for i in $(seq 120); do test -s /tmp/l.rc && break; sleep 0.5; done; "
                    "test $(cat /tmp/l.rc) != 0", timeout=120)  # its I/O failed, it ended
    if rc != 0:
        _, diag = c.run("cat /tmp/l.out; ps; for p in $(pidof fio); do echo == $p; "
                        "cat /proc/$p/stack; done; dmesg | tail -40; cat /proc/partitions; "
                        "cat /proc/net/udp", timeout=60)
        pytest.fail(f"fio did not end after the forced detach: {out}\n{diag}")
    assert "netblk0" not in c.check("cat /proc/partitions")
    assert udp_sockets(c) == sockets  # both queues' sockets are gone
    # again, ended by rmmod under load this time
    c.check(f"netblkctl attach {SERVER_IP} {PORT} queues=2", timeout=60)
    c.check("rm -f /tmp/r.rc; (dd if=/dev/netblk0 of=/dev/null bs=64k iflag=direct 2>/dev/null; "
            "echo $? > /tmp/r.rc) > /dev/null 2>&1 & "
            "for i in $(seq 600); do test $(awk '{print $1}' /sys/block/netblk0/stat) -gt 20 "
            "&& exit 0; sleep 0.2; done; exit 1", timeout=180)
    c.check("netblkctl detach all --force && for i in $(seq 120); do test -s /tmp/r.rc && "
            "break; sleep 0.5; done && rmmod netblk", timeout=120)
    assert udp_sockets(c) == sockets
    c.check("modprobe netblk")


def test_a_restart_on_another_device_fails_io_and_writes_nothing_to_it(attached, server):
    c = attached
    c.check(f"netblkctl attach {SERVER_IP} {PORT}", timeout=60)
    before = server.check("dd if=/dev/nvme0n1p2 bs=1M count=4 iflag=direct 2>/dev/null | sha256sum")
    c.check("dd if=/dev/urandom of=/tmp/src bs=1M count=4 2>/dev/null")
    # a writer that goes on until its writes fail
    c.check(f"(rm -f /tmp/dd.n; i=0; while [ $i -lt 500 ]; do dd if=/tmp/src of={DEV} bs=4k "
            "oflag=direct 2>/tmp/dd.err || break; i=$((i+1)); done; echo $i > /tmp/dd.n) "
            "> /dev/null 2>&1 &")
    # the port now serves the other partition: the writer's next session must not reach it
    server.check(f"sleep 1; netblkctl stop {PORT}; "
                 f"netblkctl start /dev/nvme0n1p2 {PORT} dev=eth1", timeout=60)
    out = c.check("for i in $(seq 600); do test -s /tmp/dd.n && break; sleep 0.5; done; "
                  "cat /tmp/dd.n /tmp/dd.err", timeout=400)
    assert "Input/output error" in out and not out.startswith("500"), out
    st = attached_json(c)["stats"]
    assert st["changed"] == 1 and st["resizes"] == 0, st  # NETBLK_HOST_CHANGE_OTHER_DEVICE
    assert "STOPPED: the server serves another device" in attached_stats(c)
    assert "serves another device now" in c.check("dmesg | tail -20")
    rc, out = c.run(f"dd if={DEV} of=/dev/null bs=4k count=1 iflag=direct", timeout=60)
    assert rc != 0, out
    assert server.check("dd if=/dev/nvme0n1p2 bs=1M count=4 iflag=direct 2>/dev/null | "
                        "sha256sum") == before
    c.check("netblkctl detach netblk0", timeout=60)


def test_a_device_grown_behind_a_restart_grows_the_disk(attached, server):
    c = attached
    dm = "DM_DISABLE_UDEV=1 dmsetup --noudevsync"
    server.check(f"{dm} create nbgrow --table '0 65536 linear /dev/nvme0n1p2 0'")
    try:
        server.check(f"netblkctl start /dev/mapper/nbgrow {PORT + 1} dev=eth1")
        c.check(f"netblkctl attach {SERVER_IP} {PORT + 1}", timeout=60)
        assert c.check("cat /sys/block/netblk0/size").strip() == "65536"
        c.check("dd if=/dev/urandom of=/tmp/g bs=64k count=8 2>/dev/null && "
                f"dd if=/tmp/g of={DEV} bs=64k oflag=direct 2>/dev/null", timeout=120)
        server.check(f"netblkctl stop {PORT + 1} && "
                     f"{dm} reload nbgrow --table '0 131072 linear /dev/nvme0n1p2 0' && "
                     f"{dm} resume nbgrow && netblkctl start /dev/mapper/nbgrow {PORT + 1} dev=eth1",
                     timeout=60)
        # the next request meets the new instance: a session, INFO, the disk grows
        c.check(f"dd if={DEV} bs=64k count=8 iflag=direct 2>/dev/null | cmp /tmp/g -", timeout=120)
        c.check("for i in $(seq 40); do test $(cat /sys/block/netblk0/size) = 131072 && exit 0; "
                "sleep 0.5; done; cat /sys/block/netblk0/size; exit 1", timeout=60)
        st = attached_json(c)["stats"]
        assert st["resizes"] == 1 and st["changed"] == 0, st
        assert "grew to 64 MiB" in c.check("dmesg | tail -20")
        c.check(f"dd if=/tmp/g of={DEV} bs=64k seek=1000 oflag=direct 2>/dev/null && "
                f"dd if={DEV} bs=64k skip=1000 count=8 iflag=direct 2>/dev/null | cmp /tmp/g -",
                timeout=120)
        c.check("netblkctl detach netblk0", timeout=60)
    finally:
        server.run(f"netblkctl stop {PORT + 1}; {dm} remove nbgrow", timeout=60)


def test_with_a_timeout_io_fails_eio_while_the_server_is_away(attached, server):
    c = attached
    c.check(f"netblkctl attach {SERVER_IP} {PORT} timeout=5", timeout=60)
    server.check(f"netblkctl stop {PORT}")
    rc, out = c.run(f"time dd if=/dev/zero of={DEV} bs=4k count=1 oflag=direct", timeout=120)
    assert rc != 0 and ("Input/output error" in out or "I/O error" in out), out
    # silent for the timeout: taken for unreachable, so the next request fails at
    # once instead of waiting 5 s of its own (md's sector-by-sector retries need that)
    st = attached_json(c)["stats"]
    assert st["unreachable"] == 1 and st["outages"] == 1, st
    rc, out = c.run(f"dd if={DEV} of=/dev/null bs=4k count=1 iflag=direct", timeout=120)
    assert rc != 0, out
    assert attached_json(c)["stats"]["failed_fast"] >= 1
    assert "UNREACHABLE" in attached_stats(c)
    # back: the device finds it by itself and serves again, no attach needed
    server.check(f"netblkctl start /dev/nvme0n1p1 {PORT} dev=eth1")
    wait_reachable(c, "netblk0")
    c.check(f"dd if=/dev/urandom of=/tmp/s bs=4k count=4 2>/dev/null && "
            f"dd if=/tmp/s of={DEV} bs=4k oflag=direct 2>/dev/null && "
            f"dd if={DEV} bs=4k count=4 iflag=direct 2>/dev/null | cmp /tmp/s -", timeout=120)
    st = attached_json(c)["stats"]
    assert st["unreachable"] == 0 and st["sessions_opened"] >= 2, st
    c.check("netblkctl detach netblk0", timeout=60)


def test_two_queues_each_give_the_server_up_and_find_it_again(attached, server):
    c = attached
    start_two_queues(server)
    c.check(f"netblkctl attach {SERVER_IP} {PORT} queues=2 timeout=5", timeout=60)
    server.check(f"netblkctl stop {PORT}")
    # a write from each CPU: each hardware queue's core waits out the timeout on its own
    for cpu in (0, 1):
        rc, out = c.run(f"taskset -c {cpu} dd if=/dev/zero of={DEV} bs=4k count=1 "
                        "oflag=direct", timeout=120)
        assert rc != 0 and ("Input/output error" in out or "I/O error" in out), out
    st = attached_json(c)["stats"]
    assert st["unreachable"] == 1 and st["outages"] == 2, st  # each queue's own outage
    server.check(f"netblkctl start /dev/nvme0n1p1 {PORT} dev=eth1 queues=2")
    wait_reachable(c, "netblk0")  # unreachable is the worst queue's: both found it
    for cpu in (0, 1):
        c.check(f"dd if=/dev/urandom of=/tmp/s bs=4k count=4 2>/dev/null && "
                f"taskset -c {cpu} dd if=/tmp/s of={DEV} bs=4k seek={8 * cpu} oflag=direct "
                f"2>/dev/null && taskset -c {1 - cpu} dd if={DEV} bs=4k skip={8 * cpu} count=4 "
                "iflag=direct 2>/dev/null | cmp /tmp/s -", timeout=120)
    st = attached_json(c)["stats"]
    assert st["unreachable"] == 0 and st["sessions_opened"] >= 4, st
    c.check("netblkctl detach netblk0", timeout=60)


def test_attach_refuses_a_server_that_does_not_answer(attached):
    rc, out = attached.run(f"netblkctl attach {SERVER_IP} {PORT + 1}", timeout=60)
    assert rc == 1 and "did not answer INFO" in out, out
    rc, out = attached.run(f"netblkctl attach {SERVER_IP} {PORT} queue-depth=0", timeout=60)
    assert rc == 2 and "queue-depth" in out, out
    rc, out = attached.run("netblkctl detach netblk7", timeout=60)
    assert rc == 1 and "not attached" in out, out


def test_a_keyed_instance_takes_only_a_client_with_its_key(attached, server):
    c = attached
    key = server.check("netblkctl genkey").strip()
    server.check(f"echo {key} > /tmp/k && chmod 600 /tmp/k && "
                 f"netblkctl start /dev/nvme0n1p2 {PORT + 1} dev=eth1 key=/tmp/k")
    c.check(f"echo {key} > /tmp/k && echo 0123456789abcdef0123456789abcdef > /tmp/bad && "
            "chmod 600 /tmp/k /tmp/bad")
    for opt in ("", "key=/tmp/bad"):
        rc, out = c.run(f"netblkctl attach {SERVER_IP} {PORT + 1} {opt}", timeout=60)
        assert rc == 1 and "refused the session" in out, out
    c.check(f"netblkctl attach {SERVER_IP} {PORT + 1} key=/tmp/k", timeout=60)
    c.check("dd if=/dev/urandom of=/tmp/s2 bs=64k count=4 2>/dev/null && "
            "dd if=/tmp/s2 of=/dev/netblk0 bs=64k oflag=direct 2>/dev/null && "
            "dd if=/dev/netblk0 bs=64k count=4 2>/dev/null | cmp /tmp/s2 -", timeout=120)
    assert "key header" in c.check("netblkctl list")


def test_rmmod_detaches_every_device_and_leaves_nothing(attached):
    c = attached
    c.check(f"netblkctl attach {SERVER_IP} {PORT} && netblkctl attach {SERVER_IP} {PORT}",
            timeout=60)
    c.check("dd if=/dev/netblk1 of=/dev/null bs=64k count=16 iflag=direct 2>/dev/null", timeout=120)
    c.check("rmmod netblk", timeout=60)
    assert "netblk" not in c.check("cat /proc/partitions")
    c.check("modprobe netblk")


def impair_link(c: Guest, spec: str) -> None:
    """netem on the client's link both ways: its sends on eth1, and what it
    receives through ifb0 (the server's replies leave through XDP, which no
    qdisc of the server sees)."""
    # modules on the cloud kernel, built in on the debug one (ci/debug-kernel.config)
    c.check("for m in sch_netem sch_ingress act_mirred cls_matchall ifb; do "
            "modprobe $m 2>/dev/null; done; ip link set ifb0 up && "
            f"{TC} qdisc add dev eth1 root netem {spec} && "
            f"{TC} qdisc add dev eth1 handle ffff: ingress && "
            f"{TC} filter add dev eth1 parent ffff: matchall action mirred egress redirect dev ifb0 && "
            f"{TC} qdisc add dev ifb0 root netem {spec}")


def clear_link(c: Guest) -> None:
    c.run(f"{TC} qdisc del dev eth1 root; {TC} qdisc del dev eth1 ingress; "
          f"{TC} qdisc del dev ifb0 root", timeout=30)


def server_stats(server: Guest, port: int) -> dict:
    return [i for i in json.loads(server.check("netblkctl list --json"))
            if i["port"] == port][0]["stats"]


def test_a_write_failed_by_its_timeout_never_sends_its_reused_buffer(attached, server):
    """timeout=: a WRITE held in the client's own qdisc (netem delays every
    datagram the client sends for longer than the timeout) fails EIO, and
    the writer at once fills the same buffer with other bytes (nbreuse).
    Nothing of the failed WRITE may go out after the writer was told: where
    its skbs hold the buffer's pages (a NIC with scatter-gather: vmxnet3,
    WRITE data in place), the request ends only once the stack let go of
    them -- else the WRITE leaves netem later carrying the other bytes, and
    the server, whose session is alive and the number fresh, writes them.
    The range may hold its old bytes or the failed WRITE's own (they left
    before the EIO: an EIO'd write is not known to be unwritten), never the
    bytes the buffer got after the EIO.  A virtio-net client's socket copies
    the data as it sends (no scatter-gather on QEMU's dgram netdev), so its
    skbs never hold the buffer: there this checks the same, in the pass
    whose NIC cannot go wrong this way."""
    need_modules("sch_netem")
    c = attached
    at, size, held = 3 << 20, 16 << 10, 8  # held: s, what netem delays by, > timeout=
    c.check(f"netblkctl attach {SERVER_IP} {PORT} timeout=2", timeout=60)
    c.check(f"dd if=/dev/zero of={DEV} bs={size} seek={at // size} count=1 oflag=direct "
            "2>/dev/null", timeout=60)
    before = server_stats(server, PORT)
    c.check(f"modprobe sch_netem 2>/dev/null; {TC} qdisc add dev eth1 root netem delay {held}s")
    try:
        c.check(f"(nbreuse {DEV} {at} {size} 300 >/tmp/reuse.out 2>&1 & echo $! >/tmp/reuse.pid) "
                ">/dev/null 2>&1")
        out = c.check("for i in $(seq 900); do grep -q . /tmp/reuse.out 2>/dev/null && break; "
                      "sleep 0.1; done; cat /tmp/reuse.out", timeout=120)
        assert out.strip() == "failed: Input/output error", out
        # netem lets the WRITE go when its time comes (nothing it holds is
        # dropped): once the server executed it, whatever bytes it carried
        deadline = time.monotonic() + 120
        while server_stats(server, PORT)["write_bytes"] - before["write_bytes"] < size:
            assert time.monotonic() < deadline, server_stats(server, PORT)
            time.sleep(0.5)
    finally:
        clear_link(c)
    wait_reachable(c, "netblk0")
    reused = c.check(f"dd if={DEV} bs={size} skip={at // size} count=1 iflag=direct 2>/dev/null "
                     "| tr -cd b | wc -c", timeout=60)
    assert int(reused) == 0, (f"{reused.strip()} bytes of the range are what the failed WRITE's "
                              f"buffer held after its EIO; client: {attached_json(c)['stats']}")
    c.check("p=$(cat /tmp/reuse.pid); kill $p; while kill -0 $p 2>/dev/null; do sleep 0.1; done; "
            "netblkctl detach netblk0", timeout=60)


def test_fio_verifies_through_loss_duplication_and_reordering(attached, server):
    need_modules(*NETEM_MODULES)
    c = attached
    c.check(f"netblkctl attach {SERVER_IP} {PORT}", timeout=60)
    impair_link(c, "loss 3% duplicate 5% delay 1ms 3ms reorder 10%")
    try:
        # 1536 random writes (6 MiB) across the whole device, each batch of 64
        # read back and checked as it goes (verify_backlog: reads and writes
        # interleaved), and what is left read back and checked at the end: a
        # set amount, not a time, so that every write is read back whatever the
        # machine's speed.  (fio starts a batch when its count of writes logged
        # is a multiple of 64 exactly: a burst of completions -- folded WRITE
        # answers complete many at once -- can step over one, so how many are
        # left at a time limit depends on timing.)
        rc, out = c.run("fio --name=v --filename=/dev/netblk0 --ioengine=libaio --direct=1 "
                        "--rw=randwrite --bs=4k --iodepth=32 --size=256m --io_size=6m "
                        "--verify=crc32c --verify_backlog=64 --verify_fatal=1 "
                        "--randrepeat=0 --output-format=json", timeout=600)
    finally:
        clear_link(c)
    assert rc == 0, out
    job = json.loads(out[out.index("{"):])["jobs"][0]
    print(f"fio: {job['write']['total_ios']} writes, {job['read']['total_ios']} read back")
    assert job["write"]["total_ios"] == 1536 and job["read"]["total_ios"] == 1536, job
    text = c.check("netblkctl list")
    assert "requests " in text and "(errors 0)" in text, text
    st = server_stats(server, PORT)
    assert st["duplicates"] + st["duplicates_in_flight"] > 0, st


def test_md_raid1_across_two_instances_degrades_and_resyncs(attached, server):
    need_modules("raid1")
    c = attached
    server.check(f"netblkctl start /dev/nvme0n1p2 {PORT + 1} dev=eth1")
    # md fails a member only when its I/O fails: timeout= makes an outage an EIO
    c.check(f"netblkctl attach {SERVER_IP} {PORT} timeout=10 && "
            f"netblkctl attach {SERVER_IP} {PORT + 1} timeout=10", timeout=120)
    c.check("mdadm --create /dev/md0 --run --level=1 --raid-devices=2 --bitmap=internal "
            "--assume-clean --metadata=1.2 /dev/netblk0 /dev/netblk1", timeout=120)
    try:
        c.check("dd if=/dev/urandom of=/tmp/a bs=64k count=32 2>/dev/null && "
                "dd if=/tmp/a of=/dev/md0 bs=64k oflag=direct 2>/dev/null", timeout=300)
        server.check(f"netblkctl stop {PORT + 1}")
        # writes go on, to the member left; the other is failed after its timeout
        c.check("dd if=/dev/urandom of=/tmp/b bs=64k count=32 2>/dev/null && "
                "dd if=/tmp/b of=/dev/md0 bs=64k seek=32 oflag=direct 2>/dev/null", timeout=300)
        detail = c.check("mdadm --detail /dev/md0")
        assert "degraded" in detail and "faulty" in detail, detail
        assert attached_json(c, "netblk1")["stats"]["outages"] >= 1
        server.check(f"netblkctl start /dev/nvme0n1p2 {PORT + 1} dev=eth1")
        wait_reachable(c, "netblk1")
        c.check("mdadm /dev/md0 --remove /dev/netblk1 && mdadm /dev/md0 --re-add /dev/netblk1",
                timeout=120)
        c.check("for i in $(seq 600); do grep -q recovery /proc/mdstat || break; sleep 1; done; "
                "! grep -q recovery /proc/mdstat", timeout=700)
        detail = c.check("mdadm --detail /dev/md0")
        assert "degraded" not in detail and "active sync" in detail, detail
        # both members hold both halves: read each alone
        c.check("cat /tmp/a /tmp/b > /tmp/ab && mdadm --stop /dev/md0 && "
                "for d in netblk0 netblk1; do off=$(mdadm --examine /dev/$d | "
                "sed -n 's/.*Data Offset : \\([0-9]*\\) sectors.*/\\1/p'); "
                "dd if=/dev/$d bs=512 skip=$off count=8192 2>/dev/null | cmp /tmp/ab - || exit 1; "
                "done", timeout=300)
    finally:
        c.run("mdadm --stop /dev/md0", timeout=60)


# ---- jumbo frames: MTU 9000 on the link, multi-buffer XDP on virtio-net ----

JUMBO = 9000
DISK4K = "/dev/nvme1n1"  # the server guest's disk with 4 KiB sectors


@pytest.fixture
def jumbo(server, client_host):
    """Both ends of the link at MTU 9000 (QEMU's dgram netdev carries each
    frame in one UDP datagram over the host's loopback, whose MTU is 64 KiB),
    the client host's module loaded; back to 1500 afterwards."""
    if not multibuffer_xdp(SERVER_LINK_NIC):
        pytest.skip(f"{SERVER_LINK_NIC} on this kernel runs no multi-buffer XDP (its XDP MTU limit is "
                    "below 3500): test_control_plane checks the refusal")
    for g in (server, client_host):
        g.check(f"ip link set eth1 mtu {JUMBO}")
    client_host.check("grep -q '^netblk ' /proc/modules || modprobe netblk")
    yield
    client_host.run("netblkctl detach all --force", timeout=60)
    server.run("netblkctl stop all", timeout=60)
    for g in (server, client_host):
        g.run("ip link set eth1 mtu 1500")


def served(server: Guest, port: int = PORT) -> dict:
    return [i for i in json.loads(server.check("netblkctl list --json")) if i["port"] == port][0]


def write_and_read_back(c: Guest, dev: str, bs: int, at: int, count: int = 64) -> None:
    """fio writes count blocks of bs bytes at byte `at` of dev, one O_DIRECT
    request at a time (one datagram each, at max_io or less), then reads
    them back and checks each block's checksum."""
    c.check(f"fio --name=v --filename={dev} --direct=1 --ioengine=psync --rw=write "
            f"--bs={bs} --offset={at} --size={count * bs} --verify=crc32c --do_verify=1 "
            f"--verify_fatal=1 >/tmp/v.out 2>&1 || {{ cat /tmp/v.out; exit 1; }}", timeout=300)


def write_bytes_ok(st: dict, written: int) -> bool:
    """The server's write_bytes is what was written: a WRITE the client sent
    again before its answer came is a duplicate the replay window answers,
    not counted again.  Only a WRITE answered EAGAIN (not executed: no
    buffer, or the disk said "again" to every try) is executed, and counted,
    when it comes again."""
    again = st["no_buffer"] + st["disk_gave_up"]
    return st["write_bytes"] == written or (st["write_bytes"] > written and again > 0)


def test_jumbo_writes_in_one_two_and_three_buffers_read_back(jumbo, server, client_host):
    """At MTU 9000 a datagram carries 8704 bytes (17 sectors).  virtio-net's
    receive buffers hold 3520 bytes with XDP on, so a 2 KiB WRITE arrives in
    one buffer (its data goes to the disk in place), a 4 KiB one in two and
    an 8 KiB one in three (copied once into the slot's page: bytes_copied);
    READ answers of up to 8 KiB go out in place from the slots' pages
    (bytes_zerocopy)."""
    server.check(f"netblkctl start /dev/nvme0n1p1 {PORT} dev=eth1")
    inst = served(server)
    assert inst["mtu"] == JUMBO, inst
    c = client_host
    c.check(f"netblkctl attach {SERVER_IP} {PORT}", timeout=60)
    for i, bs in enumerate((2048, 4096, 8192)):
        write_and_read_back(c, DEV, bs, (i + 1) << 20)
    st = served(server)["stats"]
    assert st["bad"] == 0 and st["dropped_multibuffer"] == 0, st
    assert st["refused"] == 0 and st["io_errors"] == 0, st
    # the WRITEs in two and three buffers were copied; a 2 KiB one too if it
    # came in a buffer virtio-net had posted before XDP went on (sized for
    # MTU 1500, so the frame spans two)
    written = 64 * (2048 + 4096 + 8192)
    assert 64 * (4096 + 8192) <= st["bytes_copied"] <= written, st
    assert write_bytes_ok(st, written), st
    assert st["bytes_zerocopy"] >= written + written - st["bytes_copied"], st
    dev = attached_json(c)
    cst = dev["stats"]
    assert cst["errors"] == 0 and cst["tx_errors"] == 0, dev
    # the client's side: from fio's pages where its NIC takes pages (vmxnet3)
    if CLIENT_NIC == "vmxnet3":
        assert cst["bytes_in_place"] >= written and cst["bytes_copied"] == 0, dev
    else:
        assert cst["bytes_copied"] >= written and cst["bytes_in_place"] == 0, dev


def test_a_jumbo_write_in_pieces_smaller_than_a_page_reads_back(jumbo, server, client_host):
    """A datagram's worth of data at MTU 9000 (8704 bytes) written from 17
    pieces of 512 bytes, each in a page of its own (writev's shape): with
    its header that is one more piece than an skb takes as frags, so the
    client copies the data into pages of its own rather than have the send
    refused (EMSGSIZE) at every try -- the write would never end.  That
    refusal needs a client NIC with scatter-gather (vmxnet3) and a server at
    MTU 9000 (multi-buffer XDP: virtio-net): the vmxnet3 pass's pair, where
    this write hung with 18 pieces allowed (kmod/host/host.h
    NETBLK_HOST_BVECS; a static_assert in kmod/host/transport.c holds it to
    MAX_SKB_FRAGS).  With a virtio-net client the socket copies it (no
    scatter-gather on the dgram netdev) and it must read back all the same."""
    server.check(f"netblkctl start /dev/nvme0n1p1 {PORT} dev=eth1")
    c = client_host
    c.check(f"netblkctl attach {SERVER_IP} {PORT}", timeout=60)
    before = attached_json(c)["stats"]
    c.check(f"nbiov {DEV} {3 << 20} 17 512", timeout=120)
    after = attached_json(c)["stats"]
    d = delta(after, before, "tx_errors", "bytes_copied", "errors")
    assert d["tx_errors"] == 0 and d["errors"] == 0 and d["bytes_copied"] >= 17 * 512, d
    st = served(server)["stats"]
    assert st["io_errors"] == 0 and st["refused"] == 0, st


def test_a_4k_sector_device_is_served_at_jumbo_mtu_and_refused_below(jumbo, server, client_host):
    rc, out = server.run(f"netblkctl start {DISK4K} {PORT} dev=eth1 mtu=4000")
    assert rc != 0 and "4096-byte sectors need mtu=4178 or more, not 4000" in out, out
    server.check(f"netblkctl start {DISK4K} {PORT} dev=eth1")
    inst = served(server)
    assert inst["sector_size"] == 4096 and inst["mtu"] == JUMBO, inst
    c = client_host
    out = c.check(f"netblkctl attach {SERVER_IP} {PORT}", timeout=60)
    assert c.check("cat /sys/block/netblk0/queue/logical_block_size").strip() == "4096", out
    for i, bs in enumerate((4096, 8192)):
        write_and_read_back(c, DEV, bs, (i + 1) << 20, count=32)
    st = served(server)["stats"]
    sides = (st, c.check("netblkctl list --attached --json"))
    assert st["bad"] == 0 and st["refused"] == 0 and st["io_errors"] == 0, sides
    # every WRITE copied once (none in place: each came in two or three buffers)
    written = 32 * (4096 + 8192)
    assert st["bytes_copied"] == written and write_bytes_ok(st, written), sides


def test_stop_and_rmmod_under_jumbo_load_leave_nothing_behind(jumbo, server, client_host):
    """fio writes and reads 8 KiB blocks (three buffers each way in) while
    the server stops the instance, starts it again and unloads the module:
    no frame or slot is left behind (kernel_clean checks the leak counters
    and the kernel's reports)."""
    server.check(f"netblkctl start /dev/nvme0n1p1 {PORT} dev=eth1")
    c = client_host
    c.check(f"netblkctl attach {SERVER_IP} {PORT}", timeout=60)
    c.check("rm -f /tmp/j.rc; (fio --name=j --filename=/dev/netblk0 --ioengine=libaio --direct=1 --rw=randrw "
            "--bs=8k --iodepth=32 --size=64m --time_based --runtime=60 >/tmp/j.out 2>&1; "
            "echo $? > /tmp/j.rc) > /dev/null 2>&1 &")
    server.check("for i in $(seq 600); do netblkctl list --json | grep -q "
                 "'\"bytes_copied\": [1-9][0-9]\\{6\\}' && exit 0; sleep 0.2; done; exit 1",
                 timeout=180)
    server.check(f"netblkctl stop {PORT}", timeout=60)
    assert served_or_none(server) is None
    server.check(f"netblkctl start /dev/nvme0n1p1 {PORT} dev=eth1")
    server.check("for i in $(seq 600); do netblkctl list --json | grep -q "
                 "'\"bytes_copied\": [1-9][0-9]\\{6\\}' && exit 0; sleep 0.2; done; exit 1",
                 timeout=180)
    server.check("rmmod netblk", timeout=60)
    server.check("modprobe netblk")
    c.check("netblkctl detach all --force", timeout=60)
    c.check("for i in $(seq 240); do test -s /tmp/j.rc && exit 0; sleep 0.5; done; exit 1",
            timeout=150)


def served_or_none(server: Guest, port: int = PORT):
    found = [i for i in json.loads(server.check("netblkctl list --json")) if i["port"] == port]
    return found[0] if found else None
