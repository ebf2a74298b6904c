"""Helpers the end-to-end test modules share: netblkctl in the guest, host
programs to copy into it, and what netblk leaves behind."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import time
from pathlib import Path

import pytest

from guest import ARCH, TRIPLET  # noqa: F401 (TRIPLET: the test modules')
from initramfs import sysroot


def host_elf(*names: str) -> Path | None:
    """A host ELF program (not a script or busybox link) to copy into the
    guest; for an arm64 guest (NETBLK_ARCH) the arm64 one in
    build/sysroot-arm64 (ci/fetch-sysroot.sh), if it is there."""
    for name in names:
        if ARCH != "amd64":
            root = sysroot(ARCH)
            p = shutil.which(name, path=":".join(str(root / d) for d in ("usr/sbin", "usr/bin",
                                                                         "sbin", "bin")))
        else:
            p = shutil.which(name) or next((str(d / name) for d in (Path("/usr/sbin"), Path("/sbin"))
                                            if (d / name).exists()), None)
        if not p:
            continue
        p = Path(p).resolve()
        try:
            with open(p, "rb") as f:
                if f.read(4) == b"\x7fELF" and "busybox" not in p.name:
                    return p
        except OSError:
            continue
    return None


def arch_file(path: str) -> Path:
    """Where this host has the guest's @path (a file of an :arch package, e.g.
    under /usr/lib/<triplet>): here for amd64, in the sysroot for arm64."""
    return Path(path) if ARCH == "amd64" else sysroot(ARCH) / path.lstrip("/")


def delta(after, before, *keys):
    """How much each counter of @keys grew from @before to @after."""
    return {k: after[k] - before[k] for k in keys}


def ctl(g, *args, timeout=60):
    """netblkctl ARGS in the guest: (exit status, stdout, stderr)."""
    cmd = " ".join(shlex.quote(str(a)) for a in args)
    rc, out = g.run(f"netblkctl {cmd} >/tmp/ctl.out 2>/tmp/ctl.err; rc=$?; "
                    f"cat /tmp/ctl.out; echo @@STDERR@@; cat /tmp/ctl.err; exit $rc", timeout)
    stdout, _, stderr = out.partition("@@STDERR@@\n")
    return rc, stdout, stderr


def start(g, dev, port, *opts):
    rc, out, err = ctl(g, "start", dev, port, *opts)
    assert rc == 0, f"netblkctl start {dev} {port} {' '.join(opts)}: exit {rc}\n{out}{err}"
    assert err == "", f"start wrote on stderr: {err!r}"
    return out


def instances(g):
    rc, out, err = ctl(g, "list", "--json")
    assert rc == 0, f"netblkctl list --json: exit {rc}\n{out}{err}"
    data = json.loads(out)
    assert isinstance(data, list), out
    return {e["port"]: e for e in data}


def refused(g, pattern, *args):
    """netblkctl ARGS must fail with a message (matching pattern) on stderr."""
    rc, out, err = ctl(g, *args)
    assert rc != 0, f"netblkctl {' '.join(map(str, args))} succeeded: {out}"
    msg = err.strip()
    assert msg, f"netblkctl {' '.join(map(str, args))}: exit {rc} and no message"
    assert re.search(pattern, msg, re.I), f"message {msg!r} does not match {pattern!r}"
    return rc, msg


def kthreads(g):
    """Names of the netblk worker threads (netblk/...)."""
    return re.findall(r"\[(netblk/[^\]]*)\]", g.check("ps"))


def leaked(g) -> dict:
    out = g.check("cat /sys/module/netblk/parameters/leaked_slots "
                  "/sys/module/netblk/parameters/leaked_frames")
    slots, frames = (int(x) for x in out.split())
    return {"leaked_slots": slots, "leaked_frames": frames}


def wait_stopped(g, port, why, seconds=15):
    """The instance on `port` stops on its own within `seconds`; the reason
    the kernel gives (dmesg's "stopped serving ... on port P: WHY") matches
    `why`.  Returns that line."""
    deadline = time.monotonic() + seconds
    pattern = re.compile(rf"stopped serving \S+ on port {port}: (.*)")
    while time.monotonic() < deadline:
        if port not in instances(g):
            lines = [m.group(0) for m in map(pattern.search, g.dmesg().splitlines()) if m]
            assert lines and re.search(why, lines[-1]), lines
            return lines[-1]
        g.run("sleep 0.2")
    pytest.fail(f"port {port} still served {seconds} s later: {instances(g).get(port)}")
