"""Stuck and slow disks, end to end: a device-mapper device suspended under
load (its I/O waits until resumed) -- alone, and while the NIC or the VLAN
device the instance is on goes away --, and a zoned null_blk device, whose
zone boundaries split the requests that cross them -- which a REQ_NOWAIT
submission never gets through."""

from __future__ import annotations

import re
import threading
import time

import pytest

from nbtest import Rig, client, ctl, host_elf, instances, start, wait_stopped
import netblk as nbc
import rawframes as rf

GUEST_FORWARDS = [7000, 7001]
_DMSETUP = host_elf("dmsetup")
_PROGRAMS = {path: p for path, p in (("/usr/sbin/dmsetup", _DMSETUP),
                                     ("/usr/sbin/ip-full", host_elf("ip")),
                                     ("/usr/sbin/ethtool", host_elf("ethtool"))) if p}
GUEST_OPTIONS = {"modules": ["veth", "8021q"], "extra_programs": _PROGRAMS}
P1, P2 = "/dev/nvme0n1p1", "/dev/nvme0n1p2"
DM = "nbstuck"
# no udev in the guest: libdevmapper makes the /dev/mapper node itself
DMSETUP = "DM_DISABLE_UDEV=1 dmsetup --noudevsync"


class Load(threading.Thread):
    """Reads and writes in a loop until told to stop; errors are expected
    (the disk stops answering), and only counted."""

    def __init__(self, g, port, offset):
        super().__init__(daemon=True)
        self.g, self.port, self.offset = g, port, offset
        self.ops = self.errors = 0
        self.halt = threading.Event()

    def run(self):
        c = client(self.g, self.port, timeout=0.3, tries=3)
        data = bytes(range(256)) * 16
        while not self.halt.is_set():
            try:
                c.write(self.offset, data, window=4)
                c.read(self.offset, len(data), window=4)
                self.ops += 1
            except (nbc.NetblkError, OSError):
                self.errors += 1
        c.close()


@pytest.fixture
def suspended_dm(netblk):
    """A linear device-mapper device over p1; resumed and removed afterwards,
    whatever the test left."""
    if not _DMSETUP:
        pytest.skip("needs dmsetup on the host (ci/install-deps.sh)")
    g = netblk
    g.check(f"{DMSETUP} create {DM} --table \"0 $(blockdev --getsz {P1}) linear {P1} 0\"")
    yield g
    g.run(f"{DMSETUP} resume {DM}; for i in $(seq 50); do netblkctl list | grep -q {DM} || break; "
          f"sleep 0.2; done; {DMSETUP} remove {DM}", timeout=60)


def test_a_stuck_disk_holds_up_its_own_instance_only(suspended_dm):
    g = suspended_dm
    start(g, f"/dev/mapper/{DM}", 7000)
    load = Load(g, 7000, 1 << 20)
    load.start()
    try:
        deadline = time.monotonic() + 30
        while load.ops < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert load.ops >= 3, f"no progress before the suspend: {load.errors} errors"
        # from here the device keeps what it is given until resumed
        g.check(f"{DMSETUP} suspend {DM}", timeout=60)
        time.sleep(1)
    finally:
        load.halt.set()
        load.join(10)

    t0 = time.monotonic()
    rc, out, err = ctl(g, "stop", 7000)
    waited = time.monotonic() - t0
    assert rc == 1 and "no longer serves but still waits for the disk" in err, (rc, out, err)
    assert waited < 30, f"stop took {waited:.0f} s"
    e = instances(g)[7000]
    assert e["state"] == "stopping" and e["stats"]["inflight_disk"] > 0, e
    assert re.search(r"STOPPING for \d+ s: no longer serves, waits for [1-9]\d* requests at the disk",
                     g.check("netblkctl list"))
    assert re.search(rf"port 7000 no longer serves, but \d+ requests are still at /dev/mapper/{DM}",
                     g.dmesg())

    # everything else goes on: another instance starts, serves and stops
    t0 = time.monotonic()
    start(g, P2, 7001, "ro")
    assert client(g, 7001, timeout=1, tries=5).info().read_only
    rc, out, err = ctl(g, "stop", 7001)
    assert rc == 0, (out, err)
    assert time.monotonic() - t0 < 30
    # the port is not free yet, and says why
    rc, out, err = ctl(g, "start", P2, 7000, "ro")
    assert rc == 1 and "still stopping" in err, err
    # rmmod cannot wait for a disk that may never answer: the module is in use
    assert g.check("cat /sys/module/netblk/refcnt").strip() == "1"
    rc, out = g.run("rmmod netblk 2>&1")
    assert rc != 0 and re.search(r"in use|temporarily unavailable", out), out
    assert "netblk" in g.check("cat /proc/modules")

    g.check(f"{DMSETUP} resume {DM}")
    for _ in range(100):
        if 7000 not in instances(g):
            break
        g.run("sleep 0.1")
    assert 7000 not in instances(g), instances(g)
    assert f"stopped serving /dev/mapper/{DM} on port 7000" in g.dmesg()
    # what it held is free again: the device, the port, the module
    start(g, f"/dev/mapper/{DM}", 7000)
    g.check("netblkctl stop 7000")
    g.check("rmmod netblk && modprobe netblk")


TRACE = "/sys/kernel/tracing"


def pool_releases(g) -> dict[str, list[int]]:
    """Each page pool's in-flight page counts, in order, as the kernel's
    page_pool_release tracepoint saw them: once when its driver destroyed
    it, then every second while pages are still out, until 0 and the pool
    is freed.  (vmxnet3 gives its pools no netdev, so the netdev netlink
    family's page-pool listing does not show them; the tracepoint does.)"""
    seen: dict[str, list[int]] = {}
    for m in re.finditer(r"page_pool_release: page_pool=(\S+) inflight=(-?\d+)",
                         g.check(f"cat {TRACE}/trace")):
        seen.setdefault(m[1], []).append(int(m[2]))
    return seen


def pools_waiting(g) -> dict[str, list[int]]:
    """The destroyed page pools still waiting for pages (a release retry
    later): there must be some while a stuck disk holds the NIC's frames."""
    g.run("sleep 1.5")  # one release retry
    waiting = {p: n for p, n in pool_releases(g).items() if n[-1] > 0}
    assert waiting, f"no destroyed pool waits for its pages: {pool_releases(g)}"
    return waiting


def wait_pools_freed(g, waiting):
    """Every pool of @waiting got its pages back and was freed."""
    for _ in range(50):
        if all(pool_releases(g)[p][-1] == 0 for p in waiting):
            return
        g.run("sleep 0.2")
    pytest.fail(f"pages never came back: {pool_releases(g)}")


def test_nic_down_while_the_disk_holds_its_frames(suspended_dm):
    """WRITEs at a stuck disk hold the frames the NIC received them in
    (vmxnet3: pages of its page_pool).  The NIC goes down meanwhile: the
    instance stops and keeps them until the disk answers, then gives them
    back -- and the pool the driver destroyed on the way down, kept alive by
    those pages, is freed."""
    g = suspended_dm
    # Only vmxnet3 has a page_pool to watch.  Turning a tracepoint on or off
    # patches kernel text, which QEMU's TCG with two CPUs has been seen to
    # oops on (int3 in __schedule): done only where the trace is read.
    traced = g.nic == "vmxnet3"
    if traced:
        g.check(f"echo > {TRACE}/trace; echo 1 > {TRACE}/events/page_pool/page_pool_release/enable")
    start(g, f"/dev/mapper/{DM}", 7000, "nic-loss=stop")
    g.check(f"{DMSETUP} suspend {DM}", timeout=60)
    load = Load(g, 7000, 1 << 20)
    load.start()
    try:
        for _ in range(300):
            if instances(g)[7000]["stats"]["inflight_disk"] >= 4:
                break
            time.sleep(0.1)
        held = instances(g)[7000]["stats"]["inflight_disk"]
        assert held >= 4, instances(g)[7000]["stats"]
    finally:
        load.halt.set()
        load.join(10)
    try:
        if traced:
            g.check(f"echo > {TRACE}/trace")
        g.check("ip link set eth0 down")
        for _ in range(300):
            e = instances(g).get(7000)
            if e and e["state"] == "stopping":
                break
            g.run("sleep 0.1")
        assert instances(g)[7000]["state"] == "stopping"
        if traced:
            waiting = pools_waiting(g)
        g.check(f"{DMSETUP} resume {DM}")
        wait_stopped(g, 7000, "eth0 went down", 30)
        if traced:
            wait_pools_freed(g, waiting)
    finally:
        if traced:
            g.run(f"echo 0 > {TRACE}/events/page_pool/page_pool_release/enable")
        g.run("ip link set eth0 up; ip addr add 10.0.2.15/24 dev eth0 2>/dev/null; "
              "ip route add default via 10.0.2.2 2>/dev/null; "
              "for i in $(seq 100); do grep -q up /sys/class/net/eth0/operstate && break; "
              "sleep 0.1; done", timeout=60)
    start(g, P2, 7001, "ro")
    assert client(g, 7001, timeout=1, tries=5).info().read_only


# --------------------------------------------------------------------------
# the NIC, or the VLAN device the instance answers on, goes while the disk is
# stuck: its unregistration waits for every reference to the device, and
# must not wait for the disk
# --------------------------------------------------------------------------
DM_A, DM_B = f"{DM}-a", f"{DM}-b"
VPORT = Rig.PORT	# the port Rig (nbtest) talks to
VLAN_IP, VLAN_CLIENT_IP = "10.9.5.1", "10.9.5.2"
# A bound against waiting for the disk, not a measure of how fast it is: a
# device that waits for the disk waits until the test resumes it.
GONE_WITHIN = 20


def in_background(g, cmd, name):
    """CMD run in the background in the guest; returned(g, name, ...) waits for it."""
    g.check(f"rm -f /tmp/{name}.rc; ( {cmd}; echo $? > /tmp/{name}.rc ) "
            f"</dev/null >/tmp/{name}.out 2>&1 &")


def returned(g, name, seconds):
    """The exit status of in_background's NAME once it has returned, within
    SECONDS; None if it has not."""
    deadline = time.monotonic() + seconds
    while True:
        rc, out = g.run(f"cat /tmp/{name}.rc")
        if rc == 0 and out.strip():
            return int(out)
        if time.monotonic() > deadline:
            return None
        g.run("sleep 0.2")


def gone_at_once(g, cmd, name, resume):
    """CMD, which unregisters a device an instance with a stuck disk is on,
    must return within GONE_WITHIN seconds.  If it does not, the disk is
    resumed (shell RESUME), which lets it return, and the test fails."""
    in_background(g, cmd, name)
    rc = returned(g, name, GONE_WITHIN)
    if rc is None:
        g.check(resume, timeout=60)
        late = returned(g, name, 120)
        pytest.fail(f"`{cmd}` had not returned {GONE_WITHIN} s later, with the disk stuck; "
                    f"it returned ({late}) once the disk was resumed")
    assert rc == 0, g.run(f"cat /tmp/{name}.out")[1]


def wait_in_flight(g, port, least):
    """The instance's requests at the disk, once at least LEAST."""
    for _ in range(300):
        held = instances(g)[port]["stats"]["inflight_disk"]
        if held >= least:
            return held
        g.run("sleep 0.1")
    pytest.fail(f"fewer than {least} requests reached the disk: {instances(g)[port]['stats']}")


@pytest.fixture
def split_dm(netblk):
    """nbstuck, whose halves can be frozen apart: its first half is
    nbstuck-a (p1's first half), its second nbstuck-b (p1's second half).
    Resumed and removed afterwards, whatever the test left."""
    if not _DMSETUP:
        pytest.skip("needs dmsetup on the host (ci/install-deps.sh)")
    g = netblk
    g.check(f"h=$(( $(blockdev --getsz {P1}) / 2 )) && "
            f"{DMSETUP} create {DM_A} --table \"0 $h linear {P1} 0\" && "
            f"{DMSETUP} create {DM_B} --table \"0 $h linear {P1} $h\" && "
            f"printf '0 %s linear /dev/mapper/{DM_A} 0\\n%s %s linear /dev/mapper/{DM_B} 0\\n' "
            f"$h $h $h | {DMSETUP} create {DM}")
    yield g
    g.run(f"{DMSETUP} resume {DM_A}; {DMSETUP} resume {DM_B}; "
          f"for i in $(seq 50); do netblkctl list | grep -q {DM} || break; sleep 0.2; done; "
          f"{DMSETUP} remove {DM}; {DMSETUP} remove {DM_A}; {DMSETUP} remove {DM_B}", timeout=60)


@pytest.fixture
def vlan_rig(split_dm):
    """test_hostile's veth pair -- nbv0, the instance's NIC, and nbv1, where
    its client's raw frames come from -- with VLAN 5 on nbv0: nbv0.5,
    10.9.5.1.  Afterwards the disk answers first, then the pair goes."""
    if len(_PROGRAMS) < 3:
        pytest.skip("needs dmsetup, iproute2's ip and ethtool on the host (ci/install-deps.sh)")
    g = split_dm
    g.check("ip-full link del nbv0 2>/dev/null; ip-full link add nbv0 type veth peer name nbv1 && "
            "ip link set nbv0 up && ip link set nbv1 up && "
            # veth strips VLAN tags from skbs it is handed: XDP must see them
            "ethtool -K nbv0 rxvlan off rx-vlan-stag-hw-parse off && "
            # veth transmits XDP frames only to a peer with NAPI, which GRO gives it
            "ethtool -K nbv1 gro on && "
            "ip-full link add link nbv0 name nbv0.5 type vlan id 5 && ip link set nbv0.5 up && "
            f"ip addr add {VLAN_IP}/24 dev nbv0.5")
    yield Rig(g)
    g.run(f"{DMSETUP} resume {DM_A}; {DMSETUP} resume {DM_B}; ip-full link del nbv0 2>/dev/null; "
          "true", timeout=60)


def io_requests(rig, session, offsets, **kw):
    """A READ of 4 KiB and a WRITE of 1 KiB by each offset, numbered 1, 2, ..."""
    frames = []
    for off in offsets:
        frames.append(rig.request(nbc.OP_READ, off, 4096, handle=len(frames) + 1, session=session,
                                  **kw))
        w = rig.request(nbc.OP_WRITE, off + 65536, 1024, handle=len(frames) + 1, session=session,
                        **kw)
        w.payload += bytes(range(256)) * 4
        frames.append(w)
    return frames


@pytest.mark.parametrize("gone", ["nbv0.5", "nbv0"])
def test_a_device_the_instance_is_on_goes_at_once_while_its_disk_is_stuck(vlan_rig, gone):
    """The instance serves on nbv0 and answers on its VLAN 5 device, nbv0.5,
    and its disk stops answering with READs and WRITEs at it.  Deleting the
    VLAN device -- or nbv0, and its VLAN device with it -- returns at once:
    the instance stops and lets go of both devices, rather than hold their
    unregistration (`ip link del` in netdev_wait_allrefs) until the disk
    answers.  When half of the disk answers, its replies are dropped and
    counted -- nothing goes out --, and when the rest does, the instance is
    released, leaking nothing, and the module unloads."""
    rig = vlan_rig
    g = rig.g
    to_vlan = dict(vlan=5, dst_ip=VLAN_IP, src_ip=VLAN_CLIENT_IP)
    start(g, f"/dev/mapper/{DM}", VPORT, "dev=nbv0.5")
    session = rig.open_session(**to_vlan)
    half = instances(g)[VPORT]["size_bytes"] // 2
    g.check(f"{DMSETUP} suspend {DM_A} && {DMSETUP} suspend {DM_B}", timeout=60)
    rig.exchange(*io_requests(rig, session, [1 << 20, 2 << 20, half + (1 << 20), half + (2 << 20)],
                              **to_vlan), wait_ms=100)
    wait_in_flight(g, VPORT, 8)
    before = instances(g)[VPORT]["stats"]

    gone_at_once(g, f"ip-full link del {gone}", "del",
                 f"{DMSETUP} resume {DM_A} && {DMSETUP} resume {DM_B}")
    e = instances(g)[VPORT]
    assert e["state"] == "stopping" and e["ifname"] == "nbv0", e
    assert e["stats"]["inflight_disk"] == before["inflight_disk"], e["stats"]
    assert re.search(rf"port {VPORT} lets go of {re.escape(gone)}: it is going away", g.dmesg())
    assert f"on nbv0 vlan 5 {VLAN_IP}, " in g.check("netblkctl list")

    # half of the disk answers: what it answers is dropped, counted, not sent
    listen = gone == "nbv0.5"	# nbv1 went with nbv0 otherwise
    if listen:
        g.check("nbraw nbv1 -w 300000 </dev/null >/tmp/listen.out 2>&1 & "
                "echo $! > /tmp/listen.pid; sleep 0.5")
    g.check(f"{DMSETUP} resume {DM_A}")
    for _ in range(300):
        s = instances(g)[VPORT]["stats"]
        if s["inflight_disk"] < before["inflight_disk"] and \
                s["replies_dropped"] > before["replies_dropped"]:
            break
        g.run("sleep 0.1")
    assert 0 < s["inflight_disk"] < before["inflight_disk"], s
    assert s["replies_dropped"] > before["replies_dropped"], s
    assert s["frames_tx"] == before["frames_tx"], s
    if listen:
        g.check("sleep 0.5; kill $(cat /tmp/listen.pid)")
        from_it = [line for line in g.check("cat /tmp/listen.out").split()
                   if (f := rf.parse(bytes.fromhex(line))) and f.src_port == VPORT]
        assert not from_it, f"replies went out through nbv0: {from_it}"

    g.check(f"{DMSETUP} resume {DM_B}")
    wait_stopped(g, VPORT, rf": {re.escape(gone)} is going away$", 30)
    g.check("rmmod netblk && modprobe netblk")


def test_the_nic_goes_at_once_while_its_disk_holds_its_frames(suspended_dm):
    """eth0's driver is unbound -- a VF removed, a driver reloaded -- while
    WRITEs at a stuck disk hold the frames eth0 received them in (vmxnet3:
    pages of its page_pool).  The unbind returns at once: the instance stops
    and lets go of eth0.  Once the disk answers, the frames go back and the
    instance is released; bound again, eth0 serves."""
    g = suspended_dm
    traced = g.nic == "vmxnet3"	# as in test_nic_down_while_the_disk_holds_its_frames
    start(g, f"/dev/mapper/{DM}", 7000)
    g.check(f"{DMSETUP} suspend {DM}", timeout=60)
    load = Load(g, 7000, 1 << 20)
    load.start()
    try:
        wait_in_flight(g, 7000, 4)
    finally:
        load.halt.set()
        load.join(10)
    g.check("d=$(readlink -f /sys/class/net/eth0/device) && echo ${d##*/} > /tmp/nic.dev && "
            "readlink -f $d/driver > /tmp/nic.drv")
    if traced:
        g.check(f"echo > {TRACE}/trace; echo 1 > {TRACE}/events/page_pool/page_pool_release/enable")
    try:
        gone_at_once(g, "cat /tmp/nic.dev > $(cat /tmp/nic.drv)/unbind", "unbind",
                     f"{DMSETUP} resume {DM}")
        e = instances(g)[7000]
        assert e["state"] == "stopping" and e["ifname"] == "eth0", e
        assert e["stats"]["inflight_disk"] > 0, e["stats"]
        assert g.run("test -e /sys/class/net/eth0")[0] != 0, "eth0 is still there"
        g.check("netblkctl list")
        if traced:
            waiting = pools_waiting(g)
        g.check(f"{DMSETUP} resume {DM}")
        wait_stopped(g, 7000, r": eth0 is going away$", 30)
        if traced:
            wait_pools_freed(g, waiting)
    finally:
        if traced:
            g.run(f"echo 0 > {TRACE}/events/page_pool/page_pool_release/enable")
        g.run("test -e /sys/class/net/eth0 || cat /tmp/nic.dev > $(cat /tmp/nic.drv)/bind; "
              "for i in $(seq 100); do test -e /sys/class/net/eth0 && break; sleep 0.1; done; "
              "ip link set eth0 up; ip addr add 10.0.2.15/24 dev eth0 2>/dev/null; "
              "ip route add default via 10.0.2.2 2>/dev/null; "
              "for i in $(seq 100); do grep -q up /sys/class/net/eth0/operstate && break; "
              "sleep 0.1; done", timeout=60)
    start(g, P2, 7001, "ro")
    assert client(g, 7001, timeout=1, tries=5).info().read_only


NULLB = "/sys/kernel/config/nullb/nbzoned"


@pytest.fixture
def zoned_disk(netblk):
    """A memory-backed zoned null_blk of four 1 MiB zones, the first three
    conventional (written anywhere): the block layer splits any bio that
    crosses a zone boundary, and refuses to under REQ_NOWAIT."""
    g = netblk
    g.check("modprobe null_blk nr_devices=0; grep -q configfs /proc/mounts || "
            "mount -t configfs none /sys/kernel/config; "
            f"mkdir {NULLB} && cd {NULLB} && echo 4 > size && echo 1 > memory_backed && "
            "echo 1 > zoned && echo 1 > zone_size && echo 3 > zone_nr_conv && echo 1 > power")
    yield g, "/dev/nbzoned"	# null_blk names the disk after its configfs directory
    g.run(f"netblkctl stop all >/dev/null 2>&1; echo 0 > {NULLB}/power; rmdir {NULLB}; "
          "rmmod null_blk", timeout=60)


def test_a_request_the_disk_takes_only_without_nowait_is_served(zoned_disk):
    """A bio the block layer must split gets BLK_STS_AGAIN under REQ_NOWAIT,
    every time: after a few tries with a backoff, the worker submits it
    without REQ_NOWAIT -- rather than retry it forever."""
    g, dev = zoned_disk
    start(g, dev, 7000)
    across = (1 << 20) - 512	# 1 KiB across the boundary of zones 0 and 1
    data = bytes(range(256)) * 4
    with client(g, 7000, timeout=1, tries=5) as c:
        c.write(across, data)
        assert c.read(across, 1024) == data
        assert c.read(0, 1024) == bytes(1024), "one zone only: no split"
    s = instances(g)[7000]["stats"]
    assert s["io_errors"] == 0 and s["disk_gave_up"] == 0, s
    assert s["disk_blocking"] == 2 and s["disk_busy"] == 6, s
