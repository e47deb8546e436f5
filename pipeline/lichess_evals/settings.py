"""The Lichess evaluations import's settings: what the command line decides."""

from __future__ import annotations

from dataclasses import dataclass

from runtime.workers import usable_cores

DEFAULT_ROWS_PER_SHARD = 1_000_000
DEFAULT_PROGRESS_SECONDS = 5.0


@dataclass(frozen=True)
class LichessEvalsConfig:
    """How to import (the command line's options; import_lichess_evals.py's `_parser` says
    what each one means)."""

    split: str = "train"
    rows_per_shard: int = DEFAULT_ROWS_PER_SHARD
    max_lines: int | None = None
    overwrite: bool = False
    progress_seconds: float = DEFAULT_PROGRESS_SECONDS
    workers: int = 1

    def __post_init__(self) -> None:
        if self.rows_per_shard < 1:
            raise ValueError(f"--rows-per-shard must be at least 1, got {self.rows_per_shard}")
        if self.max_lines is not None and self.max_lines < 0:
            raise ValueError(f"--max-lines must not be negative, got {self.max_lines}")
        if self.workers < 0:
            raise ValueError(f"--workers must not be negative, got {self.workers}")

    @property
    def worker_count(self) -> int:
        """`workers`, 0 meaning one per core this process may use."""
        return self.workers or usable_cores()
