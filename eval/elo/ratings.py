"""Elo ratings by maximum likelihood over all games, with draws modelled as BayesElo does.

The model (Coulom's BayesElo, "drawelo" model), with f(x) = 1 / (1 + 10^(-x / 400)):

    P(white wins)  = f(elo_white - elo_black + advantage - drawelo)
    P(black wins)  = f(elo_black - elo_white - advantage - drawelo)
    P(draw)        = 1 - P(white wins) - P(black wins)

`advantage` (the first move's worth) and `drawelo` (how drawish the games are) are fitted
together with the ratings. Ratings are only defined up to a constant: one agent, the anchor,
is fixed to `anchor_elo` and every other rating is relative to it.

A perfect score has no finite maximum-likelihood rating, which is common in small tournaments
(Stockfish against a random mover). Like BayesElo's default prior, `prior_draws` virtual draws
are added between every pair of agents that met; they are counted as half a win and half a
loss in the plain logistic model so they pull rating differences towards 0 without biasing
`advantage` or `drawelo`. `prior_draws=0` gives the pure maximum-likelihood fit.

Confidence intervals come from the observed Fisher information: the inverse Hessian of the
negative log-likelihood (plus the prior's term, when there is one) at the optimum, the Laplace
approximation BayesElo's own intervals use too, for each rating relative to the anchor. They
are symmetric, `elo ± ci`; tests check their coverage on simulated tournaments.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit, log_expit
from scipy.stats import norm

# Natural logistic units per Elo point: f(x) in Elo is expit(x * ELO_TO_NATURAL).
ELO_TO_NATURAL = math.log(10.0) / 400.0
_WIN, _DRAW, _LOSS = 0, 1, 2
_SCORE_TO_OUTCOME = {1.0: _WIN, 0.5: _DRAW, 0.0: _LOSS}
# Bounds keep the optimiser away from overflow when the data pin a value to an edge.
_MAX_ABS_NATURAL = 4000.0 * ELO_TO_NATURAL
_MIN_DRAWELO_NATURAL = 1e-3 * ELO_TO_NATURAL


@dataclass(frozen=True)
class GameResult:
    """One game: the agents' names and White's score (1, 0.5 or 0)."""

    white: str
    black: str
    score: float

    def __post_init__(self) -> None:
        if self.score not in _SCORE_TO_OUTCOME:
            raise ValueError(f"score must be 1, 0.5 or 0 (White's view), got {self.score!r}")
        if self.white == self.black:
            raise ValueError(f"an agent cannot play itself: {self.white!r}")

    @classmethod
    def from_pgn_result(cls, white: str, black: str, result: str) -> GameResult:
        scores = {"1-0": 1.0, "1/2-1/2": 0.5, "0-1": 0.0}
        if result not in scores:
            raise ValueError(f"unfinished or unknown PGN result {result!r} ({white} vs {black})")
        return cls(white, black, scores[result])


@dataclass(frozen=True)
class EloConfig:
    anchor_elo: float = 0.0
    prior_draws: float = 2.0  # virtual draws per pair of agents that met; 0 = pure MLE
    confidence: float = 0.95  # two-sided level of the reported intervals
    fit_advantage: bool = True  # False: White's advantage fixed at 0


@dataclass
class PlayerRating:
    name: str
    elo: float
    ci: float  # half-width of the interval at EloConfig.confidence; 0 for the anchor
    games: int
    wins: int
    draws: int
    losses: int

    @property
    def score(self) -> float:
        """Points per game in [0, 1]."""
        return (self.wins + 0.5 * self.draws) / self.games if self.games else float("nan")


@dataclass
class EloFit:
    players: list[PlayerRating]  # strongest first
    anchor: str
    advantage: float  # Elo points White gains from moving first
    drawelo: float
    confidence: float
    log_likelihood: float  # of the real games only (no prior), at the fitted parameters
    covariance: dict[str, dict[str, float]] = field(repr=False)  # Elo^2, relative to anchor

    def rating(self, name: str) -> PlayerRating:
        for p in self.players:
            if p.name == name:
                return p
        raise KeyError(name)

    def to_dict(self) -> dict:
        out = asdict(self)
        for p, d in zip(self.players, out["players"], strict=True):
            d["score"] = p.score
        return out


def tally(games: Iterable[GameResult]) -> dict[str, tuple[int, int, int]]:
    """(wins, draws, losses) per agent over `games`."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for g in games:
        counts[g.white][_SCORE_TO_OUTCOME[g.score]] += 1
        counts[g.black][2 - _SCORE_TO_OUTCOME[g.score]] += 1
    return {name: (w, d, lo) for name, (w, d, lo) in counts.items()}


def _check_identifiable(
    names: Sequence[str], games: Sequence[GameResult], anchor: str, prior_draws: float
) -> None:
    neighbours: dict[str, set[str]] = defaultdict(set)
    for g in games:
        neighbours[g.white].add(g.black)
        neighbours[g.black].add(g.white)
    seen, todo = {anchor}, [anchor]
    while todo:
        for n in neighbours[todo.pop()] - seen:
            seen.add(n)
            todo.append(n)
    if missing := sorted(set(names) - seen):
        raise ValueError(f"no chain of games links {missing} to the anchor {anchor!r}")
    if prior_draws == 0:
        for name, (w, d, lo) in tally(games).items():
            if w + d == 0 or d + lo == 0:
                raise ValueError(
                    f"{name!r} scored {'0%' if w + d == 0 else '100%'}: its maximum-likelihood "
                    "rating is infinite; use prior_draws > 0"
                )


class _Likelihood:
    """Negative log-posterior and its gradient over x = (free ratings, advantage, drawelo),
    all in natural logistic units; identical games are aggregated into counts."""

    def __init__(self, names, games, anchor, prior_draws, fit_advantage):
        self.index = {n: i for i, n in enumerate(names)}
        self.n = len(names)
        self.anchor = self.index[anchor]
        self.free = [i for i in range(self.n) if i != self.anchor]
        self.fit_advantage = fit_advantage
        counts = Counter(
            (self.index[g.white], self.index[g.black], _SCORE_TO_OUTCOME[g.score]) for g in games
        )
        keys = np.array(list(counts), dtype=np.int64).reshape(-1, 3)
        self.white, self.black, outcome = keys[:, 0], keys[:, 1], keys[:, 2]
        weight = np.array(list(counts.values()), dtype=np.float64)
        self.w_win = weight * (outcome == _WIN)
        self.w_draw = weight * (outcome == _DRAW)
        self.w_loss = weight * (outcome == _LOSS)
        pairs = {tuple(sorted(p)) for p in zip(self.white, self.black, strict=True)}
        pair_array = np.array(sorted(pairs), dtype=np.int64).reshape(-1, 2)
        self.pi, self.pj = pair_array[:, 0], pair_array[:, 1]
        self.prior = float(prior_draws)

    def unpack(self, x: np.ndarray) -> tuple[np.ndarray, float, float]:
        r = np.zeros(self.n)
        r[self.free] = x[: len(self.free)]
        return r, float(x[-2]), float(x[-1])

    def __call__(self, x: np.ndarray, with_prior: bool = True) -> tuple[float, np.ndarray]:
        r, adv, de = self.unpack(x)
        d = r[self.white] - r[self.black] + adv
        ll = (
            self.w_win @ log_expit(d - de)
            + self.w_loss @ log_expit(-d - de)
            + self.w_draw @ (log_expit(de - d) + log_expit(d + de))
        )
        if n_draws := self.w_draw.sum():
            ll += n_draws * math.log(-math.expm1(-2.0 * de))
        g_d = (
            self.w_win * expit(de - d)
            - self.w_loss * expit(d + de)
            + self.w_draw * (expit(-d - de) - expit(d - de))
        )
        g_de = (
            -(self.w_win @ expit(de - d))
            - self.w_loss @ expit(d + de)
            + self.w_draw @ (expit(d - de) + expit(-d - de))
            + (self.w_draw.sum() * 2.0 / math.expm1(2.0 * de) if self.w_draw.any() else 0.0)
        )
        g_r = np.bincount(self.white, g_d, self.n) - np.bincount(self.black, g_d, self.n)
        g_adv = g_d.sum() if self.fit_advantage else 0.0
        if with_prior and self.prior:
            delta = r[self.pi] - r[self.pj]
            ll += 0.5 * self.prior * (log_expit(delta) + log_expit(-delta)).sum()
            g_delta = 0.5 * self.prior * (expit(-delta) - expit(delta))
            g_r += np.bincount(self.pi, g_delta, self.n) - np.bincount(self.pj, g_delta, self.n)
        grad = np.concatenate([g_r[self.free], [g_adv, g_de]])
        return -ll, -grad


def _hessian(fun, x: np.ndarray, free: np.ndarray, step: float = 1e-5) -> np.ndarray:
    """Central differences of the analytic gradient over the `free` coordinates, symmetrised."""
    idx = np.flatnonzero(free)
    h = np.empty((idx.size, idx.size))
    for row, k in enumerate(idx):
        e = np.zeros_like(x)
        e[k] = step
        h[row] = ((fun(x + e)[1] - fun(x - e)[1]) / (2 * step))[idx]
    return 0.5 * (h + h.T)


def fit_elo(games: Sequence[GameResult], anchor: str, config: EloConfig = EloConfig()) -> EloFit:
    """Fits every agent's Elo from `games`, `anchor` fixed at `config.anchor_elo`.

    Raises ValueError when the ratings are not identifiable: no games, an anchor that did not
    play, agents with no chain of games to the anchor, or (with `prior_draws=0`) a 0% or 100%
    score.
    """
    games = list(games)
    if not games:
        raise ValueError("no games to rate")
    names = sorted({g.white for g in games} | {g.black for g in games})
    if anchor not in names:
        raise ValueError(f"anchor {anchor!r} played no game; agents: {names}")
    _check_identifiable(names, games, anchor, config.prior_draws)
    lik = _Likelihood(names, games, anchor, config.prior_draws, config.fit_advantage)

    n_free = len(lik.free)
    x0 = np.concatenate([np.zeros(n_free), [0.0, 100.0 * ELO_TO_NATURAL]])
    bounds = [(-_MAX_ABS_NATURAL, _MAX_ABS_NATURAL)] * n_free
    bounds += [(-_MAX_ABS_NATURAL, _MAX_ABS_NATURAL) if config.fit_advantage else (0.0, 0.0)]
    bounds += [(_MIN_DRAWELO_NATURAL, _MAX_ABS_NATURAL)]
    res = minimize(lik, x0, jac=True, method="L-BFGS-B", bounds=bounds,
                   options={"maxiter": 10_000, "ftol": 1e-15, "gtol": 1e-10})  # fmt: skip
    x = res.x
    lo, hi = np.array(bounds).T
    # Gradient components pushing against an active bound are not a failure to converge.
    pushing = ((x <= lo + 1e-9) & (res.jac > 0)) | ((x >= hi - 1e-9) & (res.jac < 0))
    if not res.success and np.abs(np.where(pushing, 0.0, res.jac)).max() > 1e-4:
        raise RuntimeError(f"Elo fit did not converge: {res.message}")

    # Parameters pinned to a bound (no draws at all, or advantage not fitted) are held fixed.
    free_mask = np.ones(x.size, dtype=bool)
    free_mask[-2] = config.fit_advantage
    free_mask[-1] = x[-1] > 1e3 * _MIN_DRAWELO_NATURAL
    hess = _hessian(lik, x, free_mask)
    cov_free = np.linalg.pinv(hess)[:n_free, :n_free] / ELO_TO_NATURAL**2

    r, adv, de = lik.unpack(x)
    z = norm.ppf(0.5 + config.confidence / 2)
    var = np.zeros(lik.n)
    var[lik.free] = np.diag(cov_free)
    cov_full = np.zeros((lik.n, lik.n))
    cov_full[np.ix_(lik.free, lik.free)] = cov_free
    counts = tally(games)
    players = [
        PlayerRating(
            name=name,
            elo=config.anchor_elo + r[i] / ELO_TO_NATURAL,
            ci=float(z * math.sqrt(max(var[i], 0.0))),
            games=sum(counts[name]),
            wins=counts[name][0],
            draws=counts[name][1],
            losses=counts[name][2],
        )
        for i, name in enumerate(names)
    ]
    players.sort(key=lambda p: (-p.elo, p.name))
    return EloFit(
        players=players,
        anchor=anchor,
        advantage=adv / ELO_TO_NATURAL,
        drawelo=de / ELO_TO_NATURAL,
        confidence=config.confidence,
        log_likelihood=-lik(x, with_prior=False)[0],
        covariance={
            a: {b: float(cov_full[i, j]) for j, b in enumerate(names)} for i, a in enumerate(names)
        },
    )


def outcome_probabilities(
    elo_white: float, elo_black: float, advantage: float, drawelo: float
) -> tuple[float, float, float]:
    """(P(White wins), P(draw), P(Black wins)) under the model above."""
    d = (elo_white - elo_black + advantage) * ELO_TO_NATURAL
    de = drawelo * ELO_TO_NATURAL
    win, loss = float(expit(d - de)), float(expit(-d - de))
    return win, 1.0 - win - loss, loss


def format_table(fit: EloFit) -> str:
    """A plain-text table: rank, name, games, score %, W/D/L, Elo ± CI."""
    width = max(len("agent"), *(len(p.name) for p in fit.players))
    level = f"{fit.confidence:.0%}"
    lines = [
        f"{'#':>2}  {'agent':<{width}}  {'games':>5}  {'score':>6}  {'W/D/L':>11}  "
        f"{'Elo':>6}  ±{level} CI"
    ]
    for rank, p in enumerate(fit.players, 1):
        ci = "(anchor)" if p.name == fit.anchor else f"± {p.ci:.0f}"
        wdl = f"{p.wins}/{p.draws}/{p.losses}"
        lines.append(
            f"{rank:>2}  {p.name:<{width}}  {p.games:>5}  {100 * p.score:>5.1f}%  {wdl:>11}  "
            f"{p.elo:>6.0f}  {ci}"
        )
    lines.append(f"White advantage {fit.advantage:.0f} Elo, drawelo {fit.drawelo:.0f} Elo")
    return "\n".join(lines)
