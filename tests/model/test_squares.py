"""The square-token transformer (model/networks/squares.py): the board relations its attention
reads, a policy over the legal moves only that does not depend on the padding, one pass giving
every move its value, and training, checkpoints and prediction through the trainer."""

from __future__ import annotations

import functools
import math

import chess
import jax
import numpy as np
import pytest

from core import bins
from core.actions import legal_actions, moves_to_indices
from core.tokenizer import tokenize_batch
from model import config as config_lib
from model.config import ConfigError
from model.networks import board_graph, network, squares
from model.predictor import Predictor
from model.training.train import train

BOARDS = [
    chess.Board(),
    chess.Board("r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3"),
    chess.Board("r3k2r/pP4pp/8/3pP3/8/8/5p2/R3K2R b KQkq - 0 1"),  # castling, promotions
    chess.Board("6k1/5ppp/8/8/8/8/8/R5K1 w - - 0 1"),
    chess.Board("4k3/8/8/3pP3/8/8/8/4K3 w - d6 0 1"),  # en passant
]


def tiny(target: str, **model) -> config_lib.Config:
    return config_lib.from_dict(
        {
            "model": {
                "backbone": "squares",
                "num_layers": 2,
                "embedding_dim": 16,
                "num_heads": 2,
                "widening_factor": 2,
                "move_checks": True,
                "attack_bias": True,
                **model,
            },
            "train": {"target": target, "num_bins": 16, "seed": 3, "dtype": "float32"},
        }
    )


def noisy_params(config: config_lib.Config):
    """Random parameters (the heads and biases start at zero, which would hide masking and
    padding faults); shapes come from tracing, so nothing compiles."""
    rng = np.random.default_rng(1)
    return jax.tree_util.tree_map(
        lambda x: (0.3 * rng.standard_normal(x.shape)).astype(np.float32),
        network.param_shapes(config),
    )


@functools.cache
def _apply(config: config_lib.Config):
    return jax.jit(squares.build(config).apply)


def alone(config, params, board: chess.Board, width: int):
    """The network on this board by itself, padded to `width` edges."""
    graphs = board_graph.encode_boards([board])
    padded = board_graph.pad_edges(graphs, np.array([0]), width=width)
    out = _apply(config)(
        params,
        tokenize_batch([board.fen()]),
        padded["senders"],
        padded["receivers"],
        padded["kinds"],
    )
    return np.asarray(out[0]), graphs, padded["kinds"][0]


def test_relations_name_the_moves_and_attacks_between_squares():
    board = chess.Board("4k3/8/8/8/8/2n5/8/R3K3 w - - 0 1")
    graphs = board_graph.encode_boards([board])
    padded = board_graph.pad_edges(graphs, np.array([0]), width=128)
    table = np.asarray(squares.relations(padded["senders"], padded["receivers"], padded["kinds"]))
    assert table.shape == (1, 64, 64)
    move, mine, theirs = (
        1 + t for t in (board_graph.MOVE, board_graph.ATTACK_MINE, board_graph.ATTACK_THEIRS)
    )
    # [query = the square reached, key = the piece's square]; White to move: no mirror.
    assert table[0, chess.A5, chess.A1] == move  # the rook can go there
    assert table[0, chess.E1, chess.A1] == mine  # it defends its king, not a move
    assert table[0, chess.E2, chess.C3] == theirs  # the knight attacks e2
    assert table[0, chess.B5, chess.A1] == 0
    # Every edge of the board is in the table once, and nothing else is.
    edges = graphs.edge_counts()[0]
    assert (table > 0).sum() == edges


def test_the_policy_covers_the_legal_moves_only_whatever_the_padding():
    config = tiny("bc")
    params = noisy_params(config)
    predictor = Predictor(params, config, max_batch=64)
    fens = [b.fen() for b in BOARDS]
    rows = predictor.move_log_probs(fens)  # five boards padded together in one call
    for row, board in zip(rows, BOARDS, strict=True):
        legal = moves_to_indices(legal_actions(board))
        for width in (256, 384):
            own, _, kinds = alone(config, params, board, width)
            np.testing.assert_allclose(row[legal], own[: len(legal)], rtol=1e-5, atol=1e-6)
            moves = (kinds >= 0) & (
                board_graph.unpack_kind(np.maximum(kinds, 0))[2] == board_graph.MOVE
            )
            assert moves.sum() == len(legal) and np.isneginf(own[~moves]).all()
        assert np.isneginf(np.delete(row, legal)).all()
        np.testing.assert_allclose(np.exp(row[legal]).sum(), 1.0, rtol=1e-5)
        # Noisy weights give the moves different probabilities: the head reads its squares.
        assert np.ptp(row[legal]) > 1e-3


def test_values_per_move_and_per_board_match_the_network():
    for target in ("av", "sv"):
        config = tiny(target)
        params = noisy_params(config)
        predictor = Predictor(params, config, max_batch=64)
        if target == "av":
            for board, (moves, values) in zip(BOARDS, predictor.move_values(BOARDS), strict=True):
                own, graphs, _ = alone(config, params, board, 256)
                assert moves == legal_actions(board)
                expected = bins.expected_value(own[: graphs.num_moves[0]])
                np.testing.assert_allclose(values, expected, rtol=1e-5, atol=1e-6)
        else:
            expected = [bins.expected_value(alone(config, params, b, 256)[0]) for b in BOARDS]
            got = predictor.state_values([b.fen() for b in BOARDS])
            np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_the_check_and_attack_features_change_what_it_computes():
    board = BOARDS[3]  # Ra8 is a mate: the check bit is set on one move
    plain = tiny("bc", move_checks=False, attack_bias=False)
    shapes = network.param_shapes(plain)
    assert "check_embed" not in shapes and "relation_bias" not in shapes["~"]
    full = tiny("bc")
    params = noisy_params(full)
    with_features, _, _ = alone(full, params, board, 128)
    zeroed = jax.tree_util.tree_map(lambda x: x, params)
    zeroed["check_embed"] = {"embeddings": np.zeros_like(params["check_embed"]["embeddings"])}
    zeroed["~"] = dict(params["~"], relation_bias=np.zeros_like(params["~"]["relation_bias"]))
    plain_params = {k: v for k, v in zeroed.items() if k != "check_embed"}
    plain_params["~"] = {k: v for k, v in zeroed["~"].items() if k != "relation_bias"}
    without, _, _ = alone(plain, plain_params, board, 128)
    np.testing.assert_allclose(alone(full, zeroed, board, 128)[0], without, rtol=1e-5, atol=1e-6)
    assert not np.allclose(with_features, without, atol=1e-4)


def test_the_config_keeps_each_feature_to_its_backbone():
    config_lib.validate(tiny("bc"), check_data=False)
    with pytest.raises(ConfigError, match="attack_bias"):
        config_lib.validate(
            tiny("bc").replace(model={"backbone": "gateau", "move_checks": False}),
            check_data=False,
        )
    with pytest.raises(ConfigError, match="move_checks"):
        config_lib.validate(
            tiny("bc").replace(model={"backbone": "transformer", "attack_bias": False}),
            check_data=False,
        )
    with pytest.raises(ConfigError, match="squares loads boards whole"):
        config_lib.validate(tiny("bc").replace(data={"streaming": True}), check_data=False)


def test_it_trains_resumes_and_plays_through_the_trainer(synthetic_data, tmp_path):
    config = tiny("bc").replace(
        train={
            "batch_size": 8,
            "num_steps": 6,
            "log_every": 2,
            "checkpoint_every": 3,
            "eval_boards": 10,
            "eval_batches": 2,
            "eval_every": 0,
        },
        data={"train": str(synthetic_data / "train"), "test": str(synthetic_data / "test")},
    )
    result = train(config, str(tmp_path), stop_after=3, log=lambda _: None)
    assert result.stopped_early and result.step == 3
    result = train(config, str(tmp_path), log=lambda _: None)
    assert result.step == 6 and math.isfinite(result.last_eval["test_loss"])
    predictor = Predictor.from_checkpoint(str(tmp_path))
    assert predictor.config.model.backbone == "squares" and predictor.step == 6
    assert predictor.config.model.attack_bias
    log_probs = predictor.move_log_probs([chess.Board().fen()])[0]
    legal = moves_to_indices(legal_actions(chess.Board()))
    np.testing.assert_allclose(np.exp(log_probs[legal]).sum(), 1.0, rtol=1e-5)
