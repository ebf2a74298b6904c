"""Control plane, end to end: netblkctl driving netblk.ko in the test guest.

Guest devices (ci/guest.py): /dev/nvme0n1 (512-byte sectors; p1 256 MiB raw,
p2 ext4), /dev/nvme1n1 (4096-byte sectors), eth0 10.0.2.15 (mtu 1500).
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

import pytest

from guest import kernel_trouble, multibuffer_xdp
from nbtest import client, ctl, host_elf, instances, kernel_log, refused, start  # noqa: F401

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "client"))	# tests/client
from netblk_fake import OP_HELLO, OP_INFO, OP_READ, FakeServer  # noqa: E402

GUEST_FORWARDS = [7000]	# the data path after a start on a down NIC
# util-linux's setpriv (busybox's cannot set the bounding set): netblkctl
# run with CAP_NET_ADMIN and nothing else
_SETPRIV = host_elf("setpriv")
GUEST_OPTIONS = {"extra_programs": {"/usr/sbin/setpriv-util": _SETPRIV} if _SETPRIV else {}}

ROOT = Path(__file__).resolve().parents[2]

P1, P2, DISK, DISK4K = "/dev/nvme0n1p1", "/dev/nvme0n1p2", "/dev/nvme0n1", "/dev/nvme1n1"


def kthreads(g):
    """Names of the netblk worker threads (netblk/...)."""
    return [name for _, name in kthread_pids(g)]


def kthread_pids(g):
    return [(int(pid), name) for pid, name in
            re.findall(r"^\s*(\d+)\s+\S+\s+\[(netblk/[^\]]*)\]", g.check("ps"), re.M)]


def wait_no_kthreads(g, seconds=30.0):
    """No netblk worker thread is left.  A stop returns once its worker has
    ended; ps may list it a moment longer, while the thread finishes exiting."""
    deadline = time.monotonic() + seconds
    while True:
        left = kthreads(g)
        if not left:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"worker threads {left} still there {seconds} s after their instances "
                        f"stopped")
        g.run("sleep 0.2")


def nbudp_listen(port, err):
    """Shell: nbudp listen PORT in the background, its stderr in ERR; done once
    it says it is listening (bound) or has ended (bind refused); exit status 0
    only if it listens."""
    return (f"rm -f {err}; nbudp listen {port} >/dev/null 2>{err} & p=$!; "
            f"for i in $(seq 300); do grep -q listening {err} && break; "
            f"kill -0 $p 2>/dev/null || break; sleep 0.1; done; grep -q listening {err}")


def udp_port_free(port):
    """Shell: wait until no socket holds UDP PORT (/proc/net/udp); exit status 0
    once none does."""
    hexport = f"{port:04X}"
    return (f"for i in $(seq 300); do grep -q ':{hexport} ' /proc/net/udp || break; sleep 0.1; "
            f"done; ! grep -q ':{hexport} ' /proc/net/udp")


def worker_of(g, port):
    """pid of the worker of the instance on port (its name has the port)."""
    pids = [pid for pid, name in kthread_pids(g) if re.search(rf"\b{port}\b", name)]
    assert len(pids) == 1, kthread_pids(g)
    return pids[0]


# --------------------------------------------------------------------------
def test_modprobe(guest):
    guest.check("grep -q '^netblk ' /proc/modules && rmmod netblk; true")
    guest.check("modprobe netblk")
    assert re.search(r"^netblk ", guest.check("cat /proc/modules"), re.M)
    assert instances(guest) == {}
    assert kthreads(guest) == []


def test_versions(netblk):
    """The loaded module's release is netblkctl's, one header's (MODULE_VERSION):
    what an operator reads to know the two go together."""
    release = re.search(r'#define NETBLK_VERSION "([^"]+)"',
                        (ROOT / "kmod/uapi/netblk_version.h").read_text()).group(1)
    assert netblk.check("cat /sys/module/netblk/version").strip() == release
    rc, out, err = ctl(netblk, "--version")
    assert rc == 0 and out == f"netblkctl {release}\nnetblk.ko {release}\n", (rc, out, err)


def test_module_not_loaded(guest):
    """With netblk.ko unloaded, netblkctl either gets it loaded (the family's
    module alias makes the kernel modprobe it) or says to modprobe it."""
    guest.check("grep -q '^netblk ' /proc/modules || modprobe netblk; rmmod netblk")
    rc, out, err = ctl(guest, "list")
    loaded = guest.run("grep -q '^netblk ' /proc/modules")[0] == 0
    if rc == 0:
        assert loaded, f"list succeeded without the module: {out}"
    else:
        assert "modprobe netblk" in err and not loaded, (rc, out, err)
    guest.check("grep -q '^netblk ' /proc/modules || modprobe netblk")


def test_start_list_stop(netblk):
    g = netblk
    out = start(g, P1, 7000)
    assert re.fullmatch(
        r"netblk: serving /dev/nvme0n1p1 \(256 MiB, read-write\) on eth0 10\.0\.2\.15:7000"
        r" -- \d+ bytes a datagram, worker on cpu \d+\n", out), out
    m = re.search(r"-- (\d+) bytes a datagram", out)
    assert 512 <= int(m.group(1)) <= 1500 - 28, out
    rc, out, err = ctl(g, "list")
    assert rc == 0 and "7000" in out and P1 in out, (out, err)
    assert len(kthreads(g)) == 1
    rc, out, err = ctl(g, "stop", 7000)
    assert rc == 0, (out, err)
    assert "7000" in out
    assert instances(g) == {}
    wait_no_kthreads(g)


def test_start_read_only_line(netblk):
    out = start(netblk, P1, 7001, "ro")
    assert "(256 MiB, read-only)" in out, out


def test_list_json(netblk):
    g = netblk
    start(g, P1, 7000)
    start(g, P2, 7001, "ro", "mtu=1200", "cpu=0", "poll=50")
    inst = instances(g)
    assert set(inst) == {7000, 7001}
    a, b = inst[7000], inst[7001]
    assert a["device"] == P1 and a["read_only"] is False
    assert a["size_bytes"] == 256 << 20 and a["sector_size"] == 512
    assert a["ifname"] == "eth0" and a["addr"] == "10.0.2.15" and a["mtu"] == 1500
    assert b["device"] == P2 and b["read_only"] is True
    assert b["mtu"] == 1200 and b["cpu"] == 0 and b["poll_us"] == 50
    assert b["max_io"] <= 1200 and b["max_io"] % 512 == 0
    assert isinstance(a["stats"], dict) and a["stats"].get("requests") == 0
    assert len(kthreads(g)) == 2
    # the worker of 7001 runs on cpu 0 only
    mask = g.check(f"taskset -p {worker_of(g, 7001)}").split(":")[-1].strip()
    assert int(mask, 16) == 1, mask


def test_knob_round_trip(netblk):
    """A knob of netblk_options.h (disk-tries=) goes to the kernel, comes
    back in LIST (JSON, text, Prometheus), is saved when not its default and
    refused out of range by netblkctl and the kernel's policy alike."""
    g = netblk
    start(g, P1, 7000)
    start(g, P2, 7001, "disk-tries=12")
    inst = instances(g)
    assert inst[7000]["disk_tries"] == 6 and inst[7001]["disk_tries"] == 12, inst
    rc, out, err = ctl(g, "list")
    assert rc == 0 and "options: disk-tries=12" in out, (out, err)
    assert out.count("options:") == 1, out
    prom = g.check("netblkctl stats --prometheus")
    assert 'disk_tries="12"' in prom and 'disk_tries="6"' in prom, prom
    saved = g.check("netblkctl save /tmp/knob.conf && cat /tmp/knob.conf")
    assert "disk-tries=12" in saved and saved.count("disk-tries") == 1, saved
    refused(g, r"bad disk-tries= '17'", "start", P1, 7002, "disk-tries=17")
    refused(g, r"bad disk-tries= '0'", "start", P1, 7002, "disk-tries=0")
    rc, out, err = ctl(g, "start", P2, 7001, "disk-tries=12", "--exist-ok")
    assert rc == 0, (out, err)
    rc, out, err = ctl(g, "start", P2, 7001, "disk-tries=3", "--exist-ok")
    assert rc != 0 and "disk-tries" in err, (out, err)


def test_stop_unknown_port(netblk):
    refused(netblk, r"7999|no instance", "stop", 7999)


def test_usage_errors(netblk):
    for args in (["start"], ["start", P1], ["start", P1, "0"], ["start", P1, "70000"],
                 ["start", P1, 7000, "bogus"], ["stop"], ["frobnicate"]):
        rc, out, err = ctl(netblk, *args)
        assert rc != 0 and err.strip(), (args, rc, out, err)
    assert instances(netblk) == {}


# ---- refusals -------------------------------------------------------------
@pytest.mark.parametrize("args,pattern", [
    ([P1, 1000], r"1024|well-known|privileged"),
    ([P1, 1023], r"1024|well-known|privileged"),
    (["/dev/nosuchdisk", 7000], r"no such|not exist|not found"),
    (["/dev/null", 7000], r"not a block device"),
    ([P1, 7000, "dev=nosuch0"], r"nosuch0"),
    ([P1, 7000, "mtu=100"], r"mtu"),
    ([P1, 7000, "mtu=100000"], r"mtu"),
    ([P1, 7000, "poll=100000000"], r"poll"),
    ([P1, 7000, "cpu=64"], r"cpu"),
    ([DISK4K, 7000, "mtu=1500"], r"4096-byte sectors need mtu=4178 or more, not 1500"),
    ([DISK4K, 7000], r"4096-byte sectors need mtu=4178 or more, not 1500"),
], ids=["port1000", "port1023", "nodev", "devnull", "nonic", "mtu100", "mtu100000", "poll",
        "cpu", "4k-mtu1500", "4k-default-mtu"])
def test_refused(netblk, args, pattern):
    refused(netblk, pattern, "start", *args)
    assert instances(netblk) == {}
    wait_no_kthreads(netblk)


def test_port_1024_allowed(netblk):
    start(netblk, P1, 1024)


def test_port_held_by_socket(netblk):
    g = netblk
    g.check(nbudp_listen(7002, "/tmp/nbudp.err"))
    refused(g, r"in use|busy|bound", "start", P1, 7002)
    assert instances(g) == {}
    g.check("killall nbudp; " + udp_port_free(7002))
    start(g, P1, 7002)


def test_port_held_by_instance_blocks_sockets(netblk):
    g = netblk
    start(g, P1, 7003)
    # timeout: a bind that succeeded would listen on; 30 s, however slow the guest
    rc, out = g.run("timeout 30 nbudp listen 7003")
    assert rc not in (0, 124, 143, 137), f"bind of a served port did not fail: {rc} {out}"
    assert re.search(r"in use", out, re.I), out


def test_same_port_twice(netblk):
    g = netblk
    start(g, P1, 7000)
    refused(g, r"7000|already|in use", "start", P2, 7000, "ro")
    assert set(instances(g)) == {7000}


def test_start_and_stop_exist_ok(netblk):
    """For configuration management: starting what already runs as asked and
    stopping what is gone succeed with a note; an instance that differs from
    the one asked for is named and left alone."""
    g = netblk
    start(g, P1, 7000, "mtu=1200")
    rc, out, err = ctl(g, "start", P1, 7000, "mtu=1200", "--exist-ok")
    assert (rc, out, err) == (0, "netblk: port 7000 already serves /dev/nvme0n1p1 as asked "
                                 "(--exist-ok)\n", ""), (rc, out, err)
    rc, out, err = ctl(g, "start", P1, 7000, "--exist-ok")	# mtu not named: not compared
    assert rc == 0 and "as asked" in out, (rc, out, err)
    for opts, diff in ((["mtu=1500"], "mtu 1200, not 1500"),
                       (["ro"], "read-write, not read-only (ro)"),
                       (["dev=lo"], "NIC eth0, not lo")):
        rc, msg = refused(g, r"differs", "start", P1, 7000, *opts, "--exist-ok")
        assert msg == (f"netblkctl: port 7000 is already served by an instance that differs "
                       f"from the one asked for: {diff} (stop it first)"), msg
    refused(g, r"device /dev/nvme0n1p1, not /dev/nvme0n1p2", "start", P2, 7000, "--exist-ok")
    refused(g, r"7000|already|in use", "start", P1, 7000, "mtu=1200")	# without it: refused
    assert instances(g)[7000]["mtu"] == 1200 and set(instances(g)) == {7000}

    assert ctl(g, "stop", 7000, "--exist-ok")[0] == 0
    rc, out, err = ctl(g, "stop", 7000, "--exist-ok")
    assert (rc, out, err) == (0, "netblk: nothing serves port 7000 (--exist-ok)\n", "")
    refused(g, r"no instance serves port 7000", "stop", 7000)
    refused(g, r"--exist-ok", "stop", 7000, "--force")


def saved_lines(g, path):
    return [line for line in g.check(f"cat {path}").splitlines()
            if line and not line.startswith("#")]


def test_save_and_restore(netblk):
    """netblkctl save writes what runs; restore brings it back, leaves alone
    what matches, starts again what differs, stops what the file drops, and
    checks every line before it changes anything."""
    g = netblk
    start(g, P1, 7000, "mtu=1200")
    start(g, P2, 7001, "ro", "poll=50")
    rc, out, err = ctl(g, "save", "/tmp/nb.conf")
    assert (rc, out, err) == (0, "netblk: saved 2 instances and 0 attached devices to "
                                 "/tmp/nb.conf\n", ""), (rc, out, err)
    lines = saved_lines(g, "/tmp/nb.conf")
    assert len(lines) == 2, lines
    for line, (dev, rest) in zip(lines, ((P1, "7000 dev=eth0 mtu=1200"),
                                         (P2, "7001 ro dev=eth0 poll=50"))):
        words = line.split(" ", 2)
        assert words[0] == "start" and words[2] == rest, line
        # the device by a name that survives a reboot where the guest has one
        assert g.check(f"readlink -f {words[1]}").strip() == dev, line

    assert ctl(g, "stop", "all")[0] == 0
    rc, out, err = ctl(g, "restore", "/tmp/nb.conf")
    assert rc == 0 and err == "", (out, err)
    got = instances(g)
    assert set(got) == {7000, 7001}
    assert got[7000]["mtu"] == 1200 and not got[7000]["read_only"]
    assert got[7001]["read_only"] and got[7001]["poll_us"] == 50

    rc, out, err = ctl(g, "restore", "/tmp/nb.conf")	# nothing to do
    assert (rc, out, err) == (0, "netblk: port 7000: serving as /tmp/nb.conf says\n"
                                 "netblk: port 7001: serving as /tmp/nb.conf says\n", "")

    g.check("printf '# edited\\nstart /dev/nvme0n1p1 7000 mtu=1400  # jumbo later\\n' >/tmp/nb.conf")
    rc, out, err = ctl(g, "restore", "/tmp/nb.conf")
    assert rc == 0, (out, err)
    assert "netblk: port 7001 is not in /tmp/nb.conf: stopping it\n" in out, out
    assert ("netblk: port 7000 differs from /tmp/nb.conf (mtu 1200, not 1400): starting it "
            "again\n") in out, out
    got = instances(g)
    assert set(got) == {7000} and got[7000]["mtu"] == 1400

    g.check("printf 'start /dev/nvme0n1p2 7000\\nstart /dev/nvme0n1p2 7000 ro\\n' >/tmp/bad.conf")
    refused(g, r"^netblkctl: /tmp/bad\.conf:2: port 7000 again \(line 1\); nothing was changed$",
            "restore", "/tmp/bad.conf")
    g.check("printf 'start /dev/nvme0n1p2 7001 mtu=big\\n' >/tmp/bad.conf")
    refused(g, r"/tmp/bad\.conf:1: .*mtu", "restore", "/tmp/bad.conf")
    refused(g, r"cannot read /tmp/none\.conf: No such file.*netblkctl save writes one",
            "restore", "/tmp/none.conf")
    assert set(instances(g)) == {7000} and instances(g)[7000]["mtu"] == 1400


def test_save_keeps_a_keyed_instances_line_and_refuses_to_invent_one(netblk):
    """The kernel never gives a key back: save keeps the file's line that
    names the key file, and without one writes nothing."""
    g = netblk
    g.check("netblkctl genkey >/tmp/k && chmod 600 /tmp/k")
    start(g, P1, 7000, "key=/tmp/k")
    g.check("rm -f /tmp/keyed.conf")
    refused(g, r"port 7000 takes a key, which the kernel does not give back, and "
               r"/tmp/keyed\.conf has no line for it: .*nothing was written",
            "save", "/tmp/keyed.conf")
    assert g.run("test -e /tmp/keyed.conf")[0] != 0
    g.check("echo 'start /dev/nvme0n1p1 7000 key=/tmp/k' >/tmp/keyed.conf")
    assert ctl(g, "save", "/tmp/keyed.conf")[0] == 0
    assert saved_lines(g, "/tmp/keyed.conf") == ["start /dev/nvme0n1p1 7000 key=/tmp/k"]
    assert ctl(g, "stop", "all")[0] == 0
    rc, out, err = ctl(g, "restore", "/tmp/keyed.conf")
    assert rc == 0, (out, err)
    assert instances(g)[7000]["auth"] == "header"


def test_same_device_twice_rw(netblk):
    g = netblk
    start(g, P1, 7000)
    refused(g, r"in use|busy|claimed|exclusive", "start", P1, 7001)
    assert set(instances(g)) == {7000}


def test_mounted_partition(netblk):
    g = netblk
    g.check(f"mount {P2} /mnt && cat /mnt/hello.txt")
    refused(g, r"in use|mounted|busy", "start", P2, 7000)
    start(g, P2, 7000, "ro")
    assert instances(g)[7000]["read_only"] is True
    g.check("cat /mnt/hello.txt; umount /mnt")


def test_whole_disk_vs_partition(netblk):
    g = netblk
    start(g, P1, 7000)
    refused(g, r"in use|busy|claimed|exclusive", "start", DISK, 7001)
    ctl(g, "stop", 7000)
    start(g, DISK, 7001)
    refused(g, r"in use|busy|claimed|exclusive", "start", P1, 7000)
    refused(g, r"in use|busy|claimed|exclusive", "start", P2, 7002)
    assert set(instances(g)) == {7001}
    assert instances(g)[7001]["size_bytes"] == 512 << 20


def test_4k_device_needs_a_jumbo_mtu(netblk):
    """A 4 KiB-sector disk needs an MTU of at least 4178 (4096 behind 82
    bytes): below, the refusal says which; at 9000 it is served on
    virtio-net, whose receive buffers are smaller, through the XDP program's
    multi-buffer support (test_link moves data through it).  vmxnet3, and
    virtio-net before 6.3, run no multi-buffer XDP: there the refusal must
    say it is the XDP attach."""
    g = netblk
    g.check("ip link set eth0 mtu 9000")
    try:
        if not multibuffer_xdp(g.nic):
            # netblkctl attaches the program before the module sees mtu=
            for opts in ([], ["mtu=4000"]):
                rc, out, err = ctl(g, "start", DISK4K, 7000, *opts)
                assert rc != 0 and "multi-buffer XDP: lower eth0's mtu to 3494" in err, (out, err)
            assert instances(g) == {}
            return
        refused(g, r"4096-byte sectors need mtu=4178 or more, not 4000",
                "start", DISK4K, 7000, "mtu=4000")
        start(g, DISK4K, 7000)
        inst = instances(g)[7000]
        assert inst["sector_size"] == 4096 and inst["mtu"] == 9000, inst
        assert inst["stats"]["bad"] == 0, inst
    finally:
        ctl(g, "stop", "all")
        g.check("ip link set eth0 mtu 1500")


def test_stop_all(netblk):
    g = netblk
    start(g, P1, 7000)
    start(g, P2, 7001, "ro")
    rc, out, err = ctl(g, "stop", "all")
    assert rc == 0 and "2" in out, (out, err)
    assert instances(g) == {}
    wait_no_kthreads(g)
    rc, out, err = ctl(g, "stop", "all")
    assert rc == 0 and "0" in out, (out, err)


def test_device_free_after_stop(netblk):
    g = netblk
    start(g, P2, 7000)
    rc, out = g.run(f"mount {P2} /mnt")
    if rc == 0:
        g.run("umount /mnt")
    assert rc != 0, "a partition served read-write could be mounted"
    ctl(g, "stop", 7000)
    g.check(f"mount {P2} /mnt && cat /mnt/hello.txt && umount /mnt")
    start(g, P2, 7000)


def test_rmmod_with_instances(netblk):
    g = netblk
    start(g, P1, 7000)
    start(g, P2, 7001, "ro")
    assert len(kthreads(g)) == 2
    g.check("rmmod netblk", timeout=60)
    wait_no_kthreads(g)
    # every resource is free again: the port, the devices
    g.check(nbudp_listen(7000, "/tmp/nbudp-rmmod.err") + "; rc=$?; kill $p; wait $p; exit $rc")
    g.check(f"mount {P2} /mnt && umount /mnt")
    g.check("modprobe netblk")
    start(g, P1, 7000)
    start(g, P2, 7001)
    assert set(instances(g)) == {7000, 7001}


def test_a_start_on_a_down_nic_waits_for_it(netblk):
    """A boot that restores before the link is up: with nic-loss=wait (the
    default) the instance starts waiting and serves once the NIC is up; with
    nic-loss=stop it is refused.  (vmxnet3 drops its XDP program when it
    closes, not when it opens: the program added to the down NIC runs.)"""
    g = netblk
    g.check("ip link set eth0 down")
    try:
        refused(g, r"eth0 is down: bring it up, or start with nic-loss=wait",
                "start", P1, 7000, "dev=eth0", "nic-loss=stop")
        out = g.check(f"netblkctl start {P1} 7000 dev=eth0")
        assert "waiting: eth0 is down (it serves once the NIC is up)" in out, out
        inst = instances(g)[7000]
        # "eth0 is down" at start; the monitor, looking again, says "eth0 went down"
        assert inst["state"] == "waiting" and inst["waiting_for"] in (
            "eth0 is down", "eth0 went down"), inst
    finally:
        restore_eth0(g)
    wait_state(g, 7000, "serving")
    c = client(g, 7000)
    c.write(0, b"\x5a" * 4096)
    assert c.read(0, 4096) == b"\x5a" * 4096


def test_unprivileged(netblk):
    g = netblk
    start(g, P1, 7000)
    rc, out = g.run(f"su -s /bin/sh nobody -c 'netblkctl start {P2} 7001'")
    assert rc != 0 and re.search(r"not permitted|CAP_NET_ADMIN|root", out), out
    rc, out = g.run("su -s /bin/sh nobody -c 'netblkctl stop 7000'")
    assert rc != 0 and re.search(r"not permitted|CAP_NET_ADMIN|root", out), out
    # LIST and the events name device paths, addresses and allowlists: root's
    for cmd in ("list --json", "stats --prometheus", "watch --count 1"):
        rc, out = g.run(f"su -s /bin/sh nobody -c 'netblkctl {cmd}'")
        assert rc != 0 and re.search(r"not permitted|CAP_NET_ADMIN|root", out), (cmd, out)
        assert "/dev/" not in out, out
    assert json.loads(g.check("netblkctl list --json"))[0]["port"] == 7000


# ---- privilege and the client's attach (netblk_fake.py on the host) --------
# The guest reaches this host as 10.0.2.2 through QEMU's user network, which
# hands its datagrams to 127.0.0.1, where a FakeServer listens.
HOST = "10.0.2.2"
# netblkctl with CAP_NET_ADMIN only: what a packet capture is given
NET_ADMIN_ONLY = "setpriv-util --bounding-set=-all,+net_admin --inh-caps=-all,+net_admin netblkctl"


def fake_server(**kw):
    """A fake instance on the host; zeroes, so the partition scan finds nothing."""
    return FakeServer(size=16 << 20, fill=bytes(4096), **kw)


def drop_reads(hdr) -> bool:
    """FakeServer drop=: every READ answer is lost, INFO's and HELLO's go."""
    return hdr[2] == OP_READ | 0x80


def attached_disks(g):
    return [d["disk"] for d in json.loads(g.check("netblkctl list --attached --json"))]


def detach_all(g):
    g.run("netblkctl detach all --force", timeout=120)


def test_exporting_and_attaching_need_cap_sys_admin(netblk):
    """CAP_NET_ADMIN -- what a packet capture is given -- lists; starting,
    stopping, attaching and detaching need CAP_SYS_ADMIN too, as nbd's
    connect does: they export a disk to the network, or give udev, blkid and
    LVM a partition table the remote side wrote.  The refusal is the
    kernel's, naming the capability that is missing."""
    g = netblk
    assert _SETPRIV, "no setpriv on this host (util-linux) to copy into the guest"
    start(g, P1, 7000)
    srv = fake_server().start()
    try:
        out = g.check(f"netblkctl attach {HOST} {srv.port}", timeout=60)
        assert "/dev/netblk0" in out, out
        caps = g.check(NET_ADMIN_ONLY.replace("netblkctl", "cat /proc/self/status"))
        assert re.search(r"^CapEff:\s*0*1000$", caps, re.M), caps	# CAP_NET_ADMIN alone
        got, want = {}, {}
        for args in (f"start {P2} 7001 ro", "stop 7000", "stop all", f"attach {HOST} {srv.port}",
                     "detach netblk0", "detach all --force"):
            got[args] = g.run(f"{NET_ADMIN_ONLY} {args} 2>&1")
            want[args] = (1, f"netblkctl: {args.split()[0]} needs CAP_SYS_ADMIN and CAP_NET_ADMIN: "
                             f"the caller lacks CAP_SYS_ADMIN\n")
        assert got == want
        assert set(instances(g)) == {7000}
        assert attached_disks(g) == ["netblk0"]
        # LIST stays at CAP_NET_ADMIN: paths and addresses, not the disks
        rc, out = g.run(f"{NET_ADMIN_ONLY} list --json")
        assert rc == 0 and [i["port"] for i in json.loads(out)] == [7000], out
        rc, out = g.run(f"{NET_ADMIN_ONLY} list --attached --json")
        assert rc == 0 and [d["disk"] for d in json.loads(out)] == ["netblk0"], out
        # without CAP_NET_ADMIN either: both named
        rc, out = g.run("su -s /bin/sh nobody -c 'netblkctl detach netblk0' 2>&1")
        assert rc == 1 and out == ("netblkctl: detach needs CAP_SYS_ADMIN and CAP_NET_ADMIN: "
                                   "the caller lacks both\n"), out
        assert ctl(g, "detach", "netblk0")[0] == 0
    finally:
        detach_all(g)
        srv.stop()


def run_timed(g, name, cmd):
    """CMD in the guest's background; its output, exit status and start and
    end (the guest's uptime) land in /tmp/NAME.*"""
    g.check(f"rm -f /tmp/{name}.*; ( read t0 _ </proc/uptime; {cmd} >/tmp/{name}.out 2>&1; "
            f"rc=$?; read t1 _ </proc/uptime; echo $rc $t0 $t1 >/tmp/{name}.tmp; "
            f"mv /tmp/{name}.tmp /tmp/{name}.done ) >/dev/null 2>&1 </dev/null &")


def wait_timed(g, name, seconds):
    """(exit status, seconds it took in the guest, output) of run_timed's
    NAME, waited for up to SECONDS; None if it is still running."""
    deadline = time.monotonic() + seconds
    while True:
        rc, done = g.run(f"cat /tmp/{name}.done 2>/dev/null")
        if rc == 0 and done.strip():
            status, t0, t1 = done.split()
            return int(status), float(t1) - float(t0), g.check(f"cat /tmp/{name}.out")
        if time.monotonic() > deadline:
            return None
        time.sleep(0.2)


def finished_at(g, name):
    """When run_timed's NAME ended, in the guest's uptime."""
    return float(g.check(f"cat /tmp/{name}.done").split()[2])


def wait_reads(srv, sessions, seconds=60):
    """The fake server got READs from @sessions sessions: their attaches
    are in the partition scan."""
    deadline = time.monotonic() + seconds
    while len({r.session for r in srv.requests(OP_READ)}) < sessions:
        assert time.monotonic() < deadline, f"no READ from {sessions} attaches in {seconds} s"
        time.sleep(0.1)


# An attach gives up on READs unanswered for this long (kmod/host/host.h).
ATTACH_IO_WAIT = 15


def test_an_attach_that_hangs_holds_up_nothing_else(netblk):
    """A server that answers INFO and none of the partition scan's READs (an
    instance with an MTU its path does not carry; a disk stuck behind it):
    two attaches to it at once hold up neither each other nor list, a stop of
    an instance or a detach of another device -- each answers well within
    the attaches' deadline -- and each attach fails by that deadline, saying
    what did not answer, leaving no disk behind."""
    g = netblk
    start(g, P1, 7000)
    start(g, P2, 7001, "ro")	# the one stopped: list must still show 7000
    good, bad = fake_server().start(), fake_server(drop=drop_reads).start()
    try:
        out = g.check(f"netblkctl attach {HOST} {good.port}", timeout=60)
        assert "/dev/netblk0" in out, out
        run_timed(g, "hung1", f"netblkctl attach {HOST} {bad.port}")
        run_timed(g, "hung2", f"netblkctl attach {HOST} {bad.port} queue-depth=8")
        wait_reads(bad, 1)
        assert attached_disks(g) == ["netblk0"]	# not the half-made ones
        # All three at once, so that how long each takes on a slow machine (a
        # debug kernel) adds up to nothing: each must end before the attaches
        # give up -- what they waited for before (a bound on a hang, not a
        # timing: the attaches cannot end before their deadline).  What list
        # must show is what neither the stop nor the detach takes away.
        cmds = (("list", "netblkctl list", r"port 7000:"),
                ("stop", "netblkctl stop 7001", r"stopped serving on port 7001"),
                ("detach", "netblkctl detach netblk0", r"1 device detached"))
        for name, cmd, _ in cmds:
            run_timed(g, name, cmd)
        ended = {}
        for name, cmd, want in cmds:
            done = wait_timed(g, name, 30)
            assert done, f"`{cmd}` still blocked 30 s later, behind the hung attaches"
            rc, took, out = done
            assert rc == 0 and re.search(want, out, re.S), (cmd, rc, out)
            ended[cmd] = finished_at(g, name)
            print(f"`{cmd}` took {took:.2f} s while two attaches hung")
        assert list(instances(g)) == [7000]	# 7001 stopped
        wait_reads(bad, 2)	# the second attach is in its scan too, not behind the first
        for name in ("hung1", "hung2"):
            done = wait_timed(g, name, ATTACH_IO_WAIT + 60)
            assert done, f"attach still blocked {ATTACH_IO_WAIT + 60} s after the scan began"
            rc, took, out = done
            assert rc == 1 and re.fullmatch(
                rf"netblkctl: 10\.0\.2\.2:{bad.port} answered INFO but no READ in "
                rf"{ATTACH_IO_WAIT} s \(path MTU\? its disk\?\)\n", out), (rc, out)
            assert took < ATTACH_IO_WAIT + 30, f"the attach took {took:.1f} s"
            print(f"attach {name} failed after {took:.1f} s: {out.strip()}")
            late = {cmd: at for cmd, at in ended.items() if at >= finished_at(g, name)}
            assert not late, f"ended only once attach {name} had given up: {late}"
        assert attached_disks(g) == []
        assert not [d for d in g.check("ls /sys/block").split() if d.startswith("netblk")]
        assert re.search(rf"netblk\d: 10\.0\.2\.2:{bad.port} answered INFO but not the READs",
                         g.dmesg()), g.dmesg()[-2000:]
    finally:
        bad.drop = None	# a module without the deadline: its attaches end
        detach_all(g)
        good.stop()
        bad.stop()


def test_an_attach_with_a_timeout_fails_by_it(netblk):
    """timeout= shorter than the attach's own deadline: the device's I/O
    fails by it, and so does the attach, saying so."""
    g = netblk
    bad = fake_server(drop=drop_reads).start()
    try:
        run_timed(g, "hung", f"netblkctl attach {HOST} {bad.port} timeout=2")
        done = wait_timed(g, "hung", ATTACH_IO_WAIT + 60)
        assert done, "the attach still hangs"
        rc, took, out = done
        assert rc == 1 and re.fullmatch(
            rf"netblkctl: 10\.0\.2\.2:{bad.port} answered INFO but no READ in 2 s "
            rf"\(path MTU\? its disk\?\)\n", out), (rc, out)
        assert took < ATTACH_IO_WAIT, f"the attach took {took:.1f} s, not its timeout=2"
        assert attached_disks(g) == []
    finally:
        bad.drop = None
        detach_all(g)
        bad.stop()


def test_a_detach_of_a_device_still_attaching_gives_it_up(netblk):
    """`detach all` while an attach waits for its partition scan: the attach
    is given up at once, saying so, and counted as detached."""
    g = netblk
    bad = fake_server(drop=drop_reads).start()
    try:
        run_timed(g, "hung", f"netblkctl attach {HOST} {bad.port}")
        wait_reads(bad, 1)
        run_timed(g, "detach", "netblkctl detach all")
        done = wait_timed(g, "detach", 30)
        assert done, "detach all still blocked 30 s later, behind the attach"
        rc, took, out = done
        assert (rc, out) == (0, "netblk: 1 device detached\n"), done
        print(f"`netblkctl detach all` took {took:.2f} s while an attach hung")
        done = wait_timed(g, "hung", 30)
        assert done, "the attach outlived its detach"
        rc, took, out = done
        # what ended it: the detach (its message), not its deadline's
        assert (rc, out) == (1, "netblkctl: /dev/netblk0 was detached while it attached\n"), done
        assert attached_disks(g) == []
        assert not [d for d in g.check("ls /sys/block").split() if d.startswith("netblk")]
    finally:
        bad.drop = None
        detach_all(g)
        bad.stop()


def test_attach_queues_default_to_the_cpus_up_to_the_instances_and_give_up_together(netblk):
    """attach takes one queue a CPU (the guest has 2), at most as many as
    INFO says the instance has -- 1 from a server before queues= -- each
    queue a session of its own; a detach of a device of two queues still
    attaching gives up both."""
    g = netblk
    cpus = int(g.check("nproc"))
    try:
        for queues, want in ((None, 1), (1, 1), (2, min(cpus, 2)), (8, min(cpus, 8))):
            srv = fake_server(queues=queues).start()
            try:
                g.check(f"netblkctl attach {HOST} {srv.port}", timeout=60)
                att = json.loads(g.check("netblkctl list --attached --json"))[0]
                assert att["queues"] == want, (queues, att)
                assert len({r.session for r in srv.requests(OP_INFO)}) == want, queues
                assert len(g.check("ls /sys/block/netblk0/mq").split()) == want
                assert ctl(g, "detach", "netblk0")[0] == 0
            finally:
                detach_all(g)
                srv.stop()
        bad = fake_server(drop=drop_reads, queues=2).start()
        try:
            run_timed(g, "hung", f"netblkctl attach {HOST} {bad.port} queues=2")
            wait_reads(bad, 1)
            assert len({r.session for r in bad.requests(OP_INFO)}) == 2
            run_timed(g, "detach", "netblkctl detach all")
            done = wait_timed(g, "detach", 30)
            assert done and (done[0], done[2]) == (0, "netblk: 1 device detached\n"), done
            done = wait_timed(g, "hung", 30)
            assert done, "the attach outlived its detach"
            assert (done[0], done[2]) == (
                1, "netblkctl: /dev/netblk0 was detached while it attached\n"), done
            assert not [d for d in g.check("ls /sys/block").split() if d.startswith("netblk")]
        finally:
            bad.drop = None
            detach_all(g)
            bad.stop()
    finally:
        detach_all(g)


def test_rmmod_during_an_attach_ends_it(netblk):
    """rmmod while an attach waits for INFO from a silent server: the attach
    is given up at once, saying why, and the module goes without waiting
    for it.  (While the partition scan holds the new disk open, the module
    is in use: rmmod is refused then.)"""
    g = netblk
    silent = fake_server(silent=True).start()
    try:
        run_timed(g, "hung", f"netblkctl attach {HOST} {silent.port}")
        deadline = time.monotonic() + 60
        while not silent.requests(OP_HELLO):
            assert time.monotonic() < deadline, "the attach sent no HELLO in 60 s"
            time.sleep(0.1)
        run_timed(g, "rmmod", "rmmod netblk")
        done = wait_timed(g, "rmmod", 30)
        assert done, "rmmod still blocked 30 s later, behind the attach"
        assert done[0] == 0, done
        done = wait_timed(g, "hung", 30)
        assert done, "the attach outlived the module"
        rc, took, out = done
        assert rc == 1 and out == "netblkctl: netblk is being unloaded\n", (rc, out)
        assert not [d for d in g.check("ls /sys/block").split() if d.startswith("netblk")]
    finally:
        g.run("grep -q '^netblk ' /proc/modules || modprobe netblk", timeout=120)
        detach_all(g)
        silent.stop()


# ---- instances end by themselves (kmod/uapi/netblk_genl.h: stop reasons) ---
def wait_gone(g, port, seconds=30):
    for _ in range(seconds * 5):
        if port not in instances(g):
            return
        g.run("sleep 0.2")
    pytest.fail(f"the instance on port {port} still runs: {instances(g).get(port)}")


def restore_eth0(g):
    g.check("ip link set eth0 up; ip addr add 10.0.2.15/24 dev eth0 2>/dev/null; "
            "ip route add default via 10.0.2.2 2>/dev/null; "
            "for i in $(seq 300); do grep -q up /sys/class/net/eth0/operstate && break; sleep 0.1; done",
            timeout=60)


def test_nic_down_stops_instance(netblk):
    g = netblk
    start(g, P1, 7000, "nic-loss=stop")
    g.check("ip link set eth0 down")
    try:
        wait_gone(g, 7000)
        wait_no_kthreads(g)
    finally:
        restore_eth0(g)
    start(g, P1, 7000)


def test_nic_address_removed_stops_instance(netblk):
    g = netblk
    start(g, P1, 7000, "nic-loss=stop")
    g.check("ip addr del 10.0.2.15/24 dev eth0")
    try:
        wait_gone(g, 7000)
        wait_no_kthreads(g)
    finally:
        restore_eth0(g)


def test_an_instance_waits_for_its_nic_holding_disk_and_port(netblk):
    """nic-loss=wait, the default: down, its address gone, its MTU lowered --
    each time the instance keeps its disk, its port and its worker, says what
    it waits for, and serves again when the NIC is back as it was.  vmxnet3
    drops its XDP program on a reopen (down and up, or an MTU change): there
    the instance, the NIC back, waits for `netblkctl supervise` to add the
    program again -- the first time with none running, to see it wait."""
    g = netblk
    drops_xdp = g.nic == "vmxnet3"
    dropped = "eth0 dropped netblk's XDP program: netblkctl supervise adds it again"
    start(g, P1, 7000, "mtu=1500")
    worker = worker_of(g, 7000)
    supervised = False
    try:
        for n, (breaks, why, reopens) in enumerate((
                ("ip link set eth0 down", "eth0 went down", True),
                ("ip addr del 10.0.2.15/24 dev eth0", "eth0 lost its address 10.0.2.15", False),
                ("ip link set eth0 mtu 1400",
                 "eth0's mtu fell to 1400, below the instance's 1500", True))):
            g.check(breaks)
            inst = wait_state(g, 7000, "waiting")
            assert inst["waiting_for"].startswith(why), inst
            # the port's socket and the worker: still there
            assert g.run("grep -q ':1B58 ' /proc/net/udp")[0] == 0, "port 7000 let go"
            assert worker_of(g, 7000) == worker
            assert "WAITING for" in ctl(g, "list")[1]
            restore_eth0(g)
            g.check("ip link set eth0 mtu 1500")
            if reopens and drops_xdp and not supervised:
                inst = wait_waiting_for(g, 7000, dropped)
                assert inst["xdp_dropped"] > 0, inst
                time.sleep(2)
                assert instances(g)[7000]["state"] == "waiting", "served with no program"
                g.check("(netblkctl supervise >/tmp/supervise.out 2>&1 &)")
                supervised = True
            wait_state(g, 7000, "serving")
            assert instances(g)[7000]["xdp_dropped"] == 0
            # served: the NIC's program steers the port to it again
            c = client(g, 7000, timeout=2.0, tries=10)
            c.write(n << 20, bytes([n + 1]) * 4096)
            assert c.read(n << 20, 4096) == bytes([n + 1]) * 4096
            c.close()
    finally:
        g.run("pkill -f 'netblkctl supervise'")
        restore_eth0(g)
        g.check("ip link set eth0 mtu 1500")
    assert set(instances(g)) == {7000}
    assert "port 7000 serves again: eth0 is back after" in g.dmesg()
    if drops_xdp:
        out = g.check("cat /tmp/supervise.out")
        assert "eth0: added netblk's XDP program again (vmxnet3 dropped it when eth0 reopened); " \
            "ports 7000 serve again" in out, out


def wait_waiting_for(g, port, why, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        inst = instances(g).get(port)
        if inst and inst["state"] == "waiting" and inst["waiting_for"] == why:
            return inst
        assert time.monotonic() < deadline, f"port {port} never waited for {why!r}: {inst}"
        time.sleep(0.2)


def wait_state(g, port, state, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        inst = instances(g).get(port)
        if inst and inst["state"] == state:
            return inst
        assert time.monotonic() < deadline, f"port {port} never {state}: {inst}"
        time.sleep(0.2)


NULLB = "/sys/kernel/config/nullb/nbt"


def test_device_removed_stops_instance(netblk):
    g = netblk
    g.check("modprobe null_blk nr_devices=0; grep -q configfs /proc/mounts || "
            f"mount -t configfs none /sys/kernel/config; mkdir {NULLB}; echo 64 > {NULLB}/size; "
            f"echo 1 > {NULLB}/memory_backed; echo 1 > {NULLB}/power; test -b /dev/nbt")
    try:
        out = start(g, "/dev/nbt", 7000)
        assert "(64 MiB, read-write)" in out, out
        g.check(f"echo 0 > {NULLB}/power", timeout=30)
        wait_gone(g, 7000)
        wait_no_kthreads(g)
    finally:
        ctl(g, "stop", "all")
        g.run(f"echo 0 > {NULLB}/power; rmdir {NULLB}")
    g.check("rmmod null_blk", timeout=30)  # netblk let go of the disk


def test_refusal_messages_whole(netblk):
    """The kernel cuts a formatted extack message (NL_SET_ERR_MSG_FMT) at 79
    characters and logs 'truncated extack' -- every refusal must come whole."""
    g = netblk

    def cut():
        return re.findall(r"truncated extack: (.*)", g.check("dmesg"))

    before = len(cut())
    start(g, P1, 7000)
    g.check(f"mount {P2} /mnt; " + nbudp_listen(7002, "/tmp/nbudp-whole.err"))
    for args in ([P1, 1000], [DISK4K, 7001], [P2, 7002, "ro"], [P2, 7000, "ro"], [P1, 7001],
                 [DISK, 7001], [P2, 7001], ["/dev/nosuchdisk", 7001], ["/dev/null", 7001],
                 [P2, 7001, "ro", "dev=nosuch0"], [P2, 7001, "ro", "mtu=100"],
                 [P2, 7001, "ro", "poll=100000000"], [P2, 7001, "ro", "cpu=64"]):
        rc, out, err = ctl(g, "start", *args)
        assert rc != 0, (args, out)
    ctl(g, "stop", 7999)
    new = cut()[before:]
    assert not new, "messages the kernel cut short:\n" + "\n".join(new)


def test_dmesg_clean(guest):
    """Runs last: nothing since the guest booted -- the tests above, and
    whatever else ran on it before -- made the kernel report a bug (the debug
    kernel's own banners -- kmemleak's, lockdep's -- are no report)."""
    bad = kernel_trouble(kernel_log(guest))
    assert not bad, "\n".join(bad)
