"""Evaluation during training: test loss and accuracy, and how the EMA parameters' moves and
values agree with Stockfish's on a fixed sample of test boards.

What a board can measure depends on how it was annotated. Action accuracy and Kendall's tau
rank every legal move, so they need a board with a value for each (an action-values split) and
at least two moves (one move ranks itself perfectly). A board of one root search (`--mode
search`, Lichess evaluations: a best move and a state value, `partial`) is measured by its best
move (top-1 agreement) and its value. Each metric carries the number of boards it used; one
measured on fewer than `min_boards` is reported as n/a rather than as the split's: a perfect
score on the three boards with a single legal move measured nothing.
"""

from __future__ import annotations

import dataclasses
import math

import chess
import jax
import numpy as np

from core.actions import indices_to_moves
from core.move_metrics import summarize
from model.config import Config
from model.data.loader import BoardData
from model.data.train_data import loader_settings, make_batches
from model.predictor import Predictor
from model.training.step import Placement, jitted

# The fewest boards a metric is reported on (fewer when train.eval_boards asks for fewer).
MIN_BOARDS = 20
# (result key, its words in the log line); each key has a "<key>_boards" count beside it.
METRICS = (
    ("action_accuracy", "action accuracy"),
    ("kendall_tau", "Kendall tau"),
    ("best_move_agreement", "best move"),
    ("state_value_error", "value error"),
)


def _eligible(test: BoardData) -> np.ndarray:
    """Boards with anything to compare against: a best move, a state value or move values."""
    has_moves = np.diff(test.pair_offsets) > 0
    return np.flatnonzero(has_moves | (test.best_actions >= 0) | np.isfinite(test.state_win_probs))


class Evaluator:
    """Test loss and accuracy on fixed test batches; on a fixed sample of test boards, action
    accuracy and Kendall's tau (boards with every move valued), best-move agreement and the
    state value's mean absolute error (boards with a best move, a state value)."""

    def __init__(self, config: Config, test: BoardData, placement: Placement):
        t = config.train
        self.config = config
        self.placement = placement
        self.min_boards = max(1, min(MIN_BOARDS, t.eval_boards))
        # Fixed test batches: drawn uniformly, on this thread.
        settings = dataclasses.replace(loader_settings(config), sampler="uniform", prefetch=0)
        batches = make_batches(config, test, settings)
        self.batches = [placement.global_batch(next(batches)) for _ in range(t.eval_batches)]
        self.step = jitted(config.model, t, placement).evaluate
        eligible = _eligible(test)
        rng = np.random.default_rng(t.seed)
        chosen = np.sort(rng.choice(eligible, min(t.eval_boards, len(eligible)), replace=False))
        self.boards = [chess.Board(test.fens[i]) for i in chosen]
        # Per chosen board: every move's value (None unless all are valued), best move, value.
        self.move_truth = [
            None
            if test.partial[i] or test.pair_offsets[i + 1] == test.pair_offsets[i]
            else dict(zip(test.legal_moves(i), test.move_win_probs(i), strict=True))
            for i in chosen
        ]
        best = test.best_actions[chosen]
        self.best_moves = [
            str(m) if a >= 0 else None
            for a, m in zip(best, indices_to_moves(np.maximum(best, 0)), strict=True)
        ]
        self.state_values = test.state_win_probs[chosen].astype(np.float64)
        # A BC model scores moves by probability: it has no value to compare.
        self.has_values = config.target_kind.move_score != "policy"
        self.predictor: Predictor | None = None

    def __call__(self, params) -> dict[str, float | int | None]:
        sums: dict[str, float] = {}
        for batch in self.batches:
            for k, v in self.step(params, batch).items():
                sums[k] = sums.get(k, 0.0) + float(v)
        result: dict[str, float | int | None] = {
            f"test_{k}": v / len(self.batches) for k, v in sums.items()
        }
        host_params = jax.device_get(params)
        if self.predictor is None:
            self.predictor = Predictor(host_params, self.config)
        else:
            self.predictor.params = jax.device_put(host_params, jax.local_devices()[0])
        predictions = self.predictor.move_values(self.boards)
        result.update(self._ranking(predictions))
        result.update(self._best_and_value(predictions))
        result["eval_boards"] = len(self.boards)
        result["eval_min_boards"] = self.min_boards
        return result

    def _measured(self, key: str, value: float, boards: int) -> dict:
        """`key` and `<key>_boards`; the value None (n/a) on fewer than min_boards boards."""
        enough = boards >= self.min_boards and not math.isnan(value)
        return {key: float(value) if enough else None, f"{key}_boards": boards}

    def _ranking(self, predictions) -> dict:
        """Action accuracy and Kendall's tau over the boards with every move valued."""
        predicted, truth = [], []
        for (moves, scores), values in zip(predictions, self.move_truth, strict=True):
            if values is not None and len(moves) >= 2:
                predicted.append(scores)
                truth.append(np.array([values[m] for m in moves], np.float64))
        summary = summarize(predicted, truth)
        n = summary["boards"]
        return (
            self._measured("action_accuracy", summary["action_accuracy"], n)
            | self._measured("kendall_tau", summary["kendall_tau"], summary["kendall_tau_boards"])
            | self._measured("mean_abs_win_prob_error", summary["mean_abs_win_prob_error"], n)
        )

    def _best_and_value(self, predictions) -> dict:
        """Top-1 agreement with the annotated best move (boards with two or more legal
        moves), and the mean absolute error of the board's value (its best move's score)."""
        agree, errors = [], []
        for (moves, scores), best, value in zip(
            predictions, self.best_moves, self.state_values, strict=True
        ):
            if not moves:
                continue
            top = int(np.argmax(scores))
            if best is not None and len(moves) >= 2:
                agree.append(moves[top] == best)
            if self.has_values and math.isfinite(value):
                errors.append(abs(float(scores[top]) - value))
        return self._measured(
            "best_move_agreement", float(np.mean(agree)) if agree else math.nan, len(agree)
        ) | self._measured(
            "state_value_error", float(np.mean(errors)) if errors else math.nan, len(errors)
        )


def format_eval(result: dict) -> str:
    """`test loss 2.1 | acc 0.31 | action accuracy 0.412 (480 boards) | ... | value error
    n/a (3 boards)`: each board metric with its count, n/a where too few boards had it."""
    parts = [f"test loss {result['test_loss']:.4f}", f"acc {result['test_accuracy']:.3f}"]
    for key, words in METRICS:
        boards = result.get(f"{key}_boards", 0)
        value = result.get(key)
        shown = "n/a" if value is None else f"{value:.3f}"
        parts.append(f"{words} {shown} ({boards} board{'s' if boards != 1 else ''})")
    return " | ".join(parts)
