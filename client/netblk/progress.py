"""A one-line progress bar for read, write and verify: bytes done of the
total, percent, MiB/s and time left, redrawn in place on stderr.

The Client knows nothing of it: it calls back with the bytes of each request
as it completes (read/write's progress=), and Progress.add is that callback.
"""

from __future__ import annotations

import io
import os
import shutil
import sys
import time
from typing import Callable, TextIO

MiB = 1 << 20
# Unforced, a bar appears only once a transfer has run this long: a short one
# would only flash, and a script's terminal would fill with them.
DELAY = 1.0
INTERVAL = 0.1  # seconds between redraws at most: a terminal is slow to redraw
WIDTH = 80  # columns when the stream is not a terminal (a forced bar into a pipe)


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or closed
        return False


def _amount(n: int) -> str:
    return f"{n / MiB:.1f} MiB" if n < 1 << 30 else f"{n / (1 << 30):.2f} GiB"


def _clock_text(seconds: float) -> str:
    s = int(seconds + 0.5)
    if s >= 3600:
        return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"
    return f"{s // 60}:{s % 60:02d}"


class Progress:
    """Counts the bytes of one transfer and, when drawing, shows them.

    label: the bar's first word (read, write, verify); past: what the bytes
    were (read, written, ...) for so_far(); total: bytes it will move, None
    when not known (a pipe): then no bar, percent or time left.
    draw: True always, False never, None (the default) when the stream is a
    terminal and the transfer has run DELAY seconds.
    """

    def __init__(self, label: str, total: int | None, past: str | None = None,
                 draw: bool | None = None, stream: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.label = label
        self.past = past or label
        self.total = total
        self.done = 0
        self.stream = stream if stream is not None else sys.stderr
        self.draw = _isatty(self.stream) if draw is None else draw
        self._clock = clock
        self.start = clock()
        self._next = self.start + (DELAY if draw is None else 0.0)
        self._drawn = 0  # length of the line on the screen; 0: none drawn

    def add(self, n: int) -> None:
        """n more bytes done (the Client's progress callback)."""
        self.done += n
        if self.draw:
            now = self._clock()
            if now >= self._next:
                self._next = now + INTERVAL
                self._show(now)

    def finish(self) -> None:
        """Draw the final count and end the line, if a bar was drawn."""
        if self._drawn:
            self._show(self._clock())
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = 0

    def so_far(self) -> str:
        """What was done, for a message about a transfer cut short."""
        if self.total is None:
            return f"{self.done} bytes {self.past}"
        return f"{self.done} of {self.total} bytes {self.past}"

    def line(self, now: float, columns: int) -> str:
        """The bar as drawn at `now` in `columns` (for the tests, too)."""
        elapsed = max(now - self.start, 1e-9)
        rate = self.done / elapsed
        speed = f"{rate / MiB:.1f} MiB/s"
        if not self.total:
            return f"{self.label} {_amount(self.done)}  {speed}"
        frac = min(self.done / self.total, 1.0)
        if self.done >= self.total:
            when = f"in {_clock_text(elapsed)}"
        elif rate > 0:
            when = f"ETA {_clock_text((self.total - self.done) / rate)}"
        else:
            when = "ETA -:--"
        # whole percents, rounded down: 100% only when it is all done
        tail = (f" {_amount(self.done)} / {_amount(self.total)}  {int(frac * 100):3d}%  "
                f"{speed}  {when}")
        room = columns - len(self.label) - len(tail) - 3
        if room < 10:
            return f"{self.label}{tail}"
        filled = int(frac * room)
        return f"{self.label} [{'#' * filled}{'.' * (room - filled)}]{tail}"

    def _show(self, now: float) -> None:
        # The last column is left free: a terminal that wraps there would
        # move the cursor down and the next \r would not return to this line.
        columns = 0
        if _isatty(self.stream):
            try:
                columns = os.get_terminal_size(self.stream.fileno()).columns
            except (OSError, ValueError, io.UnsupportedOperation):  # no descriptor
                columns = shutil.get_terminal_size((WIDTH, 24)).columns
        text = self.line(now, (columns or WIDTH) - 1)  # 0: a terminal that does not say
        # Spaces over what a longer line before left behind (no escape codes:
        # a forced bar may go to a file).
        pad = " " * max(self._drawn - len(text), 0)
        self.stream.write(f"\r{text}{pad}")
        self.stream.flush()
        self._drawn = len(text)
