"""The paper's per-board metrics: action accuracy and Kendall's tau of predicted action values,
and the regret of the first choice: the win probability it gives up against the best move, which
a game punishes where accuracy counts a near-best move as a miss.

Pure functions on arrays, shared by the trainer's periodic evaluation (accuracy and tau) and
`eval.metrics` (all of them), so both judge a model by one rule. Values are win probabilities
from the side to move's view, one per legal move.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy.stats import kendalltau

# A first choice that gives up more win probability than this against the best move is a
# blunder (a piece, or a won position, lost).
BLUNDER_REGRET = 0.2


def _pair(predicted, truth) -> tuple[np.ndarray, np.ndarray]:
    predicted = np.asarray(predicted, dtype=np.float64)
    truth = np.asarray(truth, dtype=np.float64)
    if predicted.shape != truth.shape or predicted.ndim != 1 or predicted.size == 0:
        raise ValueError(
            f"need two equal, non-empty 1-D arrays, got {predicted.shape} and {truth.shape}"
        )
    return predicted, truth


def is_best_action(predicted: np.ndarray, truth: np.ndarray) -> bool:
    """Whether the move the prediction ranks first is among the truth's best (ties count)."""
    predicted, truth = _pair(predicted, truth)
    return bool(truth[int(np.argmax(predicted))] >= truth.max())


def regret(predicted: np.ndarray, truth: np.ndarray) -> float:
    """The true win probability the prediction's first choice gives up against the best move
    (0 when it is among the best)."""
    predicted, truth = _pair(predicted, truth)
    return float(truth.max() - truth[int(np.argmax(predicted))])


def kendall_tau(predicted: np.ndarray, truth: np.ndarray) -> float:
    """Kendall's tau-b between predicted and true values of one board's legal moves.

    The rank correlation of the values themselves (the paper's code correlates argsort
    outputs, which is not the rank correlation). 1.0 for a single legal move; NaN when
    either side is constant, where the correlation is undefined.
    """
    predicted, truth = _pair(predicted, truth)
    if predicted.size == 1:
        return 1.0
    if np.all(predicted == predicted[0]) or np.all(truth == truth[0]):
        return math.nan
    return float(kendalltau(predicted, truth).statistic)


def summarize(predicted: Sequence[np.ndarray], truth: Sequence[np.ndarray]) -> dict:
    """Action accuracy, mean Kendall's tau, mean regret, the share of blunders (a regret over
    BLUNDER_REGRET) and mean absolute win-probability error over boards."""
    if len(predicted) != len(truth):
        raise ValueError("predicted and truth hold different numbers of boards")
    accuracy = [is_best_action(p, t) for p, t in zip(predicted, truth, strict=True)]
    taus = np.array([kendall_tau(p, t) for p, t in zip(predicted, truth, strict=True)])
    errors = (
        np.concatenate(
            [np.abs(np.asarray(p) - np.asarray(t)) for p, t in zip(predicted, truth, strict=True)]
        )
        if predicted
        else np.zeros(0)
    )
    regrets = np.array([regret(p, t) for p, t in zip(predicted, truth, strict=True)])
    defined = ~np.isnan(taus)
    return {
        "boards": len(predicted),
        "action_accuracy": float(np.mean(accuracy)) if accuracy else math.nan,
        "mean_regret": float(regrets.mean()) if regrets.size else math.nan,
        "blunder_share": float((regrets > BLUNDER_REGRET).mean()) if regrets.size else math.nan,
        "kendall_tau": float(taus[defined].mean()) if defined.any() else math.nan,
        "kendall_tau_boards": int(defined.sum()),
        "mean_abs_win_prob_error": float(errors.mean()) if errors.size else math.nan,
    }
