"""Typed training configuration: model size, training settings and data paths.

A config is a TOML file with up to four tables (`model/configs/*.toml`):

    [model]            # a named size, any field of ModelConfig overrides the preset
    size = "9M"
    [train]            # the fields of TrainConfig
    target = "av"
    [data]             # the fields of DataConfig
    train = "data/annotated/train"
    [play]             # how the trained model chooses a move (PlayConfig); optional
    successor_weight = 2.0

Values can be overridden from the command line with `section.field=value` (or just
`field=value` when the name is unique), the value parsed as TOML (`lr_schedule=cosine` works
without quotes). Everything is validated by `validate()` before any JAX compilation, so a
typo, an unknown target or a missing data path is a clear `ConfigError`.
"""

from __future__ import annotations

import dataclasses
import math
import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from core import bins
from core.actions import NUM_ACTIONS
from core.schema import board_files
from core.targets import TARGETS, Target, TargetKind, target_kind
from core.tokenizer import SEQUENCE_LENGTH, VOCAB_SIZE

SAMPLERS = ("uniform", "weighted")
LR_SCHEDULES = ("constant", "cosine")
# `train.dtype`: the compute dtype (parameters and optimiser state stay float32); "auto" is
# bfloat16 on GPUs and TPUs and float32 on CPUs (model/devices.py).
COMPUTE_DTYPES = ("auto", "float32", "bfloat16")
# Keys a config may still carry from an earlier version of this file: old name -> new name.
RENAMED_KEYS = {"train": {"compute_dtype": "dtype"}}
# The network: the paper's transformer (one (board, move) row per pass), or one that reads a
# board with all its moves per pass: the GATEAU edge backbone of model/networks/gateau.py or the
# square-token transformer of model/networks/squares.py.
GRAPH_BACKBONES = ("gateau", "squares")
BACKBONES = ("transformer", *GRAPH_BACKBONES)
# The facts of a move the graph backbones' move edges may be told (ModelConfig's flags).
MOVE_FACTS = (
    "move_checks",
    "move_exchanges",
    "move_threats",
    "move_flights",
    "move_hanging",
    "move_king_danger",
)

# One embedding table serves board tokens and actions (the 31 board tokens are a subset of
# the 1968 action ids), as in the paper's code; this is what makes the 9M count 8,954,240.
EMBEDDING_VOCAB_SIZE = max(NUM_ACTIONS, VOCAB_SIZE)
# Start token + 77 board tokens + 1 action token.
MAX_SEQUENCE_LENGTH = SEQUENCE_LENGTH + 2

# Named sizes (docs/design.md; paper Table A1). `small` (~400K params, the paper's smallest scale)
# is for CPU tests; `tiny` (~100K) is what a CPU learns most from in the few minutes of
# `make demo`: its steps are eight times cheaper.
MODEL_SIZES: dict[str, dict[str, int]] = {
    "tiny": {"num_layers": 2, "embedding_dim": 32, "num_heads": 2},
    "small": {"num_layers": 4, "embedding_dim": 64, "num_heads": 4},
    "9M": {"num_layers": 8, "embedding_dim": 256, "num_heads": 8},
    "136M": {"num_layers": 8, "embedding_dim": 1024, "num_heads": 8},
    "270M": {"num_layers": 16, "embedding_dim": 1024, "num_heads": 8},
}
# A shape that is no preset (e.g. an imported checkpoint's): every field as written.
CUSTOM_SIZE = "custom"


class ConfigError(ValueError):
    """A configuration that cannot be trained: names the offending field and value."""


@dataclass(frozen=True)
class ModelConfig:
    """Network shape: a preset named by `size`, any field of which a config may override."""

    backbone: str = "transformer"
    """One of BACKBONES: `transformer` (the paper's, one (board, move) row a pass), `gateau`
    (model/networks/gateau.py) or `squares` (model/networks/squares.py), both a board with all
    its legal moves a pass."""
    size: str = "small"
    """The MODEL_SIZES preset the shape fields came from (`custom`: none, the fields as
    written)."""
    num_layers: int = 4
    """Blocks (>= 1): transformer or squares blocks, or GATEAU layers."""
    embedding_dim: int = 64
    """Width (>= 1, a multiple of num_heads): of the tokens, or of gateau's nodes and edges."""
    num_heads: int = 4
    """Attention heads (>= 1); each is embedding_dim / num_heads wide."""
    widening_factor: int = 4
    """The MLP's hidden size in multiples of embedding_dim (>= 1): SwiGLU for transformer and
    squares, the node MLP for gateau."""
    embedding_init_scale: float = 0.02
    """transformer: the token embeddings' init stddev, before their sqrt(d) factor."""
    positional_init_scale: float = 1.0
    """transformer: the positional embeddings' init stddev (the reference's hk.Embed
    default)."""
    move_checks: bool = False
    """gateau, squares: a move edge also embeds whether the move gives check
    (model/networks/board_graph.py's check bit), a fact of the board a small network is slow
    to learn from squares and attacks."""
    move_exchanges: bool = False
    """gateau, squares: a move edge also embeds the sign of its static exchange (wins, loses
    or keeps material on its target square; model/networks/move_facts.py), read off the
    board."""
    move_threats: bool = False
    """gateau, squares: a move edge also embeds how many enemy pieces the move newly attacks
    with gain (none, one, two or more: forks and discovered attacks; model/networks/move_facts.py),
    read off the board."""
    move_flights: bool = False
    """gateau, squares: a move edge also embeds how many squares the enemy king could step to
    once the move is on the board (none, one, two or more: with the check bit, a check that
    leaves the king no square; model/networks/move_facts.py), read off the board."""
    move_hanging: bool = False
    """gateau, squares: a move edge also embeds the most valuable of the mover's other pieces
    it leaves en prise (none, a pawn, a minor piece, a rook, a queen: a threat on the board
    answered or ignored; model/networks/move_facts.py), read off the board."""
    move_king_danger: bool = False
    """gateau, squares: a move edge also embeds the checks the opponent could give the mover's
    king once the move is on the board (none, onto guarded squares only, a safe check, a safe
    check with the king boxed in: the mate's shape; model/networks/move_facts.py), read off the
    board."""
    policy_value: bool = False
    """gateau, squares with target bc: a value head beside the policy on the same trunk, trained
    on each board's state win probability (train.value_weight x its cross-entropy over
    train.num_bins bins), so that one network gives the move and the value."""
    attack_bias: bool = False
    """squares: every attention head also adds a learned bias for what the board says of a
    pair of squares (the key's piece moves to or attacks the query's square)."""


@dataclass(frozen=True)
class TrainConfig:
    """What to learn and how. Steps count optimiser updates of one global batch."""

    target: Target = "av"
    """What the network predicts (core.targets): `av` each move's value, `sv` the board's
    value, `bc` the best move."""
    num_bins: int = bins.DEFAULT_NUM_BINS
    """Value bins (>= 2) over win probability [0, 1] for av and sv; unused by bc."""
    batch_size: int = 256
    """Global batch (>= 1), split over every device: (board, move) rows for the transformer's
    AV, boards otherwise."""
    num_steps: int = 1000
    """Training steps (>= 1); also the cosine schedule's length."""
    learning_rate: float = 4e-4
    """Adam's peak rate (> 0), reached after the warm-up."""
    lr_schedule: str = "constant"
    """`constant`, or `cosine`: decays from the peak to final_lr_ratio x it at num_steps."""
    warmup_steps: int = 0
    """Steps (>= 0) of linear warm-up from 0 to the peak, before either schedule."""
    final_lr_ratio: float = 0.0
    """The cosine's last rate as a fraction of the peak, in [0, 1]; unused by `constant`."""
    grad_clip_norm: float = 1.0
    """The global gradient norm (> 0) the update is clipped to before Adam."""
    ema_decay: float = 0.99
    """The parameters' exponential moving average, in [0, 1): each step keeps this share of
    it (0.99 spans ~100 steps); evaluation and, by default, every reader use the average."""
    seed: int = 0
    """Seeds the parameter init and the data order."""
    sampler: str = "uniform"
    """`uniform` over examples, or `weighted` by each board's `count` (in-memory data only)."""
    hl_gauss: bool = False
    """av, sv: soft HL-Gauss targets over the bins instead of one-hot."""
    hl_gauss_sigma_ratio: float = 0.75
    """The HL-Gauss sigma, in units of the bin width."""
    value_weight: float = 1.0
    """model.policy_value: the value head's cross-entropy's weight (>= 0) beside the policy's."""
    soft_targets: float = 0.0
    """bc on gateau, squares: the share, in [0, 1], of the policy's target that comes from the
    teacher's values of all the board's moves (a softmax of their win probabilities over
    soft_temperature), the rest being the best move's one-hot. Only boards with every move
    valued (two or more) have such a target; the others keep the one-hot."""
    soft_temperature: float = 0.05
    """soft_targets: the softmax's temperature (> 0), in win probability: at 0.05 a move 0.05
    worse than another gets e^-1 of its weight."""
    av_partial: bool = False
    """av: also train on partial boards (only some moves valued), left out by default."""
    dtype: str = "auto"
    """The compute dtype: `auto` (bfloat16 on a GPU or TPU, float32 on a CPU), `float32` or
    `bfloat16`; parameters and optimiser state stay float32 (COMPUTE_DTYPES)."""
    log_every: int = 50
    """Steps (>= 1) a train record averages, written to the log and metrics.jsonl."""
    eval_every: int = 500
    """Steps between test evaluations (>= 0; 0: only at the end); needs test data."""
    eval_boards: int = 500
    """Test boards (>= 1) for action accuracy, Kendall's tau, best-move agreement and the
    value error."""
    eval_batches: int = 8
    """Test batches (>= 1) for the test loss."""
    checkpoint_every: int = 500
    """Steps (>= 1) between checkpoints; the last step is always saved."""
    keep_checkpoints: int = 3
    """Checkpoints kept (>= 1), the latest ones."""
    prefetch: int = 4
    """Batches (>= 1) the loader thread prepares ahead."""


@dataclass(frozen=True)
class DataConfig:
    """Annotated-board Parquet: each path a shard directory, a file, a glob or a comma list."""

    train: str = "data/annotated/train"
    """The training split."""
    test: str = ""
    """The test split; empty: no test evaluation."""
    streaming: bool = False
    """Stream the training split a row group at a time (model/data/stream.py) instead of
    loading it whole on every host. Streaming is also chosen whenever the in-memory loader
    would need more than memory_budget_gb. It serves the transformer with the uniform
    sampler."""
    memory_budget_gb: float = 8.0
    """GB (> 0) past which the split is streamed; it also bounds the streaming loader's
    memory (its shuffle window, so a resumed run keeps the budget it started with)."""


@dataclass(frozen=True)
class PlayConfig:
    """How the model chooses its move with no search (eval.agents.players.NeuralAgent, and so
    the UCI engine, the web board and `neural:` specs); training ignores it."""

    successor_weight: float = 0.0
    """>= 0. A BC policy with a value head beside it (model.policy_value) plays the legal move
    with the highest log p(move) + successor_weight x logit(its win probability by the value
    head, one ply: 1 - the value of the board after it). 0: the policy alone."""


@dataclass(frozen=True)
class Config:
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    data: DataConfig = field(default_factory=DataConfig)
    play: PlayConfig = field(default_factory=PlayConfig)

    @property
    def target(self) -> Target:
        return self.train.target

    @property
    def target_kind(self) -> TargetKind:
        return target_kind(self.train.target)

    @property
    def num_bins(self) -> int:
        return self.train.num_bins

    @property
    def output_size(self) -> int:
        """Width of the model's head: bins for av/sv, the action space for bc."""
        return self.target_kind.output_size(self.train.num_bins)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return dataclasses.asdict(self)

    def replace(self, **sections: Mapping[str, Any]) -> Config:
        """A copy with some fields changed: `cfg.replace(train={"num_steps": 10})`."""
        changed = {
            name: dataclasses.replace(getattr(self, name), **values)
            for name, values in sections.items()
        }
        return dataclasses.replace(self, **changed)


_SECTIONS = {"model": ModelConfig, "train": TrainConfig, "data": DataConfig, "play": PlayConfig}


def from_dict(raw: Mapping[str, Any], source: str = "config") -> Config:
    """Builds a Config from nested dicts; unknown tables or keys are errors (typos)."""
    unknown = set(raw) - set(_SECTIONS)
    if unknown:
        raise ConfigError(f"{source}: unknown table(s) {sorted(unknown)}; use {list(_SECTIONS)}")
    sections = {}
    for name, cls in _SECTIONS.items():
        values = _renamed(dict(raw.get(name, {})), name, source)
        if name == "model":
            size = values.get("size", ModelConfig.size)
            if size not in MODEL_SIZES and size != CUSTOM_SIZE:
                raise ConfigError(
                    f"{source}: model.size {size!r} is not one of {[*MODEL_SIZES, CUSTOM_SIZE]}"
                )
            values = {"size": size, **MODEL_SIZES.get(size, {}), **values}
        sections[name] = _build(cls, values, f"{source}: [{name}]")
    return Config(**sections)


def _renamed(values: dict[str, Any], section: str, source: str) -> dict[str, Any]:
    """`values` with the keys of RENAMED_KEYS under their current names (configs and
    checkpoints written before a rename keep loading)."""
    for old, new in RENAMED_KEYS.get(section, {}).items():
        if old in values:
            if new in values:
                raise ConfigError(f"{source}: [{section}] sets both {old} and {new}; keep {new}")
            values[new] = values.pop(old)
    return values


def _build(cls, values: Mapping[str, Any], where: str):
    known = {f.name: f for f in dataclasses.fields(cls)}
    unknown = set(values) - set(known)
    if unknown:
        raise ConfigError(f"{where} unknown key(s) {sorted(unknown)}; known: {sorted(known)}")
    checked = {}
    for name, value in values.items():
        expected = type(getattr(cls(), name))
        if expected is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if type(value) is not expected:
            raise ConfigError(
                f"{where} {name} = {value!r} should be a {expected.__name__}, "
                f"not a {type(value).__name__}"
            )
        checked[name] = value
    return cls(**checked)


def load(path: str | os.PathLike, overrides: Sequence[str] = ()) -> Config:
    """Reads a TOML config and applies `key=value` overrides (see the module docstring)."""
    try:
        with open(path, "rb") as f:
            raw = tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"config file {str(path)!r} does not exist") from None
    except IsADirectoryError:
        raise ConfigError(f"config file {str(path)!r} is a directory, not a TOML file") from None
    except OSError as e:  # a symlink loop, no permission
        raise ConfigError(f"config file {str(path)!r} cannot be read: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise ConfigError(
            f"config file {str(path)!r} is not UTF-8 text (byte {e.object[e.start]:#04x} at "
            f"offset {e.start}); TOML files are UTF-8"
        ) from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from None
    return from_dict(apply_overrides(raw, overrides, str(path)), source=str(path))


def apply_overrides(
    raw: Mapping[str, Any], overrides: Sequence[str], source: str = "config"
) -> dict[str, Any]:
    """Nested dict with `section.key=value` / `key=value` strings applied."""
    result = {name: _renamed(dict(raw.get(name, {})), name, source) for name in _SECTIONS} | {
        k: v for k, v in raw.items() if k not in _SECTIONS
    }
    for item in overrides:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"override {item!r} is not of the form key=value")
        section, _, name = key.rpartition(".")
        renamed = {o: n for names in RENAMED_KEYS.values() for o, n in names.items()}
        name = renamed.get(name, name)
        if not section:
            owners = [s for s, cls in _SECTIONS.items() if name in _field_names(cls)]
            if len(owners) != 1:
                raise ConfigError(
                    f"override {item!r}: {name!r} is "
                    + ("ambiguous" if owners else "not a config field")
                    + "; write section.key=value"
                )
            section = owners[0]
        if section not in _SECTIONS:
            raise ConfigError(f"override {item!r}: unknown section {section!r}")
        result[section][name] = _parse_value(text.strip())
    return result


def _field_names(cls) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def _parse_value(text: str) -> Any:
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text  # a bare word: a string


def validate(config: Config, check_data: bool = True) -> Config:
    """Raises ConfigError for anything that cannot train; returns the config unchanged."""
    m, t, d = config.model, config.train, config.data
    if m.backbone not in BACKBONES:
        raise ConfigError(f"model.backbone {m.backbone!r} is not one of {list(BACKBONES)}")
    for fact in MOVE_FACTS:
        if getattr(m, fact) and m.backbone not in GRAPH_BACKBONES:
            raise ConfigError(
                f"model.{fact} is a feature of the move edges of {' and '.join(GRAPH_BACKBONES)}"
            )
    if m.policy_value and (m.backbone not in GRAPH_BACKBONES or t.target != "bc"):
        raise ConfigError(
            "model.policy_value is a value head beside the BC policy of "
            f"{' and '.join(GRAPH_BACKBONES)} (backbone {m.backbone!r}, target {t.target!r})"
        )
    if not (math.isfinite(t.value_weight) and t.value_weight >= 0):
        raise ConfigError(f"train.value_weight must be >= 0, got {t.value_weight}")
    weight = config.play.successor_weight
    if not (math.isfinite(weight) and weight >= 0):
        raise ConfigError(f"play.successor_weight must be >= 0, got {weight}")
    if weight and not m.policy_value:
        raise ConfigError(
            "play.successor_weight mixes the BC policy with its own value head: it needs "
            "model.policy_value = true"
        )
    if not 0 <= t.soft_targets <= 1:  # NaN too
        raise ConfigError(f"train.soft_targets must be in [0, 1], got {t.soft_targets}")
    if t.soft_targets and (m.backbone not in GRAPH_BACKBONES or t.target != "bc"):
        raise ConfigError(
            "train.soft_targets softens the BC policy of "
            f"{' and '.join(GRAPH_BACKBONES)} (backbone {m.backbone!r}, target {t.target!r})"
        )
    if not (math.isfinite(t.soft_temperature) and t.soft_temperature > 0):
        raise ConfigError(f"train.soft_temperature must be > 0, got {t.soft_temperature}")
    if m.attack_bias and m.backbone != "squares":
        raise ConfigError("model.attack_bias is a feature of the squares backbone's attention")
    if t.target not in TARGETS:
        raise ConfigError(f"train.target {t.target!r} is not one of {list(TARGETS)}")
    if t.num_bins < 2:
        raise ConfigError(f"train.num_bins must be >= 2, got {t.num_bins}")
    if t.sampler not in SAMPLERS:
        raise ConfigError(f"train.sampler {t.sampler!r} is not one of {list(SAMPLERS)}")
    if t.lr_schedule not in LR_SCHEDULES:
        raise ConfigError(f"train.lr_schedule {t.lr_schedule!r} is not one of {LR_SCHEDULES}")
    if t.dtype not in COMPUTE_DTYPES:
        raise ConfigError(f"train.dtype {t.dtype!r} is not one of {list(COMPUTE_DTYPES)}")
    if t.hl_gauss and not target_kind(t.target).value_head:
        raise ConfigError(f"train.hl_gauss applies to value bins; target {t.target!r} has none")
    positive = {
        "model.num_layers": m.num_layers,
        "model.embedding_dim": m.embedding_dim,
        "model.num_heads": m.num_heads,
        "model.widening_factor": m.widening_factor,
        "train.batch_size": t.batch_size,
        "train.num_steps": t.num_steps,
        "train.log_every": t.log_every,
        "train.checkpoint_every": t.checkpoint_every,
        "train.keep_checkpoints": t.keep_checkpoints,
        "train.prefetch": t.prefetch,
        "train.eval_boards": t.eval_boards,
        "train.eval_batches": t.eval_batches,
    }
    for name, value in positive.items():
        if value < 1:
            raise ConfigError(f"{name} must be >= 1, got {value}")
    if t.warmup_steps < 0 or t.eval_every < 0:
        raise ConfigError("train.warmup_steps and train.eval_every must be >= 0")
    if m.embedding_dim % m.num_heads:
        raise ConfigError(
            f"model.embedding_dim {m.embedding_dim} is not divisible by "
            f"model.num_heads {m.num_heads}"
        )
    if not t.learning_rate > 0:
        raise ConfigError(f"train.learning_rate must be > 0, got {t.learning_rate}")
    if not 0 <= t.ema_decay < 1:
        raise ConfigError(f"train.ema_decay must lie in [0, 1), got {t.ema_decay}")
    if not 0 <= t.final_lr_ratio <= 1:
        raise ConfigError(f"train.final_lr_ratio must lie in [0, 1], got {t.final_lr_ratio}")
    if not t.grad_clip_norm > 0:
        raise ConfigError(f"train.grad_clip_norm must be > 0, got {t.grad_clip_norm}")
    if not d.memory_budget_gb > 0:
        raise ConfigError(f"data.memory_budget_gb must be > 0, got {d.memory_budget_gb}")
    if d.streaming and m.backbone in GRAPH_BACKBONES:
        raise ConfigError(f"data.streaming serves the transformer; {m.backbone} loads boards whole")
    if d.streaming and t.sampler != "uniform":
        raise ConfigError(
            f"data.streaming samples uniformly; train.sampler {t.sampler!r} needs the whole table"
        )
    if check_data:
        for name, path in (("data.train", d.train), ("data.test", d.test)):
            if name == "data.test" and not path:
                continue
            if not path:
                raise ConfigError(f"{name} is empty: give the annotated Parquet to train on")
            try:
                board_files(path)
            except FileNotFoundError:
                raise ConfigError(
                    f"{name} = {path!r}: no annotated board shards there "
                    "(a directory of boards-*.parquet, a file or a glob)"
                ) from None
    return config


def to_toml(config: Config) -> str:
    """The resolved config as TOML (tomllib only reads; the values here are all scalars)."""
    lines = []
    for section, values in config.to_dict().items():
        lines.append(f"[{section}]")
        for key, value in values.items():
            lines.append(f"{key} = {_toml_value(value)}")
        lines.append("")
    return "\n".join(lines)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"')
        return f'"{escaped}"'
    raise TypeError(f"cannot write {value!r} as TOML")
