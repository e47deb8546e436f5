"""Agent specs, `KIND[:OPTIONS]`: how command lines name agents (eval/agents/players.py builds
them).

`parse_agent_spec` reads a spec and checks every value before any engine or model starts;
`agent_arguments` gives the keyword arguments of the spec's agent class; `SPEC_HELP` is the
grammar, printed by every CLI's --help.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from eval.agents.evaluators import DEFAULT_PRIOR_TEMPERATURE
from eval.agents.mcts import DEFAULT_CPUCT, DEFAULT_SIMS, SearchConfig
from eval.agents.stockfish import ELO_MOVE_TIME, EngineSettings

SPEC_HELP = f"""\
Agent specs are KIND[:OPTIONS], OPTIONS comma-separated key=value pairs:
  random[:seed=N]                      uniformly random legal moves (seed 0 by default)
  greedy                               a mate in one if there is one, else the move that
                                       leaves the best material balance (P1 N3 B3 R5 Q9, the
                                       capture and any promotion counted, no reply looked
                                       at); ties to the first move in action-space order
  stockfish:LIMIT[,OPTS]               Stockfish playing normally
  stockfish:elo=N[,LIMIT,OPTS]         Stockfish weakened to UCI_Elo N (UCI_LimitStrength, the
                                       engine's own calibration; N within the range its `uci`
                                       answer gives, 1350..2850 for Stockfish 15.1); LIMIT
                                       defaults to time={ELO_MOVE_TIME}
  oracle:LIMIT[,OPTS]                  every legal move searched alone, best value wins
      LIMIT: nodes=N | time=SECONDS | depth=D (combinable)
      OPTS:  threads=1, hash=16 (MB), skill=0..20, engine=PATH (else --engine, $STOCKFISH,
             PATH, /usr/games/stockfish)
  neural:CHECKPOINT[,OPTS]             a trained AV/SV/BC model (run dir or checkpoint)
      OPTS:  ema=true|false (EMA params, default true), temperature=T (0 = argmax, default),
             seed=N (for sampling), repetition=true|false (value 0.5 for moves allowing a
             threefold claim; AV/SV, or BC with successor_weight; default true),
             successor_weight=W (a BC policy with a value head: log p(move) + W x the
             log-odds of its own value of the board after the move, one ply, no reply
             looked at; default the model's [play] successor_weight, 0 = the policy alone)
  mcts:CHECKPOINT[,OPTS]               the model searching with PUCT (AlphaZero) before each move
      OPTS:  sims=N (playouts per move, default {DEFAULT_SIMS}; 0 = the model's own move),
             time=SECONDS (per move, alone or with sims: whichever ends first),
             cpuct=C (default {DEFAULT_CPUCT}),
             batch=B (leaves per network call, default {SearchConfig.batch}),
             contempt=N_SCL (search-contempt: the opponent's moves frozen after N_SCL visits),
             value=CHECKPOINT (a BC policy's value model, AV or SV; a policy with a
             value head of its own uses that where none is named),
             prior_temperature=T (AV/SV priors softmax(values/T); {DEFAULT_PRIOR_TEMPERATURE}),
             ema=true|false, seed=N (contempt's sampling), reuse=true|false (keep the tree
             between moves of a game, default true)
  any kind: name=LABEL (the label in tables and plots; default the spec itself)
Examples: random:seed=3  greedy  stockfish:nodes=100000  oracle:time=0.05
          neural:runs/small,temperature=0.5
          mcts:runs/small,sims=256,cpuct=1.5,batch=8  mcts:runs/bc,value=runs/sv,contempt=5
"""

_ENGINE_KEYS = {"nodes", "time", "depth", "threads", "hash", "skill", "engine", "name"}
_ALLOWED = {
    "random": {"seed", "name"},
    "greedy": {"name"},
    "stockfish": _ENGINE_KEYS | {"elo"},
    "oracle": _ENGINE_KEYS,
    "neural": {"path", "ema", "temperature", "seed", "repetition", "successor_weight", "name"},
    "mcts": {
        "path",
        "sims",
        "time",
        "cpuct",
        "batch",
        "contempt",
        "value",
        "prior_temperature",
        "ema",
        "seed",
        "reuse",
        "name",
    },
}
_MODEL_KINDS = ("neural", "mcts")  # specs whose first item without `=` is the checkpoint


@dataclass(frozen=True)
class AgentSpec:
    kind: str
    options: dict[str, str]
    text: str

    @property
    def label(self) -> str:
        return self.options.get("name", self.text)


def parse_agent_spec(text: str) -> AgentSpec:
    """`KIND[:k=v,k=v,...]` -> AgentSpec; for `neural` and `mcts` a first item without `=` is
    the checkpoint.

    ValueError naming the spec and the problem for an unknown kind, an unknown or repeated
    option, or an item that is not key=value.
    """
    kind, _, rest = text.strip().partition(":")
    kind = kind.strip().lower()
    if kind not in _ALLOWED:
        raise ValueError(f"agent spec {text!r}: unknown kind {kind!r} (known: {sorted(_ALLOWED)})")
    options: dict[str, str] = {}
    items = [item.strip() for item in rest.split(",")] if rest.strip() else []
    for position, item in enumerate(items):
        if "=" not in item:
            if kind in _MODEL_KINDS and position == 0 and item:
                key, value = "path", item
            else:
                raise ValueError(f"agent spec {text!r}: {item!r} is not key=value")
        else:
            key, _, value = item.partition("=")
            key, value = key.strip().lower(), value.strip()
        if key not in _ALLOWED[kind]:
            raise ValueError(
                f"agent spec {text!r}: unknown option {key!r} for {kind} "
                f"(known: {sorted(_ALLOWED[kind])})"
            )
        if key in options:
            raise ValueError(f"agent spec {text!r}: option {key!r} given twice")
        options[key] = value
    if kind in _MODEL_KINDS and not options.get("path"):
        raise ValueError(f"agent spec {text!r}: {kind} needs a checkpoint, e.g. {kind}:runs/small")
    spec = AgentSpec(kind, options, text.strip())
    agent_arguments(spec, engine_path=None)  # bad values fail here, before anything starts
    return spec


def _number(spec: AgentSpec, key: str, kind: type, default=None):
    if key not in spec.options:
        return default
    try:
        return kind(spec.options[key])
    except ValueError:
        raise ValueError(
            f"agent spec {spec.text!r}: {key}={spec.options[key]!r} is not a {kind.__name__}"
        ) from None


def _flag(spec: AgentSpec, key: str, default: bool) -> bool:
    value = spec.options.get(key)
    if value is None:
        return default
    if value.lower() in ("1", "true", "yes", "on"):
        return True
    if value.lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"agent spec {spec.text!r}: {key}={value!r} is not true/false")


def engine_settings(spec: AgentSpec, engine_path: str | None = None) -> EngineSettings:
    elo = _number(spec, "elo", int)
    limits = {key: spec.options.get(key) for key in ("nodes", "time", "depth")}
    # A weakened engine picks its move at a shallow depth, so a short think is its whole play.
    default_time = ELO_MOVE_TIME if elo is not None and not any(limits.values()) else None
    try:
        return EngineSettings(
            path=spec.options.get("engine", engine_path),
            nodes=_number(spec, "nodes", int),
            time=_number(spec, "time", float, default_time),
            depth=_number(spec, "depth", int),
            threads=_number(spec, "threads", int, 1),
            hash_mb=_number(spec, "hash", int, 16),
            skill=_number(spec, "skill", int),
            elo=elo,
        )
    except ValueError as e:
        if str(e).startswith("agent spec"):
            raise
        raise ValueError(f"agent spec {spec.text!r}: {e}") from None


def agent_arguments(spec: AgentSpec, engine_path: str | None) -> dict:
    """The keyword arguments of the spec's agent class, every value checked."""
    if spec.kind == "random":
        return {"seed": _number(spec, "seed", int, 0), "name": spec.label}
    if spec.kind == "greedy":
        return {"name": spec.label}
    if spec.kind in ("stockfish", "oracle"):
        return {"settings": engine_settings(spec, engine_path), "name": spec.label}
    if spec.kind == "mcts":
        return _mcts_arguments(spec)
    temperature = _number(spec, "temperature", float, 0.0)
    if not 0 <= temperature < math.inf:
        raise ValueError(f"agent spec {spec.text!r}: temperature must be finite and >= 0")
    return {
        "path": spec.options["path"],
        "use_ema": _flag(spec, "ema", True),
        "temperature": temperature,
        "seed": _number(spec, "seed", int, 0),
        "repetition_workaround": _flag(spec, "repetition", True),
        "name": spec.label,
    } | _successor_weight_argument(spec)


def _successor_weight_argument(spec: AgentSpec) -> dict:
    weight = _number(spec, "successor_weight", float)
    if weight is None:
        return {}  # the model's own
    if not 0 <= weight < math.inf:
        raise ValueError(f"agent spec {spec.text!r}: successor_weight must be finite and >= 0")
    return {"successor_weight": weight}


def _mcts_arguments(spec: AgentSpec) -> dict:
    sims = _number(spec, "sims", int)
    time = _number(spec, "time", float)
    if sims is None and time is None:
        sims = DEFAULT_SIMS
    contempt = _number(spec, "contempt", int)
    prior_temperature = _number(spec, "prior_temperature", float, DEFAULT_PRIOR_TEMPERATURE)
    try:
        config = SearchConfig(
            cpuct=_number(spec, "cpuct", float, DEFAULT_CPUCT),
            batch=_number(spec, "batch", int, SearchConfig.batch),
            contempt=contempt,
        )
        if sims is not None and sims < 0:
            raise ValueError(f"sims must be >= 0, got {sims}")
        if time is not None and not 0 < time < math.inf:
            raise ValueError(f"time must be finite and > 0 seconds, got {time}")
        if not 0 < prior_temperature < math.inf:
            raise ValueError(f"prior_temperature must be finite and > 0, got {prior_temperature}")
    except ValueError as e:
        raise ValueError(f"agent spec {spec.text!r}: {e}") from None
    return {
        "path": spec.options["path"],
        "value_path": spec.options.get("value") or None,
        "use_ema": _flag(spec, "ema", True),
        "prior_temperature": prior_temperature,
        "config": config,
        "sims": sims,
        "time": time,
        "seed": _number(spec, "seed", int, 0),
        "reuse": _flag(spec, "reuse", True),
        "name": spec.label,
    }
