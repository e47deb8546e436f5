"""Progress lines for long jobs: done/total, rate, elapsed time, ETA and a running figure.

The one progress module of the project: downloads, evaluations, tournaments and sample
generation print through `Progress`; anything that composes its own line (annotation
workers, the trainer's log) formats times with `format_duration`. A job's command line
ends with `print_result`.
"""

from __future__ import annotations

import json
import math
import sys
import time
from typing import TextIO


def format_duration(seconds: float) -> str:
    """`1h02m`, `3m05s` or `7s`; `?` when the time is unknown (NaN or infinite)."""
    if not math.isfinite(seconds):
        return "?"
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def _amount(value: float) -> str:
    # Whole counts (games, boards) print as integers; scaled sizes (MB) keep one decimal.
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"


def _rate(value: float) -> str:
    # Evaluations can run well under one item a second: keep two decimals there.
    return f"{value:,.2f}" if value < 10 else f"{value:,.1f}"


class Progress:
    """Prints `label: done/total unit (pct), rate unit/s, elapsed ..., ETA ... extra` on
    `stream` (stderr by default), at most once every `every` seconds from `update`, and
    always from `done` (or `update(..., force=True)`).

    `total` may be None (unknown): the line then shows the amount and rate only. `scale`
    converts the counted quantity for printing (e.g. 1e-6 to count bytes and print MB).
    """

    def __init__(
        self,
        label: str,
        total: float | None,
        unit: str = "",
        every: float = 2.0,
        stream: TextIO | None = None,
        scale: float = 1.0,
    ):
        self.label = label
        self.total = total
        self.unit = unit
        self.every = every
        self.stream = stream if stream is not None else sys.stderr
        self.scale = scale
        self.start = time.monotonic()
        self._last = self.start
        self.count = 0.0
        self.baseline = 0.0

    def line(self, done: float, extra: str = "", baseline: float = 0.0) -> str:
        """The progress line at `done`; `baseline` is what was already done before this run
        started (a resumed download), so it counts towards the total but not the rate."""
        elapsed = time.monotonic() - self.start
        rate = (done - baseline) / elapsed if elapsed > 0 else 0.0
        unit = f" {self.unit}" if self.unit else ""
        text = f"{self.label}: {_amount(done * self.scale)}"
        if self.total:
            percent = 100.0 * done / self.total
            text += f"/{_amount(self.total * self.scale)}{unit} ({percent:.1f}%)"
        else:
            text += unit
        text += f", {_rate(rate * self.scale)}{unit}/s"
        text += f", elapsed {format_duration(elapsed)}"
        if self.total:
            eta = (self.total - done) / rate if rate > 0 else math.nan
            text += f", ETA {format_duration(eta)}"
        return f"{text} {extra}".rstrip()

    def update(
        self, done: float, extra: str = "", baseline: float = 0.0, force: bool = False
    ) -> None:
        """Records `done` and prints the line if `every` seconds have passed (or `force`)."""
        self.count, self.baseline = done, baseline
        now = time.monotonic()
        if force or now - self._last >= self.every:
            self._last = now
            print(self.line(done, extra, baseline), file=self.stream, flush=True)

    def done(self, extra: str = "") -> None:
        """Prints the final line at the last recorded amount."""
        self.update(self.count, extra, self.baseline, force=True)


def print_result(summary: str, document: dict) -> None:
    """A job's last words: one line for people on stderr, the whole machine-readable
    document as JSON on stdout (so `> result.json` keeps just the JSON)."""
    print(summary, file=sys.stderr)
    json.dump(document, sys.stdout, indent=2)
    print()
