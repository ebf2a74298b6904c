"""End-to-end fixtures: one QEMU guest (ci/guest.py) per test module.

    def test_x(guest):                 # module-scoped Guest, booted
        guest.check("netblkctl list")
    def test_y(netblk):                # the guest with netblk loaded and,
        ...                            # after the test, every instance stopped

A test module may set GUEST_FORWARDS = [7000, ...] (guest UDP ports to reach
from 127.0.0.1; guest.host_port(7000) gives the host port) and
GUEST_OPTIONS = {...} (more Guest() keyword arguments).

On a failure the report gets the tail of the guest's console and of dmesg.
The module and netblkctl must be built (`make bench-module netblkctl`, which
`make e2e` does); a missing one fails the tests rather than skipping them.

The guests boot with the kernel's own checks on (ci/guest.py
CHECKS_CMDLINE: SLUB debugging, KFENCE, panic on WARN), and every test fails
if the kernel reported a bug meanwhile (ci/guest.py kernel_trouble: in dmesg
after the test, and in the whole console log when the guest shuts down) or
if a stopped instance left slots or frames behind.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "ci"))

from guest import Guest, GuestError, NETBLK_KO, NETBLKCTL, kernel_trouble  # noqa: E402
from nbtest import leaked  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: a long-running end-to-end test")


@pytest.fixture(scope="module")
def guest(request):
    missing = [str(p) for p in (NETBLK_KO, NETBLKCTL) if not p.exists()]
    if missing:
        pytest.fail(f"not built: {', '.join(missing)} -- run `make bench-module netblkctl` "
                    f"(or `make e2e`)", pytrace=False)
    mod = request.module
    name = mod.__name__.rsplit(".", 1)[-1].removeprefix("test_")
    g = Guest(name, forwards=getattr(mod, "GUEST_FORWARDS", []), require_project=True,
              **getattr(mod, "GUEST_OPTIONS", {}))
    try:
        g.start()
    except GuestError as e:
        pytest.fail(str(e), pytrace=False)
    request.node._netblk_guest = g
    yield g
    g.shutdown()
    # what the kernel said on its console, panics on WARN included
    trouble = kernel_trouble(g.console_log.read_text(errors="replace"))
    assert not trouble, (f"the guest kernel reported trouble ({g.console_log}):\n" +
                         "\n".join(trouble[:40]))


@pytest.fixture(autouse=True)
def kernel_clean(guest):
    """After each test (and after the netblk fixture stopped every instance):
    no new kernel report, nothing leaked."""
    before = len(guest.dmesg().splitlines())
    yield
    if not guest.alive() or guest.broken:
        return
    new = guest.dmesg().splitlines()[before:]
    assert not kernel_trouble("\n".join(new)), \
        "the kernel complained during the test:\n" + "\n".join(new[-60:])
    if guest.run("grep -q '^netblk ' /proc/modules")[0] == 0:
        assert leaked(guest) == {"leaked_slots": 0, "leaked_frames": 0}


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
    if rep.when not in ("call", "setup") or not rep.failed:
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
            rep.sections.append(("guest dmesg, last lines", out))
        except GuestError as e:
            rep.sections.append(("guest dmesg", f"unavailable: {e}"))
