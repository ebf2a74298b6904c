"""The Debian packages as an operator gets them: `make deb` builds them with
Debian's tools and lintian finds no error; apt installs them on this machine;
DKMS builds netblk.ko for the test guest's kernel (Debian's 6.12 cloud
kernel, its headers installed here by this test); that module and the
packaged netblkctl then pass end-to-end tests in the guest; a purge takes all
of it away again.

This installs packages on the machine it runs on (as root): the kernel
headers stay, netblk-dkms and netblk-tools are purged at the end.
Run: make check-pkg.
"""

from __future__ import annotations

import lzma
import os
import shutil
from pathlib import Path

import pytest

from pkgtest import PYTHON, ROOT, release, run

KERNEL_RELEASE = (ROOT / "build/kernel/.release").read_text().strip() \
    if (ROOT / "build/kernel/.release").exists() else None
APT_ENV = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
PACKAGES = ("netblk-dkms", "netblk-tools")

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="installs packages: needs root")


def apt(*args):
    return run(["apt-get", "-y", "-q", "--no-install-recommends", *args], env=APT_ENV,
               timeout=1200)


def debs() -> list[Path]:
    arch = run(["dpkg", "--print-architecture"]).stdout.strip()
    return [ROOT / f"build/deb/netblk-dkms_{release()}_all.deb",
            ROOT / f"build/deb/netblk-tools_{release()}_{arch}.deb"]


@pytest.fixture(scope="module")
def installed():
    assert KERNEL_RELEASE, "build/kernel is not fetched: run `make kernel`"
    r = run(["make", "deb"], timeout=1200)
    assert "E: " not in r.stdout, r.stdout[-3000:]	# lintian --fail-on error also fails make
    for deb in debs():
        assert deb.is_file(), f"make deb made no {deb.name}"
    # DKMS builds for every kernel with headers: give it the guest's
    apt("install", f"linux-headers-{KERNEL_RELEASE}", f"linux-image-{KERNEL_RELEASE}-unsigned")
    try:
        r = apt("install", *[str(d) for d in debs()])
        yield r
    finally:
        run(["apt-get", "-y", "-q", "purge", *PACKAGES], env=APT_ENV, check=False, timeout=600)


def dkms_module() -> Path:
    d = Path(f"/lib/modules/{KERNEL_RELEASE}/updates/dkms")
    found = sorted(d.glob("netblk.ko*")) if d.is_dir() else []
    assert len(found) == 1, f"DKMS installed {found} in {d}"
    return found[0]


def test_dkms_built_the_module_for_the_guest_kernel(installed):
    status = run(["dkms", "status", "netblk"]).stdout
    assert f"netblk/{release()}, {KERNEL_RELEASE}, x86_64: installed" in status, status
    ko = dkms_module()
    assert run(["modinfo", "-F", "version", str(ko)]).stdout.strip() == release()
    assert run(["modinfo", "-F", "vermagic", str(ko)]).stdout.split()[0] == KERNEL_RELEASE
    # depmod ran: modprobe would find it
    deps = Path(f"/lib/modules/{KERNEL_RELEASE}/modules.dep").read_text()
    assert f"updates/dkms/{ko.name}:" in deps


def test_the_tools_are_installed_and_agree(installed):
    r = run(["/usr/sbin/netblkctl", "--version"])
    assert r.stdout.splitlines()[0] == f"netblkctl {release()}"
    assert run(["/usr/bin/netblk", "--version"], cwd="/").stdout == f"netblk {release()}\n"
    # importable from anywhere, and runnable as python3 -m netblk
    r = run([PYTHON, "-c", "import netblk; print(netblk.__file__, netblk.__version__)"], cwd="/")
    assert r.stdout == f"/usr/lib/python3/dist-packages/netblk/__init__.py {release()}\n"
    assert run([PYTHON, "-m", "netblk", "--version"], cwd="/").stdout == f"netblk {release()}\n"
    assert run(["man", "-w", "netblkctl"]).stdout.strip() == "/usr/share/man/man8/netblkctl.8.gz"
    assert run(["man", "-w", "netblk"]).stdout.strip() == "/usr/share/man/man1/netblk.1.gz"
    assert Path("/usr/share/bash-completion/completions/netblkctl").is_file()


def test_the_units_pass_systemd_analyze_verify(installed):
    unit = Path("/lib/systemd/system/netblk.service")
    supervise = Path("/lib/systemd/system/netblk-supervise.service")
    assert "ExecStart=/usr/sbin/netblkctl restore\n" in unit.read_text()
    assert "ExecStart=/usr/sbin/netblkctl supervise\n" in supervise.read_text()
    r = run(["systemd-analyze", "verify", str(unit), str(supervise)], check=False)
    assert r.returncode == 0 and "netblk" not in r.stderr, r.stderr


def test_the_packaged_module_and_netblkctl_serve_in_the_guest(installed, tmp_path):
    """The guest boots with DKMS's netblk.ko and the package's netblkctl and
    runs end-to-end tests with them: versions, start/list/stop, data."""
    ko = dkms_module()
    plain = tmp_path / "netblk.ko"
    if ko.suffix == ".xz":	# the guest's initramfs takes a plain .ko
        plain.write_bytes(lzma.decompress(ko.read_bytes()))
    else:
        shutil.copy(ko, plain)
    env = dict(os.environ, NETBLK_KO=str(plain), NETBLK_NETBLKCTL="/usr/sbin/netblkctl",
               NETBLK_NIC="virtio")
    r = run([PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider",
             "tests/e2e/test_control_plane.py::test_versions",
             "tests/e2e/test_control_plane.py::test_start_list_stop",
             "tests/e2e/test_control_plane.py::test_stop_all",
             "tests/e2e/test_datapath.py::test_write_read_back"],
            env=env, check=False, timeout=1800)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]


def test_purge_takes_it_all_away(installed):
    run(["apt-get", "-y", "-q", "purge", *PACKAGES], env=APT_ENV)
    assert "netblk" not in run(["dkms", "status"]).stdout
    assert not list(Path(f"/lib/modules/{KERNEL_RELEASE}").glob("updates/dkms/netblk.ko*"))
    assert not Path(f"/usr/src/netblk-{release()}").exists()
    for path in ("/usr/sbin/netblkctl", "/usr/bin/netblk",
                 "/usr/lib/python3/dist-packages/netblk"):
        assert not os.path.exists(path), path
