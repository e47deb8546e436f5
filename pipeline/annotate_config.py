"""An annotate run's settings: what the command line decides, as frozen dataclasses."""

from __future__ import annotations

from dataclasses import dataclass

from apache_beam.io.filesystems import FileSystems

from pipeline.annotate_journal import JOURNAL_EVERY, journal_dir
from pipeline.engine import Limit

DEFAULT_LIMIT = "nodes=2000"


@dataclass(frozen=True)
class EngineConfig:
    """How each worker runs its engine. `path` None: found on the worker (find_engine)."""

    path: str | None = None
    threads: int = 1
    hash_mb: int = 16
    timeout: float | None = None  # watchdog seconds; None: the limit's default
    retries: int = 2


@dataclass(frozen=True)
class AnnotateConfig:
    """One run: the command line's options (see `pipeline.annotate` for each one's meaning)."""

    inputs: tuple[str, ...]
    out: str
    split: str = "train"
    limit: Limit = Limit.parse(DEFAULT_LIMIT)
    engine: EngineConfig = EngineConfig()
    sample_rate: float = 1.0
    seed: int = 0
    max_games: int | None = None
    allow_setup: bool = False
    num_shards: int = 1
    overwrite: bool = False
    fail_on_input_error: bool = False
    progress_seconds: float = 30.0
    journal_every: int = JOURNAL_EVERY  # 0: no journal

    @property
    def split_dir(self) -> str:
        return FileSystems.join(self.out, self.split)

    @property
    def journal_dir(self) -> str:
        return journal_dir(self.split_dir)
