"""ci/bench_compare.py: two runs side by side, the ratio it prints the one
the rows give.

Run: /usr/bin/python3 -m pytest tests/client/test_bench_compare.py
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def row(system, kinsn, iops):
    return {"system": system, "workload": "randread", "bs": 4096, "depth": 32, "iops": iops,
            "server_kinsn_per_req": kinsn, "client_kinsn_per_req": kinsn / 2}


def compare(tmp_path, before, after):
    paths = []
    for name, d in (("before", before), ("after", after)):
        p = tmp_path / f"{name}.json"
        p.write_text(json.dumps(d))
        paths.append(str(p))
    return subprocess.run([sys.executable, str(ROOT / "ci" / "bench_compare.py"), *paths],
                          check=True, capture_output=True, text=True).stdout


def test_peers_ratio_to_nvme_tcp_before_and_after(tmp_path) -> None:
    before = {"rows": [row("netblk", 20.0, 1000), row("nvme-tcp", 40.0, 500)]}
    after = {"rows": [row("netblk", 22.0, 1000), row("nvme-tcp", 40.0, 1000)]}
    out = compare(tmp_path, before, after)
    assert "0.50/0.55" in out	# server instructions against nvme-tcp's
    assert "2.00/1.00" in out	# IOPS
    assert "server ratio: after/before geometric mean 1.100 over 1 rows" in out
    assert "netblk's own server: after/before geometric mean 1.100 over 1 rows" in out


def test_a_row_without_its_peer_is_left_out(tmp_path) -> None:
    before = {"rows": [row("netblk", 20.0, 1000), row("nbd", 40.0, 500)]}
    out = compare(tmp_path, before, before)
    assert "randread" not in out and "geometric" not in out


def test_host_ratios(tmp_path) -> None:
    r = {"workload": "randread", "size": 4096, "window": 32, "what": "netblk/nbd-server",
         "iops": 2.0, "p99": 0.5, "cpu_per_req": 0.25}
    out = compare(tmp_path, {"rows": [{"system": "x"}], "ratios": [r]},
                  {"rows": [{"system": "x"}], "ratios": [dict(r, iops=3.0)]})
    lines = {tuple(l.split()[:2]): l for l in out.splitlines()}
    assert "after/before geometric mean 1.500 over 1 rows" in lines[("netblk/nbd-server", "iops")]
    assert "geometric mean 1.000" in lines[("netblk/nbd-server", "cpu_per_req")]
