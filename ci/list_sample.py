#!/usr/bin/python3
"""The `netblkctl list` sample of README.md and tools/netblkctl/README.md:
boot the test guest, serve /dev/nvme0n1p1, write and read back 200 x 64 KiB
from the Python client on the host, flush, and print what netblkctl says.

    /usr/bin/python3 ci/list_sample.py      (after make bench-module netblkctl)

Under TCG on a shared host the service times say nothing about netblk.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "ci"))
sys.path.insert(0, str(ROOT / "client"))

from guest import Guest  # noqa: E402
from netblk import Client  # noqa: E402

PIECE = 64 << 10


def show(g: Guest, cmd: str) -> None:
    print(f"$ {cmd}\n{g.check(cmd).rstrip()}")


def main() -> int:
    with Guest("sample", forwards=[7000], require_project=True) as g:
        g.check("modprobe netblk")
        show(g, "netblkctl start /dev/nvme0n1p1 7000 dev=eth0 cpu=1")
        with Client("127.0.0.1", g.host_port(7000), timeout=5, tries=4) as c:
            data = os.urandom(PIECE)
            for i in range(200):
                c.write(i * PIECE, data)
            for i in range(200):
                if c.read(i * PIECE, PIECE) != data:
                    print(f"read back differs at {i * PIECE}", file=sys.stderr)
                    return 1
            c.flush()
        show(g, "netblkctl list")
        show(g, "netblkctl stop all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
