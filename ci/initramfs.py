"""Build the netblk test guest's initramfs (a newc cpio, uncompressed).

Used by ci/guest.py; standard library only.  The archive is cached under
build/guest/ keyed by a hash of every input (file paths, sizes, mtimes,
inline contents, kernel release), so it is rebuilt only when something
changed -- e.g. a rebuilt kmod/netblk.ko or netblkctl.

Contents:
  /bin/busybox (busybox-static) -- /init installs every applet as a symlink
  /init, /etc/inittab, /sbin/netblk-agent    from ci/guest-files/
  /etc/bench.env                            settings from the host
  /lib/modules/$REL/...                     the requested kernel modules and
                                            their dependencies, decompressed,
                                            plus modules.dep from `depmod -b`
  /lib/modules/$REL/extra/netblk.ko         if given
  /usr/bin/nbudp, nbraw, nbiov, nbreuse      static UDP, raw-frame and direct-I/O
                                            helpers (ci/guest-files/*.c)
  any extra files; dynamic ELF programs bring their `ldd` closure and loader.

arch="arm64" builds one for an arm64 guest from arm64 programs (cross-built,
or Debian's arm64 packages unpacked in build/sysroot-arm64 by
ci/fetch-sysroot.sh): busybox from the sysroot, the helpers compiled with
aarch64-linux-gnu-gcc, and the libraries found by the programs' DT_NEEDED
(readelf; ldd cannot run a foreign loader) in the sysroot, then in this
host's /usr/lib/aarch64-linux-gnu (the :arm64 -dev packages' libraries).
"""

from __future__ import annotations

import hashlib
import lzma
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

FORMAT_VERSION = "6"  # bump to invalidate every cached archive
GUEST_FILES = Path(__file__).resolve().parent / "guest-files"
ROOT = Path(__file__).resolve().parent.parent
# A guest architecture: its multiarch triplet and the C compiler for the
# static helpers (CC overrides amd64's).
ARCHES = {"amd64": ("x86_64-linux-gnu", None), "arm64": ("aarch64-linux-gnu", "aarch64-linux-gnu-gcc")}


def sysroot(arch: str) -> Path:
    """Where ci/fetch-sysroot.sh unpacks @arch's programs and libraries."""
    return ROOT / "build" / f"sysroot-{arch}"


# --------------------------------------------------------------------------
# newc writer
# --------------------------------------------------------------------------
class CpioWriter:
    def __init__(self, f):
        self.f = f
        self.ino = 1000
        self.names: set[str] = set()

    def _pad(self, n: int) -> None:
        if n % 4:
            self.f.write(b"\0" * (4 - n % 4))

    def entry(self, name: str, mode: int, data: bytes = b"", rdev: tuple[int, int] = (0, 0)) -> None:
        name = name.lstrip("/")
        if name in self.names:
            return
        self.names.add(name)
        self.ino += 1
        nameb = name.encode() + b"\0"
        fields = (self.ino, mode, 0, 0, 2 if stat.S_ISDIR(mode) else 1, 0, len(data),
                  0, 0, rdev[0], rdev[1], len(nameb), 0)
        hdr = b"070701" + b"".join(b"%08X" % v for v in fields)
        self.f.write(hdr + nameb)
        self._pad(len(hdr) + len(nameb))
        self.f.write(data)
        self._pad(len(data))

    def dir(self, name: str, perm: int = 0o755) -> None:
        self.entry(name, stat.S_IFDIR | perm)

    def trailer(self) -> None:
        self.entry("TRAILER!!!", 0)

    def tree(self, root: Path) -> None:
        """Every file, dir and symlink under root (sorted, parents first)."""
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            rel = os.path.relpath(dirpath, root)
            if rel != ".":
                self.dir(rel, stat.S_IMODE(os.lstat(dirpath).st_mode))
            for fn in sorted(filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]):
                p = os.path.join(dirpath, fn)
                name = os.path.normpath(os.path.join(rel, fn))
                st = os.lstat(p)
                if stat.S_ISLNK(st.st_mode):
                    self.entry(name, stat.S_IFLNK | 0o777, os.readlink(p).encode())
                elif stat.S_ISREG(st.st_mode):
                    self.entry(name, stat.S_IFREG | stat.S_IMODE(st.st_mode), Path(p).read_bytes())


# --------------------------------------------------------------------------
# kernel modules
# --------------------------------------------------------------------------
def _norm(name: str) -> str:
    return name.replace("-", "_")


def _modname(path: Path) -> str:
    n = path.name
    for suf in (".xz", ".zst", ".gz"):
        if n.endswith(suf):
            n = n[: -len(suf)]
    return _norm(n[:-3] if n.endswith(".ko") else n)


def module_index(moddir: Path) -> dict[str, Path]:
    idx = {}
    for p in (moddir / "kernel").rglob("*.ko*"):
        idx[_modname(p)] = p
    return idx


def _depends(path: Path) -> list[str]:
    out = subprocess.run(["modinfo", "-F", "depends", str(path)], check=True,
                         capture_output=True, text=True).stdout.strip()
    return [_norm(d) for d in out.split(",") if d]


def module_closure(moddir: Path, wanted: list[str], extra_kos: list[Path]) -> list[Path]:
    """Paths (in the kernel tree) of `wanted` and of everything they and
    extra_kos depend on.  Builtin modules are skipped."""
    idx = module_index(moddir)
    builtin = set()
    bfile = moddir / "modules.builtin"
    if bfile.exists():
        builtin = {_modname(Path(l.strip())) for l in bfile.read_text().splitlines() if l.strip()}
    todo = [_norm(w) for w in wanted]
    for ko in extra_kos:
        todo += _depends(ko)
    seen: dict[str, Path] = {}
    while todo:
        m = todo.pop()
        if m in seen or m in builtin:
            continue
        if m not in idx:
            raise FileNotFoundError(f"kernel module {m} is not in {moddir} (nor builtin)")
        seen[m] = idx[m]
        todo += _depends(idx[m])
    return sorted(seen.values())


# --------------------------------------------------------------------------
# ELF programs and their libraries
# --------------------------------------------------------------------------
def ldd_closure(prog: Path, arch: str = "amd64") -> list[tuple[str, Path]]:
    """(guest path, host path) of the shared objects (loader included) prog
    needs; [] for a static program."""
    if arch != "amd64":
        return elf_closure(prog, arch)
    r = subprocess.run(["ldd", str(prog)], capture_output=True, text=True)
    if r.returncode != 0 or "not a dynamic executable" in (r.stdout + r.stderr):
        return []
    libs = []
    for line in r.stdout.splitlines():
        line = line.strip()
        if "=>" in line:
            target = line.split("=>", 1)[1].strip().split(" (", 1)[0].strip()
            if target == "not found" or not target:
                raise FileNotFoundError(f"{prog}: {line}")
            libs.append(target)
        elif line.startswith("/"):
            libs.append(line.split(" (", 1)[0])
    return [(lib, Path(lib)) for lib in libs]


def _readelf(prog: Path, what: str) -> str:
    return subprocess.run(["readelf", what, "-W", str(prog)], check=True, capture_output=True,
                          text=True).stdout


def elf_closure(prog: Path, arch: str) -> list[tuple[str, Path]]:
    """ldd_closure for a program of another architecture, from its DT_NEEDED,
    RUNPATH and PT_INTERP: each library looked up where the guest's loader
    looks, in the sysroot, then on this host."""
    triplet = ARCHES[arch][0]
    dirs = [f"/lib/{triplet}", f"/usr/lib/{triplet}", "/lib", "/usr/lib"]
    roots = [sysroot(arch), Path("/")]

    def find(guest: str) -> Path | None:
        for r in roots:
            p = r / guest.lstrip("/")
            if p.exists():
                return p
        return None

    interp = [l.split(":", 1)[1].strip(" ]") for l in _readelf(prog, "-l").splitlines()
              if "Requesting program interpreter" in l]
    if not interp:
        return []
    out: dict[str, Path] = {}
    host = find(interp[0])
    if host is None:
        raise FileNotFoundError(f"{prog}: no loader {interp[0]} in {sysroot(arch)} nor on this host")
    out[interp[0]] = host
    todo = [prog]
    seen: set[str] = set()
    while todo:
        dyn = _readelf(todo.pop(), "-d").splitlines()
        needed = [l.split("[", 1)[1].rstrip("]") for l in dyn if "(NEEDED)" in l]
        # RUNPATH (librados: /usr/lib/<triplet>/ceph), absolute ones only
        runpath = [d for l in dyn if "(RUNPATH)" in l or "(RPATH)" in l
                   for d in l.split("[", 1)[1].rstrip("]").split(":") if d.startswith("/")]
        for name in needed:
            if name in seen:
                continue
            seen.add(name)
            for r, d in ((r, d) for r in roots for d in runpath + dirs):
                host = r / d.lstrip("/") / name
                if host.exists():
                    out[f"{d}/{name}"] = host
                    todo.append(host)
                    break
            else:
                raise FileNotFoundError(f"{prog}: {name} not found (ci/fetch-sysroot.sh fetches "
                                        f"a package's libraries into {sysroot(arch)})")
    return sorted(out.items())


def _file_sig(p: Path) -> str:
    st = p.stat()
    return f"{p}:{st.st_size}:{st.st_mtime_ns}"


# --------------------------------------------------------------------------
# the archive
# --------------------------------------------------------------------------
def build(out_dir: Path, *, kernel_root: Path, release: str, modules: list[str],
          netblk_ko: Path | None = None, programs: dict[str, Path] | None = None,
          files: dict[str, Path | bytes] | None = None, env: dict[str, str] | None = None,
          log=print, arch: str = "amd64") -> Path:
    """Return the path of an initramfs with all of the above, building it if
    no cached archive matches.

    programs: guest path -> host ELF program (its ldd closure comes along)
    files:    guest path -> host path or bytes (copied as is, mode kept)
    env:      written to /etc/bench.env (sourced by /init)
    arch:     the guest's architecture (ARCHES)
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    moddir = kernel_root / "lib" / "modules" / release
    programs = dict(programs or {})
    files = dict(files or {})
    if arch == "amd64":
        busybox = Path(shutil.which("busybox") or "/bin/busybox")
    else:
        busybox = sysroot(arch) / "bin" / "busybox"
        if not busybox.exists():
            raise RuntimeError(f"no {busybox}: run NETBLK_ARCH={arch} ci/fetch-sysroot.sh")
    if ldd_closure(busybox, arch):
        raise RuntimeError(f"{busybox} is dynamic: install busybox-static")
    cc = ARCHES[arch][1] or os.environ.get("CC", "cc")

    env_text = "".join(f"{k}='{v}'\n" for k, v in sorted((env or {}).items()))

    mods = module_closure(moddir, modules, [netblk_ko] if netblk_ko else [])
    h = hashlib.sha256()
    h.update(f"v{FORMAT_VERSION} {arch} {release}\n{env_text}".encode())
    for p in [Path(__file__).resolve(), busybox, *sorted(GUEST_FILES.iterdir()), *mods]:
        h.update(_file_sig(p).encode() + b"\n")
    if netblk_ko:
        h.update(b"ko " + _file_sig(netblk_ko).encode() + b"\n")
    for gp, hp in sorted(programs.items()):
        h.update(f"prog {gp} {_file_sig(hp)}\n".encode())
        for _, lib in ldd_closure(hp, arch):
            h.update(f"lib {_file_sig(lib)}\n".encode())
    for gp, src in sorted(files.items()):
        if isinstance(src, (bytes, bytearray)):
            h.update(f"data {gp} ".encode() + hashlib.sha256(src).hexdigest().encode() + b"\n")
        else:
            h.update(f"file {gp} {_file_sig(Path(src))}\n".encode())
    key = h.hexdigest()[:16]
    out = out_dir / f"initramfs-{key}.cpio"
    if out.exists():
        return out

    log(f"guest: building {out.relative_to(out_dir.parent.parent) if out_dir.parent.parent in out.parents else out}")
    with tempfile.TemporaryDirectory(dir=out_dir, prefix="initramfs-staging.") as tmp:
        st = Path(tmp)

        def put(guest_path: str, src: Path | bytes, mode: int | None = None) -> None:
            dst = st / guest_path.lstrip("/")
            dst.parent.mkdir(parents=True, exist_ok=True)
            if dst.exists() or dst.is_symlink():
                dst.unlink()
            if isinstance(src, (bytes, bytearray)):
                dst.write_bytes(src)
                os.chmod(dst, mode if mode is not None else 0o644)
            else:
                shutil.copyfile(src, dst)  # follows symlinks: the real content
                os.chmod(dst, mode if mode is not None else stat.S_IMODE(Path(src).stat().st_mode))

        for d in ("bin", "sbin", "usr/bin", "usr/sbin", "etc", "proc", "sys", "dev", "tmp",
                  "run", "mnt", "root", "var/log", "lib64"):
            (st / d).mkdir(parents=True, exist_ok=True)
        put("/bin/busybox", busybox, 0o755)
        (st / "bin/sh").symlink_to("busybox")
        put("/init", GUEST_FILES / "init", 0o755)
        put("/etc/inittab", GUEST_FILES / "inittab", 0o644)
        put("/sbin/netblk-agent", GUEST_FILES / "agent.sh", 0o755)
        put("/etc/bench.env", env_text.encode(), 0o644)
        put("/etc/passwd", b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n")
        put("/etc/group", b"root:x:0:\nnogroup:x:65534:\n")

        # the static helpers: nbudp (UDP), nbraw (raw Ethernet frames), nbiov
        # (a writev of pieces smaller than a page, read back), nbreuse (a failed
        # write's buffer filled again at once)
        for src in sorted(GUEST_FILES.glob("*.c")):
            subprocess.run([cc, "-static", "-Os", "-Wall", "-Werror", "-o",
                            str(st / "usr/bin" / src.stem), str(src)], check=True)

        # kernel modules
        gmod = st / "lib/modules" / release
        gmod.mkdir(parents=True)
        for f in ("modules.builtin", "modules.builtin.modinfo", "modules.order"):
            if (moddir / f).exists():
                shutil.copyfile(moddir / f, gmod / f)
        for m in mods:
            rel = m.relative_to(moddir)
            dst = gmod / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            if m.name.endswith(".xz"):
                dst = dst.with_name(m.name[:-3])
                dst.write_bytes(lzma.decompress(m.read_bytes()))
            else:
                shutil.copyfile(m, dst)
        if netblk_ko:
            (gmod / "extra").mkdir()
            shutil.copyfile(netblk_ko, gmod / "extra/netblk.ko")
        subprocess.run(["depmod", "-b", str(st), release], check=True)

        # programs and their libraries
        for gp, hp in programs.items():
            put(gp, hp, 0o755)
            for glib, lib in ldd_closure(hp, arch):
                put(glib, lib, 0o755)
        for gp, src in files.items():
            put(gp, src if isinstance(src, (bytes, bytearray)) else Path(src))

        tmp_out = st.with_name(st.name + ".tmp")  # unique: concurrent builds
        with open(tmp_out, "wb") as f:
            w = CpioWriter(f)
            w.dir("dev")
            w.entry("dev/console", stat.S_IFCHR | 0o600, rdev=(5, 1))
            w.entry("dev/null", stat.S_IFCHR | 0o666, rdev=(1, 3))
            w.tree(st)
            w.trailer()
        os.replace(tmp_out, out)
    # keep the few newest archives and any from the last hour (a guest being
    # started elsewhere may be about to read it), drop the rest
    import time
    old = sorted(out_dir.glob("initramfs-*.cpio"), key=lambda p: p.stat().st_mtime, reverse=True)
    for p in old[4:]:
        if p.stat().st_mtime < time.time() - 3600:
            p.unlink(missing_ok=True)
    return out
