"""make install as an operator or a packager runs it: DESTDIR, PREFIX and
INSTALL_MOD_PATH honoured, and a module built for another kernel than the
one it would be installed for refused with what to do.

Run: make check-pkg (it builds the module and netblkctl first).
"""

from __future__ import annotations

import os
import platform

from pkgtest import PYTHON, release, run, module_kernel


def make_install(dest, *args, check=True):
    return run(["make", "-s", "install", f"DESTDIR={dest}", *args], check=check)


def test_staged_install_puts_everything_under_destdir(tmp_path):
    kver = module_kernel()
    make_install(tmp_path, f"KVER={kver}")
    ko = tmp_path / f"lib/modules/{kver}/extra/netblk.ko"
    assert run(["modinfo", "-F", "version", str(ko)]).stdout.strip() == release()
    minor = platform.python_version_tuple()[1]
    site = tmp_path / f"usr/local/lib/python3.{minor}/dist-packages"
    for path in ("usr/local/sbin/netblkctl", "usr/local/bin/netblk",
                 "usr/local/share/man/man8/netblkctl.8", "usr/local/share/man/man1/netblk.1",
                 "usr/local/share/bash-completion/completions/netblkctl"):
        assert (tmp_path / path).is_file(), path
    # the package, sources only (the installed command compiles what it runs)
    assert (site / "netblk" / "__init__.py").is_file()
    assert (site / "netblk" / "__main__.py").is_file()
    assert not (site / "netblk" / "__pycache__").exists()
    unit = (tmp_path / "usr/local/lib/systemd/system/netblk.service").read_text()
    assert "ExecStart=/usr/local/sbin/netblkctl restore\n" in unit
    assert "@" not in unit
    unit = (tmp_path / "usr/local/lib/systemd/system/netblk-supervise.service").read_text()
    assert "ExecStart=/usr/local/sbin/netblkctl supervise\n" in unit
    assert "@" not in unit
    # the installed command finds the installed module, not the tree's
    r = run([str(tmp_path / "usr/local/bin/netblk"), "--version"], cwd="/",
            env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"})
    assert r.stdout == f"netblk {release()}\n"
    r = run([str(tmp_path / "usr/local/sbin/netblkctl"), "--version"])
    assert r.stdout.startswith(f"netblkctl {release()}\n")
    # nothing outside DESTDIR: no depmod of the host's tree for a staged install
    assert not os.path.exists(f"/lib/modules/{kver}/extra/netblk.ko")


def test_prefix_usr_uses_debians_python_directory(tmp_path):
    make_install(tmp_path, f"KVER={module_kernel()}", "PREFIX=/usr")
    assert (tmp_path / "usr/lib/python3/dist-packages/netblk/__init__.py").is_file()
    assert (tmp_path / "usr/sbin/netblkctl").is_file()
    assert (tmp_path / "usr/share/man/man8/netblkctl.8").is_file()
    unit = (tmp_path / "lib/systemd/system/netblk.service").read_text()
    assert "ExecStart=/usr/sbin/netblkctl restore\n" in unit


def test_install_mod_path_prefixes_the_module(tmp_path):
    kver = module_kernel()
    make_install(tmp_path, f"KVER={kver}", "INSTALL_MOD_PATH=/opt/mods")
    assert (tmp_path / f"opt/mods/lib/modules/{kver}/extra/netblk.ko").is_file()
    assert not (tmp_path / "lib").exists()


def test_another_kernels_module_is_refused_with_what_to_do(tmp_path):
    kver = module_kernel()
    r = make_install(tmp_path, "KVER=9.9.9-nowhere", check=False)
    assert r.returncode != 0
    assert (f"kmod/netblk.ko is built for {kver}, not KVER=9.9.9-nowhere" in r.stderr and
            f"give KVER={kver}" in r.stderr), r.stderr
    assert not (tmp_path / "lib/modules").exists()


def test_without_kver_the_running_kernel_decides(tmp_path):
    """Without KVER: the running kernel's module is installed for it; one for
    another kernel (a host without its headers builds the test guest's) is
    refused, naming the headers to install and the KVER= that would do."""
    kver, running = module_kernel(), os.uname().release
    r = make_install(tmp_path, check=False)
    if kver == running:
        assert r.returncode == 0, r.stderr
        assert (tmp_path / f"lib/modules/{running}/extra/netblk.ko").is_file()
    else:
        assert r.returncode != 0
        assert f"not for the kernel this host runs ({running})" in r.stderr, r.stderr
        assert f"apt-get install linux-headers-{running}" in r.stderr
        assert f"make install KVER={kver}" in r.stderr
        assert not (tmp_path / "lib/modules").exists()
        assert not (tmp_path / "usr").exists()
