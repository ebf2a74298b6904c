#!/usr/bin/python3
"""The netblk test guest: the Debian 6.12 cloud kernel in QEMU (TCG), a
busybox initramfs, two NVMe disks, user-mode networking with UDP forwards
from 127.0.0.1, and a command agent on virtio-serial.  Standard library only.

    from guest import Guest                      # with ci/ on sys.path
    with Guest("mytest", forwards=[7000]) as g:  # host port picked for 7000
        g.check("modprobe netblk")
        rc, out = g.run("netblkctl list", timeout=30)
        hp = g.host_port(7000)                   # send UDP to 127.0.0.1:hp

Guest devices (fixed, checked at every boot):
  /dev/nvme0n1   512 MiB, 512-byte sectors, serial NETBLK0, GPT:
                   /dev/nvme0n1p1  256 MiB, no filesystem ("netblk-raw")
                   /dev/nvme0n1p2  the rest, ext4 label "netblk-ext4"
                                   holding /hello.txt
  /dev/nvme1n1   64 MiB, 4096-byte logical and physical blocks, serial
                 NETBLK1, blank
  The disks are per-guest copies (build/guest/<name>.<pid>.nvme{0,1}.img) of the
  templates build/guest/disk.img and disk4k.img, so every boot starts clean;
  they are deleted when the guest stops unless keep_disks=True.
  NVMe probes asynchronously, so the controllers can come up in either
  order; /init then unbinds both and binds them again in order (sysfs bind
  probes synchronously), and the host checks the serials after boot
  (rebooting if they are still swapped), so the names above always hold.
  eth0           virtio-net (NETBLK_NIC=vmxnet3: vmxnet3), 10.0.2.15/24,
                 gateway 10.0.2.2 (QEMU user-net);
                 UDP to 127.0.0.1:<host port> reaches 10.0.2.15:<guest port>
                 from 10.0.2.2.
  /dev/virtio-ports/netblk.agent, netblk.agent2   the command agents; the
                 host ends are build/guest/<name>.<pid>.agent.sock and
                 .agent2.sock (under /tmp/netblk-<hash>/ when the
                 checkout's path is too long for a Unix socket).
                 Independent of eth0.
  Kernel: Debian's 6.12 cloud kernel (build/kernel, ci/fetch-kernel.sh);
  with NETBLK_KERNEL=6.1 Debian 12's own 6.1 cloud kernel (build/kernel-6.1,
  `ci/fetch-kernel.sh 6.1`) and its netblk.ko (build/module-6.1,
  `make module-6.1`); with NETBLK_KERNEL=debug the debug one (build/debug-kernel,
  ci/debug-kernel.sh: KASAN, lockdep, kmemleak, DEBUG_ATOMIC_SLEEP, the
  drivers built in, booted with acpi=noirq hpet=disable tsc=reliable) and its netblk.ko
  (build/debug-module, `make debug-module`).
  Tools: busybox (all applets), netblkctl in /usr/sbin, netblk.ko as
  /lib/modules/$REL/extra/netblk.ko (`modprobe netblk`), nbudp (UDP
  listen/send helper; busybox nc here has no -u), nbraw (raw frames), nbiov
  (scattered O_DIRECT writev, read back), nbreuse (an O_DIRECT write whose
  buffer is filled again if it fails), modules virtio_net,
  null_blk, loop, dm-mod.

Commands: run(cmd, timeout) sends a script to the agent, which runs it with
  sh (cwd /, stdin /dev/null, stdout+stderr together) and kills it after
  timeout s (exit 137); the host gives up timeout+20 s later (a task stuck in
  D state), marks the guest broken and reports the console tail and the
  blocked tasks (sysrq w, through the second agent port).  A Guest is not
  thread-safe: one command at a time.  QEMU dies with its parent
  (PR_SET_PDEATHSIG) and at exit (atexit).

Logs: build/guest/console-<name>.<pid>.log (serial console, kernel loglevel
  5: warnings, oopses and /init's lines), qemu-<name>.<pid>.log (QEMU's
  command line and messages); <pid> is the process that runs the guest, and
  a later boot of the same name removes those of processes that are gone.
  Boot timeout: NETBLK_BOOT_TIMEOUT (s, default 300: a hang, not a slow
  host).

Kernel checks (checks=True, what the tests use): the kernel boots with
  CHECKS_CMDLINE -- SLUB debugging (red zones, poisoning, sanity checks),
  KFENCE sampling every 10 ms, memory zeroed on free, and a panic on any WARN
  or soft lockup -- and kernel_trouble() finds what the kernel reported.  The
  benchmark and the demo boot without them: they cost CPU.

Architecture: NETBLK_ARCH=arm64 boots Debian's arm64 6.12 cloud kernel
  (build/kernel-arm64, `NETBLK_ARCH=arm64 ci/fetch-kernel.sh`) in
  qemu-system-aarch64 (virt machine, TCG, console ttyAMA0), with the
  cross-built netblk.ko (build/module-arm64, `make module-arm64`) and
  netblkctl (build/arm64/netblkctl, `make netblkctl-arm64`); busybox and any
  other arm64 program come from build/sysroot-arm64 (ci/fetch-sysroot.sh).
  The devices are the same.

CLI:  ci/guest.py build                      build initramfs and disk images
      ci/guest.py run [-f G|H:G]... 'CMD'    boot, run CMD, print, shut down
"""

from __future__ import annotations

import argparse
import atexit
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import initramfs  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build" / "guest"
DEBUG_KERNEL = ROOT / "build" / "debug-kernel"
# NETBLK_KERNEL: the guest's kernel -- where it is unpacked, the series
# ci/fetch-kernel.sh fetches it by, and where its netblk.ko is built.  Every
# kernel but the tree's own (6.12) has its module built apart, in a copy of
# kmod/ (make module-6.1, make debug-module).
FLAVOURS = {
    "cloud": (ROOT / "build" / "kernel", "6.12", ROOT / "kmod"),
    "6.1": (ROOT / "build" / "kernel-6.1", "6.1", ROOT / "build" / "module-6.1" / "kmod"),
    "debug": (DEBUG_KERNEL, None, ROOT / "build" / "debug-module" / "kmod"),
}
FLAVOUR = os.environ.get("NETBLK_KERNEL", "cloud")
FLAVOUR = "cloud" if FLAVOUR == "6.12" else FLAVOUR
# NETBLK_ARCH: the guest's architecture, amd64 or arm64 (the 6.12 cloud
# kernel only, cross-built netblk.ko and netblkctl).
ARCH = os.environ.get("NETBLK_ARCH", "amd64")
if ARCH not in initramfs.ARCHES:
    raise SystemExit(f"NETBLK_ARCH={ARCH!r}: one of {', '.join(initramfs.ARCHES)}")
if ARCH == "arm64":
    if FLAVOUR != "cloud":
        raise SystemExit(f"NETBLK_ARCH=arm64: only the 6.12 cloud kernel, not NETBLK_KERNEL={FLAVOUR}")
    FLAVOURS["cloud"] = (ROOT / "build" / "kernel-arm64", "6.12", ROOT / "build" / "module-arm64" / "kmod")
TRIPLET = initramfs.ARCHES[ARCH][0]
if FLAVOUR not in FLAVOURS:
    raise SystemExit(f"NETBLK_KERNEL={FLAVOUR!r}: cloud or 6.12 (Debian's 6.12 cloud kernel), "
                     f"6.1 (Debian 12's own cloud kernel) or debug (ci/debug-kernel.sh: KASAN, "
                     f"lockdep, kmemleak)")
KERNEL, KERNEL_SERIES, MODULE_DIR = FLAVOURS[FLAVOUR]
# NETBLK_KO and NETBLK_NETBLKCTL name others (tests/pkg: what the packages installed).
NETBLK_KO = Path(os.environ.get("NETBLK_KO") or MODULE_DIR / "netblk.ko")
NETBLKCTL = Path(os.environ.get("NETBLK_NETBLKCTL") or
                 (ROOT / "build" / "arm64" / "netblkctl" if ARCH == "arm64"
                  else ROOT / "tools" / "netblkctl" / "netblkctl"))
XDP_DISPATCHER = Path(f"/usr/lib/{TRIPLET}/bpf/xdp-dispatcher.o")	# libxdp1's (:arm64 for arm64)

# A Unix socket's path must fit sun_path (108 bytes): from a deep checkout the
# agent sockets go to a short directory of this checkout's own under /tmp.
SOCKETS = BUILD
if len(str(BUILD)) > 60:
    import hashlib
    import tempfile
    SOCKETS = Path(tempfile.gettempdir()) / ("netblk-" + hashlib.sha1(str(ROOT).encode()).hexdigest()[:12])

DISK_SIZE = 512 << 20
DISK_P1_SECTORS = (256 << 20) // 512
DISK4K_SIZE = 64 << 20
SERIALS = ("NETBLK0", "NETBLK1")
# virtio_pci and virtio_console (the agents) are modules on 6.1, built in on 6.12.
MODULES = ["virtio_pci", "virtio_console", "null_blk", "loop", "dm_mod"]
# eth0's model: QEMU's virtio-net (virtio_net: no page_pool, a locked transmit
# queue when it has fewer than CPUs) or VMware's vmxnet3 (vmxnet3: a page_pool
# a receive queue, its own XDP code); NETBLK_NIC picks it for every guest.
NIC_MODELS = {"virtio": ("virtio-net-pci", "virtio_net"), "vmxnet3": ("vmxnet3", "vmxnet3")}
NIC = os.environ.get("NETBLK_NIC", "virtio")
if NIC not in NIC_MODELS:
    raise SystemExit(f"NETBLK_NIC={NIC!r}: one of {', '.join(NIC_MODELS)}")
GUEST_IP = "10.0.2.15"
# A bound on a boot that hangs, not a measure of speed: idle, the guest is up
# in 30 s (the debug kernel in 45); on a host whose two cores also run other
# guests (CI, a second suite, a build) the same boot took over 60.
BOOT_TIMEOUT = float(os.environ.get("NETBLK_BOOT_TIMEOUT", "300"))
CHECKS_CMDLINE = ("slub_debug=FZPU kfence.sample_interval=10 init_on_free=1 panic_on_warn=1 "
                  "softlockup_panic=1")

# What the kernel says when something is wrong: WARN and BUG, oopses, KFENCE,
# SLUB's debug reports, KASAN, lockdep, kmemleak, RCU and atomic-sleep checks,
# hung and locked-up tasks, a page pool whose pages never came back (60 s
# after its driver destroyed it) -- and netblk's own leak report.
KERNEL_TROUBLE = re.compile(
    r"WARNING:|\bBUG[: ]|Oops|Call Trace|general protection|Kernel panic|refcount_t|"
    r"KFENCE:|KASAN:|Poison overwritten|Redzone|Object padding|Freepointer corrupt|"
    r"possible circular locking|inconsistent lock state|possible recursive locking|"
    r"suspicious RCU usage|sleeping function called from invalid context|"
    r"unreferenced object|soft lockup|hard LOCKUP|hung_task|blocked for more|"
    r"list_(add|del) corruption|stalled pool shutdown|stopped holding")


# Reports of the kernel's own drivers that the tests run into without netblk
# causing them, each by the line that says where; one is let pass only whole
# (to its "</TASK>") and only when netblk.ko is not on its stack.  vmxnet3
# (6.12) reads its XDP program with rcu_dereference() under rtnl, in
# vmxnet3_xdp_set(), and in its receive path: a lockdep kernel (the debug
# kernel) warns at the first XDP attach and the first XDP frame.
FOREIGN_REPORTS = re.compile(
    r"drivers/net/vmxnet3/vmxnet3_xdp\.c:\d+ suspicious rcu_dereference_check\(\) usage!")


def foreign_report_end(lines: list[str], i: int) -> int | None:
    """The index of the last line of a foreign report starting at lines[i]
    (FOREIGN_REPORTS), or None when none starts there."""
    if "suspicious RCU usage" not in lines[i] or \
            not any(FOREIGN_REPORTS.search(l) for l in lines[i + 1:i + 4]):
        return None
    for j in range(i + 1, len(lines)):
        if "[netblk]" in lines[j]:
            return None
        if "</TASK>" in lines[j]:
            return j
    return None


def kernel_trouble(text: str) -> list[str]:
    """The lines of a kernel log that report a bug (FOREIGN_REPORTS left out)."""
    lines = text.splitlines()
    out, i = [], 0
    while i < len(lines):
        end = foreign_report_end(lines, i)
        if end is not None:
            i = end + 1
            continue
        if KERNEL_TROUBLE.search(lines[i]):
            out.append(lines[i])
        i += 1
    return out


MARKER = re.compile(rb"\n@@NBA-END (\S+) (-?\d+)@@\n")


class GuestError(RuntimeError):
    pass


class GuestTimeout(GuestError):
    pass


class CommandFailed(GuestError):
    def __init__(self, cmd: str, rc: int, output: str):
        self.cmd, self.rc, self.output = cmd, rc, output
        super().__init__(f"guest command failed (exit {rc}): {cmd}\n--- output ---\n{output.rstrip()}")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


_ports_given: set[int] = set()


def free_udp_port() -> int:
    """A UDP port free on 127.0.0.1 (and for TCP, as QEMU also checks nothing
    else), never one this process gave before: the kernel hands a port just
    closed out again, so two picks in a row could name the same port and QEMU
    refuse its second forward.  Another process can still take it before
    QEMU binds it: Guest.start() picks again then."""
    for _ in range(200):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port >= 1024 and port not in _ports_given:
            _ports_given.add(port)
            return port
    raise GuestError("no free UDP port")


def link_args(local_port: int, remote_port: int, mac: str, model: str = NIC_MODELS[NIC][0],
              netdev: str = "link0") -> list[str]:
    """QEMU arguments for a NIC joined to another guest's by a private link:
    QEMU's dgram netdev, each end's Ethernet frames sent as UDP datagrams
    between 127.0.0.1:local_port and 127.0.0.1:remote_port on the host
    (the other guest's pair is the same, swapped).  Nothing else is on it:
    the two guests address each other as they choose (ip addr add)."""
    return ["-netdev", f"dgram,id={netdev},local.type=inet,local.host=127.0.0.1,"
                       f"local.port={local_port},remote.type=inet,remote.host=127.0.0.1,"
                       f"remote.port={remote_port}",
            "-device", f"{model},netdev={netdev},mac={mac}"]


# A multi-queue link (TapLink): tun's ioctl and flags (linux/if_tun.h), setns's.
TUNSETIFF = 0x400454CA
IFF_TAP, IFF_NO_PI, IFF_MULTI_QUEUE = 0x0002, 0x1000, 0x0100
CLONE_NEWNET = 0x40000000
NETNS_DIR = Path("/run/netns")
TAP_NETNS_PREFIX = "netblk-link-"


def _ip(*args: str) -> None:
    r = subprocess.run(["ip", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode:
        raise GuestError(f"ip {' '.join(args)}: {r.stdout.strip()} (exit {r.returncode})")


def _setns(fd: int) -> None:
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"setns: {os.strerror(e)}")


class TapLink:
    """A private multi-queue link between guests, for what QEMU's dgram
    netdev (link_args, one virtio-net queue) cannot show: RSS spreading
    sessions over a NIC's queues.  A network namespace of this process's own
    (netblk-link-<pid>) holds a bridge and @ports tap devices of @queues
    queues each (IFF_MULTI_QUEUE), joined to it; nothing else is in it, and
    the host's own namespace gets no device.  Each tap's queues are opened
    inside the namespace (setns on this thread, then back: the guests'
    127.0.0.1 sockets stay in the host's) and handed to QEMU as fds
    (args()); tun's flow steering then puts each flow on the queue its
    guest last sent it from (the first packets of a flow by its hash).
    close() (and the context's exit, and this process's exit) removes the
    devices and the namespace; a namespace of a process that is gone is
    removed by the next TapLink.  Needs root and iproute2's ip.

        with TapLink(ports=2, queues=2) as tl:
            Guest(..., qemu_args=tl.args(0, mac), pass_fds=tl.fds(0))
    """

    def __init__(self, ports: int = 2, queues: int = 2):
        self.ports, self.queues = ports, queues
        self.netns = f"{TAP_NETNS_PREFIX}{os.getpid()}"
        self._fds: list[list[int]] = []
        self._open = False

    @staticmethod
    def prune() -> None:
        """Remove the namespaces of earlier TapLinks whose processes are gone."""
        if not NETNS_DIR.is_dir():
            return
        for p in NETNS_DIR.glob(f"{TAP_NETNS_PREFIX}*"):
            pid = p.name[len(TAP_NETNS_PREFIX):]
            if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                TapLink._remove(p.name)

    @staticmethod
    def _remove(netns: str) -> None:
        # the devices first, so that none is ever moved to the host's namespace
        subprocess.run(["sh", "-c", f"for d in $(ip -n {netns} -o link show | "
                        "awk -F': ' '{print $2}' | cut -d@ -f1); do "
                        f"[ $d = lo ] || ip -n {netns} link del $d; done"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        subprocess.run(["ip", "netns", "del", netns], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)

    def tap(self, port: int) -> str:
        return f"nbtap{port}"

    def open(self) -> "TapLink":
        import fcntl
        import struct
        self.prune()
        _ip("netns", "add", self.netns)
        self._open = True
        _links.add(self)
        ns = self.netns
        _ip("-n", ns, "link", "add", "nbbr0", "type", "bridge")
        subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-qw",
                        "net.ipv6.conf.all.disable_ipv6=1"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        for port in range(self.ports):
            _ip("-n", ns, "tuntap", "add", "dev", self.tap(port), "mode", "tap", "multi_queue")
            _ip("-n", ns, "link", "set", self.tap(port), "master", "nbbr0")
        home = os.open("/proc/self/ns/net", os.O_RDONLY)
        target = os.open(NETNS_DIR / ns, os.O_RDONLY)
        try:
            _setns(target)
            try:
                for port in range(self.ports):
                    fds = []
                    for _ in range(self.queues):
                        fd = os.open("/dev/net/tun", os.O_RDWR)
                        fds.append(fd)
                        ifr = struct.pack("16sH22x", self.tap(port).encode(),
                                          IFF_TAP | IFF_NO_PI | IFF_MULTI_QUEUE)
                        fcntl.ioctl(fd, TUNSETIFF, ifr)
                    self._fds.append(fds)
            finally:
                _setns(home)
        finally:
            os.close(target)
            os.close(home)
        for dev in [self.tap(p) for p in range(self.ports)] + ["nbbr0"]:
            _ip("-n", ns, "link", "set", dev, "up")
        return self

    def drops(self) -> dict[str, int]:
        """Each of the namespace's devices' dropped frames (tx and rx summed):
        a tap drops what its queue's ring (txqueuelen) cannot hold."""
        import json
        r = subprocess.run(["ip", "-n", self.netns, "-s", "-j", "link", "show"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        out = {}
        for dev in json.loads(r.stdout or "[]"):
            st = dev.get("stats64", {})
            out[dev["ifname"]] = st.get("rx", {}).get("dropped", 0) + \
                st.get("tx", {}).get("dropped", 0)
        return out

    def fds(self, port: int) -> list[int]:
        return list(self._fds[port])

    def args(self, port: int, mac: str, model: str = NIC_MODELS[NIC][0],
             netdev: str = "link0") -> list[str]:
        """QEMU's arguments for guest @port's link NIC: its tap's queues as
        fds (pass them: Guest(pass_fds=fds(port))), no vhost; virtio-net
        with mq=on and a vector per queue each way, plus config and control."""
        fds = ":".join(str(fd) for fd in self._fds[port])
        dev = f"{model},netdev={netdev},mac={mac}"
        if model == "virtio-net-pci":
            dev += f",mq=on,vectors={2 * self.queues + 2}"
        return ["-netdev", f"tap,id={netdev},fds={fds},vhost=off", "-device", dev]

    def close(self) -> None:
        for fds in self._fds:
            for fd in fds:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._fds = []
        if self._open:
            self._remove(self.netns)
            self._open = False
        _links.discard(self)

    def __enter__(self) -> "TapLink":
        return self.open()

    def __exit__(self, *exc) -> None:
        self.close()


_links: set[TapLink] = set()


def kernel_release() -> str:
    if FLAVOUR == "debug":
        rel = DEBUG_KERNEL / ".release"
        if not rel.exists():
            raise GuestError("the debug kernel is not built: run `make check-debug` (or "
                             "ci/debug-kernel.sh)")
        return rel.read_text().strip()
    rel = KERNEL / ".release"
    if not rel.exists():
        subprocess.run([str(ROOT / "ci" / "fetch-kernel.sh"), KERNEL_SERIES], check=True,
                       stdout=subprocess.DEVNULL)
    return rel.read_text().strip()


def kernel_image() -> Path:
    if FLAVOUR == "debug":
        return DEBUG_KERNEL / "bzImage"
    return KERNEL / "root" / "boot" / f"vmlinuz-{kernel_release()}"


def kernel_root() -> Path:
    """Where the kernel's lib/modules/<release> is."""
    return KERNEL / "root"


def multibuffer_xdp(nic: str) -> bool:
    """Whether the guest's @nic model runs multi-buffer XDP, which netblk
    needs at an MTU above its receive buffers' size (jumbo frames) and to
    send a gathered READ's answers (their data in a second buffer):
    virtio-net from Linux 6.3 on (6.1's refuses XDP above an MTU of about
    3500, and sends a frame's first buffer alone), vmxnet3 in none of the
    guest's kernels."""
    return nic == "virtio" and FLAVOUR != "6.1"


def kernel_has(module: str) -> bool:
    """Whether the guest's kernel has @module, as a module or built in."""
    moddir = kernel_root() / "lib" / "modules" / kernel_release()
    name = module.replace("-", "_")
    if name in initramfs.module_index(moddir):
        return True
    builtin = moddir / "modules.builtin"
    return builtin.exists() and any(
        Path(line.strip()).name.split(".ko")[0].replace("-", "_") == name
        for line in builtin.read_text().splitlines())


# Under TCG the debug kernel spends minutes in ACPI's interpreter (its _PRT
# methods hit the 30 s AML loop timeout, KASAN-instrumented) and in the HPET:
# it takes only ACPI's CPU tables, routes PCI interrupts by the BIOS's table,
# and keeps time on the TSC.  ~45 s to boot with two CPUs, instead of three
# minutes (acpi=off, the other way out, finds only one CPU in SeaBIOS's MP table).
# The debug kernel's vCPUs take turns on one host thread: with a thread each,
# a vCPU went on running an int3 the other had patched away (text_poke_bp on
# XDP's dispatcher, as a program came or went), and the kernel oopsed --
# TCG's translated code does not follow another vCPU's writes at once.  The
# cloud kernel, much faster, keeps a thread a vCPU, but for two guests side
# by side (TCG_THREADS_PAIR): its client host met the same race twice, each
# time as a static key flipped under load (a forced detach closing the
# client's socket: memalloc_socks_key, udp_encap_needed_key; a soft lockup
# in ksoftirqd, and a double fault in the slab allocator with a garbled
# EFLAGS), and two guests on two host cores gain nothing from a thread a vCPU.
TCG_THREADS = "single" if FLAVOUR == "debug" else "multi"
TCG_THREADS_PAIR = "single"
# Not acpi=noirq for the cloud kernels, though under TCG enabling each PCI
# device's ACPI interrupt link takes ~6 s (a 6.12 boot ~57 s -> ~21 s with
# it): their PCI devices then lose MSI and share INTx lines the $PIR table
# routes -- in CI "irq 10: nobody cared" (virtio and NVMe on one line) and
# the line disabled; 6.1 WARNs allocating NVMe's vectors (no MSI domain).
FLAVOUR_CMDLINE = (os.environ.get("NETBLK_DEBUG_CMDLINE", "acpi=noirq hpet=disable tsc=reliable")
                   if FLAVOUR == "debug" else "")


# --------------------------------------------------------------------------
# disk images
# --------------------------------------------------------------------------
DISK_VERSION = "4"


def build_disks() -> tuple[Path, Path]:
    """Templates: build/guest/disk.img (GPT, p1 raw, p2 ext4) and
    build/guest/disk4k.img (blank).  Sparse, rebuilt when DISK_VERSION moves."""
    BUILD.mkdir(parents=True, exist_ok=True)
    disk, disk4k, stamp = BUILD / "disk.img", BUILD / "disk4k.img", BUILD / "disk.stamp"
    if disk.exists() and disk4k.exists() and stamp.exists() and stamp.read_text() == DISK_VERSION:
        return disk, disk4k
    log("guest: building disk images")
    tmp = BUILD / "disk.img.tmp"
    tmp.unlink(missing_ok=True)
    with open(tmp, "wb") as f:
        f.truncate(DISK_SIZE)
    p2_first = 2048 + DISK_P1_SECTORS
    p2_last = DISK_SIZE // 512 - 34
    subprocess.run(["sgdisk", "-o", "-a", "2048",
                    "-n", f"1:2048:{p2_first - 1}", "-t", "1:8300", "-c", "1:netblk-raw",
                    "-n", f"2:{p2_first}:{p2_last}", "-t", "2:8300", "-c", "2:netblk-ext4",
                    str(tmp)], check=True, stdout=subprocess.DEVNULL)
    part = BUILD / "p2.img.tmp"
    content = BUILD / "p2-content"
    shutil.rmtree(content, ignore_errors=True)
    content.mkdir()
    (content / "hello.txt").write_text("hello from the netblk test disk\n")
    part.unlink(missing_ok=True)
    with open(part, "wb") as f:
        f.truncate((p2_last - p2_first + 1) * 512)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-L", "netblk-ext4", "-d", str(content), str(part)],
                   check=True, env={**os.environ, "E2FSPROGS_FAKE_TIME": "1700000000"})
    subprocess.run(["dd", f"if={part}", f"of={tmp}", "bs=1M", f"seek={p2_first * 512}",
                    "oflag=seek_bytes", "conv=notrunc,sparse", "status=none"], check=True)
    part.unlink()
    shutil.rmtree(content)
    os.replace(tmp, disk)
    disk4k.unlink(missing_ok=True)
    with open(disk4k, "wb") as f:
        f.truncate(DISK4K_SIZE)
    stamp.write_text(DISK_VERSION)
    return disk, disk4k


def build_initramfs(extra_files: dict | None = None, extra_programs: dict | None = None,
                    modules: list[str] | None = None, require_project: bool = False,
                    nic: str = NIC) -> Path:
    rel = kernel_release()
    programs = dict(extra_programs or {})
    files = dict(extra_files or {})
    if NETBLKCTL.exists():
        programs.setdefault("/usr/sbin/netblkctl", NETBLKCTL)
        # libxdp loads its dispatcher from this file at run time
        files.setdefault(str(XDP_DISPATCHER), XDP_DISPATCHER)
    elif require_project:
        raise GuestError(f"{NETBLKCTL} is not built: run `make netblkctl`")
    if require_project and not NETBLK_KO.exists():
        raise GuestError(f"{NETBLK_KO} is not built: run `make bench-module`")
    waits = "nvme0n1 nvme0n1p1 nvme0n1p2 nvme1n1"
    driver = NIC_MODELS[nic][1]
    return initramfs.build(BUILD, kernel_root=kernel_root(), release=rel,
                           modules=[driver] + MODULES + list(modules or []),
                           netblk_ko=NETBLK_KO if NETBLK_KO.exists() else None,
                           programs=programs, files=files,
                           env={"BENCH_WAIT_DEVS": waits, "BENCH_RELEASE": rel,
                                "BENCH_NVME": " ".join(SERIALS), "BENCH_NIC_DRIVER": driver},
                           log=log, arch=ARCH)


# --------------------------------------------------------------------------
# the agent channel
# --------------------------------------------------------------------------
class Agent:
    """Host end of one virtio-serial command port (a Unix socket QEMU serves)."""

    def __init__(self, path: Path, alive=lambda: True):
        self.path = Path(path)
        self.alive = alive
        self.sock: socket.socket | None = None
        self.buf = b""

    def connect(self, deadline: float) -> None:
        while self.sock is None:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(str(self.path))
                self.sock = s
                self.buf = b""
            except OSError:
                s.close()
                if not self.alive():
                    raise GuestError("QEMU exited")
                if time.monotonic() > deadline:
                    raise GuestTimeout(f"cannot connect to {self.path}")
                time.sleep(0.1)

    def close(self) -> None:
        if self.sock:
            self.sock.close()
            self.sock = None

    def send(self, script: str, timeout: int) -> str:
        tag = secrets.token_hex(6)
        data = script.encode()
        assert self.sock
        self.sock.sendall(f"NBA1 {tag} {len(data)} {int(timeout)}\n".encode() + data)
        return tag

    def wait(self, tag: str, deadline: float) -> tuple[int, str]:
        assert self.sock
        while True:
            m = MARKER.search(self.buf)
            while m:
                out, self.buf = self.buf[:m.start()], self.buf[m.end():]
                if m.group(1).decode() == tag:
                    return int(m.group(2)), out.decode("utf-8", "replace")
                m = MARKER.search(self.buf)  # a reply to an abandoned command
            now = time.monotonic()
            if now > deadline:
                raise GuestTimeout("no reply from the guest agent")
            if not self.alive():
                raise GuestError("QEMU exited")
            self.sock.settimeout(min(0.5, max(0.01, deadline - now)))
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                continue
            if not chunk:
                self.close()
                raise GuestError("agent socket closed by QEMU")
            self.buf += chunk


def run_on_socket(path: Path, cmd: str, timeout: int = 60) -> tuple[int, str]:
    """Run cmd through an agent socket of an already running guest."""
    a = Agent(path)
    a.connect(time.monotonic() + 5)
    try:
        tag = a.send(cmd, timeout)
        return a.wait(tag, time.monotonic() + timeout + 15)
    finally:
        a.close()


# --------------------------------------------------------------------------
# the guest
# --------------------------------------------------------------------------
_live: set["Guest"] = set()


def _die_with_parent() -> None:
    """In the QEMU child: SIGKILL when the process that started it dies, even
    by SIGKILL (atexit covers the orderly exits)."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


@atexit.register
def _kill_all() -> None:
    for g in list(_live):
        g.kill()
    for link in list(_links):
        link.close()


class Guest:
    """One QEMU guest.

    forwards: guest UDP ports to reach from 127.0.0.1: an int G (a free host
      port is picked), a pair (H, G) (H = 0: pick), or a triple
      ("tcp"|"udp", H, G).  g.host_port(G) tells the host port.
    extra_files: {guest path: host path or bytes}; extra_programs: {guest
      path: host ELF} (shared libraries come along); modules: more kernel
      modules to include.  require_project: fail unless netblk.ko and
      netblkctl are built.  tcg_threads: "multi" (a host thread a vCPU) or
      "single" (the vCPUs take turns on one: see TCG_THREADS_PAIR).
      pass_fds: file descriptors QEMU inherits (TapLink's tap queues).
    """

    def __init__(self, name: str = "bench", forwards=(), *, extra_files=None, extra_programs=None,
                 modules=None, memory: int = 1024, smp: int = 2, nic_mtu: int | None = None,
                 boot_timeout: float = BOOT_TIMEOUT, require_project: bool = False,
                 qemu_args=(), cmdline: str = "", keep_disks: bool = False, checks: bool = True,
                 pid: int | None = None, nic: str = NIC, tcg_threads: str = TCG_THREADS,
                 pass_fds=()):
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
            raise ValueError(f"bad guest name {name!r}")
        self.name = name
        self.fwd: list[tuple[str, int, int]] = []
        self.picked_fwd: list[int] = []  # indices into fwd of the ports picked here
        for f in forwards:
            if isinstance(f, int):
                f = ("udp", 0, f)
            elif len(f) == 2:
                f = ("udp", *f)
            proto, h, g = f
            if not h:
                self.picked_fwd.append(len(self.fwd))
            self.fwd.append((proto, h or free_udp_port(), g))
        self.extra_files, self.extra_programs, self.modules = extra_files, extra_programs, modules
        self.memory, self.smp, self.nic_mtu = memory, smp, nic_mtu
        if tcg_threads not in ("single", "multi"):
            raise ValueError(f"tcg_threads {tcg_threads!r}: single or multi")
        self.tcg_threads = tcg_threads
        if nic not in NIC_MODELS:
            raise ValueError(f"nic {nic!r}: one of {', '.join(NIC_MODELS)}")
        if nic_mtu and nic != "virtio":
            raise ValueError("nic_mtu is virtio-net's host_mtu: not for " + nic)
        self.nic = nic
        self.boot_timeout = boot_timeout
        self.require_project = require_project
        self.qemu_args = list(qemu_args)
        self.pass_fds = tuple(pass_fds)
        self.cmdline = (CHECKS_CMDLINE + " " + cmdline).strip() if checks else cmdline
        self.keep_disks = keep_disks
        # the disks, sockets and logs are this process's (@pid: another's, to
        # reach its guest), so that two runs of the same test module (two
        # suites in one tree: check-debug beside a NIC's e2e) do not meet
        own = f"{name}.{pid or os.getpid()}"
        self.disks = (BUILD / f"{own}.nvme0.img", BUILD / f"{own}.nvme1.img")
        self.console_log = BUILD / f"console-{own}.log"
        self.qemu_log = BUILD / f"qemu-{own}.log"
        SOCKETS.mkdir(parents=True, exist_ok=True)
        self.agent_sock = SOCKETS / f"{own}.agent.sock"
        self.agent2_sock = SOCKETS / f"{own}.agent2.sock"
        self.proc: subprocess.Popen | None = None
        self.agent: Agent | None = None
        self.broken: str | None = None

    # ---- ports
    def host_port(self, guest_port: int, proto: str = "udp") -> int:
        for p, h, g in self.fwd:
            if g == guest_port and p == proto:
                return h
        raise KeyError(f"no {proto} forward to guest port {guest_port}")

    # ---- lifecycle
    def __enter__(self) -> "Guest":
        if not self.proc:
            self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def qemu_command(self, kernel: Path, initrd: Path, disk: Path, disk4k: Path) -> list[str]:
        netdev = "user,id=n0,net=10.0.2.0/24,host=10.0.2.2,dns=10.0.2.3"
        for proto, h, g in self.fwd:
            netdev += f",hostfwd={proto}:127.0.0.1:{h}-:{g}"
        nic = f"{NIC_MODELS[self.nic][0]},netdev=n0,mac=52:54:00:12:34:56"
        if self.nic_mtu:
            nic += f",host_mtu={self.nic_mtu}"
        console = "ttyAMA0" if ARCH == "arm64" else "ttyS0"
        append = f"console={console} panic=-1 loglevel=5 mitigations=off {FLAVOUR_CMDLINE} {self.cmdline}"
        # arm64: QEMU's virt board (PCIe, a PL011 console); -cpu max with
        # QEMU's own pointer-authentication hash, not the architected QARMA
        # (costly under TCG, and the kernel is built with pac-ret).
        machine = (["qemu-system-aarch64", "-M", "virt", "-cpu", "max,pauth-impdef=on"]
                   if ARCH == "arm64" else ["qemu-system-x86_64", "-cpu", "max"])
        return [
            machine[0], *machine[1:-2], "-accel", f"tcg,thread={self.tcg_threads}", *machine[-2:],
            "-smp", str(self.smp), "-m", str(self.memory),
            "-nodefaults", "-display", "none", "-no-reboot", "-no-user-config",
            "-kernel", str(kernel), "-initrd", str(initrd), "-append", append.strip(),
            "-chardev", f"file,id=con,path={self.console_log}", "-serial", "chardev:con",
            # NVMe: nvme0 (512-byte sectors, GPT) then nvme1 (4096-byte blocks)
            "-drive", f"file={disk},format=raw,if=none,id=d0,cache=unsafe",
            "-device", f"nvme,drive=d0,serial={SERIALS[0]}",
            "-drive", f"file={disk4k},format=raw,if=none,id=d1,cache=unsafe",
            "-device", f"nvme,drive=d1,serial={SERIALS[1]},logical_block_size=4096,physical_block_size=4096",
            "-netdev", netdev, "-device", nic,
            "-device", "virtio-serial-pci,id=vser0",
            "-chardev", f"socket,id=agent,path={self.agent_sock},server=on,wait=off",
            "-device", "virtserialport,bus=vser0.0,chardev=agent,name=netblk.agent",
            "-chardev", f"socket,id=agent2,path={self.agent2_sock},server=on,wait=off",
            "-device", "virtserialport,bus=vser0.0,chardev=agent2,name=netblk.agent2",
            *self.qemu_args,
        ]

    def start(self) -> "Guest":
        kernel = kernel_image()
        initrd = build_initramfs(self.extra_files, self.extra_programs, self.modules,
                                 self.require_project, self.nic)
        tdisk, tdisk4k = build_disks()
        disk, disk4k = self.disks
        for attempt in range(3):
            for src, dst in ((tdisk, disk), (tdisk4k, disk4k)):
                subprocess.run(["cp", "--sparse=always", str(src), str(dst)], check=True)
            try:
                self._boot(self.qemu_command(kernel, initrd, disk, disk4k))
            except GuestError:
                if self._pick_forwards_again() and attempt < 2:
                    continue
                early = self._early_boot_trouble()
                if not early or attempt == 2:
                    raise
                # before /init is ready nothing of netblk's has run: under
                # TCG, an emulation artefact (README.md); kept, and booted again
                kept = self.console_log.with_suffix(".boot-failure.log")
                shutil.copyfile(self.console_log, kept)
                log(f"guest {self.name}: the kernel failed before /init was ready ({early}); "
                    f"its console is in {kept}; booting again")
                continue
            serials = self.check("cat /sys/class/nvme/nvme0/serial /sys/class/nvme/nvme1/serial; "
                                 "ls /dev/nvme0n1p1 /dev/nvme0n1p2 /dev/nvme1n1 >/dev/null",
                                 timeout=20).split()
            if serials == list(SERIALS):
                return self
            log(f"guest {self.name}: NVMe controllers came up as {serials}, rebooting")
            self.kill()
        raise GuestError(f"guest {self.name}: NVMe controllers keep coming up in the wrong order")

    def _pick_forwards_again(self) -> bool:
        """Whether QEMU exited because a forward's host port was taken (by
        another process, between free_udp_port() and QEMU's bind), and the
        ports picked here are picked again.  A port the caller named is its
        own to keep: that failure stands."""
        try:
            text = self.qemu_log.read_text(errors="replace")
        except OSError:
            return False
        if "Could not set up host forwarding rule" not in text or not self.picked_fwd:
            return False
        for i in self.picked_fwd:
            proto, _, g = self.fwd[i]
            self.fwd[i] = (proto, free_udp_port(), g)
        log(f"guest {self.name}: a forward's host port was taken; picking them again")
        return True

    def _early_boot_trouble(self) -> str | None:
        """What the kernel reported on the console before /init was ready, if
        it did (netblk.ko is loaded only after that)."""
        try:
            text = self.console_log.read_text(errors="replace")
        except OSError:
            return None
        if "netblk-init: ready" in text:
            return None
        trouble = kernel_trouble(text)
        return trouble[0].strip() if trouble else None

    def _prune_logs(self) -> None:
        """Logs of this guest's name from processes that are gone: an earlier
        run's, which this one replaces (those of a run still going stay)."""
        for p in BUILD.glob(f"*-{self.name}.*.log"):
            m = re.fullmatch(rf"(?:console|qemu)-{re.escape(self.name)}\.(\d+)(?:\.boot-failure)?\.log",
                             p.name)
            if m and int(m[1]) != os.getpid() and not Path(f"/proc/{m[1]}").exists():
                p.unlink(missing_ok=True)

    def _boot(self, cmd: list[str]) -> None:
        BUILD.mkdir(parents=True, exist_ok=True)
        self._prune_logs()
        for p in (self.agent_sock, self.agent2_sock, self.console_log):
            p.unlink(missing_ok=True)
        self.broken = None
        t0 = time.monotonic()
        with open(self.qemu_log, "wb") as qlog:
            qlog.write((shlex.join(cmd) + "\n").encode())
            qlog.flush()
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=qlog, stderr=qlog,
                                         start_new_session=True, preexec_fn=_die_with_parent,
                                         pass_fds=self.pass_fds)
        _live.add(self)
        deadline = t0 + self.boot_timeout
        self.agent = Agent(self.agent_sock, self.alive)
        try:
            self.agent.connect(deadline)
            # Probe until the agent answers; resend now and then in case a
            # probe got lost while the port was being opened.
            while True:
                tag = self.agent.send("true", 10)
                try:
                    rc, _ = self.agent.wait(tag, min(deadline, time.monotonic() + 10))
                    break
                except GuestTimeout:
                    if time.monotonic() > deadline:
                        raise
                    self.agent.send("\n", 1)  # resynchronise a half-read header
        except (GuestError, OSError) as e:
            self.kill()
            try:
                qemu = "\n".join(self.qemu_log.read_text(errors="replace").splitlines()[-15:])
            except OSError:
                qemu = ""
            raise GuestError(f"guest {self.name} did not boot within {self.boot_timeout:.0f} s ({e})\n"
                             f"--- {self.qemu_log} ---\n{qemu}\n"
                             f"--- {self.console_log} ---\n{self.console_tail()}") from None
        log(f"guest {self.name}: up in {time.monotonic() - t0:.1f} s")

    def kill(self) -> None:
        if self.agent:
            self.agent.close()
            self.agent = None
        if self.proc and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
        _live.discard(self)
        for p in (self.agent_sock, self.agent2_sock):
            p.unlink(missing_ok=True)
        if not self.keep_disks:
            for p in self.disks:
                p.unlink(missing_ok=True)

    def shutdown(self, timeout: float = 20) -> None:
        """Power the guest off (poweroff -f), wait for QEMU, kill it if slow."""
        if self.alive() and self.agent and not self.broken:
            try:
                self.agent.send("sync; poweroff -f", 5)
                self.proc.wait(timeout)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()

    # ---- commands
    def run(self, cmd: str, timeout: int = 60) -> tuple[int, str]:
        """Run a shell script in the guest: (exit status, stdout+stderr).
        The guest kills it after timeout seconds (status 137)."""
        if self.broken:
            raise GuestError(f"guest {self.name} is unusable: {self.broken}")
        if not self.alive():
            raise GuestError(f"guest {self.name} is not running; console:\n{self.console_tail()}")
        try:
            if self.agent.sock is None:
                self.agent.connect(time.monotonic() + 10)
            tag = self.agent.send(cmd, timeout)
            return self.agent.wait(tag, time.monotonic() + timeout + 20)
        except GuestError as e:
            self.broken = f"{e} (running: {cmd})"
            raise GuestError(f"guest {self.name}: {e} while running {cmd!r}; console tail:\n"
                             f"{self.console_tail()}{self._diagnose()}") from None

    def _diagnose(self) -> str:
        """After a command hung: the blocked tasks, through the second port."""
        if not self.alive():
            return ""
        try:
            rc, out = run_on_socket(self.agent2_sock, "echo w >/proc/sysrq-trigger; sleep 1; "
                                    "dmesg | tail -n 150", timeout=20)
            return "\n--- blocked tasks (sysrq w), dmesg tail ---\n" + out
        except (OSError, GuestError) as e:
            return f"\n(no diagnosis through {self.agent2_sock.name}: {e})"

    def check(self, cmd: str, timeout: int = 60) -> str:
        """Like run(), but raise CommandFailed unless the exit status is 0."""
        __tracebackhide__ = True
        rc, out = self.run(cmd, timeout)
        if rc != 0:
            raise CommandFailed(cmd, rc, out)
        return out

    def dmesg(self) -> str:
        return self.check("dmesg")

    def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        import base64
        if isinstance(data, str):
            data = data.encode()
        b64 = base64.b64encode(data).decode()
        lines = "\n".join(b64[i:i + 76] for i in range(0, len(b64), 76))
        self.check(f"base64 -d > {shlex.quote(path)} <<'NBEOF'\n{lines}\nNBEOF\n"
                   f"chmod {mode:o} {shlex.quote(path)}")

    def console_tail(self, lines: int = 60) -> str:
        try:
            text = self.console_log.read_text(errors="replace")
        except OSError:
            return "(no console log)"
        return "\n".join(text.splitlines()[-lines:])


def _parse_forward(s: str):
    if ":" in s:
        h, g = s.split(":", 1)
        return (int(h), int(g))
    return int(s)


def main() -> int:
    ap = argparse.ArgumentParser(description="netblk test guest")
    sub = ap.add_subparsers(dest="what", required=True)
    sub.add_parser("build", help="build the initramfs and disk images")
    r = sub.add_parser("run", help="boot, run a command, shut down")
    r.add_argument("-f", "--forward", action="append", default=[], help="G or H:G (UDP)")
    r.add_argument("--name", default="cli")
    r.add_argument("--timeout", type=int, default=120)
    r.add_argument("cmd")
    a = ap.parse_args()
    if a.what == "build":
        print(build_initramfs())
        print(*build_disks())
        return 0
    with Guest(a.name, [_parse_forward(f) for f in a.forward]) as g:
        for proto, h, gp in g.fwd:
            log(f"{proto} 127.0.0.1:{h} -> guest {gp}")
        rc, out = g.run(a.cmd, a.timeout)
        sys.stdout.write(out)
        return rc


if __name__ == "__main__":
    sys.exit(main())
