"""The Elo fit on synthetic tournaments whose true strengths are known."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from eval.elo.ratings import (
    EloConfig,
    GameResult,
    fit_elo,
    format_table,
    outcome_probabilities,
    tally,
)

TRUE = {"a": 0.0, "b": 120.0, "c": 300.0, "d": -200.0}
ADVANTAGE, DRAWELO = 40.0, 180.0


def simulate(rng: np.random.Generator, true: dict[str, float], games_per_pair: int):
    """Games drawn from the BayesElo model itself, each pair playing both colours equally."""
    games = []
    for x, y in itertools.combinations(sorted(true), 2):
        for k in range(games_per_pair):
            white, black = (x, y) if k % 2 == 0 else (y, x)
            p = outcome_probabilities(true[white], true[black], ADVANTAGE, DRAWELO)
            score = rng.choice([1.0, 0.5, 0.0], p=p)
            games.append(GameResult(white, black, float(score)))
    return games


def test_recovers_known_strengths_within_their_intervals():
    games = simulate(np.random.default_rng(7), TRUE, games_per_pair=800)
    fit = fit_elo(games, anchor="a", config=EloConfig(prior_draws=0))
    assert fit.rating("a").elo == 0.0 and fit.rating("a").ci == 0.0
    for name, elo in TRUE.items():
        r = fit.rating(name)
        assert abs(r.elo - elo) <= r.ci, (name, r.elo, r.ci)
        if name != "a":
            assert 10 < r.ci < 60  # 800 games per pair pin ratings to tens of Elo
    assert abs(fit.advantage - ADVANTAGE) < 20
    assert abs(fit.drawelo - DRAWELO) < 20
    assert [p.name for p in fit.players] == ["c", "b", "a", "d"]


def test_interval_coverage_matches_its_level():
    """Over many simulated tournaments, ~95% of the 95% intervals hold the true rating."""
    rng = np.random.default_rng(11)
    inside = total = 0
    for _ in range(40):
        games = simulate(rng, TRUE, games_per_pair=100)
        fit = fit_elo(games, anchor="a", config=EloConfig(prior_draws=0))
        for name in ("b", "c", "d"):
            r = fit.rating(name)
            inside += abs(r.elo - TRUE[name]) <= r.ci
            total += 1
    assert 0.88 <= inside / total <= 1.0, inside / total


def test_anchor_shifts_every_rating():
    games = simulate(np.random.default_rng(3), TRUE, games_per_pair=200)
    fit0 = fit_elo(games, anchor="a", config=EloConfig(prior_draws=0))
    fit1 = fit_elo(games, anchor="b", config=EloConfig(prior_draws=0, anchor_elo=1500))
    shift = 1500 - fit0.rating("b").elo
    for name in TRUE:
        assert fit1.rating(name).elo == pytest.approx(fit0.rating(name).elo + shift, abs=0.5)
    assert fit1.rating("b").ci == 0.0 and fit1.rating("a").ci > 0


def test_symmetric_results_give_equal_ratings_and_no_advantage():
    games = [GameResult("x", "y", 1.0), GameResult("y", "x", 1.0)] * 5
    games += [GameResult("x", "y", 0.5), GameResult("y", "x", 0.5)] * 3
    fit = fit_elo(games, anchor="x")
    assert fit.rating("y").elo == pytest.approx(0.0, abs=1e-3)
    assert fit.advantage > 100  # White won every decisive game
    assert fit.drawelo > 0


def test_perfect_score_is_finite_with_the_prior_and_refused_without():
    games = [GameResult("strong", "weak", 1.0), GameResult("weak", "strong", 0.0)] * 10
    fit = fit_elo(games, anchor="weak")
    strong = fit.rating("strong")
    assert 200 < strong.elo < 2000 and np.isfinite(strong.ci)
    assert (strong.wins, strong.draws, strong.losses, strong.score) == (20, 0, 0, 1.0)
    more = fit_elo(games * 3, anchor="weak")
    assert more.rating("strong").elo > strong.elo  # more evidence, further apart
    with pytest.raises(ValueError, match="100%"):
        fit_elo(games, anchor="weak", config=EloConfig(prior_draws=0))


def test_unidentifiable_inputs_are_clear_errors():
    games = [GameResult("a", "b", 1.0), GameResult("c", "d", 0.5)]
    with pytest.raises(ValueError, match="no chain of games"):
        fit_elo(games, anchor="a")
    with pytest.raises(ValueError, match="played no game"):
        fit_elo(games, anchor="z")
    with pytest.raises(ValueError, match="no games"):
        fit_elo([], anchor="a")
    with pytest.raises(ValueError, match="score must be"):
        GameResult("a", "b", 0.7)
    with pytest.raises(ValueError, match="unfinished"):
        GameResult.from_pgn_result("a", "b", "*")


def test_tally_and_table():
    games = [GameResult("a", "b", 1.0), GameResult("b", "a", 0.5), GameResult("a", "b", 0.0)]
    assert tally(games) == {"a": (1, 1, 1), "b": (1, 1, 1)}
    table = format_table(fit_elo(games, anchor="a"))
    assert "(anchor)" in table and "1/1/1" in table and "50.0%" in table
