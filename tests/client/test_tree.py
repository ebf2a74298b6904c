"""The tree as committed: no merge's conflict markers left in any file (a
stash's were in kmod/genl.c's header comment from 1d585b8 to 13ac165,
compiling, being in a comment).

Run: /usr/bin/python3 -m pytest tests/client/test_tree.py
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_no_conflict_markers() -> None:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    found = subprocess.run(["git", "grep", "-n", "-E", "^(<{7}|>{7})( |$)"], cwd=ROOT,
                           capture_output=True, text=True)
    assert found.returncode == 1, f"conflict markers committed:\n{found.stdout}{found.stderr}"
