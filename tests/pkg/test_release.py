"""One release everywhere, and man pages and completion that say what the
tools do: checked against the tools' own usage text, so they cannot drift.

Run: make check-pkg (or /usr/bin/python3 -m pytest tests/pkg/test_release.py
after `make netblkctl`).
"""

from __future__ import annotations

import re
import sys

import pytest

from pkgtest import PYTHON, ROOT, release, run

sys.path.insert(0, str(ROOT / "client"))
import netblk  # noqa: E402

NETBLKCTL = ROOT / "tools/netblkctl/netblkctl"


def test_client_release_is_the_header_one():
    assert netblk.__version__ == release()
    r = run([PYTHON, "-m", "netblk", "--version"], cwd=ROOT / "client")
    assert r.stdout == f"netblk {release()}\n"


def test_debian_changelog_release_is_the_header_one():
    top = (ROOT / "debian/changelog").read_text().splitlines()[0]
    assert re.match(rf"^netblk \({re.escape(release())}\) ", top), top


def test_netblkctl_version_without_module():
    """On the build host the module is not loaded: netblkctl says so and
    still names its own release."""
    r = run([str(NETBLKCTL), "--version"])
    lines = r.stdout.splitlines()
    assert lines[0] == f"netblkctl {release()}"
    assert lines[1].startswith("netblk.ko "), lines


# --------------------------------------------------------------------------
# netblkctl(8) against netblkctl --help

def ctl_usage() -> dict[str, set[str]]:
    """netblkctl --help's usage lines: each command and the words it takes
    (ro, dev=, --json, all ...), continuation lines under their command."""
    text = run([str(NETBLKCTL), "--help"]).stdout
    block = text.split("\n\n", 1)[0]
    cmds: dict[str, set[str]] = {}
    cur = None
    for line in block.splitlines():
        m = re.match(r"^(?:usage:)?\s+netblkctl (\S+)(.*)$", line)
        if m:
            cur, rest = m.group(1), m.group(2)
            cmds.setdefault(cur, set())
        else:
            rest = line
        cmds[cur] |= words(rest)
    return cmds


def words(text: str) -> set[str]:
    """The literal words of a usage or synopsis line: options (--json),
    keys (dev=), keywords (ro, all, header, full)."""
    text = re.sub(r"[*_]", "", text)                 # scdoc's bold and underline
    text = re.sub(r"<[^>]*>", "", text)              # <port>
    out = set(re.findall(r"--[a-z-]+|\b[a-z-]+=", text))
    text = re.sub(r"--[a-z-]+|\b[a-z-]+=[A-Za-z]*", "", text)
    out |= set(re.findall(r"(?<![\w-])[a-z][a-z-]*(?![\w-])", text))   # ro, all, a-flag
    return out


def man_sections(name: str) -> dict[str, str]:
    """The page's sections by heading, without scdoc's comment lines (the
    markers of the regions tests/netblkctl/test_docs.cpp generates)."""
    text = (ROOT / "man" / f"{name}.scd").read_text()
    text = re.sub(r"^;( .*)?\n", "", text, flags=re.M)
    parts = re.split(r"^# (\S[^\n]*)$", text, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


def ctl_man_synopsis() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for para in man_sections("netblkctl.8")["SYNOPSIS"].strip().split("\n\n"):
        m = re.match(r"^\*netblkctl (\S+?)\*?\s(.*)$", para.replace("\n", " ") + " ")
        assert m, f"not a netblkctl synopsis line: {para!r}"
        cmd, rest = m.group(1), m.group(2)
        if cmd.endswith("*"):
            cmd = cmd[:-1]
        out[cmd] = words(rest)
    return out


# Lower-case words of the usage that are placeholders, not literals.
PLACEHOLDERS = {"blockdev", "port", "addr", "netblkn"}


def test_netblkctl_man_synopsis_is_the_usage():
    usage = ctl_usage()
    man = ctl_man_synopsis()
    # "--help | --version" is one line in both
    assert set(man) == set(usage), (sorted(man), sorted(usage))
    for cmd, ws in usage.items():
        assert man[cmd] - PLACEHOLDERS == ws - PLACEHOLDERS, \
            f"{cmd}: the man page says {sorted(man[cmd])}, the usage {sorted(ws)}"


def test_netblkctl_man_describes_every_option():
    commands = man_sections("netblkctl.8")["COMMANDS"]
    for cmd, ws in ctl_usage().items():
        for w in ws - PLACEHOLDERS - {"all", "header", "full", "wait", "stop"}:
            assert re.search(r"\*[^*\n]*" + re.escape(w) + r"[^*\n]*\*", commands), \
                f"netblkctl(8) COMMANDS does not describe {cmd}'s {w}"


def test_netblkctl_completion_offers_the_usage():
    comp = (ROOT / "tools/netblkctl/netblkctl.bash-completion").read_text()
    usage = ctl_usage()
    top = re.search(r'local cmds="([^"]*)"', comp).group(1).split()
    assert set(top) == (set(usage) - {"--help"}) | {"--help", "--version"}
    offered = set()
    for wl in re.findall(r'-W "([^"$]*)"', comp.split("case", 1)[1]):
        offered |= set(wl.split())
    values = {"all", "header", "full", "wait", "stop"}    # a word's values, not options
    wanted = set().union(*usage.values()) - PLACEHOLDERS - values
    wanted -= {"--help", "--version"}
    assert wanted <= offered, sorted(wanted - offered)
    assert offered - values - {"dev=", "key=", "auth=", "nic-loss="} <= wanted, \
        sorted(offered - wanted)


# --------------------------------------------------------------------------
# netblk(1) against the client's argparse parser

def client_commands() -> dict[str, set[str]]:
    parser = netblk.build_parser()
    common = {o for a in parser._actions for o in a.option_strings}
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return {name: {o for a in sp._actions for o in a.option_strings} - common
            for name, sp in sub.choices.items()} | {"": common}


def test_netblk_man_synopsis_has_every_command_and_its_options():
    synopsis = man_sections("netblk.1")["SYNOPSIS"]
    lines = {}
    for para in synopsis.strip().split("\n\n"):
        m = re.search(r"_port_ \*(\w+)\*(.*)$", para.replace("\n", " "))
        if m:
            lines[m.group(1)] = set(re.findall(r"--[a-z-]+", m.group(2)))
    cmds = client_commands()
    assert set(lines) == set(cmds) - {""}
    for name, opts in cmds.items():
        if name:
            assert lines[name] == opts - {"-h", "--help"}, (name, lines[name], opts)


def test_netblk_man_describes_every_option_and_no_other():
    text = (ROOT / "man/netblk.1.scd").read_text()
    options = man_sections("netblk.1")["OPTIONS"]
    cmds = client_commands()
    for o in cmds[""] - {"-h"}:
        assert f"*{o}*" in options, f"netblk(1) OPTIONS does not describe {o}"
    known = set().union(*cmds.values())
    assert set(re.findall(r"\*(--[a-z-]+)\*", text)) <= known


@pytest.mark.parametrize("page", ["netblkctl.8", "netblk.1"])
def test_man_page_renders(page, tmp_path):
    out = tmp_path / page
    run(f"scdoc <man/{page}.scd >{out}")
    r = run(["groff", "-ww", "-man", "-Tutf8", "-P", "-c", "-P", "-b", "-P", "-u", str(out)])
    assert r.stderr == "", f"groff warns about {page}:\n{r.stderr}"
    assert "SYNOPSIS" in r.stdout and "DESCRIPTION" in r.stdout
