"""Engine scores -> win probabilities (side to move's view), the Lichess way.

p = 0.5 + 0.5 * (2 / (1 + exp(-0.00368208 * cp)) - 1), which is sigmoid(0.00368208 * cp).
A mate for the side to move is 1.0, a mate against it 0.0; `mate == 0` means the side to
move is already mated (python-chess reports such a board as Mate(-0)) and is 0.0.
"""

from __future__ import annotations

import math

import numpy as np

LICHESS_CP_SCALE = 0.00368208


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
