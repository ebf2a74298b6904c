"""End-to-end fixtures: QEMU guests (ci/guest.py), one shared by the test
modules that can share it.

    def test_x(guest):                 # module-scoped Guest, booted
        guest.check("netblkctl list")
    def test_y(netblk):                # the guest with netblk loaded and,
        ...                            # after the test, every instance stopped

A test module may set GUEST_FORWARDS = [7000, ...] (guest UDP ports to reach
from 127.0.0.1; guest.host_port(7000) gives the host port),
GUEST_OPTIONS = {...} (more Guest() keyword arguments) and GUEST_SHARED =
False (a guest of its own, booted for it and shut down after it).

Sharing.  A boot under TCG takes 30-100 s, so the modules whose guests
differ only in what merges -- the forwards and GUEST_OPTIONS' extra_programs,
extra_files and modules -- share one guest that has the union of them all
(the union over the modules this run selected).  Any other option (qemu_args,
cmdline, smp, tcg_threads, ...) is part of what the guest must look like: the
modules asking the same share a guest, and a module alone in asking gets its
own, as does one whose extra_programs or extra_files name another host file
for the same guest path.  The modules are run grouped by the guest they take
(in the order each group first appears; the tests of a module in their
order), so that a shared guest is booted once and shut down once its last
module is done, and no guest waits idle beside another module's.

Between two modules the shared guest is reset (RESET: what any module may
leave -- background processes, instances, attached devices, mounts,
device-mapper and null_blk devices, netblk.ko, links, eth0's MTU, address,
route and XDP programs, libxdp's stale pins, /tmp) and then must look as it
did after its boot (FACTS); the next module gets it only if it does, and if
nothing went wrong in the module before: a failed test, a kernel report, a
leak, a guest that is broken (a command hung) or dead, or a reset that
failed each make the next module boot a fresh guest (a warning says why).
A module starts with netblk.ko unloaded, as after a boot.

On a failure the report gets the tail of the guest's console and of dmesg.
The module and netblkctl must be built (`make bench-module netblkctl`, which
`make e2e` does); a missing one fails the tests rather than skipping them.

The guests boot with the kernel's own checks on (ci/guest.py
CHECKS_CMDLINE: SLUB debugging, KFENCE, panic on WARN), and every test fails
if the kernel reported a bug meanwhile (ci/guest.py kernel_trouble) or if a
stopped instance left slots or frames behind.  The kernel's log is read and
cleared (dmesg -c) before each test: what came since the last test (a boot,
a reset, a report a while after that test) must hold no report, and dmesg in
a test is that test's alone -- whatever it searches for, the test made the
kernel say (nbtest.kernel_log: all of it since the boot).  The console log is
checked when a module hands its guest back and when the guest shuts down.
"""

from __future__ import annotations

import difflib
import sys
import time
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "ci"))

from guest import Guest, GuestError, NETBLK_KO, NETBLKCTL, kernel_trouble, log  # noqa: E402
from nbtest import leaked  # noqa: E402

# GUEST_OPTIONS that merge into a shared guest: the union of what each module
# puts into the initramfs.  Every other option is part of a guest's kind.
MERGED_OPTIONS = ("extra_programs", "extra_files", "modules")


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: a long-running end-to-end test")


# --------------------------------------------------------------------------
# which modules take which guest
# --------------------------------------------------------------------------
class Kind:
    """A guest that one or more test modules take: the modules, and the
    Guest() arguments that suit them all."""

    def __init__(self, name: str, options: dict, open: bool):
        self.name = name
        self.rest = options	# what is not merged: the same for every module here
        self.open = open	# whether other modules may take it too
        self.modules: list[str] = []
        self.forwards: list[int] = []
        self.merged: dict = {"extra_programs": {}, "extra_files": {}, "modules": []}
        # the shared guest, once booted
        self.guest: Guest | None = None
        self.boots = 0
        self.facts = ""	# FACTS after its boot
        self.console_seen = 0	# bytes of its console log already checked

    @property
    def shared(self) -> bool:
        return len(self.modules) > 1

    def fits(self, opts) -> bool:
        """Whether a module's merged options go with the others'."""
        if not self.open:
            return False
        for k in ("extra_programs", "extra_files"):
            have = self.merged[k]
            if any(have.get(p, v) != v for p, v in (opts.get(k) or {}).items()):
                return False
        return True

    def add(self, modname: str, fwd, opts) -> None:
        self.modules.append(modname)
        self.forwards += [f for f in fwd if f not in self.forwards]
        for k in ("extra_programs", "extra_files"):
            self.merged[k].update(opts.get(k) or {})
        self.merged["modules"] += [m for m in opts.get("modules") or []
                                   if m not in self.merged["modules"]]

    def guest_args(self) -> dict:
        return dict(self.rest, **self.merged)


def _module_name(mod) -> str:
    return mod.__name__.rsplit(".", 1)[-1].removeprefix("test_")


def _plan(items) -> dict[str, Kind]:
    """Module name -> its Kind, for the modules whose tests take a guest."""
    kinds: list[Kind] = []
    of: dict[str, Kind] = {}
    for item in items:
        mod = item.module
        name = _module_name(mod)
        if name in of or "guest" not in getattr(item, "fixturenames", ()):
            continue
        fwd = list(getattr(mod, "GUEST_FORWARDS", []))
        opts = dict(getattr(mod, "GUEST_OPTIONS", {}))
        rest = {k: v for k, v in opts.items() if k not in MERGED_OPTIONS}
        # a forward to a host port of its own (H, G): not on a guest others share
        open = getattr(mod, "GUEST_SHARED", True) and all(isinstance(f, int) for f in fwd)
        kind = next((k for k in kinds if open and k.rest == rest and k.fits(opts)), None)
        if kind is None:
            kind = Kind(name, rest, open)
            kinds.append(kind)
        kind.add(name, fwd, opts)
        of[name] = kind
    for k in kinds:
        if k.shared:
            k.name = "shared" if not k.rest else f"shared-{k.modules[0]}"
    return of


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    """Plan the guests for what is selected (after -k and the like), and run
    the modules that share one guest one after the other."""
    plan = _plan(items)
    config._netblk_plan = plan
    first: dict[object, int] = {}
    for i, item in enumerate(items):
        name = _module_name(item.module)
        first.setdefault(id(plan[name]) if name in plan else name, i)
    items[:] = sorted(items, key=lambda it: first[id(plan[n]) if (n := _module_name(it.module)) in plan
                                                 else n])


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    item.config._netblk_next = nextitem


# --------------------------------------------------------------------------
# the state a shared guest is handed on in
# --------------------------------------------------------------------------
# init's children but the command agents (/etc/inittab) and busybox
# timeout's watchdogs (they end a second after their command, which ran
# under the agent): what a test left in the background -- `(cmd &)`, and the
# children of a command that ended before them
ORPHANS = ("for p in $(grep -l '^PPid:[[:space:]]*1$' /proc/[0-9]*/status 2>/dev/null); do "
           "p=${p%/status}; st=$(cat $p/status 2>/dev/null) && "
           "cmd=$(tr '\\0' ' ' 2>/dev/null <$p/cmdline) || continue; "
           "echo \"$st\" | grep -q -e '^Name:.timeout$' -e '^State:.Z' && continue; "
           "case \"$cmd\" in *netblk-agent*) ;; *) echo ${p#/proc/} ;; esac; done")
# each process's network namespace: "PID net:[INODE]"
NETNS = ("ls -l /proc/[0-9]*/ns/net 2>/dev/null | "
         "awk '$NF ~ /^net:/ {split($(NF-2), a, \"/\"); print a[3], $NF}'")

# What any module may leave behind, taken away (each step whatever the
# others did; FACTS says whether it worked).
RESET = f"""
for round in 1 2 3 4 5; do	# their children are init's in turn
	left=$({ORPHANS})
	[ -n "$left" ] || break
	kill -9 $left 2>/dev/null
	sleep 0.2
done
for p in $({NETNS} | awk -v ns="$(readlink /proc/1/ns/net)" '$2 != ns {{print $1}}'); do
	kill -9 $p 2>/dev/null
done
if grep -q '^netblk ' /proc/modules; then
	netblkctl detach all --force >/dev/null 2>&1
	netblkctl stop all >/dev/null 2>&1
fi
for m in $(awk '$1 ~ /^\\/dev\\// {{print $2}}' /proc/mounts); do umount $m; done
if command -v dmsetup >/dev/null; then
	for d in $(DM_DISABLE_UDEV=1 dmsetup ls 2>/dev/null | awk '$1 != "No" {{print $1}}'); do
		DM_DISABLE_UDEV=1 dmsetup --noudevsync resume $d
	done
	DM_DISABLE_UDEV=1 dmsetup --noudevsync remove_all
fi
for d in /sys/kernel/config/nullb/*/; do
	[ -d "$d" ] || continue
	echo 0 >$d/power; rmdir $d
done
for m in netblk null_blk; do
	for i in $(seq 50); do grep -q "^$m " /proc/modules || break; rmmod $m && break; sleep 0.2; done
done
# netblk's XDP program, if an rmmod left it (netblkctl takes it away), and
# xdp-loader's (slow to start on the debug kernel: only when eth0 has one)
netblkctl stop all --exist-ok >/dev/null 2>&1
if command -v ip-full >/dev/null && ip-full -d link show dev eth0 | grep -q prog/xdp; then
	command -v xdp-loader >/dev/null && xdp-loader unload eth0 --all >/dev/null 2>&1
	ip-full link set dev eth0 xdp off
fi
# links made since the boot (a kernel with ifb built in boots with ifb0, ifb1)
for n in /sys/class/net/*; do
	grep -qx "${{n##*/}}" /run/netblk-boot-links || ip link del ${{n##*/}} 2>/dev/null
done
# libxdp's pins of the dispatchers of NICs that went away, or lost their
# program behind its back (a NIC's driver removed, a veth deleted, bpftool
# net detach): with no XDP program left on any NIC, every one is stale
command -v ip-full >/dev/null && ip-full -d link show dev eth0 | grep -q prog/xdp || rm -rf /sys/fs/bpf/*
grep -q configfs /proc/mounts && umount /sys/kernel/config
ip link set eth0 mtu 1500 up
ip addr show dev eth0 | grep -q 'inet 10.0.2.15/24' || ip addr add 10.0.2.15/24 dev eth0
ip route | grep -q '^default via 10.0.2.2' || ip route add default via 10.0.2.2
for i in $(seq 100); do [ "$(cat /sys/class/net/eth0/operstate)" = up ] && break; sleep 0.1; done
rm -rf /tmp/* /tmp/.[!.]*
true
"""

# What a shared guest must show after RESET: what it showed after its boot.
FACTS = f"""
echo "netblk.ko: $(grep -c '^netblk ' /proc/modules) loaded, null_blk: $(grep -c '^null_blk ' /proc/modules)"
echo "background processes: $({ORPHANS} | wc -l)"
echo "network namespaces: $({NETNS} | awk '{{print $2}}' | sort -u | wc -l)"
echo "mounts:"; awk '{{print "  " $1, $2, $3}}' /proc/mounts | sort
echo "links: $(ls /sys/class/net | tr '\\n' ' ')"
echo "eth0: $(cat /sys/class/net/eth0/operstate) mtu $(cat /sys/class/net/eth0/mtu) \\
$(ip -4 addr show dev eth0 | awk '$1 == "inet" {{print $2}}'), $(ip route | grep '^default')"
command -v ip-full >/dev/null && echo "eth0's XDP: $(ip-full -d link show dev eth0 | grep -o 'prog/xdp.*')"
echo "block devices in use:"
for d in /sys/block/*; do [ "$(cat $d/size)" = 0 ] || echo "  ${{d##*/}} $(cat $d/size)"; done
echo "pinned BPF objects: $(find /sys/fs/bpf ! -type d | wc -l)"
echo "/tmp: $(ls -A /tmp | wc -l)"
mount -o ro /dev/nvme0n1p2 /mnt && echo "p2's hello.txt: $(cat /mnt/hello.txt)"; umount /mnt
"""


def _facts(g: Guest) -> str:
    return g.check(FACTS, timeout=60)


def _console_trouble(kind: Kind, g: Guest) -> list[str]:
    """Reports on the console since the last look."""
    try:
        with open(g.console_log, "rb") as f:
            f.seek(kind.console_seen)
            text = f.read()
    except OSError:
        return []
    kind.console_seen += len(text)
    return kernel_trouble(text.decode(errors="replace"))


def _retire(kind: Kind) -> list[str]:
    """Shut the kind's guest down; what its console said since the last look."""
    g, kind.guest = kind.guest, None
    if g is None:
        return []
    g.shutdown()
    return _console_trouble(kind, g)


def _take(kind: Kind) -> Guest:
    """The kind's guest, booted if it has none."""
    if kind.guest is None:
        kind.boots += 1
        name = kind.name if kind.boots == 1 else f"{kind.name}-{kind.boots}"
        g = Guest(name, forwards=kind.forwards, require_project=True, **kind.guest_args())
        g.netblk_kernel_log = []	# what kernel_clean cleared from dmesg (nbtest.kernel_log)
        g.netblk_last_test = "its boot"
        g.netblk_suspect = ""	# why it is not to be handed on
        try:
            g.start()
        except GuestError as e:
            g.kill()
            pytest.fail(str(e), pytrace=False)
        kind.guest, kind.console_seen = g, 0
        if kind.shared:
            g.check("ls /sys/class/net >/run/netblk-boot-links")
            kind.facts = _facts(g)
    return kind.guest


def _hand_back(kind: Kind, g: Guest, failed: bool) -> tuple[str, list[str]]:
    """After a module: why its guest is not to be handed on to the next ('' when
    it is: reset, as after its boot), and the kernel's reports meanwhile."""
    if not g.alive():
        return "it is dead", []
    if g.broken:
        return f"it is broken: {g.broken}", []
    if failed:
        return "a test failed", []
    if g.netblk_suspect:
        return g.netblk_suspect, []
    t0 = time.monotonic()
    try:
        g.check(RESET, timeout=300)
        facts = _facts(g)
        said = g.check("dmesg -c")
    except GuestError as e:
        return f"the reset failed: {e}", []
    log(f"guest {g.name}: reset for the next module in {time.monotonic() - t0:.1f} s")
    g.netblk_kernel_log.append(said)
    trouble = kernel_trouble(said)
    if trouble:
        return "the kernel reported trouble in the reset", trouble
    if facts != kind.facts:
        diff = "\n".join(difflib.unified_diff(kind.facts.splitlines(), facts.splitlines(),
                                              "after its boot", "after the reset", lineterm=""))
        return f"after the reset it is not as after its boot:\n{diff}", []
    return "", []


@pytest.fixture(scope="module")
def guest(request):
    missing = [str(p) for p in (NETBLK_KO, NETBLKCTL) if not p.exists()]
    if missing:
        pytest.fail(f"not built: {', '.join(missing)} -- run `make bench-module netblkctl` "
                    f"(or `make e2e`)", pytrace=False)
    name = _module_name(request.module)
    plan = request.config._netblk_plan
    kind = plan[name]
    g = _take(kind)
    request.node._netblk_guest = g
    yield g
    nxt = request.config._netblk_next
    why, trouble = "", []
    if kind.shared and nxt is not None and plan.get(_module_name(nxt.module)) is kind:
        why, trouble = _hand_back(kind, g, getattr(request.node, "_netblk_failed", False))
        trouble += _console_trouble(kind, g)
        if trouble and not why:
            why = "the kernel reported trouble on the console"
        if why:
            warnings.warn(f"guest {g.name}: not handed on from {name}, the next module "
                          f"boots a fresh one: {why}")
            trouble += _retire(kind)
    else:
        trouble = _retire(kind)	# its last module: shut down
    assert not trouble, (f"the guest kernel reported trouble ({g.console_log}, dmesg):\n" +
                         "\n".join(trouble[:40]))


@pytest.fixture(scope="session", autouse=True)
def _guests_down(request):
    """A shared guest whose last module was skipped whole: shut down at the end."""
    yield
    trouble = []
    for kind in set(getattr(request.config, "_netblk_plan", {}).values()):
        if kind.guest is not None:
            trouble += _retire(kind)
    assert not trouble, "a guest's kernel reported trouble:\n" + "\n".join(trouble[:40])


@pytest.fixture(autouse=True)
def kernel_clean(request, guest):
    """Before each test: nothing the kernel said since the last one (or the
    boot) reports a bug; dmesg cleared.  After it (and after the netblk
    fixture stopped every instance): no report in what it said, nothing
    leaked."""
    if guest.alive() and not guest.broken:
        earlier = guest.check("dmesg -c")
        guest.netblk_kernel_log.append(earlier)
        if kernel_trouble(earlier):
            guest.netblk_suspect = "the kernel reported trouble between tests"
            pytest.fail(f"the kernel complained before this test began, since "
                        f"{guest.netblk_last_test} ended (a boot, a reset between modules, "
                        f"or a report that came late):\n" +
                        "\n".join(earlier.splitlines()[-60:]), pytrace=False)
    yield
    guest.netblk_last_test = request.node.nodeid
    if not guest.alive() or guest.broken:
        return
    new = guest.dmesg()
    if kernel_trouble(new):
        guest.netblk_suspect = "the kernel reported trouble during a test"
        pytest.fail("the kernel complained during the test:\n" +
                    "\n".join(new.splitlines()[-60:]), pytrace=False)
    if guest.run("grep -q '^netblk ' /proc/modules")[0] == 0:
        got = leaked(guest)
        if got != {"leaked_slots": 0, "leaked_frames": 0}:
            guest.netblk_suspect = f"netblk leaked: {got}"
        assert got == {"leaked_slots": 0, "leaked_frames": 0}


def _reset(g: Guest) -> None:
    """Best effort: leave no instance, listener or mount behind."""
    if not g.alive() or g.broken:
        return
    g.run("killall nbudp 2>/dev/null; "
          "grep -q '^netblk ' /proc/modules && netblkctl stop all >/dev/null 2>&1; "
          "for m in $(awk '$1 ~ /^\\/dev\\/nvme/ {print $2}' /proc/mounts); do umount $m; done; true",
          timeout=60)


@pytest.fixture
def netblk(guest):
    """The guest with netblk.ko loaded; every instance stopped afterwards."""
    guest.check("grep -q '^netblk ' /proc/modules || modprobe netblk")
    yield guest
    _reset(guest)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if not rep.failed:
        return
    module = item.getparent(pytest.Module)
    if module is not None:
        module._netblk_failed = True	# its guest is not taken on
    if rep.when not in ("call", "setup"):
        return
    g = None
    node = item.parent
    while node is not None and g is None:
        g = getattr(node, "_netblk_guest", None)
        node = node.parent
    if g is None:
        g = item.funcargs.get("guest") if hasattr(item, "funcargs") else None
    if not isinstance(g, Guest):
        return
    rep.sections.append((f"guest console ({g.console_log}), last lines", g.console_tail(40)))
    if g.alive() and not g.broken:
        try:
            rc, out = g.run("dmesg | tail -n 40", timeout=15)
            rep.sections.append(("guest dmesg (since the test began), last lines", out))
        except GuestError as e:
            rep.sections.append(("guest dmesg", f"unavailable: {e}"))
