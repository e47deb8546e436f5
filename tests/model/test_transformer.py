"""The transformer: exact parameter counts, architecture details, outputs."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from model import config as config_lib
from model.networks.transformer import build, cast, count_params, init_params, param_shapes


def make(size="small", target="av", **model):
    return config_lib.from_dict(
        {"model": {"size": size, **model}, "train": {"target": target, "num_bins": 128}}
    )


def test_9m_action_value_model_has_the_papers_parameter_count():
    assert count_params(param_shapes(make("9M", "av"))) == 8_954_240


@pytest.mark.parametrize(
    "size, target, expected",
    [
        # 8 layers of 16 d^2 + 4d, embeddings (1968 + 79) x d, final norm 2d, head (d + 1) x K.
        ("9M", "bc", 8 * (16 * 256**2 + 4 * 256) + 2047 * 256 + 2 * 256 + 257 * 1968),
        ("136M", "av", 8 * (16 * 1024**2 + 4 * 1024) + 2047 * 1024 + 2 * 1024 + 1025 * 128),
        ("270M", "sv", 16 * (16 * 1024**2 + 4 * 1024) + 2047 * 1024 + 2 * 1024 + 1025 * 128),
    ],
)
def test_named_sizes_follow_the_architecture(size, target, expected):
    assert count_params(param_shapes(make(size, target))) == expected


def test_only_the_head_and_layer_norms_have_offsets():
    shapes = param_shapes(make())
    with_bias = sorted(module for module, leaves in shapes.items() if "b" in leaves)
    assert with_bias == ["head"]
    norms = [m for m in shapes if m.endswith("norm")]
    assert len(norms) == 2 * 4 + 1 and all("offset" in shapes[m] for m in norms)


@pytest.mark.parametrize("target, width", [("av", 128), ("sv", 128), ("bc", 1968)])
def test_outputs_are_log_probabilities(target, width):
    config = make(target=target, num_layers=1, embedding_dim=32, num_heads=2)
    params = init_params(config, seed=1)
    rng = np.random.default_rng(0)
    states = rng.integers(0, 31, (5, 77))
    actions = rng.integers(0, 1968, 5) if target == "av" else None
    log_probs = np.asarray(build(config).apply(params, states, actions))
    assert log_probs.shape == (5, width)
    np.testing.assert_allclose(np.exp(log_probs).sum(axis=1), 1.0, rtol=1e-5)


def test_a_new_model_predicts_uniformly():
    config = make(num_layers=1, embedding_dim=32, num_heads=2)
    log_probs = build(config).apply(init_params(config), np.zeros((2, 77), int), np.zeros(2, int))
    np.testing.assert_allclose(log_probs, -np.log(128), rtol=1e-6)


def test_every_board_token_and_the_action_reach_the_output():
    config = make(num_layers=1, embedding_dim=32, num_heads=2)
    params = init_params(config, seed=2)
    params["head"]["w"] = jax.random.normal(jax.random.PRNGKey(0), params["head"]["w"].shape)
    apply = jax.jit(build(config).apply)
    states = np.full((1, 77), 30)
    base = np.asarray(apply(params, states, np.array([5])))
    for position in (0, 40, 76):
        changed = states.copy()
        changed[0, position] = 20
        assert not np.allclose(apply(params, changed, np.array([5])), base)
    assert not np.allclose(apply(params, states, np.array([6])), base)


def test_bfloat16_compute_is_close_to_float32():
    config = make(num_layers=2, embedding_dim=32, num_heads=2)
    params = init_params(config, seed=3)
    params["head"]["w"] = jax.random.normal(jax.random.PRNGKey(0), params["head"]["w"].shape)
    rng = np.random.default_rng(1)
    states, actions = rng.integers(0, 31, (4, 77)), rng.integers(0, 1968, 4)
    full = np.asarray(build(config).apply(params, states, actions))
    half = build(config).apply(cast(params, jax.numpy.bfloat16), states, actions)
    assert half.dtype == np.float32  # log-softmax in float32
    np.testing.assert_allclose(np.exp(half), np.exp(full), atol=0.02)


@pytest.mark.parametrize("num_layers", [1, 3])
def test_one_board_forward_computes_what_the_full_forward_computes_on_one_boards_moves(
    num_layers,
):
    config = make(num_layers=num_layers, embedding_dim=32, num_heads=2)
    params = init_params(config, seed=4)
    leaves, tree = jax.tree_util.tree_flatten(params)
    keys = jax.random.split(jax.random.PRNGKey(5), len(leaves))
    noisy = [x + 0.3 * jax.random.normal(k, x.shape) for x, k in zip(leaves, keys, strict=True)]
    params = jax.tree_util.tree_unflatten(tree, noisy)
    rng = np.random.default_rng(2)
    board = rng.integers(0, 31, (1, 77))
    states, actions = np.repeat(board, 7, axis=0), rng.integers(0, 1968, 7)
    full = np.asarray(build(config).apply(params, states, actions))
    shared = np.asarray(build(config, one_board=True).apply(params, states, actions))
    np.testing.assert_allclose(np.exp(shared), np.exp(full), rtol=1e-5, atol=1e-6)
    assert np.ptp(full, axis=0).max() > 0.1  # the moves do get different predictions
    # It reads row 0's board for every row: rows of another board are not its input.
    other = states.copy()
    other[1:] = rng.integers(0, 31, (6, 77))
    assert not np.allclose(
        build(config, one_board=True).apply(params, other, actions),
        build(config).apply(params, other, actions),
    )


def test_one_board_forward_needs_moves():
    config = make(target="sv", num_layers=1, embedding_dim=32, num_heads=2)
    with pytest.raises(ValueError, match="one_board needs a move per row"):
        build(config, one_board=True).apply(init_params(config), np.zeros((2, 77), int))
