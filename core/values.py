"""Engine scores -> win probabilities (side to move's view), the Lichess way.

p = 0.5 + 0.5 * (2 / (1 + exp(-0.00368208 * cp)) - 1), which is sigmoid(0.00368208 * cp).
A mate for the side to move is 1.0, a mate against it 0.0; `mate == 0` means the side to
move is already mated (python-chess reports such a board as Mate(-0)) and is 0.0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

LICHESS_CP_SCALE = 0.00368208


def is_win_probability(p: np.ndarray | float) -> np.ndarray:
    """Whether each value may be stored as a win probability: a number in [0, 1] (NaN is
    not)."""
    p = np.asarray(p, dtype=np.float64)
    return (p >= 0.0) & (p <= 1.0)


def win_probability(cp: int | None = None, mate: int | None = None) -> float:
    """Win probability for the side to move from exactly one of `cp` or `mate`."""
    if (cp is None) == (mate is None):
        raise ValueError(f"give exactly one of cp and mate, got cp={cp!r}, mate={mate!r}")
    if mate is not None:
        return 1.0 if mate > 0 else 0.0
    # Written as the logistic so huge |cp| cannot overflow exp().
    x = LICHESS_CP_SCALE * cp
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def centipawns(win_prob: float) -> float:
    """The centipawn score whose win probability is `win_prob`: win_probability's inverse,
    -inf at 0 and +inf at 1 (a UCI engine reports a model's or a search's value with it)."""
    if win_prob <= 0.0:
        return -math.inf
    if win_prob >= 1.0:
        return math.inf
    return math.log(win_prob / (1.0 - win_prob)) / LICHESS_CP_SCALE


def win_probabilities(cp: np.ndarray, mate: np.ndarray) -> np.ndarray:
    """Vectorised win_probability: float arrays with NaN where a value is absent.

    Where `mate` is present it decides; otherwise `cp` does. NaN where both are absent.
    """
    cp = np.asarray(cp, dtype=np.float64)
    mate = np.asarray(mate, dtype=np.float64)
    from_cp = 0.5 * (1.0 + np.tanh(0.5 * LICHESS_CP_SCALE * cp))  # == sigmoid, overflow-free
    from_mate = np.where(mate > 0, 1.0, 0.0)
    return np.where(np.isnan(mate), from_cp, from_mate)


@dataclass(frozen=True)
class Score:
    """An engine score from the side to move's view: exactly one of `cp` and `mate`.

    `mate=N>0` mates in N, `mate=-N` is mated in N, `mate=0` is already mated. The labels'
    client (pipeline.labels.uci_client) and the oracle agent (eval.agents.players) both score moves
    with it.
    """

    cp: int | None = None
    mate: int | None = None

    @property
    def win_prob(self) -> float:
        return win_probability(cp=self.cp, mate=self.mate)

    def rank_key(self) -> tuple[int, int]:
        """Orders scores from worst to best: being mated soonest < cp < mating soonest."""
        if self.mate is None:
            return (1, self.cp)
        if self.mate > 0:
            return (2, -self.mate)
        return (0, -self.mate)


def best_score_index(scores: Sequence[Score]) -> int:
    """The tie rule of the labels and the oracle: the index of the best score by `rank_key`
    (the win probability, then the shortest mate or the highest cp); ties go to the first,
    so with moves in action-space order the choice is deterministic."""
    if not scores:
        raise ValueError("no scores to choose from")
    return max(range(len(scores)), key=lambda i: (scores[i].rank_key(), -i))
