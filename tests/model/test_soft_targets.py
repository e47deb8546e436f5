"""Soft policy targets (train.soft_targets): the BC policy learns the best move mixed with a
softmax of the teacher's values of all the board's moves, on boards where every move has one."""

from __future__ import annotations

import json
import math

import chess
import jax
import numpy as np
import pytest

from model import config as config_lib
from model.data.board_view import BoardBatches, soft_policy_targets
from model.data.loader import load_boards
from model.data.loader_settings import LoaderSettings
from model.networks import gateau, squares
from model.predictor import Predictor
from model.training.step import make_loss
from model.training.train import train

NETWORKS = {"gateau": gateau, "squares": squares}
NAN = np.nan


def tiny(backbone: str = "gateau", **train_fields) -> config_lib.Config:
    return config_lib.from_dict(
        {
            "model": {"backbone": backbone, "num_layers": 2, "embedding_dim": 16, "num_heads": 2},
            "train": {
                "target": "bc",
                "num_bins": 16,
                "seed": 3,
                "dtype": "float32",
                **train_fields,
            },
        }
    )


def test_a_soft_target_mixes_the_best_move_with_the_softmax_of_the_values():
    values = np.array(
        [
            [0.6, 0.5, 0.1, NAN],  # complete, three moves
            [0.6, 0.5, 0.1, NAN],  # the same board marked partial: one-hot
            [0.7, NAN, NAN, NAN],  # one valued move (a search row): one-hot
            [0.2, 0.2, NAN, NAN],  # a tie, best given as the second
        ],
        np.float32,
    )
    best = np.array([0, 0, 0, 1])
    complete = np.array([True, False, True, True])
    got = soft_policy_targets(best, values, complete, share=0.5, temperature=0.1)
    assert got.dtype == np.float32 and got.shape == values.shape
    np.testing.assert_allclose(got.sum(axis=1), 1.0, rtol=1e-6)
    weights = np.exp(np.array([0.6, 0.5, 0.1]) / 0.1)
    soft = weights / weights.sum()
    np.testing.assert_allclose(got[0, :3], 0.5 * np.array([1, 0, 0]) + 0.5 * soft, rtol=1e-6)
    assert got[0, 3] == 0.0  # no value, no weight
    np.testing.assert_array_equal(got[1], [1, 0, 0, 0])
    np.testing.assert_array_equal(got[2], [1, 0, 0, 0])
    np.testing.assert_allclose(got[3], [0.25, 0.75, 0, 0], rtol=1e-6)
    # share 0 is the one-hot; share 1 the softmax alone; a colder softmax is nearer the best.
    zero = soft_policy_targets(best, values, complete, share=0.0, temperature=0.1)
    np.testing.assert_array_equal(zero, np.eye(4, dtype=np.float32)[best])
    np.testing.assert_allclose(
        soft_policy_targets(best, values, complete, 1.0, 0.1)[0, :3], soft, rtol=1e-6
    )
    cold = soft_policy_targets(best, values, complete, share=1.0, temperature=0.01)
    assert cold[0, 0] > 0.99


@pytest.mark.parametrize(
    "model, train_fields, message",
    [
        ({"backbone": "transformer"}, {"target": "bc"}, "softens the BC policy"),
        ({"backbone": "gateau"}, {"target": "av"}, "target 'av'"),
        ({"backbone": "gateau"}, {"target": "bc", "soft_targets": 1.5}, r"in \[0, 1\]"),
        ({"backbone": "gateau"}, {"target": "bc", "soft_targets": -0.1}, r"in \[0, 1\]"),
        ({"backbone": "squares"}, {"target": "bc", "soft_temperature": 0.0}, "> 0"),
        ({"backbone": "gateau"}, {"target": "bc", "soft_temperature": math.nan}, "> 0"),
        ({"backbone": "gateau"}, {"target": "bc", "soft_temperature": math.inf}, "> 0"),
        ({"backbone": "gateau"}, {"target": "bc", "soft_targets": math.nan}, r"in \[0, 1\]"),
    ],
)
def test_the_config_refuses_soft_targets_it_cannot_train(model, train_fields, message):
    raw = {"model": model, "train": {"soft_targets": 0.5, **train_fields}}
    with pytest.raises(config_lib.ConfigError, match=message):
        config_lib.validate(config_lib.from_dict(raw), check_data=False)


@pytest.fixture(scope="module")
def boards(make_rows, shard_writer, tmp_path_factory):
    """24 boards with every move valued, the last 6 marked partial."""
    rows = make_rows(24, seed=5)
    for row in rows[18:]:
        row["partial"] = True
    return rows, load_boards(str(shard_writer(rows, tmp_path_factory.mktemp("soft"), 2)))


def soft_settings(**fields) -> LoaderSettings:
    return LoaderSettings("bc", 16, batch_size=24, seed=2, prefetch=0, **fields)


def test_a_batch_carries_the_soft_targets_on_the_move_edges(boards):
    rows, data = boards
    plain = next(BoardBatches(data, soft_settings()))
    batch = next(BoardBatches(data, soft_settings(soft_targets=0.4, soft_temperature=0.05)))
    np.testing.assert_array_equal(plain.states, batch.states)
    assert batch.targets.shape == batch.kinds.shape and batch.targets.dtype == np.float32
    np.testing.assert_allclose(batch.targets.sum(axis=1), 1.0, rtol=1e-5)
    # The best move keeps the most weight; the rest lies on move edges only (kind >= 0 and
    # a move: the plain batch's label is one of them).
    np.testing.assert_array_equal(batch.targets.argmax(axis=1), plain.targets)
    rows_at = np.arange(24)
    best_weight = batch.targets[rows_at, plain.targets]
    by_fen = {row["fen"]: row for row in rows}
    partial = np.array(
        [
            by_fen[data.fens[np.flatnonzero((data.states == s).all(1))[0]]]["partial"]
            for s in batch.states
        ]
    )
    assert partial.sum() == 6
    np.testing.assert_array_equal(best_weight[partial], 1.0)
    assert (best_weight[~partial] < 1.0).all() and (best_weight[~partial] >= 0.6).all()
    spread = (batch.targets > 0).sum(axis=1)
    legal = np.array(
        [
            len(by_fen[data.fens[np.flatnonzero((data.states == s).all(1))[0]]]["moves"])
            for s in batch.states
        ]
    )
    np.testing.assert_array_equal(spread[~partial], legal[~partial])


@pytest.mark.parametrize("backbone", ["gateau", "squares"])
def test_the_loss_is_the_cross_entropy_with_the_mixed_target(boards, backbone):
    _, data = boards
    batch = next(BoardBatches(data, soft_settings(soft_targets=0.5, soft_temperature=0.05)))
    config = tiny(backbone, soft_targets=0.5)
    rng = np.random.default_rng(4)
    params = jax.tree_util.tree_map(
        lambda x: (0.3 * rng.standard_normal(x.shape)).astype(np.float32),
        NETWORKS[backbone].param_shapes(config),
    )
    loss, metrics = jax.jit(make_loss(config))(params, batch)
    log_probs = np.asarray(
        NETWORKS[backbone]
        .build(config)
        .apply(params, batch.states, batch.senders, batch.receivers, batch.kinds)
    )
    on = batch.targets > 0
    expected = -(np.where(on, batch.targets * np.where(on, log_probs, 0.0), 0.0)).sum(1).mean()
    assert np.isfinite(float(loss))
    np.testing.assert_allclose(float(loss), expected, rtol=1e-5)  # float32 sums reordered
    grads = jax.grad(lambda p: make_loss(config)(p, batch)[0])(params)
    assert all(np.isfinite(g).all() for g in jax.tree_util.tree_leaves(grads))
    # Accuracy is still against the best move, the mixed target's largest weight.
    right = log_probs.argmax(axis=1) == batch.targets.argmax(axis=1)
    np.testing.assert_allclose(float(metrics["accuracy"]), right.mean(), rtol=1e-6)


def test_a_policy_trained_on_soft_targets_checkpoints_and_plays(synthetic_data, tmp_path):
    config = tiny(soft_targets=0.5, batch_size=8, num_steps=20, log_every=10).replace(
        train={"checkpoint_every": 20, "eval_boards": 10, "eval_batches": 2, "eval_every": 0},
        data={"train": str(synthetic_data / "train"), "test": str(synthetic_data / "test")},
    )
    run = tmp_path / "run"
    result = train(config, str(run), log=lambda _: None)
    assert result.step == 20 and math.isfinite(result.last_eval["test_loss"])
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["loss"] for r in records if r["kind"] == "train"]
    assert all(math.isfinite(r["loss"]) for r in records if r["kind"] == "train")
    # The checkpoint is a plain BC policy to every reader.
    [(moves, probs)] = Predictor.from_checkpoint(str(run)).move_values([chess.Board()])
    assert len(moves) == 20 and math.isclose(float(probs.sum()), 1.0, rel_tol=1e-5)
