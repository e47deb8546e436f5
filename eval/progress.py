"""A progress line for long evaluations: done/total, rate, ETA and a running figure, on stderr."""

from __future__ import annotations

import sys
import time
from typing import TextIO


def format_seconds(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


class Progress:
    """Prints at most every `interval` seconds, and always at the end (`done()`)."""

    def __init__(self, label: str, total: int, interval: float = 2.0, stream: TextIO | None = None):
        self.label = label
        self.total = total
        self.interval = interval
        self.stream = stream if stream is not None else sys.stderr
        self.start = time.monotonic()
        self._last = self.start
        self.count = 0

    def update(self, count: int, extra: str = "") -> None:
        self.count = count
        now = time.monotonic()
        if now - self._last >= self.interval:
            self._last = now
            self._print(now, extra)

    def done(self, extra: str = "") -> None:
        self._print(time.monotonic(), extra)

    def _print(self, now: float, extra: str) -> None:
        elapsed = now - self.start
        rate = self.count / elapsed if elapsed > 0 else 0.0
        eta = (self.total - self.count) / rate if rate > 0 else float("nan")
        eta_text = format_seconds(eta) if eta == eta else "?"
        line = (
            f"{self.label}: {self.count}/{self.total} {rate:.2f}/s "
            f"elapsed {format_seconds(elapsed)} ETA {eta_text}"
        )
        print(f"{line} {extra}".rstrip(), file=self.stream, flush=True)
