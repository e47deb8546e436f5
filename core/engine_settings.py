"""How to run a UCI engine: how to start it (`EngineOptions`) and how long each search runs
(`EngineLimit`). The labels' client (pipeline.labels.uci_client), the annotate and self-play
commands and the evaluation's Stockfish agents (eval.agents.stockfish) all read these two
records."""

from __future__ import annotations

from dataclasses import dataclass, field

# Silence allowed to a search with only a depth limit, which bounds neither nodes nor time.
DEPTH_ONLY_WATCHDOG_SECONDS = 300.0

_LIMIT_KEYS = ("nodes", "time", "depth")


@dataclass(frozen=True)
class EngineOptions:
    """How to start a UCI engine. `path` None: core.engine_path.find_engine() decides."""

    path: str | None = None
    threads: int = 1  # one thread keeps node-limited searches deterministic
    hash_mb: int = 16
    skill: int | None = None  # Stockfish "Skill Level" 0..20 (weakened play), None = full
    # UCI_LimitStrength at this UCI_Elo: the engine's own Elo calibration (range checked
    # against the engine's `uci` answer when it starts); None = full strength
    elo: int | None = None
    extra_options: dict[str, str | int | bool] = field(default_factory=dict)

    def __post_init__(self):
        if self.threads < 1 or self.hash_mb < 1:
            raise ValueError("threads and hash must be >= 1")
        if self.skill is not None and not 0 <= self.skill <= 20:
            raise ValueError(f"skill must lie in 0..20, got {self.skill}")
        if self.skill is not None and self.elo is not None:
            raise ValueError("give skill or elo, not both (UCI_Elo overrides Skill Level)")

    def uci_options(self) -> dict[str, str | int | bool]:
        """The UCI options these settings set (an engine without one ignores it)."""
        options: dict[str, str | int | bool] = {"Threads": self.threads, "Hash": self.hash_mb}
        if self.skill is not None:
            options["Skill Level"] = self.skill
        if self.elo is not None:
            options |= {"UCI_LimitStrength": True, "UCI_Elo": self.elo}
        return options | dict(self.extra_options)


@dataclass(frozen=True)
class EngineLimit:
    """How long one search runs: any of nodes, time (seconds) and depth, at least one; the
    engine stops at whichever it reaches first."""

    nodes: int | None = None
    time: float | None = None
    depth: int | None = None

    def __post_init__(self):
        if self.nodes is None and self.time is None and self.depth is None:
            raise ValueError("an engine limit needs at least one of nodes, time and depth")
        for key in _LIMIT_KEYS:
            value = getattr(self, key)
            if value is not None and not value > 0:
                raise ValueError(f"engine limit {key} must be positive, got {value!r}")

    @classmethod
    def parse(cls, text: str) -> EngineLimit:
        """The command lines' form: `nodes=N` or `time=SECONDS`. No depth: the labels'
        client needs a bound on each search's time for its watchdog."""
        kind, sep, raw = text.partition("=")
        kind = kind.strip().lower()
        try:
            value = float(raw)
        except ValueError:
            value = float("nan")
        if not sep or kind not in ("nodes", "time") or not value > 0:
            raise ValueError(f"limit {text!r} is not nodes=N or time=SECONDS (e.g. nodes=2000)")
        if kind == "time":
            return cls(time=value)
        if value != int(value):
            raise ValueError(f"limit {text!r}: nodes must be a whole number")
        return cls(nodes=int(value))

    def _given(self) -> list[tuple[str, int | float]]:
        return [(key, value) for key in _LIMIT_KEYS if (value := getattr(self, key)) is not None]

    def __str__(self) -> str:
        return ",".join(
            f"{key}={format(value, 'g') if isinstance(value, float) else value}"
            for key, value in self._given()
        )

    @property
    def go_args(self) -> str:
        """The limit as the arguments of a UCI `go` command."""
        return " ".join(
            f"movetime {max(1, round(value * 1000))}" if key == "time" else f"{key} {value}"
            for key, value in self._given()
        )

    @property
    def deterministic(self) -> bool:
        """Whether a search's result can depend on the machine's speed."""
        return self.time is None

    def watchdog_seconds(self) -> float:
        """Silence after which a search is deemed hung: generous, so only real hangs trip it."""
        if self.time is not None:
            return 10.0 + 20.0 * self.time
        if self.nodes is not None:
            return 10.0 + self.nodes / 20_000  # assumes >= 20k nodes/s even on a starved core
        return DEPTH_ONLY_WATCHDOG_SECONDS
