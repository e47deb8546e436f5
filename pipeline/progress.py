"""Progress lines for long jobs: done/total, rate and ETA, at most one line every few seconds."""

from __future__ import annotations

import sys
import time
from typing import TextIO


def format_duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


class Progress:
    """Prints `label: done/total unit (pct), rate unit/s, ETA ...` every `every` seconds.

    `total` may be None (unknown): the line then shows the rate only.
    """

    def __init__(
        self,
        label: str,
        total: float | None,
        unit: str,
        every: float = 10.0,
        stream: TextIO | None = None,
        scale: float = 1.0,
    ):
        self.label = label
        self.total = total
        self.unit = unit
        self.every = every
        self.stream = stream or sys.stderr
        self.scale = scale  # e.g. 1e-6 to print bytes as MB
        self.start = time.monotonic()
        self._last = self.start

    def line(self, done: float, baseline: float = 0.0) -> str:
        """The progress line; `baseline` is what was already done before this run started."""
        elapsed = max(time.monotonic() - self.start, 1e-9)
        rate = (done - baseline) / elapsed
        text = f"{self.label}: {done * self.scale:,.1f}"
        if self.total:
            percent = 100.0 * done / self.total
            text += f"/{self.total * self.scale:,.1f} {self.unit} ({percent:.1f}%)"
        else:
            text += f" {self.unit}"
        text += f", {rate * self.scale:,.1f} {self.unit}/s"
        if self.total and rate > 0:
            text += f", ETA {format_duration((self.total - done) / rate)}"
        return text

    def update(self, done: float, baseline: float = 0.0, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self._last >= self.every:
            self._last = now
            print(self.line(done, baseline), file=self.stream, flush=True)
