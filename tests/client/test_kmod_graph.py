"""ci/kmod_graph.py, which `make check` runs on the built module: it finds a
circle wherever one is, however long, and reads the objects Kbuild links.

Run: /usr/bin/python3 -m pytest tests/client/test_kmod_graph.py
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "ci"))

import kmod_graph  # noqa: E402


def test_a_one_way_graph_has_no_circle() -> None:
    g = {"genl": {"target/ctl"}, "target/ctl": {"target/instance", "core/engine"},
         "target/instance": {"core/engine"}, "core/engine": set()}
    assert kmod_graph.circles(g) == []


def test_every_circle_is_found_with_all_its_files() -> None:
    g = {"genl": {"target/instance"}, "target/instance": {"target/monitor"},
         "target/monitor": {"genl", "core/engine"}, "core/engine": set(),
         "host/blk": {"host/engine"}, "host/engine": {"host/blk"}}
    found = kmod_graph.circles(g)
    assert sorted(found) == [["genl", "target/instance", "target/monitor"],
                             ["host/blk", "host/engine"]]


def test_the_objects_are_kbuilds_list(tmp_path: Path) -> None:
    (tmp_path / "Kbuild").write_text("obj-m += netblk.o\n\nnetblk-y := \\\n\tmain.o \\\n"
                                     "\ttarget/ctl.o \\\n\tcore/engine.o\n\nccflags-y += -I$(src)\n")
    assert kmod_graph.module_objects(tmp_path) == [
        tmp_path / "main.o", tmp_path / "target" / "ctl.o", tmp_path / "core" / "engine.o"]


def test_the_tree_lists_every_c_and_cpp_file_it_has() -> None:
    """A file left out of Kbuild's list would be left out of the graph too."""
    kmod = ROOT / "kmod"
    listed = {o.with_suffix("") for o in kmod_graph.module_objects(kmod)}
    sources = {p.with_suffix("") for p in kmod.rglob("*") if p.suffix in (".c", ".cpp")
               and not p.name.endswith(".mod.c")}
    assert sources == listed
