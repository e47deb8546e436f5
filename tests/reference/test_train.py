"""For the same parameters and batches, this project's loss, gradients and trainer update
compute what the reference's make_loss_fn and update_parameters compute (float32)."""

from __future__ import annotations

import jax
import numpy as np
import optax
import pytest

from core import bins
from core.actions import legal_actions, move_to_index
from core.tokenizer import tokenize_batch
from model.config import Config, ModelConfig, TrainConfig
from model.data.batch import Batch
from model.import_reference import to_project
from model.training.step import (
    Placement,
    TrainState,
    compile_train_step,
    make_loss,
    make_optimizer,
)

NUM_LAYERS, WIDTH, BATCH = 2, 32, 64


def project_config(target: str, **train) -> Config:
    model = ModelConfig(size="custom", num_layers=NUM_LAYERS, embedding_dim=WIDTH, num_heads=8)
    return Config(model=model, train=TrainConfig(target=target, num_bins=128, **train))


def batches(ref, boards, target: str, count: int, seed: int):
    """`count` pairs (our batch dict, their (sequences, loss mask)) of the same examples:
    real boards, a random legal move each, random win probabilities binned by each side's
    own code (the two binnings must agree for the targets to agree)."""
    rng = np.random.default_rng(seed)
    edges, _ = ref.utils.get_uniform_buckets_edges_values(128)
    for _ in range(count):
        chosen = [boards[i] for i in rng.integers(len(boards), size=BATCH)]
        fens = [b.fen() for b in chosen]
        moves = [str(rng.choice(legal_actions(b))) for b in chosen]
        # Bin edges included: a value on an edge must go to the same bin on both sides.
        probs = np.where(
            rng.random(BATCH) < 0.2, rng.integers(0, 129, BATCH) / 128, rng.random(BATCH)
        )
        theirs_bins = ref.utils.compute_return_buckets_from_returns(probs, edges)
        states = tokenize_batch(fens)
        their_states = np.stack([ref.tokenizer.tokenize(f) for f in fens]).astype(np.int32)
        np.testing.assert_array_equal(states, their_states)
        actions = np.array([move_to_index(m) for m in moves], np.int32)
        np.testing.assert_array_equal(actions, [ref.utils.MOVE_TO_ACTION[m] for m in moves])
        if target == "av":
            ours = Batch(states, bins.to_bins(probs, 128).astype(np.int32), actions)
            tail = [actions[:, None], theirs_bins[:, None]]
        elif target == "sv":
            ours = Batch(states, bins.to_bins(probs, 128).astype(np.int32))
            tail = [theirs_bins[:, None]]
        else:
            ours = Batch(states, actions)
            tail = [actions[:, None]]
        np.testing.assert_array_equal(ours.targets, np.concatenate(tail, axis=1)[:, -1])
        sequences = np.concatenate([their_states, *tail], axis=1).astype(np.uint32)
        mask = np.ones(sequences.shape, bool)
        mask[:, -1] = False  # their loaders' mask: the loss is on the last token only
        yield ours, (sequences, mask)


def max_difference(a, b) -> float:
    return max(
        float(np.abs(np.asarray(x) - np.asarray(y)).max())
        for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True)
    )


@pytest.mark.parametrize("target", ["av", "sv", "bc"])
def test_loss_and_gradients_equal_the_references(ref, reference_model, real_boards, target):
    predictor, params, _ = reference_model(target)
    [(ours, (sequences, mask))] = batches(ref, real_boards, target, 1, seed=1)
    their_loss, their_grads = jax.jit(
        jax.value_and_grad(ref.training_utils.make_loss_fn(predictor))
    )(params, sequences, mask)
    loss = make_loss(project_config(target))
    (our_loss, _), our_grads = jax.jit(jax.value_and_grad(loss, has_aux=True))(
        to_project(params, NUM_LAYERS), ours
    )
    assert abs(float(our_loss) - float(their_loss)) <= 1e-5 * float(their_loss)
    expected = to_project(jax.device_get(their_grads), NUM_LAYERS)
    assert jax.tree_util.tree_structure(our_grads) == jax.tree_util.tree_structure(expected)
    scale = max(float(np.abs(g).max()) for g in jax.tree_util.tree_leaves(expected))
    assert max_difference(our_grads, expected) <= 1e-5 * scale


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:optax.global_norm is deprecated:DeprecationWarning")
def test_trainer_steps_land_on_the_references_parameters(ref, reference_model, real_boards):
    steps, learning_rate = 5, 1e-4  # their train.py: Adam 1e-4 after clipping at norm 1
    predictor, params, _ = reference_model("av")
    optimizer = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(learning_rate))
    # One grad_fn object: it is a static argument of their jitted update.
    grad_fn = jax.value_and_grad(ref.training_utils.make_loss_fn(predictor))
    theirs = (params, params, optimizer.init(params))  # their EMA starts as a copy

    config = project_config("av", learning_rate=learning_rate, grad_clip_norm=1.0, ema_decay=0.99)
    placement = Placement.over_all_devices()
    step = compile_train_step(config, placement)
    start = jax.device_put(to_project(params, NUM_LAYERS), placement.replicated)
    state = TrainState(
        start,
        jax.device_put(to_project(params, NUM_LAYERS), placement.replicated),
        jax.jit(make_optimizer(config.train).init)(start),
    )
    for ours, (sequences, mask) in batches(ref, real_boards, "av", steps, seed=2):
        new_params, new_ema, opt_state, their_loss, _ = ref.training_utils.update_parameters(
            *theirs,
            sequences,
            mask,
            grad_fn=grad_fn,
            optimizer=optimizer,
        )
        theirs = (new_params, new_ema, opt_state)
        state, metrics = step(state, placement.global_batch(ours))
        assert abs(float(metrics["loss"]) - float(their_loss)) <= 1e-5 * float(their_loss)
    moved = max_difference(
        to_project(jax.device_get(theirs[0]), NUM_LAYERS), to_project(params, NUM_LAYERS)
    )
    assert moved > 1e-4  # the steps did move the parameters
    assert max_difference(state.params, to_project(jax.device_get(theirs[0]), NUM_LAYERS)) <= 1e-6
    assert (
        max_difference(state.ema_params, to_project(jax.device_get(theirs[1]), NUM_LAYERS)) <= 1e-6
    )
