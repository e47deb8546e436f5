"""One player's Elo from games against opponents of known, fixed rating.

The logistic model of Elo: a player rated r scores

    E(r; R) = 1 / (1 + 10^((R - r) / 400))

on average against an opponent rated R. A game's score s (1, 1/2 or 0) contributes
s * log E + (1 - s) * log(1 - E) to the log-likelihood, so a draw counts as half a win and
half a loss (the performance-rating model Ordo and FIDE's tables use). The log-likelihood is
concave in r: the maximum-likelihood rating solves sum(s_i) = sum(E(r; R_i)), found by
bracketing.

The interval is the profile-likelihood one: every r with 2 * (L(r_hat) - L(r)) <= the chi-square
quantile with one degree of freedom at `confidence`. Unlike the Fisher interval it is
asymmetric where the score is lopsided, which is where ladders against a floor of opponents
end up.

A 0% (or 100%) score has no finite maximum: the likelihood grows towards -inf (+inf). The fit
then reports no estimate, only the bound the same likelihood ratio gives: the rating below
which (above which) the observed games lie within the interval, and the other end infinite.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy.optimize import brentq
from scipy.special import log_expit
from scipy.stats import chi2

from eval.elo.ratings import ELO_TO_NATURAL

# How far beyond the opponents the root searches look: an Elo gap of 4000 is a score of
# 1e-10, far past anything a finite set of games can tell apart.
_SEARCH_SPAN = 4000.0


@dataclass(frozen=True)
class RatedGame:
    """One game: the opponent's fixed rating and the player's score (1, 0.5 or 0)."""

    opponent_elo: float
    score: float

    def __post_init__(self) -> None:
        if self.score not in (0.0, 0.5, 1.0):
            raise ValueError(f"score must be 1, 0.5 or 0, got {self.score!r}")
        if not math.isfinite(self.opponent_elo):
            raise ValueError(f"opponent rating must be finite, got {self.opponent_elo!r}")


@dataclass(frozen=True)
class FixedFit:
    """The fit: `elo` is None exactly when the score is 0% or 100% (then `bound` names the
    finite end, "upper" for 0% and "lower" for 100%)."""

    elo: float | None
    lower: float  # -inf when unbounded below
    upper: float  # +inf when unbounded above
    games: int
    points: float
    confidence: float

    @property
    def score(self) -> float:
        return self.points / self.games

    @property
    def bound(self) -> str | None:
        if self.elo is not None:
            return None
        return "upper" if self.points == 0 else "lower"

    @property
    def half_width(self) -> float:
        """Half the interval's width (inf while one end is open)."""
        return (self.upper - self.lower) / 2

    def describe(self) -> str:
        """`1234 [1180, 1290]`, `< 1100` or `> 2900`."""
        if self.bound == "upper":
            return f"< {self.upper:.0f}"
        if self.bound == "lower":
            return f"> {self.lower:.0f}"
        return f"{self.elo:.0f} [{self.lower:.0f}, {self.upper:.0f}]"

    def to_dict(self) -> dict:
        out = asdict(self)
        for key in ("lower", "upper"):
            out[key] = None if math.isinf(out[key]) else out[key]
        return out | {"score": self.score, "bound": self.bound, "half_width": self.half_width}


def expected_score(elo: float, opponent_elo: float) -> float:
    """E(elo; opponent_elo) of the logistic Elo model."""
    return 1.0 / (1.0 + 10.0 ** ((opponent_elo - elo) / 400.0))


def _log_likelihood(r: float, opponents: np.ndarray, scores: np.ndarray) -> float:
    d = (r - opponents) * ELO_TO_NATURAL
    return float(scores @ log_expit(d) + (1.0 - scores) @ log_expit(-d))


def fit_against_fixed(games: Iterable[RatedGame], confidence: float = 0.95) -> FixedFit:
    """The maximum-likelihood rating and its profile-likelihood interval (module docstring).
    ValueError for no games or a confidence outside (0, 1)."""
    games = list(games)
    if not games:
        raise ValueError("no games to rate")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    opponents = np.array([g.opponent_elo for g in games], dtype=np.float64)
    scores = np.array([g.score for g in games], dtype=np.float64)
    points, n = float(scores.sum()), len(games)
    lo_edge = float(opponents.min()) - _SEARCH_SPAN
    hi_edge = float(opponents.max()) + _SEARCH_SPAN
    drop = chi2.ppf(confidence, df=1) / 2  # the log-likelihood may fall this far

    def ll(r: float) -> float:
        return _log_likelihood(r, opponents, scores)

    if points == 0 or points == n:
        # The supremum, 0, lies at -inf (all lost) or +inf (all won).
        bound = brentq(lambda r: ll(r) + drop, lo_edge, hi_edge, xtol=1e-6)
        lower, upper = (-math.inf, bound) if points == 0 else (bound, math.inf)
        return FixedFit(None, lower, upper, n, points, confidence)

    elo = brentq(
        lambda r: points - sum(expected_score(r, o) for o in opponents),
        lo_edge,
        hi_edge,
        xtol=1e-9,
    )
    top = ll(elo)
    lower = brentq(lambda r: ll(r) - top + drop, lo_edge, elo, xtol=1e-6)
    upper = brentq(lambda r: ll(r) - top + drop, elo, hi_edge, xtol=1e-6)
    return FixedFit(elo, lower, upper, n, points, confidence)


def games_for_half_width(score: float, half_width: float, confidence: float = 0.95) -> float:
    """About how many games at `score` (against opponents rated alike) give an interval of
    +-`half_width`: the Fisher information of n games is n * p * (1 - p) * (ln 10 / 400)^2."""
    p = min(max(score, 0.02), 0.98)  # a lopsided score so far is not a reason to give up
    z = math.sqrt(chi2.ppf(confidence, df=1))
    return (z / (half_width * ELO_TO_NATURAL)) ** 2 / (p * (1 - p))


def summed(games: Sequence[RatedGame]) -> dict[float, tuple[int, float]]:
    """Per opponent rating: (games, points), in rating order."""
    out: dict[float, tuple[int, float]] = {}
    for g in sorted(games, key=lambda g: g.opponent_elo):
        n, pts = out.get(g.opponent_elo, (0, 0.0))
        out[g.opponent_elo] = (n + 1, pts + g.score)
    return out
