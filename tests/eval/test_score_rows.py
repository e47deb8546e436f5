"""eval.metrics.score_rows: one network pass per input, yet the same scores as the predictor's
move_values and the same losses as its raw log-probabilities."""

import random

import chess
import jax
import numpy as np
import pytest

from core.actions import legal_actions, moves_to_indices
from core.bins import to_bins
from core.tokenizer import tokenize_batch
from eval.metrics import score_rows
from model.config import Config
from model.networks.transformer import init_params
from model.predictor import Predictor


def rows_of_random_games(num: int, seed: int) -> list[dict]:
    """Schema rows of positions from seeded random games, with made-up (seeded) values."""
    rng = random.Random(seed)
    rows = []
    while len(rows) < num:
        board = chess.Board()
        for _ in range(rng.randint(0, 60)):
            board.push(rng.choice(list(board.legal_moves)))
            if board.is_game_over():
                break
        moves = legal_actions(board)
        if not moves:
            continue
        win_probs = [rng.random() for _ in moves]
        rows.append(
            {
                "fen": board.fen(),
                "moves": moves,
                "win_probs": win_probs,
                "best_move": moves[int(np.argmax(win_probs))],
                "state_win_prob": max(win_probs),
            }
        )
    return rows


@pytest.fixture(scope="module")
def rows():
    return rows_of_random_games(12, seed=5)


def predictor(target: str) -> Predictor:
    # Noise on every parameter: the zero-initialised head would score every move the same.
    config = Config().replace(train={"target": target}, model={"num_layers": 1})
    rng = np.random.default_rng(2)
    params = jax.tree_util.tree_map(
        lambda p: p + rng.normal(0.0, 0.05, p.shape).astype(p.dtype), init_params(config, seed=2)
    )
    return Predictor(params, config)


@pytest.mark.parametrize("target", ["av", "sv", "bc"])
def test_scores_and_losses_match_the_predictor(rows, target):
    model = predictor(target)
    scores, losses = score_rows(model, rows)

    expected = model.move_values([chess.Board(row["fen"]) for row in rows])
    assert len(scores) == len(rows)
    for row, got, (moves, want) in zip(rows, scores, expected, strict=True):
        assert moves == row["moves"]
        # AV: score_rows takes its values from the pass that also gives the losses, and
        # move_values from the one-board forward; other compiled programs may round the last
        # float32 bits differently per CPU.
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)

    fens = [row["fen"] for row in rows]
    if target == "bc":
        log_probs = model.move_log_probs(fens)
        labels = moves_to_indices([row["best_move"] for row in rows])
    elif target == "sv":
        log_probs = model.log_probs(tokenize_batch(fens))
        labels = to_bins(np.array([row["state_win_prob"] for row in rows]), model.config.num_bins)
    else:
        lengths = [len(row["moves"]) for row in rows]
        states = np.repeat(tokenize_batch(fens), lengths, axis=0)
        actions = moves_to_indices(np.concatenate([row["moves"] for row in rows]))
        log_probs = model.log_probs(states, actions)
        labels = to_bins(np.concatenate([row["win_probs"] for row in rows]), model.config.num_bins)
    assert len(losses) == (sum(lengths) if target == "av" else len(rows))
    # AV: the losses come from log_probs_and_values, a program of its own (see above).
    np.testing.assert_allclose(
        losses, -log_probs[np.arange(len(labels)), labels], rtol=1e-6, atol=1e-6
    )
    assert (losses > 0).all()


def test_moves_out_of_action_order_are_refused(rows):
    shuffled = dict(rows[0], moves=list(reversed(rows[0]["moves"])))
    with pytest.raises(ValueError, match="not its legal moves in action-space order"):
        score_rows(predictor("bc"), [shuffled])
