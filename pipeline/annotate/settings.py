"""An annotate run's settings: what the command line decides, as frozen dataclasses."""

from __future__ import annotations

from dataclasses import dataclass

from apache_beam.io.filesystems import FileSystems

from core.engine_settings import EngineLimit, EngineOptions
from pipeline.annotate.journal import JOURNAL_EVERY, journal_dir
from pipeline.beam.portable import DEFAULT_GROUPS
from pipeline.labels.action_values import Mode, limit_label

DEFAULT_LIMIT = "nodes=2000"


@dataclass(frozen=True)
class EngineConfig(EngineOptions):
    """How each worker runs its engine: how to start it (core.engine_settings.EngineOptions;
    `path` None: found on the worker) and the labels' client's own watchdog and retries."""

    timeout: float | None = None  # watchdog seconds; None: the limit's default
    retries: int = 2

    def __post_init__(self):
        super().__post_init__()
        # The labels are the paper's full-strength Stockfish: a weakened engine would make
        # another dataset under the same limit label.
        if self.skill is not None or self.elo is not None or self.extra_options:
            raise ValueError("the labels' engine takes no skill, elo or extra UCI options")

    def record(self) -> dict:
        """The settings a run's stats.json records: those the labels' client uses."""
        return {
            "path": self.path,
            "threads": self.threads,
            "hash_mb": self.hash_mb,
            "timeout": self.timeout,
            "retries": self.retries,
        }


@dataclass(frozen=True)
class AnnotateConfig:
    """One run: the command line's options (each one's meaning: `python -m pipeline.annotate
    --help`, from pipeline/annotate/arguments.py)."""

    inputs: tuple[str, ...]
    out: str
    split: str = "train"
    limit: EngineLimit = EngineLimit.parse(DEFAULT_LIMIT)
    mode: Mode = "action-values"  # or "search": one unrestricted search per board
    multipv: int = 1  # lines of that search (search mode only)
    engine: EngineConfig = EngineConfig()
    sample_rate: float = 1.0
    seed: int = 0
    max_games: int | None = None
    allow_setup: bool = False
    random_move_rate: float = 0.0  # share of boards replaced by the board after a random move
    num_shards: int = 1
    groups: int = DEFAULT_GROUPS  # work units games and boards are spread over
    overwrite: bool = False
    fail_on_input_error: bool = False
    progress_seconds: float = 30.0
    journal_every: int = JOURNAL_EVERY  # 0: no journal
    exclude: tuple[str, ...] = ()  # puzzle CSVs and EPD files whose positions are dropped

    @property
    def row_limit(self) -> str:
        """The rows' `limit` column (pipeline.labels.action_values.limit_label)."""
        return limit_label(self.limit, self.mode, self.multipv)

    @property
    def split_dir(self) -> str:
        return FileSystems.join(self.out, self.split)

    @property
    def journal_dir(self) -> str:
        return journal_dir(self.split_dir)
