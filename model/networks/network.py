"""The network a config names, behind one set of functions: the paper's transformer
(model/networks/transformer.py, one (board, move) row per pass), or a backbone that reads a whole
board with all its moves per pass: the GATEAU edge backbone (model/networks/gateau.py) or the
square-token transformer (model/networks/squares.py)."""

from __future__ import annotations

from types import ModuleType

import haiku as hk

from model.config import GRAPH_BACKBONES, Config
from model.networks import gateau, squares, transformer

# The board-at-once backbones: each module has build, init_params and param_shapes over the
# same inputs (the tokens and model/networks/board_graph.py's padded edges) and outputs.
_GRAPH_MODULES: dict[str, ModuleType] = {"gateau": gateau, "squares": squares}
assert set(_GRAPH_MODULES) == set(GRAPH_BACKBONES)


def is_graph(config: Config) -> bool:
    """Whether an example is a whole board (gateau, squares) rather than a (board, move) row."""
    return config.model.backbone in GRAPH_BACKBONES


def graph_module(config: Config) -> ModuleType:
    """The module of a board-at-once backbone (ValueError for the paper's transformer)."""
    try:
        return _GRAPH_MODULES[config.model.backbone]
    except KeyError:
        raise ValueError(f"backbone {config.model.backbone!r} does not read whole boards") from None


def _module(config: Config) -> ModuleType:
    return graph_module(config) if is_graph(config) else transformer


def init_params(config: Config, seed: int | None = None) -> hk.Params:
    return _module(config).init_params(config, seed)


def param_shapes(config: Config) -> hk.Params:
    """Parameter shapes and dtypes without computing anything (jax.ShapeDtypeStruct leaves)."""
    return _module(config).param_shapes(config)
