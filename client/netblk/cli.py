"""The netblk command: its arguments, its commands, main() and run().
The command line it takes is in the package's docstring (__init__.py)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import stat
import sys
import time
from typing import Iterator

from . import __version__
from .bench import bench
from .client import Client, Info, NetblkError, NetblkTimeout
from .progress import Progress
from .protocol import (INFO_FUA, INFO_READ_ONLY, INFO_TRIM, INFO_VOLATILE_CACHE,
                       INFO_WRITE_ZEROES, Auth, read_key_file)
from .sizes import format_size, parse_range, parse_size

PIECE = 64 << 20  # read/write/verify go through memory this much at a time
# The HELLO that first reaches out to an instance gets this long in all (or 3
# timeouts, if longer): a host that is down or a wrong port is named at once,
# not after --tries x --timeout (20 x 0.25 s) of resending into the void.
FIRST_CONTACT = 3.0


class UsageError(Exception):
    """A command line that cannot be carried out as given (exit 2)."""


def _size_arg(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _range_arg(text: str) -> tuple[int, int]:
    try:
        return parse_range(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1: {text}")
    return v


def _port(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 1 <= v <= 65535:
        raise argparse.ArgumentTypeError(f"not a port number (1..65535): {text}")
    return v


def _positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not v > 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {text}")
    return v


COMMON_DEFAULTS = {"timeout": 0.25, "tries": 20, "window": 64, "json": False, "checksum": True,
                   "key": None, "auth": None, "deadline": None}


def _common_options(parser: argparse.ArgumentParser) -> None:
    # SUPPRESS: an option given before or after the command both count.
    parser.add_argument("--timeout", type=_positive_float, default=argparse.SUPPRESS,
                        help="seconds to wait for an answer before resending (0.25)")
    parser.add_argument("--tries", type=_positive_int, default=argparse.SUPPRESS,
                        help="sends of one request before giving up (20)")
    parser.add_argument("--deadline", type=_positive_float, metavar="S",
                        default=argparse.SUPPRESS,
                        help="give up on the whole command after S seconds (none)")
    parser.add_argument("--window", type=_positive_int, default=argparse.SUPPRESS,
                        help="requests in flight at once, capped by the instance's slots (64)")
    parser.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="machine-readable output (info, bench)")
    parser.add_argument("--no-checksum", dest="checksum", action="store_false",
                        default=argparse.SUPPRESS,
                        help="send UDP checksum 0: the server then need not read a write's "
                             "data to verify it (a trusted link whose frames carry a CRC)")
    parser.add_argument("--key", metavar="FILE", default=argparse.SUPPRESS,
                        help="the key of a keyed instance (netblkctl start ... key=FILE)")
    parser.add_argument("--auth", choices=["header", "full"], default=argparse.SUPPRESS,
                        help="what the instance's tags cover, as its auth= says (header)")


def _progress_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--progress", dest="progress", action="store_true", default=None,
                        help="draw a progress bar on stderr (default: when stderr is a "
                             "terminal and the transfer takes more than a second)")
    parser.add_argument("--no-progress", dest="progress", action="store_false", default=None,
                        help="never draw one")


def build_parser() -> argparse.ArgumentParser:
    # prog: the same name run as the netblk command, python3 -m netblk or imported
    p = argparse.ArgumentParser(
        prog="netblk",
        description="Client of a netblk instance (block device over UDP, protocol v2). "
                    "Sizes and offsets take k/m/g suffixes (powers of 1024) or plain bytes.")
    p.add_argument("--version", action="version", version=f"netblk {__version__}")
    p.add_argument("host", help="the instance's IPv4 address or name")
    p.add_argument("port", type=_port, help="the instance's UDP port")
    _common_options(p)
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    s = sub.add_parser("info", help="print what the instance serves")
    _common_options(s)

    s = sub.add_parser("read", help="read LENGTH bytes at OFFSET into FILE ('-': stdout); "
                                    "without LENGTH up to the end of the device")
    s.add_argument("offset", type=_size_arg)
    # argparse gives an optional positional before a required one the
    # leftover: `read 0 out` is offset and file, `read 0 4k out` all three
    s.add_argument("length", type=_size_arg, nargs="?", default=None,
                   help="bytes to read (none: up to the end of the device)")
    s.add_argument("file")
    _progress_options(s)
    _common_options(s)

    s = sub.add_parser("write", help="write FILE ('-': stdin) at OFFSET")
    s.add_argument("offset", type=_size_arg)
    s.add_argument("file")
    s.add_argument("--fua", action="store_true", help="force unit access: on stable media")
    s.add_argument("--flush", action="store_true",
                   help="then FLUSH: the device's volatile cache written out")
    _progress_options(s)
    _common_options(s)

    s = sub.add_parser("flush", help="write the device's volatile cache out")
    _common_options(s)

    s = sub.add_parser("trim", help="tell the device it may forget LENGTH bytes at OFFSET")
    s.add_argument("offset", type=_size_arg)
    s.add_argument("length", type=_size_arg)
    _common_options(s)

    s = sub.add_parser("zero", help="make LENGTH bytes at OFFSET read back as zeros "
                                    "(WRITE_ZEROES: no data is sent)")
    s.add_argument("offset", type=_size_arg)
    s.add_argument("length", type=_size_arg)
    _common_options(s)

    s = sub.add_parser("verify", help="DESTRUCTIVE: write random data over the range, "
                                      "read it back and compare")
    s.add_argument("offset", type=_size_arg)
    s.add_argument("length", type=_size_arg)
    _progress_options(s)
    _common_options(s)

    s = sub.add_parser("bench", help="measure IOPS, MiB/s and latency")
    s.add_argument("--mode", required=True, choices=["randread", "randwrite", "read", "write"])
    s.add_argument("--size", type=_size_arg, default=1024, help="bytes per request (1k)")
    s.add_argument("--seconds", type=_positive_float, default=5.0, help="how long (5)")
    s.add_argument("--range", type=_range_arg, default=None, metavar="OFFSET:LENGTH",
                   help="where requests go; required for writes (reads: the whole device)")
    s.add_argument("--seed", type=int, default=None, help="seed of the random offsets")
    _common_options(s)
    return p


def _info_text(info: Info, where: str) -> str:
    known = ((INFO_READ_ONLY, "read-only"), (INFO_VOLATILE_CACHE, "volatile write cache"),
             (INFO_FUA, "FUA honoured"), (INFO_TRIM, "TRIM"),
             (INFO_WRITE_ZEROES, "WRITE_ZEROES"))
    flags = [name for bit, name in known if info.flags & bit]
    unknown = info.flags & ~sum(bit for bit, _ in known)
    if unknown:
        flags.append(f"unknown 0x{unknown:x}")
    lines = [
        f"instance     {where}",
        f"size         {info.size} bytes ({format_size(info.size)})",
        f"sector size  {info.sector_size} bytes (physical {info.physical_block_size}, "
        f"optimal I/O {info.io_opt or 'not given'})",
        f"max io       {info.max_io} bytes per datagram",
        f"max read     {info.max_read} bytes per READ",
        f"slots        {info.slots}",
        f"trim         " + (f"up to {info.max_trim} bytes a request, granularity "
                            f"{info.discard_granularity}" if info.trim else "no"),
        f"write zeroes " + (f"up to {info.max_write_zeroes} bytes a request"
                            if info.write_zeroes else "no"),
        f"access       {'read-only' if info.read_only else 'read-write'}",
        f"flags        0x{info.flags:x} ({', '.join(flags) if flags else 'none'})",
        f"export id    {info.export_id:016x}",
    ]
    return "\n".join(lines)


def _bench_text(r: dict) -> str:
    lat = r["latency_us"]
    rng = r["range"]
    text = (f"bench {r['mode']}: {r['size']}-byte requests, window {r['window']}, "
            f"range {rng['offset']}+{rng['length']}, {r['seconds']:.2f} s\n"
            f"  {r['ops']} ops  {r['iops']:.1f} IOPS  {r['mib_s']:.2f} MiB/s\n"
            f"  latency (us): p50 {lat['p50']:.1f}  p99 {lat['p99']:.1f}  "
            f"p99.9 {lat['p99.9']:.1f}  max {lat['max']:.1f}\n"
            f"  retries {r['retries']}  busy {r['busy']}  errors {r['errors']}")
    if r.get("first_error"):
        text += f"\n  first error: {r['first_error']}"
    return text


def _first_difference(a, b) -> int:
    """Index of the first byte where a and b differ (they are known to)."""
    step = 4096
    for i in range(0, min(len(a), len(b)), step):
        if a[i:i + step] != b[i:i + step]:
            for j in range(i, min(i + step, len(a), len(b))):
                if a[j] != b[j]:
                    return j
    return min(len(a), len(b))


@contextlib.contextmanager
def _transfer(a, label: str, total: int | None, past: str) -> Iterator[Progress]:
    """A transfer's Progress (its add() the Client's progress callback), its
    line ended however the transfer ends; an error that cuts it short says
    how far it got."""
    bar = Progress(label, total, past, draw=a.progress)
    try:
        yield bar
    except NetblkError as e:
        if bar.done or isinstance(e, NetblkTimeout):
            raise type(e)(f"{e}; {bar.so_far()}", e.status, e.op, e.offset, e.length) from None
        raise
    finally:
        bar.finish()


def _read_length(c: Client, a) -> int:
    """read's LENGTH: as given, or what is left of the device after OFFSET."""
    if a.length is not None:
        return a.length
    size = c.geometry.size
    if a.offset > size:
        raise UsageError(f"read: offset {a.offset} is beyond the end of the device "
                         f"({size} bytes)")
    return size - a.offset


def _cmd_read(c: Client, a) -> int:
    length = _read_length(c, a)
    out = sys.stdout.buffer if a.file == "-" else open(a.file, "wb")
    try:
        with _transfer(a, "read", length, "read") as bar:
            piece = max(PIECE // c.read_piece(), 1) * c.read_piece()
            buf = bytearray(min(piece, length))
            pos = 0
            t0 = time.monotonic()
            while pos < length:
                n = min(piece, length - pos)
                view = memoryview(buf)[:n]
                c.read_into(a.offset + pos, view, a.window, bar.add)
                out.write(view)
                pos += n
            out.flush()
    finally:
        if out is not sys.stdout.buffer:
            out.close()
    dt = time.monotonic() - t0
    print(f"netblk: read {length} bytes at {a.offset} in {dt:.3f} s "
          f"({length / max(dt, 1e-9) / (1 << 20):.1f} MiB/s)", file=sys.stderr)
    return 0


def _input_size(src) -> int | None:
    """Bytes left to read in src when it is a regular file (else None: a pipe)."""
    try:
        st = os.fstat(src.fileno())
        if not stat.S_ISREG(st.st_mode):
            return None
        return max(st.st_size - os.lseek(src.fileno(), 0, os.SEEK_CUR), 0)
    except (OSError, ValueError):  # no file descriptor (a test's stdin), or closed
        return None


def _cmd_write(c: Client, a) -> int:
    g = c.geometry
    sector = max(g.sector_size, 1)
    src = sys.stdin.buffer if a.file == "-" else open(a.file, "rb")
    try:
        total = _input_size(src)
        if src is not sys.stdin.buffer and total is not None and total % sector:
            raise UsageError(f"write: {a.file} is {total} bytes, not a whole number "
                             f"of {sector}-byte sectors")
        with _transfer(a, "write", total, "written") as bar:
            piece = max(PIECE // max(g.max_io, 1), 1) * max(g.max_io, 1)
            pos = 0
            t0 = time.monotonic()
            while True:
                data = src.read(piece)
                if not data:
                    break
                if len(data) % sector:
                    raise UsageError(f"write: the input ends {pos + len(data)} bytes in, not "
                                     f"on a {sector}-byte sector boundary; {pos} bytes were "
                                     f"written")
                c.write(a.offset + pos, data, a.window, a.fua, bar.add)
                pos += len(data)
            if a.flush:
                c.flush()
    finally:
        if src is not sys.stdin.buffer:
            src.close()
    dt = time.monotonic() - t0
    print(f"netblk: wrote {pos} bytes at {a.offset}{' (FUA)' if a.fua else ''}"
          f"{' and flushed' if a.flush else ''} in {dt:.3f} s "
          f"({pos / max(dt, 1e-9) / (1 << 20):.1f} MiB/s)", file=sys.stderr)
    return 0


def _verify_range(c: Client, a, bar: Progress) -> str | None:
    """Write random data over the range and read it back: the first mismatch
    said, or None."""
    g = c.geometry
    unit = max(g.max_io, 1) * max(c.read_piece() // max(g.max_io, 1), 1)
    piece = max(PIECE // unit, 1) * unit
    pos = 0
    while pos < a.length:
        n = min(piece, a.length - pos)
        data = os.urandom(n)
        c.write(a.offset + pos, data, a.window, progress=bar.add)
        back = c.read(a.offset + pos, n, a.window, bar.add)
        if back != data:
            i = _first_difference(data, back)
            return (f"verify: MISMATCH at offset {a.offset + pos + i}: wrote 0x{data[i]:02x}, "
                    f"read 0x{back[i]:02x}" if i < len(back) else
                    f"verify: MISMATCH at offset {a.offset + pos + i}: short read")
        pos += n
    return None


def _cmd_verify(c: Client, a) -> int:
    print(f"verify: this overwrites {a.offset}..{a.offset + a.length} on the device", flush=True)
    # every byte goes out and comes back: the bar counts both
    with _transfer(a, "verify", 2 * a.length, "written or read back") as bar:
        mismatch = _verify_range(c, a, bar)
    if mismatch:
        print(mismatch)
        return 1
    print(f"verify: OK ({a.length} bytes at {a.offset} read back as written)")
    return 0


def _cmd_bench(c: Client, a) -> int:
    try:
        r = bench(c, a.mode, a.size, a.seconds, a.window, a.range, a.seed)
    except ValueError as e:
        raise UsageError(str(e)) from None
    print(json.dumps(r) if a.json else _bench_text(r))
    return 1 if r["errors"] else 0


def _check_read_args(a) -> None:
    # `read 0 4k` is most likely a FILE forgotten, not the whole device
    # wanted in a file named 4k: refused before it reads gigabytes
    if a.command == "read" and a.length is None:
        try:
            parse_size(a.file)
        except ValueError:
            return
        raise UsageError(f"read: {a.file!r} looks like a LENGTH, not a FILE: give both "
                         f"(read OFFSET LENGTH FILE), or write the file as ./{a.file} to "
                         f"read to the end of the device")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    a = parser.parse_args(argv)
    for k, v in COMMON_DEFAULTS.items():
        if not hasattr(a, k):
            setattr(a, k, v)
    try:
        _check_read_args(a)
        auth = None
        if a.key is not None:
            try:
                auth = Auth(read_key_file(a.key), a.auth == "full")
            except ValueError as e:
                raise UsageError(str(e)) from None
        elif a.auth is not None:
            raise UsageError("--auth needs the key: --key FILE")
        with Client(a.host, a.port, timeout=a.timeout, tries=a.tries, checksum=a.checksum,
                    auth=auth, deadline=a.deadline,
                    first_contact=max(FIRST_CONTACT, 3 * a.timeout)) as c:
            if a.command == "info":
                info = c.info()
                print(json.dumps(info.to_dict()) if a.json else _info_text(info, c.where))
                return 0
            if a.command == "read":
                return _cmd_read(c, a)
            if a.command == "write":
                return _cmd_write(c, a)
            if a.command == "flush":
                c.flush()
                print("netblk: flushed", file=sys.stderr)
                return 0
            if a.command in ("trim", "zero"):
                (c.trim if a.command == "trim" else c.write_zeroes)(a.offset, a.length, a.window)
                print(f"netblk: {'trimmed' if a.command == 'trim' else 'zeroed'} {a.length} "
                      f"bytes at {a.offset}", file=sys.stderr)
                return 0
            if a.command == "verify":
                return _cmd_verify(c, a)
            if a.command == "bench":
                return _cmd_bench(c, a)
            parser.error(f"unknown command {a.command}")
    except UsageError as e:
        print(f"netblk: {e}", file=sys.stderr)
        return 2
    except NetblkError as e:
        print(f"netblk: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"netblk: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


def run() -> int:
    """The netblk command: main() with the command line's exit habits."""
    try:
        return main()
    except BrokenPipeError:
        # the reader of stdout went away (e.g. `| head`)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(run())
