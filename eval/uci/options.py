"""The UCI engine's options: one table says each option's name, type, range and meaning, and
both the `uci` answer and `setoption` are read from it.

Besides the model's own options it accepts every option that lichess-bot, Cute Chess and
fastchess send by default, each doing what it honestly can:

| option | effect |
|---|---|
| `WeightsFile` | the model (run dir or checkpoint dir), Lc0's name for it |
| `ValueFile` | a BC model's value model (AV, SV): score, WDL, search (default: its own head) |
| `Threads` | the most CPU threads the model's runtime uses; 0 = every CPU the engine may use |
| `Hash` | MB the search's tree may take; a full tree stops growing (its search ends) |
| `Move Overhead` | milliseconds kept back from the clock by the time management (eval.uci.go) |
| `SyzygyPath` | accepted and kept; tablebases are not probed yet |
| `UCI_ShowWDL` | `wdl W D L` (per mille) in the info line, from the model's win probability |
| `Ponder` | set by GUIs that ponder: `bestmove` then names the expected reply |
| `Temperature` | 0 plays the best move; above 0 samples a softmax of the scores (policy only) |
| `SuccessorWeight` | log p + it x its value head's log-odds after each move; empty: the model's |
| `RepetitionWorkaround` | a move allowing a threefold claim is valued a draw (policy only) |
| `UseEMA` | the EMA parameters (as the paper evaluates) instead of the raw ones |
| `Seed` | the random stream of sampling, of search-contempt and of the no-model fallback |
| `Simulations` | playouts per move, at most (eval/agents/mcts.py); 0 = the searchless policy |
| `CPuct` | PUCT's exploration constant |
| `SearchContempt` | search-contempt's N_scl (the opponent's moves frozen after it); 0 = PUCT |
| `SearchBatch` | leaves per network call, with virtual loss |
| `PriorTemperature` | an AV/SV model's priors are softmax(move values / it) |
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Literal

from eval.agents.mcts import max_nodes_for
from eval.agents.neural_setup import DEFAULT_MODEL, DEFAULT_SEARCH, SearchSettings

EMPTY = "<empty>"  # how UCI shows an empty string option


class UciError(ValueError):
    """Malformed input; reported as `info string error: ...` and the engine goes on."""


@dataclass(frozen=True)
class UciOptions:
    weights: str = DEFAULT_MODEL
    value_weights: str = ""  # used only beside a BC model; "": its own value head, if any
    threads: int = 0
    # A search tree's node takes ~4 KB (eval/mcts.NODE_BYTES), far more than a Stockfish
    # hash entry: 256 MB hold 65,536 of them, minutes of a CPU's search.
    hash_mb: int = 256
    move_overhead_ms: int = 10
    syzygy_path: str = ""
    show_wdl: bool = False
    ponder: bool = False
    temperature: float = 0.0
    successor_weight: float | None = None  # None: the model's own [play] successor_weight
    repetition_workaround: bool = True
    use_ema: bool = True
    seed: int = 0
    simulations: int = 0
    cpuct: float = DEFAULT_SEARCH.cpuct
    search_contempt: int = 0
    search_batch: int = DEFAULT_SEARCH.batch
    prior_temperature: float = DEFAULT_SEARCH.prior_temperature

    def search_settings(self) -> SearchSettings:
        """The search the options ask for (with Simulations > 0): SearchContempt 0 is plain
        PUCT, and Hash bounds the tree."""
        return SearchSettings(
            cpuct=self.cpuct,
            batch=self.search_batch,
            contempt=self.search_contempt or None,
            prior_temperature=self.prior_temperature,
            max_nodes=max_nodes_for(self.hash_mb),
        )

    def policy_key(self) -> tuple:
        """The options a move choice depends on: a change rebuilds the move chooser."""
        key = (
            self.weights,
            self.value_weights,
            self.use_ema,
            self.temperature,
            self.successor_weight,
            self.seed,
            self.repetition_workaround,
        )
        if self.simulations == 0:  # the search's options do not touch the policy
            return key
        return (
            *key,
            self.hash_mb,
            self.cpuct,
            self.search_contempt,
            self.search_batch,
            self.prior_temperature,
        )


OptionKind = Literal["check", "spin", "string"]


@dataclass(frozen=True)
class OptionSpec:
    name: str  # as GUIs show it
    field: str  # the UciOptions field it sets
    kind: OptionKind
    minimum: int | None = None  # spin only
    maximum: int | None = None


# Spin ranges are wide on purpose: python-chess refuses to send a value outside the range an
# engine announces, and lichess-bot's defaults (Threads 4, Hash 512) must pass everywhere.
OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec("WeightsFile", "weights", "string"),
    OptionSpec("ValueFile", "value_weights", "string"),
    OptionSpec("Threads", "threads", "spin", 0, 1024),
    OptionSpec("Hash", "hash_mb", "spin", 1, 33_554_432),
    OptionSpec("Move Overhead", "move_overhead_ms", "spin", 0, 60_000),
    OptionSpec("SyzygyPath", "syzygy_path", "string"),
    OptionSpec("UCI_ShowWDL", "show_wdl", "check"),
    OptionSpec("Ponder", "ponder", "check"),
    OptionSpec("Temperature", "temperature", "string"),
    OptionSpec("SuccessorWeight", "successor_weight", "string"),
    OptionSpec("RepetitionWorkaround", "repetition_workaround", "check"),
    OptionSpec("UseEMA", "use_ema", "check"),
    OptionSpec("Seed", "seed", "spin", 0, 2**31 - 1),
    OptionSpec("Simulations", "simulations", "spin", 0, 1_000_000_000),
    OptionSpec("CPuct", "cpuct", "string"),
    OptionSpec("SearchContempt", "search_contempt", "spin", 0, 1_000_000_000),
    OptionSpec("SearchBatch", "search_batch", "spin", 1, 256),
    OptionSpec("PriorTemperature", "prior_temperature", "string"),
)
assert {spec.field for spec in OPTIONS} == {f.name for f in fields(UciOptions)}


def _key(name: str) -> str:
    # GUIs differ in case and some drop the space of "Move Overhead".
    return "".join(name.split()).lower()


_BY_KEY = {_key(spec.name): spec for spec in OPTIONS}


def find_option(name: str) -> OptionSpec:
    spec = _BY_KEY.get(_key(name))
    if spec is None:
        raise UciError(f"unknown option {name!r}")
    return spec


def _show(value) -> str:
    if value is None:
        return EMPTY
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:g}"
    return str(value) if value != "" else EMPTY


def option_lines(defaults: UciOptions) -> list[str]:
    """The `option name ...` lines of the `uci` answer, with `defaults`' values."""
    lines = []
    for spec in OPTIONS:
        default = _show(getattr(defaults, spec.field))
        line = f"option name {spec.name} type {spec.kind} default {default}"
        if spec.kind == "spin":
            line += f" min {spec.minimum} max {spec.maximum}"
        lines.append(line)
    return lines


def _check(name: str, value: str) -> bool:
    if value.lower() in ("true", "1", "on", "yes"):
        return True
    if value.lower() in ("false", "0", "off", "no"):
        return False
    raise UciError(f"{name} {value!r} is not true or false")


def _spin(spec: OptionSpec, value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise UciError(f"{spec.name} {value!r} is not an integer") from None
    if not spec.minimum <= number <= spec.maximum:
        raise UciError(f"{spec.name} must lie in {spec.minimum}..{spec.maximum}, got {number}")
    return number


def _number(name: str, value: str, zero_allowed: bool) -> float:
    try:
        t = float(value)
    except ValueError:
        raise UciError(f"{name} {value!r} is not a number") from None
    if not math.isfinite(t) or t < 0 or (t == 0 and not zero_allowed):
        bound = ">= 0" if zero_allowed else "> 0"
        raise UciError(f"{name} must be a finite number {bound}, got {value!r}")
    return t


# The string options that hold numbers (UCI has no type for a fraction): name -> 0 allowed.
_NUMBERS = {
    "temperature": True,
    "successor_weight": True,
    "cpuct": False,
    "prior_temperature": False,
}


def parse_value(spec: OptionSpec, value: str):
    """The typed value of `setoption name <spec.name> value <value>`, or UciError."""
    value = value.strip()
    if spec.kind == "check":
        return _check(spec.name, value)
    if spec.kind == "spin":
        return _spin(spec, value)
    if spec.field == "successor_weight" and value in ("", EMPTY):
        return None  # the model's own
    if spec.field in _NUMBERS:
        return _number(spec.name, value, zero_allowed=_NUMBERS[spec.field])
    return "" if value == EMPTY else value


def with_option(options: UciOptions, spec: OptionSpec, value) -> UciOptions:
    return replace(options, **{spec.field: value})
