"""On an accelerator the board-at-once networks reach no parameter through a scatter, and
their one-hot lookups give what the CPU's indexed ones give.

The gradient of an indexed lookup (`table[ids]`, an indexed `hk.Embed`) is a scatter-add of
every row of the batch into the table's few rows. On a GPU, in bfloat16, those additions
contend for the same addresses: the square-token network took 35 s a step at a batch of 1,024
boards on an H200 with them. Off the CPU its lookups are one-hot matrix products
(model/networks/board_net.py `one_hot_lookups`). These tests read the gradient's program,
which needs no GPU: a scatter whose operand has a parameter's shape is such a lookup's
gradient.
"""

from __future__ import annotations

import chess
import jax
import jax.extend.core as jax_core
import numpy as np
import pytest

from core.tokenizer import tokenize_batch
from model import config as config_lib
from model.networks import board_graph, board_net, network

BOARDS = [
    chess.Board(),
    chess.Board("r3k2r/pP4pp/8/3pP3/8/8/5p2/R3K2R b KQkq - 0 1"),
]


def config(backbone: str, target: str) -> config_lib.Config:
    return config_lib.from_dict(
        {
            "model": {
                "backbone": backbone,
                "num_layers": 1,
                "embedding_dim": 16,
                "num_heads": 2,
                "widening_factor": 2,
                "move_checks": True,
                "move_exchanges": True,
                **({"attack_bias": True} if backbone == "squares" else {}),
            },
            "train": {"target": target, "num_bins": 8, "dtype": "float32"},
        }
    )


def inputs():
    graphs = board_graph.encode_boards(BOARDS)
    padded = board_graph.pad_edges(graphs, np.arange(len(BOARDS)))
    states = tokenize_batch([b.fen() for b in BOARDS])
    return states, padded["senders"], padded["receivers"], padded["kinds"]


def noisy_params(cfg: config_lib.Config):
    """Random parameters: the heads start at zero, which would hide a wrong lookup."""
    rng = np.random.default_rng(0)
    return jax.tree_util.tree_map(
        lambda x: (0.3 * rng.standard_normal(x.shape)).astype(np.float32),
        network.param_shapes(cfg),
    )


def scatter_operand_shapes(jaxpr) -> list[tuple[int, ...]]:
    """The operand shape of every scatter in a jaxpr and the jaxprs inside it."""
    shapes = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name.startswith("scatter"):
            shapes.append(tuple(eqn.invars[0].aval.shape))
        for sub in jax_core.jaxprs_in_params(eqn.params):
            shapes.extend(scatter_operand_shapes(sub))
    return shapes


BACKBONES_AND_TARGETS = [("squares", "bc"), ("squares", "av"), ("gateau", "bc"), ("gateau", "av")]


@pytest.mark.parametrize("backbone,target", BACKBONES_AND_TARGETS)
def test_on_an_accelerator_the_gradient_scatters_into_no_parameter(backbone, target, monkeypatch):
    monkeypatch.setattr(board_net, "one_hot_lookups", lambda: True)
    cfg = config(backbone, target)
    apply = network.graph_module(cfg).build(cfg).apply
    params = noisy_params(cfg)
    batch = inputs()

    def loss(p):
        return apply(p, *batch).sum()

    program = jax.make_jaxpr(jax.grad(loss))(params).jaxpr
    parameter_shapes = {tuple(x.shape) for x in jax.tree_util.tree_leaves(params)}
    scattered = scatter_operand_shapes(program)
    into_parameters = [s for s in scattered if s in parameter_shapes]
    assert not into_parameters, f"scatters into parameter-shaped tables: {into_parameters}"
    if backbone == "squares":  # the accelerator window's network: no scatter at all
        assert not scattered, f"scatters in the square network's gradient: {scattered}"


@pytest.mark.parametrize("backbone,target", BACKBONES_AND_TARGETS)
def test_one_hot_and_indexed_lookups_give_the_same_outputs(backbone, target, monkeypatch):
    cfg = config(backbone, target)
    params = noisy_params(cfg)
    batch = inputs()
    outputs = {}
    for one_hot in (False, True):
        monkeypatch.setattr(board_net, "one_hot_lookups", lambda one_hot=one_hot: one_hot)
        apply = network.graph_module(cfg).build(cfg).apply  # traced anew: no jit cache
        outputs[one_hot] = np.asarray(apply(params, *batch))
    finite = np.isfinite(outputs[False])
    np.testing.assert_array_equal(finite, np.isfinite(outputs[True]))  # the same masked moves
    # float32 throughout: the sums differ only in rounding (seen: up to 3e-5 relative
    # with these large random weights); a wrong row would differ by O(1)
    np.testing.assert_allclose(outputs[True][finite], outputs[False][finite], rtol=1e-4, atol=1e-4)
