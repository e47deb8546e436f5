"""The network a config names, behind one set of functions: the paper's transformer
(model/transformer.py, one (board, move) row per pass) or the GATEAU edge backbone
(model/gateau.py, one board with all its moves per pass)."""

from __future__ import annotations

import haiku as hk

from model import gateau, transformer
from model.config import Config


def is_graph(config: Config) -> bool:
    """Whether an example is a whole board (gateau) rather than a (board, move) row."""
    return config.model.backbone == "gateau"


def init_params(config: Config, seed: int | None = None) -> hk.Params:
    module = gateau if is_graph(config) else transformer
    return module.init_params(config, seed)


def param_shapes(config: Config) -> hk.Params:
    """Parameter shapes and dtypes without computing anything (jax.ShapeDtypeStruct leaves)."""
    module = gateau if is_graph(config) else transformer
    return module.param_shapes(config)
