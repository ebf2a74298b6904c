"""The guest instructions QEMU's TCG plugin ci/qemu-plugin/insn_count.c
counts, each vCPU's: the work a guest does for a request, exact to about
1 % where CPU time under TCG moves 10-40 % from run to run.

    counter = InsnCounter("bench-server")
    Guest(..., qemu_args=[*other_args, *counter.qemu_args()])
    before = counter.total(); ...; after = counter.total()

`make insn-plugin` builds the plugin (ci/fetch-qemu-plugin-header.sh takes
its header from Debian's qemu source package).  Standard library only.
"""

from __future__ import annotations

import os
import socket
import time

from guest import ROOT, SOCKETS

PLUGIN = ROOT / "build" / "qemu-plugin" / "libinsn_count.so"


class InsnCounter:
    """One guest's counts, read through the plugin's Unix socket."""

    def __init__(self, name: str, pcs: bool = False):
        """@pcs: the plugin also counts each translated block's executions
        (pcs=on), read with blocks(); the plugin then takes a request line."""
        self.sock = SOCKETS / f"{name}.{os.getpid()}.insn.sock"
        self.pcs = pcs

    def qemu_args(self) -> list[str]:
        """QEMU's arguments to load the plugin (QEMU refuses to start
        without it: `make insn-plugin` builds it)."""
        SOCKETS.mkdir(parents=True, exist_ok=True)
        return ["-plugin", f"{PLUGIN},sock={self.sock}" + (",pcs=on" if self.pcs else "")]

    def ask(self, request: bytes | None) -> bytes:
        """The plugin's answer to @request (pcs=on only; None: none sent)."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(30)
            s.connect(str(self.sock))
            if request is not None:
                s.sendall(request)
            chunks = []
            while chunk := s.recv(1 << 16):
                chunks.append(chunk)
        return b"".join(chunks)

    def per_vcpu(self) -> list[int]:
        """Each vCPU's instructions since the guest started."""
        data = self.ask(b"\n" if self.pcs else None)
        if not data.endswith(b"\n"):
            raise RuntimeError(f"{self.sock}: a cut answer {data!r}")
        return [int(n) for n in data.split()]

    def blocks(self) -> dict[tuple[int, int], int]:
        """pcs=on: {(block address, its instructions): executions so far}."""
        data = self.ask(b"pcs\n")
        if not data.endswith(b"\n\n") and data != b"\n":
            raise RuntimeError(f"{self.sock}: a cut table ({len(data)} bytes)")
        out = {}
        for line in data.split(b"\n"):
            if line:
                vaddr, n, execs = line.split()
                out[(int(vaddr, 16), int(n))] = int(execs)
        return out

    def total(self) -> int:
        return sum(self.per_vcpu())

    def idle_rate(self, seconds: float = 3.0) -> float:
        """Instructions a second the guest executes doing nothing of ours
        (timers, the agent): what a measurement over a time subtracts."""
        n0, t0 = self.total(), time.monotonic()
        time.sleep(seconds)
        return (self.total() - n0) / (time.monotonic() - t0)
