#!/usr/bin/python3
"""The client path: fio on a block device in a second guest.

Two QEMU guests (ci/guest.py) on a private link (link_args: QEMU's dgram
netdev over 127.0.0.1), as the e2e suite's tests/e2e/test_link.py has them:
the server guest serves its emulated NVMe partition /dev/nvme0n1p1 (256 MiB)
on its link NIC, the client guest runs fio on the block device that gives it
back.  Standard library only.

    ci/bench_client.py [--seconds 4] [--systems netblk,nvme-tcp,nbd,aoe,local,md-netblk,md-nvme-tcp]
                       [--rounds 1] [--link dgram|tap]
                       [--nic virtio|vmxnet3] [--out bench/peers/results.json]
    ci/bench_client.py --queues [--rounds 1] [--out bench/queues/results.json]
    (make bench-client BENCH_CLIENT_ARGS='--seconds 8'; make bench runs it too;
     make bench-queues runs --queues)

Systems (the server guest's side, then the client guest's):
  netblk    `netblkctl start /dev/nvme0n1p1 7000 dev=eth1`; `netblkctl attach
            10.9.0.1 7000` -> /dev/netblk0.  At MTU 1500 a datagram carries
            1024 bytes: a 4 KiB write is 4 WRITEs, a 4 KiB read one READ
            answered in 4 datagrams.  Zero copy on the server (its counters).
  nvme-tcp  the kernel's NVMe/TCP target (nvmet, nvmet-tcp) through configfs,
            a namespace on the partition (a block device: nvmet's bdev
            backend, bios straight to the disk, no page cache), port 4420;
            the kernel's nvme-tcp initiator by hand through /dev/nvme-fabrics
            -> /dev/nvmeXn1.  Its target copies WRITE data from the socket
            into its pages; READ data goes out from the bio's pages.
  nbd       nbd-server (Debian's 3.24) on the partition, TCP 10809; the
            kernel's nbd client through nbd-client -> /dev/nbd0.  nbd-server
            reads and writes with pread/pwrite through the server's page
            cache (it has no O_DIRECT): the cache is dropped before each run
            and a `sync` is run, and counted, before the server's CPU is read
            afterwards, so that no write is left in its cache unpaid.  It
            copies every byte twice (socket <-> user space <-> page cache).
  aoe       vblade -d (O_DIRECT) on the partition, shelf 0 slot 0 on eth1;
            the kernel's aoe driver -> /dev/etherd/e0.0.  Raw Ethernet, no
            IP; vblade copies every byte between its raw socket and user space.
  netblk-9000
            netblk with both guests' link NICs at MTU 9000 (virtio-net only:
            vmxnet3 runs no multi-buffer XDP): a datagram carries 8704 bytes,
            a 4 KiB request is one datagram each way.  A WRITE that arrives
            in more than one of virtio-net's 3520-byte receive buffers is
            copied once on the server (docs/jumbo.md).
  nvme-tcp-9000
            nvme-tcp with both guests' link NICs at MTU 9000: the peer on
            the same jumbo link as netblk-9000.
  local     fio on /dev/nvme0n1p1 inside the server guest: the disk's own
            limit (no client guest CPU).
  netblk-q1, netblk-q2
            netblk with `queues=N` on both sides (`netblkctl start ...
            queues=N`, `netblkctl attach ... queues=N`: N blk-mq hardware
            queues, each with its own socket, source port and session) on
            the multi-queue link (--link tap, which these imply): does
            spreading the sessions over the server NIC's two RX queues and
            two workers add instructions a request, and what IOPS does it
            give?  Not in the default set; --queues runs the two side by
            side (4 KiB randread and randwrite at QD 32 and 1).  netblk-q2's
            setup attaches again (up to 8 times) until its two sessions are
            on different server queues, and the row's server counters per
            queue (requests, sessions, steered) are in the results.
  md-netblk, md-nvme-tcp
            the scale-out case: md RAID1 (no bitmap, --assume-clean) in the
            client guest over two devices of one system, /dev/nvme0n1p1 and
            /dev/nvme0n1p2 served by two netblk instances, or by one nvmet
            subsystem with two namespaces; 4 KiB random writes at QD 32 only,
            over 192 MiB.

Workloads, the same fio job for every system (--direct=1, libaio): 4 KiB
random read and random write at queue depth 1 and 32, 128 KiB sequential
read and write at queue depth 8, --seconds each.

The link (--link): `dgram` (the default) is QEMU's dgram netdev over
127.0.0.1, one virtio-net queue each side; `tap` (guest.py's TapLink) is a
network namespace of the benchmark's own holding a bridge and two
multi-queue tap devices (two queues each, handed to QEMU as fds, no vhost),
virtio-net with mq=on and `ethtool -L eth1 combined 2` in both guests, so
that the tun driver's flow steering spreads the client's source ports over
the server's two RX queues; the namespace is removed at the end, also on
failure.

The dgram link's two QEMU sockets are this host's UDP sockets: with Debian's
net.core.rmem_default (208 KiB) they drop the bursts a window of answers
makes (host_udp_rcvbuf_errors in the results), which no real NIC's ring
would; --host-rmem (8 MiB by default) sets it while the guests start, the
same for every system.

Guest CPU per request, on each guest: the `cpu` line of its /proc/stat
before and after a run (everything but idle and iowait, USER_HZ=100: 10 ms a
jiffy), divided by the requests fio completed.  In the guest that runs fio,
fio's own start and exit (a one-request run, the least of three) is taken
off.  Under TCG absolute numbers mean little; only ratios within one run
count.

Guest instructions per request, on each guest (srv/cli Ki/req; --no-insns
leaves them out): the QEMU TCG plugin ci/qemu-plugin/insn_count.c (make
insn-plugin) counts each vCPU's instructions; a row's are its guest's rate
from 40 % to 90 % of its seconds (fio running, not starting or exiting), less
the guest's idle rate, over fio's IOPS.  They do not move with the host's
speed as CPU time does (bench/README.md, "Instructions a request").
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import (DEV, DEV_SIZE, USER_HZ, cpu_us, extract_json, fio_result, fmt_size,  # noqa: E402
                   guest_busy, host_udp_drops, log, parse_cpu, parse_size)
from guest import (NIC, NIC_MODELS, ROOT, Guest, GuestError, TapLink, free_udp_port,  # noqa: E402
                   link_args, run_on_socket)
from insn_count import PLUGIN, InsnCounter  # noqa: E402

SERVER_IP, CLIENT_IP = "10.9.0.1", "10.9.0.2"
PORT = 7000
SYSTEMS = ("netblk", "netblk-9000", "nvme-tcp", "nvme-tcp-9000", "nbd", "aoe", "local", "md-netblk",
           "md-nvme-tcp", "netblk-q1", "netblk-q2")
# netblk with queues=N both sides, on the multi-queue link only (--queues)
QUEUE_SYSTEMS = {"netblk-q1": 1, "netblk-q2": 2}
QUEUE_WORKLOADS = (("randread", 4096, 32), ("randwrite", 4096, 32),
                   ("randread", 4096, 1), ("randwrite", 4096, 1))
LINK_QUEUES = 2  # the tap link's queues a NIC (--link tap)
JUMBO = 9000  # netblk-9000's and nvme-tcp-9000's link MTU, both guests (docs/jumbo.md)
DEV2 = "/dev/nvme0n1p2"  # the second member of the md rows' RAID1
# md RAID1 over two devices of one system: the scale-out case (the rows' size: inside md's)
MD_SYSTEMS = ("md-netblk", "md-nvme-tcp")
MD_WORKLOADS = (("randwrite", 4096, 32),)
MD_SIZE = 192 << 20
NVME_PORT, NBD_PORT = 4420, 10809
NQN = "nqn.2026-12.io.netblk:bench"
NVMET = "/sys/kernel/config/nvmet"
# What each system's server copies of the data, by design (netblk: its counters).
COPIES = {"netblk": "none: the NIC's pages go to the disk, the disk's to the NIC (counters)",
          "netblk-9000": "WRITEs in more than one receive buffer (over 3412 bytes on virtio-net), "
                         "once into the slot's page; the rest none (counters)",
          "nvme-tcp": "WRITE data, socket to its pages; READ data sent from the bio's pages",
          "nvme-tcp-9000": "WRITE data, socket to its pages; READ data sent from the bio's pages",
          "nbd": "all of it, twice: socket <-> nbd-server <-> page cache",
          "aoe": "all of it: raw socket <-> vblade (O_DIRECT to the disk)",
          "local": "-",
          "netblk-q1": "as netblk", "netblk-q2": "as netblk"}
# Server-guest modules and programs, client-guest modules.
SERVER_MODULES = ["nvmet_tcp"]
CLIENT_MODULES = ["nvme_tcp", "nbd", "aoe", "raid1"]
# (fio --rw, block size, queue depth)
WORKLOADS = (("randread", 4096, 1), ("randwrite", 4096, 1),
             ("randread", 4096, 32), ("randwrite", 4096, 32),
             ("read", 131072, 8), ("write", 131072, 8))
FIO_RW = ("randread", "randwrite", "read", "write")


def parse_workloads(text: str) -> tuple:
    """--workloads: RW:BS:QD,... (BS in bytes or with a k suffix) -> the
    WORKLOADS tuples; ValueError saying which item is wrong."""
    out = []
    for item in text.split(","):
        parts = item.split(":")
        if len(parts) != 3 or parts[0] not in FIO_RW:
            raise ValueError(f"{item!r}: RW:BS:QD, RW one of {', '.join(FIO_RW)}")
        rw, bs, qd = parts
        try:
            size = parse_size(bs)
            depth = int(qd)
        except ValueError:
            raise ValueError(f"{item!r}: BS and QD are numbers (4096 or 4k; 32)") from None
        if size <= 0 or size % 512 or depth < 1:
            raise ValueError(f"{item!r}: BS a multiple of 512 bytes, QD 1 or more")
        out.append((rw, size, depth))
    return tuple(out)


def fio_job(dev: str, rw: str, bs: int, depth: int, seconds: float, extra: str = "",
            size: int = DEV_SIZE) -> str:
    return (f"fio --name=bench --filename={dev} --direct=1 --ioengine=libaio --rw={rw} "
            f"--bs={bs} --iodepth={depth} --size={size} --offset=0 --time_based "
            f"--runtime={seconds:g} --randrepeat=1 --lat_percentiles=1 --output-format=json "
            f"{extra}")


def fio_between_stats(g: Guest, job: str, timeout: float) -> tuple[dict, int]:
    """fio in @g between two reads of its /proc/stat, in one command: its
    JSON and the guest's busy jiffies over it."""
    script = ("head -n 1 /proc/stat; echo @@; "
              f"{job} --output=/tmp/fio.json >/tmp/fio.log 2>&1; rc=$?; "
              "echo @@; head -n 1 /proc/stat; echo @@; "
              "if [ $rc -ne 0 ]; then cat /tmp/fio.log; exit $rc; fi; cat /tmp/fio.json")
    rc, out = g.run(script, timeout=int(timeout))
    parts = out.split("@@\n")
    if rc != 0 or len(parts) < 4:
        raise RuntimeError(f"fio in {g.name} failed (exit {rc}): {out[-1500:]}")
    return extract_json(parts[3]), parse_cpu(parts[2]) - parse_cpu(parts[0])


def fio_start_cost(g: Guest, dev: str) -> int:
    """What fio costs @g to start and exit: a one-request run, the least of three."""
    job = fio_job(dev, "randread", 4096, 1, 1, "--number_ios=1")
    return min(fio_between_stats(g, job, 120)[1] for _ in range(3))


class Link:
    """The two guests and the systems' setups on them; @insns: each guest's
    instruction counter (by guest name), or None."""

    def __init__(self, server: Guest, client: Guest, seconds: float,
                 insns: dict[str, InsnCounter] | None = None, tap: TapLink | None = None):
        self.server, self.client, self.seconds = server, client, seconds
        self.tap = tap
        self.start_cost: dict[str, int] = {}
        self.insns = insns
        self.idle: dict[str, float] = {}  # guest name -> instructions a second, idle

    # The part of a row whose instructions are counted, in fractions of its
    # seconds from the moment its command was sent: fio has started (under
    # TCG that takes up to a second) and not yet begun to exit, so neither
    # its start nor its exit is counted, and no estimate of them is needed.
    WINDOW = (0.4, 0.9)

    def insns_now(self) -> dict[str, int] | None:
        return {name: c.total() for name, c in self.insns.items()} if self.insns else None

    def measure_idle(self, seconds: float = 3.0) -> dict[str, float]:
        """Each guest's instructions a second with nothing run (timers, the
        agent, a system's own keep-alives): taken off every row's count."""
        if not self.insns:
            return {}
        n0, t0 = self.insns_now(), time.monotonic()
        time.sleep(seconds)
        n1, dt = self.insns_now(), time.monotonic() - t0
        self.idle = {name: (n1[name] - n0[name]) / dt for name in n0}
        return self.idle

    def busy_rate(self, name: str, n0: dict, n1: dict, seconds: float) -> float:
        """Guest @name's instructions a second between two readings, idle taken off."""
        return max(0.0, (n1[name] - n0[name]) / seconds - self.idle.get(name, 0.0))

    def count_window(self, t0: float) -> tuple[dict, dict, float] | None:
        """Both guests' counts at the edges of WINDOW of the row sent at @t0."""
        if not self.insns:
            return None
        start, end = (t0 + f * self.seconds for f in self.WINDOW)
        time.sleep(max(0.0, start - time.monotonic()))
        n0, ta = self.insns_now(), time.monotonic()
        time.sleep(max(0.0, end - ta))
        return n0, self.insns_now(), time.monotonic() - ta

    def completed(self, dev: str) -> int:
        """The requests @dev in the client guest has completed (its
        /sys/block/*/stat: reads and writes), read through the guest's
        second agent port: the first is running fio."""
        rc, out = run_on_socket(self.client.agent2_sock,
                                f"cat /sys/block/{Path(dev).name}/stat", timeout=20)
        f = out.split()
        if rc != 0 or len(f) < 5:
            raise RuntimeError(f"{dev}'s stat: {out!r}")
        return int(f[0]) + int(f[4])

    def count_window_requests(self, t0: float, dev: str) -> tuple | None:
        """count_window(), and the requests the client's @dev completed
        between its edges: each edge reads the device's count, then the
        instructions, so that both spans are shifted alike (the client's
        `cat` at the far edge is counted, a constant ~1 M instructions)."""
        if not self.insns:
            return None
        start, end = (t0 + f * self.seconds for f in self.WINDOW)
        time.sleep(max(0.0, start - time.monotonic()))
        r0 = self.completed(dev)
        n0, ta = self.insns_now(), time.monotonic()
        time.sleep(max(0.0, end - ta))
        r1 = self.completed(dev)
        return n0, self.insns_now(), time.monotonic() - ta, r1 - r0

    def netblk_setup(self) -> tuple[Guest, str]:
        self.server.check("grep -q '^netblk ' /proc/modules || modprobe netblk")
        self.server.check(f"netblkctl start {DEV} {PORT} dev=eth1")
        self.client.check("grep -q '^netblk ' /proc/modules || modprobe netblk")
        log("bench: " + self.client.check(f"netblkctl attach {SERVER_IP} {PORT}", timeout=60).strip())
        return self.client, "/dev/netblk0"

    def queues_setup(self, queues: int) -> tuple[Guest, str]:
        """netblk with queues=@queues both sides; for more than one, attached
        again until the sessions are on as many server queues (the tun
        driver puts a new flow on a queue by its hash: two source ports may
        hash alike)."""
        self.server.check("grep -q '^netblk ' /proc/modules || modprobe netblk")
        self.server.check(f"netblkctl start {DEV} {PORT} dev=eth1 queues={queues}")
        self.client.check("grep -q '^netblk ' /proc/modules || modprobe netblk")
        for attempt in range(8):
            # a queue's session opens with its HELLO: all are open once attach
            # returns; a detached attempt's stay open on the server until they
            # time out, so the queues that gained one are the new sessions'
            before = [q.get("sessions_open", 0) for q in self.server_queues()]
            log("bench: " + self.client.check(f"netblkctl attach {SERVER_IP} {PORT} "
                                              f"queues={queues}", timeout=60).strip())
            ql = self.server_queues()
            used = sum(1 for q, b in zip(ql, before) if q.get("sessions_open", 0) > b)
            log(f"bench: server queues after attach: " + "; ".join(
                f"cpu {q.get('cpu')} sessions {q.get('sessions_open')}" for q in ql))
            if used >= min(queues, len(ql)):
                self.spread_attempts = attempt + 1
                return self.client, "/dev/netblk0"
            self.client.check("netblkctl detach netblk0", timeout=60)
        raise GuestError(f"queues={queues}: the sessions stayed on {used} server queue(s) "
                         "over 8 attaches")

    def server_instance(self) -> dict:
        return [i for i in json.loads(self.server.check("netblkctl list --json"))
                if i["port"] == PORT][0]

    def server_queues(self) -> list[dict]:
        return self.server_instance().get("queue_list", [])

    def link_mtu(self, mtu: int) -> None:
        for g in (self.server, self.client):
            g.check(f"ip link set eth1 mtu {mtu}")

    def jumbo_setup(self) -> tuple[Guest, str]:
        self.link_mtu(JUMBO)
        return self.netblk_setup()

    def jumbo_teardown(self) -> None:
        self.netblk_teardown()
        self.link_mtu(1500)

    def nvme_jumbo_setup(self) -> tuple[Guest, str]:
        self.link_mtu(JUMBO)
        return self.nvme_setup()

    def nvme_jumbo_teardown(self) -> None:
        self.nvme_teardown()
        self.link_mtu(1500)

    def netblk_counters(self) -> dict:
        inst = [i for i in json.loads(self.server.check("netblkctl list --json"))
                if i["port"] == PORT][0]["stats"]
        attached = json.loads(self.client.check("netblkctl list --attached --json"))[0]
        att = attached["stats"]
        return {"server_bytes_in_place": inst["bytes_zerocopy"],
                "server_bytes_copied": inst["bytes_copied"],
                "client_write_bytes_in_place": att["bytes_in_place"],
                "client_write_bytes_copied": att["bytes_copied"],
                "client_read_bytes_copied": att["read_bytes_copied"],
                "client_datagrams_batched": att["tx_batched"],
                "client_resends": att["timeouts"] + att["fast_resends"] + att["busy"],
                "client_errors": att["errors"],
                "client_queues": attached.get("queues"),
                "server_queue_list": self.server_queues()}

    def netblk_teardown(self) -> None:
        self.client.check("netblkctl detach netblk0", timeout=60)
        self.server.check(f"netblkctl stop {PORT}")

    # ---- nvme-tcp: nvmet on the server, the nvme-tcp initiator on the client
    def nvme_export(self, devs: tuple[str, ...]) -> list[str]:
        """A subsystem with namespace k+1 on devs[k], a TCP port, a
        controller on the client: the namespaces' devices there, in order."""
        sub, port = f"{NVMET}/subsystems/{NQN}", f"{NVMET}/ports/1"
        # configfs stays mounted after the first nvme row (no mountpoint(1) in the guest)
        cmds = ["modprobe nvmet_tcp", "(grep -qs ' /sys/kernel/config configfs ' /proc/mounts || "
                "mount -t configfs none /sys/kernel/config)", f"mkdir {sub}",
                f"echo 1 > {sub}/attr_allow_any_host"]
        for nsid, dev in enumerate(devs, 1):
            cmds += [f"mkdir {sub}/namespaces/{nsid}",
                     f"echo -n {dev} > {sub}/namespaces/{nsid}/device_path",
                     f"echo 1 > {sub}/namespaces/{nsid}/enable"]
        cmds += [f"mkdir {port}", f"echo tcp > {port}/addr_trtype",
                 f"echo ipv4 > {port}/addr_adrfam", f"echo {SERVER_IP} > {port}/addr_traddr",
                 f"echo {NVME_PORT} > {port}/addr_trsvcid", f"ln -s {sub} {port}/subsystems/{NQN}"]
        self.server.check(" && ".join(cmds))
        self.nvme_namespaces = len(devs)
        out = self.client.check(
            "modprobe nvme_tcp && exec 3<>/dev/nvme-fabrics && "
            f"echo 'transport=tcp,traddr={SERVER_IP},trsvcid={NVME_PORT},nqn={NQN}' >&3 && "
            "cat <&3", timeout=60)
        self.nvme_ctrl = "nvme" + out.split("instance=")[1].split(",")[0]
        # the namespaces' multipath heads, nvmeXnY (not a path's hidden nvmeXcZnY):
        # their device is the subsystem, which names the NQN
        names = self.client.check(
            "for i in $(seq 100); do n=0; for d in /sys/block/nvme*n*; do b=${d##*/}; "
            "case $b in nvme*c*) continue;; esac; "
            f"grep -qsx {NQN} $d/device/subsysnqn && n=$((n+1)); done; "
            f"[ $n -ge {len(devs)} ] && break; sleep 0.1; done; "
            "for d in /sys/block/nvme*n*; do b=${d##*/}; case $b in nvme*c*) continue;; esac; "
            f"grep -qsx {NQN} $d/device/subsysnqn && echo $b $(cat $d/nsid 2>/dev/null || "
            "cat $d/device/../$b/nsid 2>/dev/null); done").split("\n")
        by_nsid = {}
        for line in names:
            f = line.split()
            if len(f) == 2:
                by_nsid[int(f[1])] = f"/dev/{f[0]}"
        if sorted(by_nsid) != list(range(1, len(devs) + 1)):
            raise GuestError(f"nvme-tcp: namespaces {sorted(by_nsid)} on the client, "
                             f"{len(devs)} exported: {names}")
        return [by_nsid[k] for k in range(1, len(devs) + 1)]

    def nvme_setup(self) -> tuple[Guest, str]:
        return self.client, self.nvme_export((DEV,))[0]

    def nvme_teardown(self) -> None:
        sub, port = f"{NVMET}/subsystems/{NQN}", f"{NVMET}/ports/1"
        self.client.check(f"echo 1 > /sys/class/nvme/{self.nvme_ctrl}/delete_controller",
                          timeout=60)
        cmds = [f"rm {port}/subsystems/{NQN}", f"rmdir {port}"]
        for nsid in range(1, self.nvme_namespaces + 1):
            cmds += [f"echo 0 > {sub}/namespaces/{nsid}/enable", f"rmdir {sub}/namespaces/{nsid}"]
        self.server.check(" && ".join(cmds + [f"rmdir {sub}"]), timeout=60)

    # ---- md RAID1 over two of a system's devices: how netblk scales past one server
    def md_create(self, a: str, b: str) -> tuple[Guest, str]:
        self.client.check(f"mdadm --create /dev/md0 --run --level=1 --raid-devices=2 "
                          f"--assume-clean --bitmap=none --metadata=1.2 {a} {b}", timeout=120)
        return self.client, "/dev/md0"

    def md_netblk_setup(self) -> tuple[Guest, str]:
        self.server.check("grep -q '^netblk ' /proc/modules || modprobe netblk")
        self.server.check(f"netblkctl start {DEV} {PORT} dev=eth1 && "
                          f"netblkctl start {DEV2} {PORT + 1} dev=eth1")
        self.client.check("grep -q '^netblk ' /proc/modules || modprobe netblk")
        self.client.check(f"netblkctl attach {SERVER_IP} {PORT} && "
                          f"netblkctl attach {SERVER_IP} {PORT + 1}", timeout=60)
        return self.md_create("/dev/netblk0", "/dev/netblk1")

    def md_netblk_teardown(self) -> None:
        self.client.check("mdadm --stop /dev/md0 && netblkctl detach all", timeout=60)
        self.server.check("netblkctl stop all", timeout=60)

    def md_nvme_setup(self) -> tuple[Guest, str]:
        return self.md_create(*self.nvme_export((DEV, DEV2)))

    def md_nvme_teardown(self) -> None:
        self.client.check("mdadm --stop /dev/md0", timeout=60)
        self.nvme_teardown()

    # ---- nbd: nbd-server on the server, the kernel's nbd client on the client
    def nbd_setup(self) -> tuple[Guest, str]:
        self.server.check(f"nbd-server -C /nonexistent -p /run/nbd-server.pid {NBD_PORT} {DEV} "
                          ">/tmp/nbd-server.log 2>&1; sleep 1; kill -0 $(cat /run/nbd-server.pid)"
                          " || { cat /tmp/nbd-server.log; exit 1; }")
        self.client.check(f"modprobe nbd && nbd-client -N '' {SERVER_IP} {NBD_PORT} /dev/nbd0 "
                          "-b 4096", timeout=60)
        return self.client, "/dev/nbd0"

    def nbd_teardown(self) -> None:
        self.client.check("nbd-client -d /dev/nbd0", timeout=60)
        self.server.run("kill $(cat /run/nbd-server.pid); sleep 1", timeout=60)

    # ---- AoE: vblade on the server, the kernel's aoe driver on the client
    def aoe_setup(self) -> tuple[Guest, str]:
        self.server.check(f"vblade -d 0 0 eth1 {DEV} >/tmp/vblade.log 2>&1 & "
                          "echo $! > /tmp/vblade.pid; sleep 1; kill -0 $(cat /tmp/vblade.pid) "
                          "|| { cat /tmp/vblade.log; exit 1; }")
        self.client.check("modprobe aoe aoe_iflist=eth1 && for i in $(seq 100); do "
                          "test -b /dev/etherd/e0.0 && exit 0; "
                          "echo > /dev/etherd/discover 2>/dev/null; sleep 0.2; done; exit 1",
                          timeout=60)
        return self.client, "/dev/etherd/e0.0"

    def aoe_teardown(self) -> None:
        self.client.check("rmmod aoe", timeout=60)
        self.server.run("kill $(cat /tmp/vblade.pid); sleep 1", timeout=60)

    def local_setup(self) -> tuple[Guest, str]:
        return self.server, DEV

    def warm_up(self, system: str, fio_guest: Guest, dev: str, seconds: float) -> None:
        """An untimed run of reads and writes, 4 KiB and 128 KiB, before a
        system's first row: the first row after a setup was often its
        system's slowest (nvme-tcp's randread QD1 177 IOPS against 196 for
        randwrite QD1; netblk-9000's 294 against 389) -- TCG translating the
        paths the first time they run, netblk's window and round-trip
        estimate at their start -- which a later row never paid."""
        size = MD_SIZE if system in MD_SYSTEMS else DEV_SIZE
        job = fio_job(dev, "randrw", 4096, 8, seconds, "--bssplit=4k/50:128k/50", size=size)
        fio_between_stats(fio_guest, job, seconds + 180)

    def run(self, system: str, fio_guest: Guest, dev: str, rw: str, bs: int, depth: int) -> dict:
        key = f"{system}:{fio_guest.name}"
        if key not in self.start_cost:
            self.start_cost[key] = fio_start_cost(fio_guest, dev)
        other = self.server if fio_guest is self.client else None
        if system == "nbd":
            self.server.check("sync; echo 3 > /proc/sys/vm/drop_caches", timeout=300)
        queues0 = self.queue_snapshot() if system in QUEUE_SYSTEMS else None
        s0 = guest_busy(other) if other else 0
        size = MD_SIZE if system in MD_SYSTEMS else DEV_SIZE
        job = fio_job(dev, rw, bs, depth, self.seconds, size=size)
        ran: dict = {}

        def fio() -> None:
            try:
                ran["fio"] = fio_between_stats(fio_guest, job, self.seconds + 180)
            except (RuntimeError, ValueError, GuestError) as e:
                ran["error"] = e

        t0 = time.monotonic()
        thread = threading.Thread(target=fio, name="fio")
        thread.start()
        window = self.count_window_requests(t0, dev) if system in QUEUE_SYSTEMS \
            else self.count_window(t0)
        thread.join()
        wall = time.monotonic() - t0
        if "error" in ran:
            raise ran["error"]
        doc, fio_j = ran["fio"]
        s1 = guest_busy(other) if other else 0
        sync = None
        if system == "nbd" and rw.endswith("write"):
            # what nbd-server buffered in the server's page cache, written back and paid for
            n0, t1 = self.insns_now(), time.monotonic()
            self.server.check("sync", timeout=300)
            s1 = guest_busy(other)
            if n0:
                n1, took = self.insns_now(), time.monotonic() - t1
                sync = self.busy_rate(self.server.name, n0, n1, took) * took
        queues = self.queue_delta(queues0) if queues0 else {}
        res = fio_result(doc, rw.endswith("write"))
        side = doc["jobs"][0]["write" if rw.endswith("write") else "read"]
        ops = max(res["ops"], 1)
        fio_j = max(0, fio_j - self.start_cost[key])
        server_j, client_j = (s1 - s0, fio_j) if other else (fio_j, None)
        return {**res, "mib_s": round(side["bw_bytes"] / (1 << 20), 2),
                "server_busy_jiffies": server_j, "client_busy_jiffies": client_j,
                "server_cpu_us_per_req": round(cpu_us(server_j) / ops, 1),
                "client_cpu_us_per_req": round(cpu_us(client_j) / ops, 1)
                if client_j is not None else None,
                **self.insns_per_req(window[:3] if window else None, res, sync,
                                     other is not None),
                **(self.insns_per_window_req(window) if window and len(window) > 3 else {}),
                **queues, "wall_s": round(wall, 2)}

    def insns_per_window_req(self, window: tuple) -> dict:
        """Thousands of instructions a request on each guest over the
        requests completed in the counted part itself (count_window_requests),
        not over fio's whole-run IOPS: a stall (a resend's timeout) inside or
        outside the counted part then moves both counts alike."""
        n0, n1, seconds, reqs = window
        if reqs <= 0:
            return {}
        return {f"{side}_kinsn_per_wreq": round(
                    self.busy_rate(g.name, n0, n1, seconds) * seconds / reqs / 1000, 2)
                for side, g in (("server", self.server), ("client", self.client))} | \
            {"window_iops": round(reqs / seconds, 1)}

    QUEUE_COUNTERS = ("requests", "steered", "frames_rx", "frames_tx")
    # the instance's (all queues'): how much each wakeup and batch carries
    BATCH_COUNTERS = ("requests", "worker_sleeps", "disk_batches", "tx_batches")

    def queue_snapshot(self) -> dict:
        """The server's per-queue counters, the client's resends and the tap
        link's drops, before a netblk-qN row."""
        att = json.loads(self.client.check("netblkctl list --attached --json"))[0]["stats"]
        inst = self.server_instance()
        return {"queues": inst.get("queue_list", []),
                "batches": {k: inst["stats"].get(k, 0) for k in self.BATCH_COUNTERS},
                "resends": att["timeouts"] + att["fast_resends"] + att["busy"],
                "drops": self.tap.drops() if self.tap else {}}

    def queue_delta(self, before: dict) -> dict:
        """What a netblk-qN row added to queue_snapshot()'s counts: each
        server queue's (by its CPU), the client's resends, the link's drops."""
        after = self.queue_snapshot()
        per = []
        for q0, q1 in zip(before["queues"], after["queues"]):
            per.append({"cpu": q1.get("cpu"), **{k: q1.get(k, 0) - q0.get(k, 0)
                                                 for k in self.QUEUE_COUNTERS}})
        b = {k: after["batches"][k] - before["batches"][k] for k in self.BATCH_COUNTERS}
        per_wakeup = {f"server_requests_per_{name}": round(b["requests"] / b[k], 2) if b[k] else None
                      for k, name in (("worker_sleeps", "sleep"), ("disk_batches", "disk_batch"),
                                      ("tx_batches", "tx_batch"))}
        return {"server_queues": per, **per_wakeup,
                "client_resends": after["resends"] - before["resends"],
                "link_drops": sum(after["drops"].values()) - sum(before["drops"].values())}

    def insns_per_req(self, window: tuple | None, res: dict, sync: float | None,
                      across: bool) -> dict:
        """Thousands of instructions a request on each guest: its rate over
        the row's WINDOW, idle taken off, over fio's rate of requests (@across:
        fio ran in the client guest; else in the server guest, and the client
        guest did nothing).  @sync: the server's instructions writing back
        what nbd-server left in its page cache, shared by the row's requests."""
        if not window or not res["iops"]:
            return {}
        n0, n1, seconds = window
        server = self.busy_rate(self.server.name, n0, n1, seconds) / res["iops"]
        if sync:
            server += sync / max(res["ops"], 1)
        client = self.busy_rate(self.client.name, n0, n1, seconds) / res["iops"] if across \
            else None
        return {"server_kinsn_per_req": round(server / 1000, 2),
                "client_kinsn_per_req": round(client / 1000, 2) if client is not None else None}


def medians(rows: list[dict]) -> list[dict]:
    """One row per system and workload: the medians over the rounds."""
    keys = ("iops", "mib_s", "p50_us", "p99_us", "p999_us", "server_cpu_us_per_req",
            "client_cpu_us_per_req", "server_kinsn_per_req", "client_kinsn_per_req",
            "server_kinsn_per_wreq", "client_kinsn_per_wreq", "window_iops")
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["system"], r["workload"], r["bs"], r["depth"]), []).append(r)
    out = []
    for (system, wl, bs, depth), rs in groups.items():
        m = {"system": system, "workload": wl, "bs": bs, "depth": depth, "rounds": len(rs)}
        for k in keys:
            vals = [r[k] for r in rs if r.get(k) is not None]
            m[k] = round(statistics.median(vals), 1) if vals else None
        out.append(m)
    return out


def ratios(meds: list[dict]) -> list[dict]:
    """netblk and netblk-9000 over each other system, per workload;
    md-netblk over md-nvme-tcp."""
    by = {(m["system"], m["workload"], m["bs"], m["depth"]): m for m in meds}
    out = []
    for (system, wl, bs, depth), m in by.items():
        if system not in ("netblk", "netblk-9000", "md-netblk", "netblk-q2"):
            continue
        md = system in MD_SYSTEMS
        for (other, owl, obs, odepth), o in by.items():
            # netblk-q2 against netblk-q1 only, on their own link
            if (system in QUEUE_SYSTEMS or other in QUEUE_SYSTEMS) and \
                    (system, other) != ("netblk-q2", "netblk-q1"):
                continue
            if other == system or (other in MD_SYSTEMS) != md or \
               (owl, obs, odepth) != (wl, bs, depth):
                continue
            r = {"workload": wl, "bs": bs, "depth": depth, "system": system, "vs": other}
            for k in ("iops", "p99_us", "server_cpu_us_per_req", "client_cpu_us_per_req",
                      "server_kinsn_per_req", "client_kinsn_per_req", "server_kinsn_per_wreq",
                      "client_kinsn_per_wreq"):
                a, b = m.get(k), o.get(k)
                r[k] = round(a / b, 3) if a and b else None
            out.append(r)
    return out


def table(meds: list[dict]) -> str:
    head = (f"{'system':12} {'workload':10} {'bs':>6} {'qd':>3} {'iops':>8} {'MiB/s':>7} "
            f"{'p50 us':>8} {'p99 us':>9} {'p99.9 us':>9} {'srv us/req':>10} {'cli us/req':>10} "
            f"{'srv Ki/req':>10} {'cli Ki/req':>10}")
    lines = [head, "-" * len(head)]
    for m in meds:
        def f(k, w):
            v = m.get(k)
            return f"{'-' if v is None else v:>{w}}"
        lines.append(f"{m['system']:12} {m['workload']:10} {fmt_size(m['bs']):>6} {m['depth']:>3} "
                     f"{f('iops', 8)} {f('mib_s', 7)} {f('p50_us', 8)} {f('p99_us', 9)} "
                     f"{f('p999_us', 9)} {f('server_cpu_us_per_req', 10)} "
                     f"{f('client_cpu_us_per_req', 10)} {f('server_kinsn_per_req', 10)} "
                     f"{f('client_kinsn_per_req', 10)}")
    return "\n".join(lines)


def plot(meds: list[dict], path: Path, title: str) -> bool:
    """Bars per system across the link, a panel per workload: IOPS, p99 and
    server guest CPU a request (Debian's python3-matplotlib); the local disk,
    an order of magnitude off the scale, is a number in the IOPS panel's
    title.  False without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("bench: no plot: python3-matplotlib is not installed")
        return False
    # in the order they ran (WORKLOADS', or --workloads')
    workloads = list(dict.fromkeys((m["workload"], m["bs"], m["depth"]) for m in meds
                                   if m["system"] not in MD_SYSTEMS))
    systems = [s for s in SYSTEMS if s != "local" and s not in MD_SYSTEMS and
               any(m["system"] == s for m in meds)]
    metrics = (("iops", "IOPS (higher is better)"), ("p99_us", "p99 us (lower is better)"),
               ("server_cpu_us_per_req", "server guest CPU us/request (lower is better)"))
    fig, axes = plt.subplots(len(metrics), len(workloads),
                             figsize=(3 * len(workloads), 2.6 * len(metrics)), squeeze=False)
    colours = {"netblk": "tab:green", "netblk-9000": "tab:olive", "nvme-tcp": "tab:blue",
               "nvme-tcp-9000": "tab:cyan", "nbd": "tab:orange", "aoe": "tab:purple",
               "local": "tab:grey"}
    for col, (rw, bs, qd) in enumerate(workloads):
        for row, (key, label) in enumerate(metrics):
            ax = axes[row][col]
            vals = []
            for sy in systems:
                m = next((m for m in meds if (m["system"], m["workload"], m["bs"], m["depth"])
                          == (sy, rw, bs, qd)), None)
                vals.append((m or {}).get(key) or 0)
            ax.bar(range(len(systems)), vals, color=[colours.get(sy, "tab:cyan") for sy in systems])
            ax.set_xticks(range(len(systems)), systems, rotation=45, fontsize=7)
            ax.tick_params(axis="y", labelsize=7)
            if row == 0:
                local = next((m for m in meds if (m["system"], m["workload"], m["bs"],
                                                  m["depth"]) == ("local", rw, bs, qd)), None)
                ax.set_title(f"{rw} {fmt_size(bs)} QD{qd}" +
                             (f"\n(local disk: {local['iops']:.0f})" if local else ""),
                             fontsize=8)
            if col == 0:
                ax.set_ylabel(label, fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def main() -> int:
    ap = argparse.ArgumentParser(description="fio on a block device in a second guest")
    ap.add_argument("--seconds", type=float, default=None,
                    help="seconds per run (BENCH_SECONDS, else 4; --queues: 10)")
    ap.add_argument("--systems", default=None,
                    help="comma-separated, of " + ", ".join(SYSTEMS) +
                         " (all; netblk-9000 only on virtio)")
    ap.add_argument("--warm-up", type=float, default=2, metavar="SECONDS",
                    help="an untimed mixed run after each system's setup, before its first "
                         "row (2; 0: none)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="run every system this many times over, in turn (1)")
    ap.add_argument("--workloads", default=None, metavar="RW:BS:QD,...",
                    help="fio jobs to run instead of the default set, e.g. "
                         "randread:512:32,randread:4k:32 (md systems keep theirs)")
    ap.add_argument("--nic", default=NIC, choices=sorted(NIC_MODELS),
                    help="the guests' NIC model (NETBLK_NIC, virtio by default)")
    ap.add_argument("--out", default=None, help="bench/peers/results.json, and its plot "
                    "bench/peers/results.png (--nic vmxnet3: bench/peers/results-vmxnet3.json)")
    ap.add_argument("--host-rmem", type=int, default=8 << 20, metavar="BYTES",
                    help="this host's net.core.rmem_default while the guests start (the link's "
                         "two QEMU sockets get it; restored after): 8 MiB by default, 0 leaves it")
    ap.add_argument("--link", choices=("dgram", "tap"), default=None,
                    help="the guests' link: QEMU's dgram netdev (one queue; the default), or "
                         "two-queue taps bridged in a network namespace of the benchmark's own "
                         "(the default for netblk-q1/netblk-q2)")
    ap.add_argument("--queues", action="store_true",
                    help="queues=2 against queues=1: --systems netblk-q1,netblk-q2 --link tap, "
                         "4 KiB randread and randwrite at QD 32 and 1 (unless --workloads), "
                         "--seconds 10, --out bench/queues/results.json")
    ap.add_argument("--no-insns", dest="insns", action="store_false",
                    help="do not count the guests' instructions (the TCG plugin, make "
                         "insn-plugin, slows them a little)")
    a = ap.parse_args()
    if a.insns and not PLUGIN.exists():
        ap.error(f"{PLUGIN} is not built: make insn-plugin (or --no-insns)")
    if a.seconds is None:
        # --queues: under a loaded host fio took up to 3 s to start, past
        # WINDOW's 40 % of 4 s; of 10 s the counted part is 4 s to 9 s
        a.seconds = float(os.environ.get("BENCH_SECONDS", 10 if a.queues else 4))
    if a.queues:
        a.systems = a.systems or ",".join(QUEUE_SYSTEMS)
        a.workloads = a.workloads or ",".join(f"{rw}:{bs}:{qd}" for rw, bs, qd in QUEUE_WORKLOADS)
        a.out = a.out or str(ROOT / "bench" / "queues" / "results.json")
    try:
        a.workloads = parse_workloads(a.workloads) if a.workloads else WORKLOADS
    except ValueError as e:
        ap.error(f"--workloads {e}")
    systems = a.systems.split(",") if a.systems else \
        [s for s in SYSTEMS if (s != "netblk-9000" or a.nic == "virtio") and
         s not in QUEUE_SYSTEMS]
    for s in systems:
        if s not in SYSTEMS:
            ap.error(f"unknown system {s!r} (one of {', '.join(SYSTEMS)})")
    if a.link is None:
        a.link = "tap" if set(QUEUE_SYSTEMS) & set(systems) else "dgram"
    elif a.link == "dgram" and set(QUEUE_SYSTEMS) & set(systems):
        ap.error("netblk-q1 and netblk-q2 need --link tap (the dgram link has one queue)")
    if a.rounds < 1:
        ap.error("--rounds must be at least 1")
    need = {"fio": "fio"}
    if "nbd" in systems:
        need.update({"nbd-server": "nbd-server", "nbd-client": "nbd-client"})
    if "aoe" in systems:
        need["vblade"] = "vblade"
    if set(MD_SYSTEMS) & set(systems):
        need["mdadm"] = "mdadm"
    if a.link == "tap":
        need.update({"ethtool": "ethtool", "ip": "iproute2"})
    found = {p: shutil.which(p) or next((str(d / p) for d in (Path("/usr/sbin"), Path("/sbin"))
                                         if (d / p).exists()), None) for p in need}
    missing = [f"{p} (apt-get install {need[p]})" for p, path in found.items() if not path]
    if missing:
        log("bench: missing: " + ", ".join(missing))
        return 2
    if a.out is None:
        suffix = "" if a.nic == "virtio" else f"-{a.nic}"
        a.out = str(ROOT / "bench" / "peers" / f"results{suffix}.json")

    # a SIGTERM (make's, a timeout's) unwinds like an error: the guests and
    # the tap link's namespace are removed on the way out
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    rmem_path = Path("/proc/sys/net/core/rmem_default")
    rmem_old = rmem_path.read_text().strip()
    if a.host_rmem:
        rmem_path.write_text(str(a.host_rmem))
    try:
        return run(a, systems, found)
    finally:
        rmem_path.write_text(rmem_old)


def run(a, systems: list[str], found: dict) -> int:
    """Boot the two guests, run every system's rows, write the results; on
    the tap link, inside its namespace's life."""
    if a.link != "tap":
        return run_on(a, systems, found, None)
    with TapLink(ports=2, queues=LINK_QUEUES) as tap:
        log(f"bench: link: network namespace {tap.netns}, a bridge and two taps of "
            f"{LINK_QUEUES} queues")
        return run_on(a, systems, found, tap)


def run_on(a, systems: list[str], found: dict, tap: TapLink | None) -> int:
    t_start = time.monotonic()
    drops0 = host_udp_drops()
    server_end, client_end = free_udp_port(), free_udp_port()
    model = NIC_MODELS[a.nic][0]
    server_programs = {"/usr/bin/fio": Path(found["fio"])}
    client_programs = dict(server_programs)
    for prog in ("nbd-server", "vblade"):
        if found.get(prog):
            server_programs[f"/usr/sbin/{prog}"] = Path(found[prog])
    if found.get("nbd-client"):
        client_programs["/usr/sbin/nbd-client"] = Path(found["nbd-client"])
    if found.get("mdadm"):
        client_programs["/sbin/mdadm"] = Path(found["mdadm"])
    if tap:
        for programs in (server_programs, client_programs):
            programs["/usr/sbin/ethtool"] = Path(found["ethtool"])

    def link_nic(port: int, local: int, remote: int, mac: str) -> list[str]:
        return tap.args(port, mac, model) if tap else link_args(local, remote, mac, model)
    rows: list[dict] = []
    failures: list[str] = []
    counters: dict[str, dict] = {}
    idle: dict[str, dict] = {}
    insns = {name: InsnCounter(name) for name in ("bench-server", "bench-client")} \
        if a.insns else None
    plugin = {name: c.qemu_args() for name, c in insns.items()} if insns else {}
    with Guest("bench-server", checks=False, extra_programs=server_programs,
               modules=SERVER_MODULES, require_project=True,
               qemu_args=link_nic(0, server_end, client_end, "52:54:00:09:00:01") +
               plugin.get("bench-server", []), pass_fds=tap.fds(0) if tap else (),
               memory=2048, nic=a.nic) as server, \
         Guest("bench-client", checks=False, extra_programs=client_programs,
               modules=CLIENT_MODULES, require_project=True,
               qemu_args=link_nic(1, client_end, server_end, "52:54:00:09:00:02") +
               plugin.get("bench-client", []), pass_fds=tap.fds(1) if tap else (),
               memory=2048, nic=a.nic) as client:
        link_queues = {}
        for g, ip in ((server, SERVER_IP), (client, CLIENT_IP)):
            if tap:
                g.check(f"ethtool -L eth1 combined {LINK_QUEUES}")
            g.check(f"ip link set eth1 up && ip addr add {ip}/24 dev eth1")
            if tap:
                link_queues[g.name] = g.check("ls /sys/class/net/eth1/queues | tr '\\n' ' '; "
                                              "ethtool -l eth1 | tail -n 4 | tr '\\n' ' '").strip()
                log(f"bench: {g.name} eth1: {link_queues[g.name]}")
        link = Link(server, client, a.seconds, insns, tap)
        steps = {"netblk": (link.netblk_setup, link.netblk_teardown),
                 "netblk-9000": (link.jumbo_setup, link.jumbo_teardown),
                 "nvme-tcp": (link.nvme_setup, link.nvme_teardown),
                 "nvme-tcp-9000": (link.nvme_jumbo_setup, link.nvme_jumbo_teardown),
                 "nbd": (link.nbd_setup, link.nbd_teardown),
                 "aoe": (link.aoe_setup, link.aoe_teardown),
                 "local": (link.local_setup, lambda: None),
                 "md-netblk": (link.md_netblk_setup, link.md_netblk_teardown),
                 "md-nvme-tcp": (link.md_nvme_setup, link.md_nvme_teardown),
                 "netblk-q1": (lambda: link.queues_setup(1), link.netblk_teardown),
                 "netblk-q2": (lambda: link.queues_setup(2), link.netblk_teardown)}
        def workloads(system: str):
            return MD_WORKLOADS if system in MD_SYSTEMS else a.workloads

        total = a.rounds * sum(len(workloads(s)) for s in systems)
        done = 0
        for rnd in range(a.rounds):
            for system in SYSTEMS:
                if system not in systems:
                    continue
                setup, teardown = steps[system]
                try:
                    fio_guest, dev = setup()
                except (GuestError, IndexError) as e:
                    log(f"bench: FAILED {system}: its setup: {e}")
                    failures.append(f"{system}: setup: {e}")
                    continue
                if a.warm_up > 0:
                    log(f"bench: {system}: warming up ({a.warm_up:g} s, not measured)")
                    try:
                        link.warm_up(system, fio_guest, dev, a.warm_up)
                    except (RuntimeError, GuestError) as e:
                        log(f"bench: FAILED {system}: its warm-up: {e}")
                        failures.append(f"{system}: warm-up: {e}")
                if insns:
                    rates = link.measure_idle()
                    idle.setdefault(system, []).append({k: round(v) for k, v in rates.items()})
                    log(f"bench: {system}: idle " + ", ".join(
                        f"{k} {v / 1e6:.1f} M instructions/s" for k, v in rates.items()))
                for rw, bs, depth in workloads(system):
                    done += 1
                    what = f"{system} {rw} {fmt_size(bs)} qd{depth}"
                    log(f"bench: [{done}/{total}] {what}" +
                        (f" (round {rnd + 1})" if a.rounds > 1 else ""))
                    try:
                        res = link.run(system, fio_guest, dev, rw, bs, depth)
                    except (RuntimeError, ValueError, KeyError, GuestError) as e:
                        log(f"bench: FAILED {what}: {e}")
                        failures.append(f"{what}: {e}")
                        continue
                    rows.append({"system": system, "workload": rw, "bs": bs, "depth": depth,
                                 "round": rnd, **res})
                if system in ("netblk", "netblk-9000") or system in QUEUE_SYSTEMS:
                    c = link.netblk_counters()
                    if system in QUEUE_SYSTEMS:
                        c["attaches_to_spread"] = getattr(link, "spread_attempts", None)
                        counters.setdefault(system, []).append(c)
                        log(f"bench: {system}: server queues " + "; ".join(
                            f"cpu {q.get('cpu')}: requests {q.get('requests')}, sessions "
                            f"{q.get('sessions_open')}, steered {q.get('steered')}"
                            for q in c["server_queue_list"]))
                    else:
                        counters[system] = c
                teardown()

    drops = host_udp_drops() - drops0
    meds = medians(rows)
    result = {
        "rows": rows, "medians": meds, "ratios": ratios(meds),
        "netblk_counters": counters.get("netblk"),
        "netblk_9000_counters": counters.get("netblk-9000"),
        "netblk_queues_counters": {s: counters[s] for s in QUEUE_SYSTEMS if s in counters} or None,
        "failures": failures,
        "meta": {
            "seconds_per_run": a.seconds, "rounds": a.rounds, "device": DEV,
            "warm_up_seconds": a.warm_up,
            "device_bytes": DEV_SIZE,
            "guests": f"QEMU TCG, 2 vCPUs, 2048 MiB each; {a.nic} link NICs "
                      f"({NIC_MODELS[a.nic][1]}), MTU 1500 (netblk-9000, nvme-tcp-9000: {JUMBO}), "
                      + ("QEMU dgram netdev over 127.0.0.1" if not tap else
                         f"tap netdev, {LINK_QUEUES} queues a NIC (mq=on, vhost=off, ethtool -L "
                         f"combined {LINK_QUEUES}), two taps bridged in a network namespace"),
            "link": a.link, "link_queues": link_queues or None,
            "fio": "--direct=1 --ioengine=libaio, in the client guest (local: the server guest)",
            "fio_start_exit_jiffies": link.start_cost,
            "insns": "guest instructions a request (QEMU TCG plugin ci/qemu-plugin/insn_count.c): "
                     "each guest's rate from 40 % to 90 % of a row's seconds, its idle rate "
                     "(3 s after a system's warm-up) taken off, over fio's IOPS"
                     if insns else None,
            "idle_insns_per_s": idle or None,
            "host_rmem_default": a.host_rmem or None,
            "host_udp_rcvbuf_errors": drops,
            "user_hz": USER_HZ, "host": platform.node(), "host_cpus": os.cpu_count(),
            "wall_seconds": round(time.monotonic() - t_start, 1),
            "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        },
    }
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    png = out.with_suffix(".png")
    if plot(meds, png, f"one run, {a.seconds:g} s a row, QEMU TCG (only ratios count): "
                       f"{result['meta']['date']}"):
        log(f"bench: wrote {png}")
    print(table(meds))
    for r in result["ratios"]:
        print(f"{r['system']}/{r['vs']} {r['workload']} {fmt_size(r['bs'])} qd{r['depth']}: "
              f"iops {r['iops']}, p99 {r['p99_us']}, server CPU/req {r['server_cpu_us_per_req']}"
              + (f", server instructions/req {r['server_kinsn_per_req']}, client "
                 f"{r['client_kinsn_per_req']}" if insns else ""))
    if counters:
        print("netblk: " + ", ".join(f"{k} {v}" for k, v in counters.items()))
    print(f"\nwrote {out} ({result['meta']['wall_seconds']} s; under TCG only ratios count)")
    if failures:
        print("FAILED runs:\n  " + "\n  ".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except GuestError as e:
        log(f"bench: {e}")
        sys.exit(1)
