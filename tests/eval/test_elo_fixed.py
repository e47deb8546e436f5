"""The Elo of one player against fixed-rated opponents, on results with known answers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from eval.elo.fixed_opponents import (
    RatedGame,
    expected_score,
    fit_against_fixed,
    games_for_half_width,
    summed,
)


def games(opponent: float, wins: int, draws: int, losses: int) -> list[RatedGame]:
    return (
        [RatedGame(opponent, 1.0)] * wins
        + [RatedGame(opponent, 0.5)] * draws
        + [RatedGame(opponent, 0.0)] * losses
    )


def test_half_the_points_against_1500_is_1500_with_a_symmetric_interval():
    for wins, draws in ((5, 0), (2, 6), (0, 10)):
        fit = fit_against_fixed(games(1500, wins, draws, wins))
        assert fit.elo == pytest.approx(1500, abs=1e-6)
        assert fit.upper - 1500 == pytest.approx(1500 - fit.lower, abs=1e-4)
        assert fit.describe().startswith("1500 [")


def test_a_score_gives_the_logistic_gap():
    # 75% against 1500: 1500 + 400 log10(3); 10% against 2000: 2000 - 400 log10(9).
    assert fit_against_fixed(games(1500, 3, 0, 1)).elo == pytest.approx(1690.85, abs=0.01)
    assert fit_against_fixed(games(2000, 1, 0, 9)).elo == pytest.approx(1618.30, abs=0.01)
    assert expected_score(1690.85, 1500) == pytest.approx(0.75, abs=1e-5)


def test_opponents_on_both_sides_balance():
    # A win against 1400 and a loss against 1600: 1500 by symmetry.
    fit = fit_against_fixed(games(1400, 1, 0, 0) + games(1600, 0, 0, 1))
    assert fit.elo == pytest.approx(1500, abs=1e-6)


def test_the_interval_shrinks_with_games_like_one_over_root_n():
    widths = [fit_against_fixed(games(1500, n, 0, n)).half_width for n in (5, 50, 500)]
    assert widths[0] > widths[1] > widths[2]
    # For many games the profile interval is the Fisher one: 1.96 * (400 / ln 10) / sqrt(n/4).
    assert widths[2] == pytest.approx(1.959964 * 400 / math.log(10) / math.sqrt(250), abs=0.2)
    # And games_for_half_width inverts it.
    assert games_for_half_width(0.5, widths[2]) == pytest.approx(1000, rel=0.01)


def test_a_lopsided_score_has_a_lopsided_interval():
    fit = fit_against_fixed(games(1500, 1, 0, 19))
    assert fit.lower < fit.elo < fit.upper
    assert fit.elo - fit.lower > fit.upper - fit.elo  # the long side is towards 0%


def test_zero_and_full_scores_are_reported_as_bounds():
    lost = fit_against_fixed(games(1350, 0, 0, 10))
    assert lost.elo is None and lost.bound == "upper" and lost.lower == -math.inf
    assert lost.upper < 1350 and lost.describe() == f"< {lost.upper:.0f}"
    # More losses push the bound down; the bound is where the games' likelihood is e^-1.92.
    assert fit_against_fixed(games(1350, 0, 0, 40)).upper < lost.upper
    assert 10 * math.log(1 - expected_score(lost.upper, 1350)) == pytest.approx(-1.9207, abs=1e-3)
    won = fit_against_fixed(games(1350, 10, 0, 0))
    assert won.elo is None and won.bound == "lower" and won.upper == math.inf
    assert won.lower - 1350 == pytest.approx(1350 - lost.upper, abs=1e-3)
    assert won.to_dict()["upper"] is None and won.to_dict()["bound"] == "lower"


def test_coverage_on_simulated_ladders():
    # A player of 1450 against 1350 and 1550 opponents, 60 games per run: the 95% interval
    # holds the truth in about 95% of runs (binomial noise on 400 runs: +-2.2%, 3 sigma).
    rng = np.random.default_rng(0)
    hits = 0
    for _ in range(400):
        played = []
        for opp in (1350, 1550):
            p = expected_score(1450, opp)
            played += [RatedGame(opp, float(s)) for s in rng.random(30) < p]
        fit = fit_against_fixed(played)
        hits += fit.elo is not None and fit.lower <= 1450 <= fit.upper
    assert 0.95 - 0.035 <= hits / 400 <= 0.95 + 0.035


def test_bad_input():
    with pytest.raises(ValueError, match="no games"):
        fit_against_fixed([])
    with pytest.raises(ValueError, match="score must be"):
        RatedGame(1500, 0.7)
    with pytest.raises(ValueError, match="confidence"):
        fit_against_fixed(games(1500, 1, 0, 1), confidence=1.0)


def test_summed_per_level():
    assert summed(games(1600, 1, 1, 0) + games(1400, 0, 0, 2)) == {1400: (2, 0.0), 1600: (2, 1.5)}
