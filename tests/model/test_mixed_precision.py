"""bfloat16 compute (`train.dtype`, the default on accelerators) trains like float32: the
same loss curve within a stated tolerance, with float32 parameters and optimiser state."""

from __future__ import annotations

import json
import pathlib

import jax
import numpy as np
import pytest

from model import config as config_lib
from model.checkpoint import load_params
from model.data.batch import Batch
from model.training.train import train

# The largest gap between the two runs' logged losses (each the mean of 20 steps), in nats:
# about 1% of the loss. Measured: 0.016 at most over the 200 steps.
LOSS_TOLERANCE = 0.05


def run(data: pathlib.Path, out: pathlib.Path, dtype: str):
    config = config_lib.from_dict(
        {
            "model": {"num_layers": 2, "embedding_dim": 32, "num_heads": 2},
            "train": {
                "batch_size": 64,
                "num_steps": 200,
                "learning_rate": 1e-3,
                "log_every": 20,
                "checkpoint_every": 200,
                "dtype": dtype,
            },
            "data": {"train": str(data / "train"), "test": ""},
        }
    )
    result = train(config, str(out), log=lambda line: None)
    losses = [json.loads(line)["loss"] for line in open(out / "metrics.jsonl")]
    return np.array(losses), result


@pytest.mark.slow
def test_bfloat16_training_follows_the_float32_loss_curve(synthetic_data, tmp_path):
    f32, _ = run(synthetic_data, tmp_path / "f32", "float32")
    bf16, result = run(synthetic_data, tmp_path / "bf16", "bfloat16")
    assert len(f32) == len(bf16) == 10
    # A curve worth following: both runs learn.
    assert f32[-1] < f32[0] - 0.1 and bf16[-1] < bf16[0] - 0.1
    np.testing.assert_allclose(bf16, f32, atol=LOSS_TOLERANCE, rtol=0)
    # ...and bfloat16 really was in effect: the curves are not the same numbers.
    assert np.abs(bf16 - f32).max() > 0
    # Parameters, EMA and Adam's moments stay float32, in memory and in the checkpoint.
    for tree in (result.state.params, result.state.ema_params, result.state.opt_state):
        floats = [x for x in jax.tree_util.tree_leaves(tree) if np.issubdtype(x.dtype, np.inexact)]
        assert floats and all(x.dtype == np.float32 for x in floats)
    saved, config, _ = load_params(str(tmp_path / "bf16"), use_ema=False)
    assert config.train.dtype == "bfloat16"
    assert all(x.dtype == np.float32 for x in jax.tree_util.tree_leaves(saved))


@pytest.mark.parametrize("target", ["av", "bc"])
def test_every_matrix_product_of_a_bfloat16_step_multiplies_bfloat16(target):
    """A single float32 operand (a numpy scalar promoting the activations, say) turns the
    step's matrix products into float32 ones, which a GPU runs as tf32 at half bf16's rate:
    the step would be float32 in all but name."""
    from model.networks.transformer import example_inputs, init_params
    from model.training.step import make_loss

    config = config_lib.from_dict(
        {
            "model": {"num_layers": 2, "embedding_dim": 32, "num_heads": 2},
            "train": {"target": target, "dtype": "bfloat16"},
        }
    )
    states, actions = example_inputs(config, batch=4)
    batch = Batch(states, np.zeros((4,), np.int32), actions)
    params = init_params(config)
    jaxpr = jax.make_jaxpr(jax.grad(lambda p: make_loss(config)(p, batch)[0]))(params)

    def products(jaxpr):
        for eqn in jaxpr.eqns:
            if eqn.primitive.name == "dot_general":
                yield eqn
            for value in eqn.params.values():
                inner = getattr(value, "jaxpr", None)
                if inner is not None:
                    yield from products(getattr(inner, "jaxpr", inner))

    found = list(products(jaxpr.jaxpr))
    assert len(found) > 10
    kinds = {tuple(str(v.aval.dtype) for v in eqn.invars) for eqn in found}
    assert kinds == {("bfloat16", "bfloat16")}
