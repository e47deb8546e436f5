"""The gateau edge backbone: masking (illegal edges never get loss or probability), one pass
giving every move the value the network computes for its edge, the board view of the
loader, and training, checkpoints and prediction through the unchanged trainer."""

from __future__ import annotations

import functools
import math

import chess
import jax
import numpy as np
import pytest
from scipy.stats import spearmanr

from core import bins
from core.actions import legal_actions, move_to_index, moves_to_indices
from core.tokenizer import tokenize_batch
from model import config as config_lib
from model.data.board_view import BoardBatches
from model.data.loader import DataError, load_boards, make_view
from model.data.loader_settings import LoaderSettings
from model.networks import board_graph, gateau
from model.predictor import Predictor
from model.training.step import make_loss
from model.training.train import train

BOARDS = [
    chess.Board(),
    chess.Board("r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3"),
    chess.Board("r3k2r/pP4pp/8/3pP3/8/8/5p2/R3K2R b KQkq - 0 1"),  # castling, promotions
    chess.Board("6k1/5ppp/8/8/8/8/8/R5K1 w - - 0 1"),
    chess.Board("4k3/8/8/3pP3/8/8/8/4K3 w - d6 0 1"),  # en passant
]


def tiny(target: str, **train) -> config_lib.Config:
    return config_lib.from_dict(
        {
            "model": {
                "backbone": "gateau",
                "num_layers": 2,
                "embedding_dim": 16,
                "num_heads": 2,
                "widening_factor": 2,
            },
            "train": {"target": target, "num_bins": 16, "seed": 3, "dtype": "float32", **train},
        }
    )


def noisy_params(config: config_lib.Config):
    """Random parameters of the right shapes (the heads start at zero, which would make
    every prediction equal); shapes come from tracing, so nothing compiles."""
    rng = np.random.default_rng(1)
    return jax.tree_util.tree_map(
        lambda x: (0.3 * rng.standard_normal(x.shape)).astype(np.float32),
        gateau.param_shapes(config),
    )


@pytest.fixture(scope="module")
def predictors() -> dict[str, Predictor]:
    return {t: Predictor(noisy_params(tiny(t)), tiny(t), max_batch=64) for t in ("av", "sv", "bc")}


ALONE_WIDTH = 256  # other padding than the predictor's (128 edges for these boards)


@functools.cache
def _apply(config: config_lib.Config):
    return jax.jit(gateau.build(config).apply)


def alone(predictor: Predictor, board: chess.Board):
    """The network on this board by itself, padded to ALONE_WIDTH edges: (its output, its
    graph, its padded kinds)."""
    graphs = board_graph.encode_boards([board])
    padded = board_graph.pad_edges(graphs, np.array([0]), width=ALONE_WIDTH)
    out = _apply(predictor.config)(
        predictor.params,
        tokenize_batch([board.fen()]),
        padded["senders"],
        padded["receivers"],
        padded["kinds"],
    )
    return np.asarray(out[0]), graphs, padded["kinds"][0]


def test_one_pass_gives_each_move_the_value_of_its_edge(predictors):
    predictor = predictors["av"]
    results = predictor.move_values(BOARDS)  # five boards padded together in one call
    for board, (moves, values) in zip(BOARDS, results, strict=True):
        log_probs, graphs, _ = alone(predictor, board)
        assert moves == legal_actions(board)
        expected = bins.expected_value(log_probs[: graphs.num_moves[0]])
        np.testing.assert_allclose(values, expected, rtol=1e-5, atol=1e-6)
    # The same values through every other entry point.
    fens = [b.fen() for b in BOARDS]
    chosen = [moves[::3] for moves, _ in results]
    for (moves, values), picked, got in zip(
        results, chosen, predictor.action_values(fens, chosen), strict=True
    ):
        np.testing.assert_allclose(got, values[[moves.index(m) for m in picked]], rtol=1e-6)
    states = np.repeat(tokenize_batch(fens), [len(m) for m, _ in results], axis=0)
    actions = moves_to_indices(np.concatenate([m for m, _ in results]))
    log_probs, values = predictor.log_probs_and_values(states, actions)
    np.testing.assert_allclose(values, np.concatenate([v for _, v in results]), rtol=1e-6)
    assert log_probs.shape == (len(actions), 16)
    with pytest.raises(ValueError, match="not legal"):
        predictor.action_values([fens[0]], [["e2e5"]])


def test_state_values_and_policies_match_the_network(predictors):
    sv, bc = predictors["sv"], predictors["bc"]
    fens = [b.fen() for b in BOARDS]
    expected = [bins.expected_value(alone(sv, b)[0]) for b in BOARDS]
    np.testing.assert_allclose(sv.state_values(fens), expected, rtol=1e-5)
    log_probs = bc.move_log_probs(fens)
    for row, board in zip(log_probs, BOARDS, strict=True):
        own, graphs, kinds = alone(bc, board)
        legal = moves_to_indices(legal_actions(board))
        np.testing.assert_allclose(row[legal], own[: len(legal)], rtol=1e-5, atol=1e-6)
        # Illegal actions, attack edges and padding have no probability at all; the legal
        # moves share all of it.
        assert np.isneginf(np.delete(row, legal)).all()
        moves = (kinds >= 0) & (board_graph.unpack_kind(kinds)[2] == board_graph.MOVE)
        assert moves.sum() == len(legal) and np.isneginf(own[~moves]).all()
        np.testing.assert_allclose(np.exp(row[legal]).sum(), 1.0, rtol=1e-5)


def test_move_checks_give_checking_moves_their_own_embedding():
    plain = tiny("bc")
    checks = plain.replace(model={"move_checks": True})
    shapes = gateau.param_shapes(checks)
    assert "check_embed" in shapes and "check_embed" not in gateau.param_shapes(plain)
    # The same parameters but the check embedding: without the feature the network reads
    # the kinds as the models trained before it did; with a zero check embedding it is the
    # same network, and with a non-zero one the checking move changes what it computes.
    params = noisy_params(checks)
    without = {k: v for k, v in params.items() if k != "check_embed"}
    board = chess.Board("6k1/5ppp/8/8/8/8/8/R5K1 w - - 0 1")  # Ra8 mates, Re1 does nothing
    predictor = Predictor(without, plain, max_batch=16)
    off, graphs, kinds = alone(predictor, board)
    flags = board_graph.kind_gives_check(kinds) * (kinds >= 0)
    assert flags.sum() == 1  # Ra8#
    params["check_embed"]["embeddings"] = np.zeros_like(params["check_embed"]["embeddings"])
    same, *_ = alone(Predictor(params, checks, max_batch=16), board)
    np.testing.assert_allclose(same, off, rtol=1e-5, atol=1e-6)
    # (Not a constant row: the layer norms would take it out again.)
    check_row = np.random.default_rng(2).standard_normal(16)
    params["check_embed"]["embeddings"] = np.stack([np.zeros(16), check_row]).astype(np.float32)
    moved, *_ = alone(Predictor(params, checks, max_batch=16), board)
    assert not np.allclose(moved, off, atol=1e-3)
    with pytest.raises(config_lib.ConfigError, match="move_checks"):
        config_lib.validate(plain.replace(model={"backbone": "transformer", "move_checks": True}))


@pytest.fixture(scope="module")
def mixed(make_rows, shard_writer, tmp_path_factory):
    """Complete boards and partial ones (only every third move valued)."""
    rows = make_rows(24, seed=5)
    for row in rows[12:]:
        keep = list(range(0, len(row["moves"]), 3))
        for key in ("moves", "win_probs", "cp", "mate"):
            row[key] = [row[key][i] for i in keep]
        row["best_move"] = row["moves"][0]
        row["partial"] = True
    return rows, load_boards(str(shard_writer(rows, tmp_path_factory.mktemp("mixed"), 2)))


def test_board_batches_put_each_value_on_its_move_edge(mixed):
    rows, data = mixed
    by_fen = {row["fen"]: row for row in rows}
    batches = BoardBatches(
        data, LoaderSettings("av", 32, batch_size=24, seed=0, prefetch=0, av_partial=True)
    )
    batch = next(batches)
    widest = batches.boards.graphs.edge_counts().max()
    assert batch.senders.shape[1] == batches.width == board_graph.edge_bucket(widest, 32)
    for row_index, tokens in enumerate(batch.states):
        fen = data.fens[np.flatnonzero((data.states == tokens).all(1))[0]]
        row = by_fen[fen]
        board = chess.Board(fen)
        _, graphs = None, board_graph.encode_boards([board])
        n = graphs.edge_counts()[0]
        valued = {move_to_index(m): p for m, p in zip(row["moves"], row["win_probs"], strict=True)}
        mask = batch.target_mask[row_index]
        expected_mask = np.isin(graphs.actions, list(valued))
        # Loss only on the valued move edges: never an attack, padding or unvalued move.
        np.testing.assert_array_equal(mask[:n], expected_mask)
        assert not mask[n:].any()
        wanted = [bins.to_bins(np.float32(valued[a]), 32) for a in graphs.actions[expected_mask]]
        np.testing.assert_array_equal(batch.targets[row_index][:n][expected_mask], wanted)
    # Without av_partial the partial boards are left out, as in the row view.
    complete = BoardBatches(data, LoaderSettings("av", 32, batch_size=4, seed=0, prefetch=0))
    assert len(complete.view) == 12
    # BC's label is the best move's edge; SV is one item per board as before.
    bc = BoardBatches(data, LoaderSettings("bc", 32, batch_size=24, seed=0, prefetch=0))
    for board, label in zip(bc.view.board, bc.view.label, strict=True):
        start = bc.boards.graphs.offsets[board]
        assert bc.boards.graphs.actions[start + label] == data.best_actions[board]
    sv = BoardBatches(data, LoaderSettings("sv", 32, batch_size=4, seed=0, prefetch=0))
    np.testing.assert_array_equal(sv.view.label, make_view(data, "sv", 32).label)


def test_a_value_for_an_illegal_move_is_named(make_rows, shard_writer, tmp_path):
    rows = make_rows(3, seed=2)
    rows[1]["moves"][0] = "a1h8"  # an action, but not legal on that board
    # The loader's legality check (core/move_check.py) names it, with the file and row, before
    # the graphs are built.
    with pytest.raises(DataError, match=r"parquet: row 1 \(FEN .*\): move 'a1h8' is not legal"):
        BoardBatches(
            load_boards(str(shard_writer(rows, tmp_path, 1))), LoaderSettings("av", 32, 2, seed=0)
        )


def test_the_loss_counts_valued_move_edges_only(mixed):
    _, data = mixed
    config = tiny("av", num_bins=32)
    batch = next(
        BoardBatches(
            data, LoaderSettings("av", 32, batch_size=24, seed=1, prefetch=0, av_partial=True)
        )
    )
    params = noisy_params(config)
    loss = jax.jit(make_loss(config))
    value, metrics = loss(params, batch)
    log_probs = np.asarray(
        gateau.build(config).apply(
            params, batch.states, batch.senders, batch.receivers, batch.kinds
        )
    )
    mask = batch.target_mask
    nll = -np.take_along_axis(log_probs, batch.targets[..., None], -1)[..., 0]
    np.testing.assert_allclose(float(value), nll[mask].mean(), rtol=1e-5)
    np.testing.assert_allclose(float(metrics["values_per_board"]), mask.sum() / 24, rtol=1e-6)
    # Targets where the mask is off do not matter.
    scrambled = batch._replace(targets=np.where(mask, batch.targets, 7))
    # Exact on purpose: one compiled program on inputs of one shape, in which the masked-off
    # terms are exact zeros whatever their targets, so the sums are the same bits anywhere.
    assert float(loss(params, scrambled)[0]) == float(value)


def test_gateau_trains_checkpoints_and_predicts_through_the_trainer(synthetic_data, tmp_path):
    config = tiny("av", num_bins=16, batch_size=8, num_steps=6, log_every=2).replace(
        train={"checkpoint_every": 3, "eval_boards": 10, "eval_batches": 2, "eval_every": 0},
        data={"train": str(synthetic_data / "train"), "test": str(synthetic_data / "test")},
    )
    result = train(config, str(tmp_path), stop_after=3, log=lambda _: None)
    assert result.stopped_early and result.step == 3
    result = train(config, str(tmp_path), log=lambda _: None)
    assert result.step == 6 and math.isfinite(result.last_eval["test_loss"])
    assert 0 <= result.last_eval["action_accuracy"] <= 1
    predictor = Predictor.from_checkpoint(str(tmp_path))
    assert predictor.config.model.backbone == "gateau" and predictor.step == 6
    [(moves, values)] = predictor.move_values([chess.Board()])
    assert len(moves) == 20 and ((values >= 0) & (values <= 1)).all()


@pytest.mark.slow
def test_gateau_learns_real_action_values(annotated_data, tmp_path):
    """A small gateau on real Stockfish annotations of 900 boards, 120 steps of 32 boards:
    the test loss ends below log K and the predicted values rank Stockfish's. Measured
    here with EMA 0.99: test loss 3.21 (log K 3.47), Spearman 0.51."""
    config = config_lib.from_dict(
        {
            "model": {
                "backbone": "gateau",
                "num_layers": 3,
                "embedding_dim": 32,
                "num_heads": 4,
                "widening_factor": 2,
            },
            "train": {
                "target": "av",
                "num_bins": 32,
                "batch_size": 32,
                "num_steps": 120,
                "learning_rate": 2e-3,
                "ema_decay": 0.9,  # 120 steps: a 0.99 average would still hold the init
                "eval_every": 0,
                "eval_boards": 50,
                "checkpoint_every": 120,
            },
            "data": {
                "train": str(annotated_data / "train"),
                "test": str(annotated_data / "test"),
            },
        }
    )
    result = train(config, str(tmp_path), log=print)
    test_loss = result.last_eval["test_loss"]
    predictor = Predictor.from_checkpoint(str(tmp_path))
    test = load_boards(config.data.test)
    boards = [chess.Board(fen) for fen in test.fens]
    predicted = np.concatenate([v for _, v in predictor.move_values(boards)])
    labels = np.concatenate([test.move_win_probs(i) for i in range(test.num_boards)])
    correlation = spearmanr(predicted, labels).statistic
    print(f"test loss {test_loss:.3f} (log K {math.log(32):.3f}), Spearman {correlation:.3f}")
    assert test_loss < math.log(32) - 0.3
    assert correlation > 0.3


@pytest.mark.parametrize("target", ["av", "bc"])
def test_warm_up_compiles_the_shapes_a_game_uses(predictors, target):
    # The UCI engine warms its predictor up before the first move: a gateau model once failed
    # there (no transformer functions to compile), so `searchless-uci` could not load it.
    predictor = predictors[target]
    shapes = predictor.warm_up(max_boards=1)
    assert shapes == [(1, 128), (1, 192)]
    # and a board of either width is then valued with no further compilation error
    legal, _ = predictor.move_values([chess.Board()])[0]
    assert sorted(legal) == sorted(m.uci() for m in chess.Board().legal_moves)


@pytest.mark.slow
@pytest.mark.parametrize("target", ["av", "bc"])
def test_fixed_shapes_give_the_same_values_with_a_few_shapes(target):
    # A board wider than the warmed widths (218 moves) goes alone at the widest width, the
    # others in padded batches of 1 or 4: the values are those of unfixed shapes.
    config = tiny(target)
    params = noisy_params(config)
    free, fixed = Predictor(params, config, max_batch=64), Predictor(params, config, max_batch=64)
    wide = chess.Board("R6R/3Q4/1Q4Q1/4Q3/2Q4Q/Q4Q2/pp1Q4/kBNN1KB1 w - - 0 1")
    assert board_graph.encode_boards([wide]).edge_counts()[0] > 192
    shapes = fixed.fix_shapes(max_boards=4)
    assert shapes == [(1, 128), (1, 192), (4, 128), (4, 192), (1, 896)]
    boards = [*BOARDS[1:4], wide, chess.Board()]
    for batch in (boards, boards[:2], boards[3:4]):
        for (moves, ours), (same, theirs) in zip(
            fixed.move_values(batch), free.move_values(batch), strict=True
        ):
            assert moves == same
            np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)  # float32 padding
