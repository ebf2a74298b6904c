"""The documents' relative links point at files that exist: README.md,
bench/README.md, docs/*.md and every other README, so that moving a file
(bench/'s results, a doc) cannot leave a reader at a dead link.  And every
run directory bench/README.md names is there.

Run: /usr/bin/python3 -m pytest tests/client
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted(p for p in {ROOT / "README.md", *ROOT.glob("docs/*.md"), *ROOT.glob("*/README.md"),
                          *ROOT.glob("tools/*/README.md")}
              if not any(part.startswith(".") for part in p.relative_to(ROOT).parts))  # .pytest_cache
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_exist(doc: Path) -> None:
    missing = []
    for target in LINK.findall(doc.read_text()):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        if not (doc.parent / target.split("#")[0]).exists():
            missing.append(target)
    assert not missing, f"{doc.relative_to(ROOT)} links to what is not there: {missing}"


def test_bench_runs_named_exist() -> None:
    text = (ROOT / "bench" / "README.md").read_text()
    named = set(re.findall(r"runs/(\d{4}-\d\d-\d\d-[a-z0-9-]+)/", text))
    on_disk = {p.name for p in (ROOT / "bench" / "runs").iterdir() if p.is_dir()}
    assert named, "bench/README.md names no run directory"
    assert not named - on_disk, f"named but missing: {sorted(named - on_disk)}"
    assert not on_disk - named, f"in bench/runs/ but not in bench/README.md: {sorted(on_disk - named)}"
