"""ci/guest.py's TapLink, the benchmark's multi-queue link (bench/README.md,
"queues=2 against queues=1"), on the host alone: its devices are made in a
network namespace of its own and nowhere else, each tap has the queues asked
for, and the namespace is gone after close() -- and after a run that was
killed, at the next TapLink.  No guest."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "ci"))
from guest import TAP_NETNS_PREFIX, TapLink  # noqa: E402

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("ip") or
                                not os.path.exists("/dev/net/tun"),
                                reason="needs root, iproute2's ip and /dev/net/tun")


@pytest.fixture(autouse=True)
def kernel_clean():
    """conftest's check of a guest's kernel log, replaced: these tests boot no guest."""
    yield


def links(netns: str | None = None) -> dict[str, dict]:
    cmd = ["ip", "-d", "-j", "link", "show"]
    if netns:
        cmd[1:1] = ["-n", netns]
    return {d["ifname"]: d for d in json.loads(subprocess.check_output(cmd, text=True))}


def namespaces() -> list[str]:
    return [line.split()[0] for line in subprocess.check_output(["ip", "netns", "list"],
                                                                text=True).splitlines()]


def test_taplink_makes_its_devices_in_its_own_namespace_and_removes_them():
    host_before = set(links())
    with TapLink(ports=2, queues=2) as tl:
        assert tl.netns in namespaces()
        devs = links(tl.netns)
        assert {"nbbr0", "nbtap0", "nbtap1"} <= set(devs)
        for tap in ("nbtap0", "nbtap1"):
            info = devs[tap]["linkinfo"]["info_data"]
            assert info["multi_queue"] and info["numqueues"] == 2, info
            assert devs[tap]["master"] == "nbbr0"
        assert len(tl.fds(0)) == 2 and len(tl.fds(1)) == 2
        args = tl.args(0, "52:54:00:09:00:01")
        assert args[1] == f"tap,id=link0,fds={tl.fds(0)[0]}:{tl.fds(0)[1]},vhost=off"
        assert "mq=on,vectors=6" in args[3]
        assert tl.drops() == {d: 0 for d in devs}
        assert set(links()) == host_before  # nothing in the host's namespace
        fds = tl.fds(0) + tl.fds(1)
    assert tl.netns not in namespaces()
    assert set(links()) == host_before
    for fd in fds:
        with pytest.raises(OSError):
            os.fstat(fd)


def test_a_killed_runs_namespace_is_removed_by_the_next():
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = f"{TAP_NETNS_PREFIX}{dead.pid}"
    subprocess.run(["ip", "netns", "add", stale], check=True)
    subprocess.run(["ip", "-n", stale, "tuntap", "add", "dev", "nbtap0", "mode", "tap",
                    "multi_queue"], check=True)
    try:
        with TapLink(ports=1, queues=2) as tl:
            assert stale not in namespaces() and tl.netns in namespaces()
    finally:
        subprocess.run(["ip", "netns", "del", stale], stderr=subprocess.DEVNULL)
    assert "nbtap0" not in links()
