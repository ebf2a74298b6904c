"""Helpers of tests/pkg: the tree's release and commands run from its root."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYTHON = "/usr/bin/python3"


def release() -> str:
    """The release kmod/uapi/netblk_version.h names."""
    text = (ROOT / "kmod/uapi/netblk_version.h").read_text()
    return re.search(r'^#define NETBLK_VERSION "([^"]+)"$', text, re.M).group(1)


def run(cmd: list[str] | str, *, check: bool = True, timeout: float = 900,
        **kw) -> subprocess.CompletedProcess:
    """cmd in the tree's root, its output captured; check: fail with it."""
    r = subprocess.run(cmd, cwd=kw.pop("cwd", ROOT), shell=isinstance(cmd, str), text=True,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                       timeout=timeout, **kw)
    if check and r.returncode != 0:
        raise AssertionError(f"{cmd} exited {r.returncode}\n--- stdout\n{r.stdout[-4000:]}"
                             f"\n--- stderr\n{r.stderr[-4000:]}")
    return r


def module_kernel() -> str:
    """The kernel release kmod/netblk.ko is built for (its vermagic)."""
    return run(["modinfo", "-F", "vermagic", "kmod/netblk.ko"]).stdout.split()[0]
