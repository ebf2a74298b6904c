"""bench: IOPS, MiB/s and latency percentiles of one kind of request, run
through a Client's request engine."""

from __future__ import annotations

import math
import os
import random
import time
from dataclasses import asdict
from typing import Iterator

from .client import Client, NetblkError, Stats, _Job
from .protocol import OP_READ, OP_WRITE


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of an ascending list."""
    if not sorted_values:
        return 0.0
    k = max(0, min(len(sorted_values) - 1, math.ceil(q / 100 * len(sorted_values)) - 1))
    return sorted_values[k]


def bench(client: Client, mode: str, size: int, seconds: float, window: int = 64,
          rng: tuple[int, int] | None = None, seed: int | None = None) -> dict:
    """Run one benchmark: requests of `size` bytes for `seconds`, `window` in flight,
    never outside rng (offset, length); writes need rng.  Returns the results."""
    if mode not in ("randread", "randwrite", "read", "write"):
        raise ValueError(f"unknown bench mode {mode!r}")
    writing = mode.endswith("write")
    if writing and rng is None:
        raise ValueError(f"bench --mode {mode} writes: say where with --range OFFSET:LENGTH "
                         f"(it overwrites that range)")
    g = client.geometry
    if writing and g.read_only:
        raise ValueError(f"bench --mode {mode}: the instance is read-only")
    base, span = rng if rng is not None else (0, g.size)
    sector = max(g.sector_size, 1)
    if size <= 0 or size % sector:
        raise ValueError(f"--size {size} is not a whole number of {sector}-byte sectors")
    limit = g.max_io if writing else client.read_piece()
    if size > limit:
        raise ValueError(f"--size {size} is more than one {'WRITE' if writing else 'READ'} "
                         f"carries here ({limit})")
    if base % sector or span % sector:
        raise ValueError(f"--range {base}:{span} is not sector-aligned ({sector})")
    if base + span > g.size:
        raise ValueError(f"--range {base}:{span} ends beyond the device ({g.size} bytes)")
    if span < size:
        raise ValueError(f"--range {base}:{span} is smaller than --size {size}")
    if seconds <= 0:
        raise ValueError("--seconds must be > 0")

    count = span // size  # whole requests that fit the range
    r = random.Random(seed)
    payload = os.urandom(size) if writing else b""
    op = OP_WRITE if writing else OP_READ
    cost = client._read_cost(size) if op == OP_READ else 1
    sink = bytearray(size) if not writing else None
    latencies: list[float] = []
    errors: list[str] = []
    before = Stats(**asdict(client.stats))

    start = time.monotonic()
    end = start + seconds

    def jobs() -> Iterator[_Job]:
        i = 0
        while time.monotonic() < end:
            k = r.randrange(count) if mode.startswith("rand") else i % count
            i += 1
            off = base + k * size
            assert base <= off and off + size <= base + span
            yield _Job(op, off, size, payload=payload, cost=cost, buf=sink)

    def done(job: _Job) -> None:
        latencies.append(job.done_at - job.first_sent)

    def error(job: _Job, exc: NetblkError) -> None:
        errors.append(str(exc))

    client._run(jobs(), window, on_done=done, on_error=error)
    elapsed = time.monotonic() - start

    latencies.sort()
    ops = len(latencies)
    s = client.stats
    us = [x * 1e6 for x in latencies]
    return {
        "mode": mode,
        "size": size,
        "window": client.effective_window(window, cost),
        "seconds": round(elapsed, 6),
        "range": {"offset": base, "length": span},
        "ops": ops,
        "bytes": ops * size,
        "iops": round(ops / elapsed, 1) if elapsed > 0 else 0.0,
        "mib_s": round(ops * size / elapsed / (1 << 20), 3) if elapsed > 0 else 0.0,
        "latency_us": {
            "p50": round(percentile(us, 50), 1),
            "p99": round(percentile(us, 99), 1),
            "p99.9": round(percentile(us, 99.9), 1),
            "max": round(us[-1], 1) if us else 0.0,
        },
        "retries": s.retries - before.retries,
        "busy": s.busy - before.busy,
        "errors": len(errors),
        "first_error": errors[0] if errors else None,
    }
