"""A value head beside the BC policy (model.policy_value): the config's rules, the boards'
value bins in the batches, the loss (policy + weight x value, the value over the boards that
have one), training through the unchanged trainer, and one model that the search asks for both
its priors and its values."""

from __future__ import annotations

import io
import json
import math

import chess
import jax
import numpy as np
import pytest

from core import bins
from eval.agents.evaluators import PolicyValueEvaluator, make_evaluator
from eval.uci.choosers import move_value
from eval.uci.factories import NeuralFactory
from eval.uci.info import score_words
from eval.uci.server import UciServer
from eval.web.api import WebSettings, analysis
from eval.web.models import ModelStore
from eval.web.params import BoardRequest
from model import config as config_lib
from model.data.board_view import BoardBatches
from model.data.loader import DataError, load_boards
from model.data.loader_settings import LoaderSettings
from model.networks import gateau, squares
from model.predictor import Predictor, TargetError
from model.training.step import make_loss
from model.training.train import train
from tests.eval.uci_inprocess import bestmoves, search_lines

NETWORKS = {"gateau": gateau, "squares": squares}


def tiny(backbone: str = "gateau", policy_value: bool = True, **train) -> config_lib.Config:
    return config_lib.from_dict(
        {
            "model": {
                "backbone": backbone,
                "num_layers": 2,
                "embedding_dim": 16,
                "num_heads": 2,
                "widening_factor": 2,
                "policy_value": policy_value,
            },
            "train": {"target": "bc", "num_bins": 16, "seed": 3, "dtype": "float32", **train},
        }
    )


def noisy_params(config: config_lib.Config):
    rng = np.random.default_rng(1)
    return jax.tree_util.tree_map(
        lambda x: (0.3 * rng.standard_normal(x.shape)).astype(np.float32),
        NETWORKS[config.model.backbone].param_shapes(config),
    )


@pytest.mark.parametrize(
    "model, train, message",
    [
        ({"backbone": "transformer"}, {"target": "bc"}, "value head beside the BC policy"),
        ({"backbone": "gateau"}, {"target": "av"}, "target 'av'"),
        ({"backbone": "gateau"}, {"target": "sv"}, "target 'sv'"),
        ({"backbone": "gateau"}, {"target": "bc", "value_weight": -1.0}, "value_weight"),
        ({"backbone": "gateau"}, {"target": "bc", "value_weight": math.nan}, "value_weight"),
        ({"backbone": "gateau"}, {"target": "bc", "value_weight": math.inf}, "value_weight"),
    ],
)
def test_the_config_refuses_a_value_head_where_there_is_no_policy_beside_it(model, train, message):
    raw = {"model": {**model, "policy_value": True}, "train": train}
    with pytest.raises(config_lib.ConfigError, match=message):
        config_lib.validate(config_lib.from_dict(raw), check_data=False)


@pytest.fixture(scope="module")
def boards(make_rows, shard_writer, tmp_path_factory):
    """24 boards, the last 6 without a state value."""
    rows = make_rows(24, seed=11)
    for row in rows[18:]:
        row["state_win_prob"] = None
    return rows, load_boards(str(shard_writer(rows, tmp_path_factory.mktemp("pv"), 2)))


def test_batches_carry_each_boards_value_bin_and_minus_one_where_it_has_none(boards):
    rows, data = boards
    by_fen = {row["fen"]: row for row in rows}
    settings = LoaderSettings("bc", 16, batch_size=24, seed=0, prefetch=0, board_values=True)
    batch = next(BoardBatches(data, settings))
    assert batch.value_targets.shape == (24,) and batch.value_targets.dtype == np.int32
    for tokens, got in zip(batch.states, batch.value_targets, strict=True):
        fen = data.fens[np.flatnonzero((data.states == tokens).all(1))[0]]
        value = by_fen[fen]["state_win_prob"]
        assert got == (-1 if value is None else bins.to_bins(np.float32(value), 16))
    assert (batch.value_targets == -1).sum() == 6
    # Without the flag, a BC batch is as before.
    plain = next(BoardBatches(data, LoaderSettings("bc", 16, batch_size=24, seed=0, prefetch=0)))
    assert plain.value_targets is None
    np.testing.assert_array_equal(plain.targets, batch.targets)


def test_a_value_head_over_boards_without_values_is_refused(make_rows, shard_writer, tmp_path):
    # As a --policy-only pack leaves them: the head's loss would be 0 and it would learn nothing.
    rows = make_rows(8, seed=12)
    for row in rows:
        row["state_win_prob"] = None
    data = load_boards(str(shard_writer(rows, tmp_path, 1)))
    settings = LoaderSettings("bc", 16, batch_size=4, seed=0, prefetch=0, board_values=True)
    with pytest.raises(DataError, match="none of the 8 training boards has a board value"):
        BoardBatches(data, settings)
    plain = LoaderSettings("bc", 16, batch_size=4, seed=0, prefetch=0)
    assert next(BoardBatches(data, plain)).targets.shape == (4,)


@pytest.mark.parametrize("backbone", ["gateau", "squares"])
def test_the_loss_adds_the_weighted_value_loss_over_the_boards_with_a_value(boards, backbone):
    _, data = boards
    settings = LoaderSettings("bc", 16, batch_size=24, seed=1, prefetch=0, board_values=True)
    batch = next(BoardBatches(data, settings))
    weight = 0.3
    config = tiny(backbone, value_weight=weight)
    params = noisy_params(config)
    value, metrics = jax.jit(make_loss(config))(params, batch)
    policy, board_value = (
        NETWORKS[backbone]
        .build(config)
        .apply(params, batch.states, batch.senders, batch.receivers, batch.kinds)
    )
    policy_nll = -np.asarray(policy)[np.arange(24), batch.targets].mean()
    has = batch.value_targets >= 0
    value_nll = -np.asarray(board_value)[np.flatnonzero(has), batch.value_targets[has]].mean()
    tolerance = {"rtol": 1e-5}  # float32 sums in another order
    np.testing.assert_allclose(float(metrics["policy_loss"]), policy_nll, **tolerance)
    np.testing.assert_allclose(float(metrics["value_loss"]), value_nll, **tolerance)
    np.testing.assert_allclose(float(value), policy_nll + weight * value_nll, **tolerance)
    # The policy's own loss is the plain BC loss of the same trunk and policy head.
    plain = tiny(backbone, policy_value=False)
    plain_params = {k: v for k, v in params.items() if not k.startswith("value_head")}
    plain_loss, _ = jax.jit(make_loss(plain))(plain_params, batch._replace(value_targets=None))
    np.testing.assert_allclose(float(plain_loss), policy_nll, **tolerance)


@pytest.fixture(scope="module")
def trained(synthetic_data, tmp_path_factory):
    """A tiny policy-value gateau trained 40 steps: (its run dir, the trainer's result)."""
    run = tmp_path_factory.mktemp("policy-value-run")
    config = tiny(batch_size=8, num_steps=40, log_every=10, learning_rate=3e-3).replace(
        train={"checkpoint_every": 40, "eval_boards": 10, "eval_batches": 2, "eval_every": 0},
        data={"train": str(synthetic_data / "train"), "test": str(synthetic_data / "test")},
    )
    return run, train(config, str(run), log=lambda _: None)


def test_one_model_trains_and_gives_the_search_priors_and_values(trained):
    tmp_path, result = trained
    assert result.step == 40 and math.isfinite(result.last_eval["test_loss"])
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    records = [r for r in map(json.loads, lines) if r["kind"] == "train"]
    # The value head learns: its loss falls from that of a uniform guess over the 16 bins.
    assert records[-1]["value_loss"] < math.log(16) - 0.1
    assert records[-1]["loss"] > records[-1]["policy_loss"]

    predictor = Predictor.from_checkpoint(str(tmp_path))
    assert predictor.values_boards
    boards = [chess.Board(), chess.Board("6k1/5ppp/8/8/8/8/8/R5K1 w - - 0 1")]
    values = predictor.state_values([b.fen() for b in boards])
    assert values.shape == (2,) and ((values >= 0) & (values <= 1)).all()
    # The policy is the same whether or not the value is asked for.
    [(moves, probs)] = predictor.move_values([boards[0]])
    assert len(moves) == 20 and math.isclose(float(probs.sum()), 1.0, rel_tol=1e-5)

    evaluator = make_evaluator(predictor)  # no second model: its own value head
    assert isinstance(evaluator, PolicyValueEvaluator) and evaluator.target == "bc+value"
    leaves = evaluator.evaluate(boards)
    for leaf, value in zip(leaves, values, strict=True):
        assert math.isclose(leaf.value, float(value), rel_tol=1e-5)
        assert math.isclose(float(leaf.priors.sum()), 1.0, rel_tol=1e-5)


def test_the_search_gets_priors_and_values_from_one_pass_equal_to_two(trained):
    predictor = Predictor.from_checkpoint(str(trained[0]))
    boards = [chess.Board(), chess.Board("r3k2r/pP4pp/8/3pP3/8/8/5p2/R3K2R b KQkq - 0 1")]
    policies, values = predictor.policies_and_values(boards)
    tolerance = {"rtol": 1e-5, "atol": 1e-6}  # another compiled program than the two below
    np.testing.assert_allclose(
        values, predictor.state_values([b.fen() for b in boards]), **tolerance
    )
    for (moves, probs), (want_moves, want) in zip(
        policies, predictor.move_values(boards), strict=True
    ):
        assert moves == want_moves
        np.testing.assert_allclose(probs, want, **tolerance)
    empty, no_values = predictor.policies_and_values([])
    assert empty == [] and no_values.shape == (0,)


def test_the_web_board_shows_the_models_own_values(trained, tmp_path):
    run = trained[0]
    store = ModelStore.create(str(run), "none", str(tmp_path))
    board = chess.Board()
    board.push_uci("e2e4")
    request = BoardRequest(board, None, None, simulations=8)
    result = analysis(store, WebSettings(), request)
    predictor = Predictor.from_checkpoint(str(run))
    assert result["value_model"] is None and result["search"] is not None
    moves = [entry["uci"] for entry in result["moves"]]
    wins = dict(zip(moves, predictor.successor_values(board, moves), strict=True))
    for entry in result["moves"]:
        assert math.isclose(entry["win"], float(wins[entry["uci"]]), rel_tol=1e-5)
    own = float(predictor.state_values([board.fen()])[0])
    assert math.isclose(result["value"], own, rel_tol=1e-5)
    # Named as its own value model, it is one.
    store = ModelStore.create(str(run), str(run), str(tmp_path))
    named = analysis(store, WebSettings(), request)
    assert named["value_model"] == store.default_model
    assert math.isclose(named["value"], own, rel_tol=1e-5)


def test_a_policy_without_a_value_head_still_needs_a_value_model(synthetic_data):
    config = tiny(policy_value=False)
    predictor = Predictor(noisy_params(config), config, max_batch=64)
    assert not predictor.values_boards
    with pytest.raises(TargetError, match="a BC policy without one"):
        predictor.state_values([chess.Board().fen()])
    with pytest.raises(ValueError, match="needs a value model"):
        make_evaluator(predictor)
    with pytest.raises(ValueError, match="no value head"):
        PolicyValueEvaluator(predictor, predictor)


def test_the_uci_engine_scores_and_searches_with_the_models_own_value(trained, tmp_path):
    run, _ = trained
    out = io.StringIO()
    engine = UciServer(NeuralFactory(str(tmp_path)), out)
    setup = [f"setoption name WeightsFile value {run}", "setoption name UCI_ShowWDL value true"]
    engine.run([*setup, "isready", "position startpos moves e2e4", "go nodes 1"])
    lines = out.getvalue().splitlines()
    assert not [line for line in lines if line.startswith("info string")], lines
    [info] = [line for line in lines if line.startswith("info depth")]
    # The score is the model's own value of the board after its move.
    board = chess.Board()
    board.push_uci("e2e4")
    move = chess.Move.from_uci(bestmoves(out)[0])
    value = move_value(Predictor.from_checkpoint(str(run)), board, move)
    assert f"score {score_words(board, [move], value, exact=False)[0].split(' ', 1)[1]}" in info

    # With Simulations it searches on its own: no value model named, none needed; and named as
    # its own ValueFile, it is the value model: no complaint either way.
    for value_file in ([], [f"setoption name ValueFile value {run}"]):
        lines = search_lines(tmp_path, [*setup, *value_file])
        assert not [line for line in lines if line.startswith("info string")], lines
        assert [line for line in lines if " nodes 8 " in line and " score cp " in line], lines
