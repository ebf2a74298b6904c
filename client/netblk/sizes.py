"""Sizes and ranges as the command line writes them: plain bytes or a k/m/g/t
suffix (powers of 1024)."""

from __future__ import annotations

import re


_SIZE_RE = re.compile(r"^\s*(\d+)\s*([kmgt]?)(i?b)?\s*$", re.IGNORECASE)
_SHIFT = {"": 0, "k": 10, "m": 20, "g": 30, "t": 40}


def parse_size(text: str) -> int:
    """'4096', '4k', '1M', '2g', '0x1000' -> bytes (suffixes are powers of 1024)."""
    s = str(text).strip()
    if s.lower().startswith("0x"):
        try:
            return int(s, 16)
        except ValueError:
            pass
    m = _SIZE_RE.match(s)
    if not m:
        raise ValueError(f"not a size: {text!r} (use bytes or a k/m/g suffix, e.g. 4k)")
    return int(m.group(1)) << _SHIFT[m.group(2).lower()]


def format_size(n: int) -> str:
    """1073741824 -> '1 GiB', 1536 -> '1.5 KiB', 1000 -> '1000 B'."""
    for shift, unit in ((40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")):
        if n >= 1 << shift:
            v = n / (1 << shift)
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.3g} {unit}"
    return f"{n} B"


def parse_range(text: str) -> tuple[int, int]:
    if ":" not in text:
        raise ValueError(f"not a range: {text!r} (use OFFSET:LENGTH, e.g. 1g:64m)")
    a, b = text.split(":", 1)
    return parse_size(a), parse_size(b)
