"""netblk client: talk to a netblk instance over UDP (wire protocol v2).

Command line (installed as `netblk`; from the tree `PYTHONPATH=client
python3 -m netblk`):

    netblk --version
    netblk HOST PORT info [--json]
    netblk HOST PORT read OFFSET [LENGTH] FILE   (FILE '-' = stdout; no LENGTH: to the end)
    netblk HOST PORT write OFFSET FILE [--fua] [--flush]   (FILE '-' = stdin)
    netblk HOST PORT flush
    netblk HOST PORT trim OFFSET LENGTH          (the device may forget the range)
    netblk HOST PORT zero OFFSET LENGTH          (reads back zeros)
    netblk HOST PORT verify OFFSET LENGTH        (destroys the range)
    netblk HOST PORT bench --mode randread|randwrite|read|write
           [--size 1k] [--window 64] [--seconds 5] [--range OFFSET:LENGTH] [--json]

    common options: --timeout S (0.25) --tries N (20) --window N (64)
                    --deadline S (none: the whole command's time)
                    --key FILE [--auth header|full] (a keyed instance's key)
    read, write, verify: --progress | --no-progress (default: a bar on
                    stderr when it is a terminal and the transfer is long)

Every request goes in a session, opened with a HELLO when the client first
needs one and opened again when the instance has forgotten it (it was
started again): a resend reuses the request's sequence number, so the
instance executes a request that changes the disk at most once.  The
command gives the first HELLO 3 s (or 3 timeouts): no answer by then names
the host and port and stops.

Sizes and offsets take k/m/g/t suffixes (powers of 1024) or plain bytes.

As a module:

    from netblk import Client, NetblkError
    c = Client("127.0.0.1", 7000)
    info = c.info()                 # Info dataclass
    data = c.read(0, 1 << 20)       # bytes
    c.write(0, data, fua=True)
    c.flush()
    c.trim(0, 1 << 20); c.write_zeroes(0, 4096)
    r = c.request(OP_READ, 0, 512)  # raw Reply, status not interpreted

The modules: protocol (constants, the header, tags), client (Client and
what it answers), sizes, bench, progress (the bar), cli (the command).

Python 3.11, standard library only.
"""

# The release, as kmod/uapi/netblk_version.h says (tests/pkg/test_release.py
# holds them together); the wire protocol's own version is VERSION below.
# Set before the modules are imported: cli names it in --version.
__version__ = "0.2.0"

from .protocol import (  # noqa: E402
    FAST_RESEND_MAX, FAST_RESEND_MIN, FLAG_AUTH_DATA, FLAG_AUTH_KEY, FLAG_FUA, HEADER,
    HEADER_SIZE, INFO_FUA, INFO_PAYLOAD, INFO_READ_ONLY, INFO_SIZE, INFO_TRIM,
    INFO_VOLATILE_CACHE, INFO_WRITE_ZEROES, MAGIC, OP_FLUSH, OP_HELLO, OP_INFO, OP_NAMES,
    OP_READ, OP_REPLY, OP_TRIM, OP_WRITE, OP_WRITE_ZEROES, RECV_BUFFER, REOPENS_MAX,
    REPLAY_WINDOW, SEQ_SPAN, SO_NO_CHECK, SOCKET_BUFFER, STATUS_OK, STATUS_TEXT, TAG_OFFSET,
    V1_HEADER, VERSION, Auth, op_name, pack_header, parse_key, read_key_file, siphash24,
    status_name, status_text, unpack_header,
)
from .client import (  # noqa: E402
    Client, Info, NetblkDeadline, NetblkError, NetblkTimeout, Reply, Session, Stats, hello,
)
from .sizes import format_size, parse_range, parse_size  # noqa: E402
from .bench import bench, percentile  # noqa: E402
from .progress import Progress  # noqa: E402
from .cli import (  # noqa: E402
    COMMON_DEFAULTS, FIRST_CONTACT, PIECE, UsageError, build_parser, main, run,
)

__all__ = [
    "__version__",
    "FAST_RESEND_MAX", "FAST_RESEND_MIN", "FLAG_AUTH_DATA", "FLAG_AUTH_KEY", "FLAG_FUA",
    "HEADER", "HEADER_SIZE", "INFO_FUA", "INFO_PAYLOAD", "INFO_READ_ONLY", "INFO_SIZE",
    "INFO_TRIM", "INFO_VOLATILE_CACHE", "INFO_WRITE_ZEROES", "MAGIC", "OP_FLUSH", "OP_HELLO",
    "OP_INFO", "OP_NAMES", "OP_READ", "OP_REPLY", "OP_TRIM", "OP_WRITE", "OP_WRITE_ZEROES",
    "RECV_BUFFER", "REOPENS_MAX", "REPLAY_WINDOW", "SEQ_SPAN", "SO_NO_CHECK", "SOCKET_BUFFER",
    "STATUS_OK", "STATUS_TEXT", "TAG_OFFSET", "V1_HEADER", "VERSION", "Auth", "op_name",
    "pack_header", "parse_key", "read_key_file", "siphash24", "status_name", "status_text",
    "unpack_header",
    "Client", "Info", "NetblkDeadline", "NetblkError", "NetblkTimeout", "Reply", "Session",
    "Stats", "hello",
    "format_size", "parse_range", "parse_size",
    "bench", "percentile",
    "Progress",
    "COMMON_DEFAULTS", "FIRST_CONTACT", "PIECE", "UsageError", "build_parser", "main", "run",
]
