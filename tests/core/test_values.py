import math

import chess.engine
import numpy as np
import pytest

from core.values import Score, best_score_index, centipawns, win_probabilities, win_probability


def lichess_formula(cp):
    return 0.5 + 0.5 * (2 / (1 + math.exp(-0.00368208 * cp)) - 1)


@pytest.mark.parametrize("cp", [-2000, -350, -1, 0, 1, 35, 100, 800, 5000])
def test_centipawns_follow_the_lichess_formula(cp):
    assert win_probability(cp=cp) == pytest.approx(lichess_formula(cp), abs=1e-12)
    if abs(cp) <= 1000:  # python-chess clamps its Lichess model to +-1000 cp
        expectation = chess.engine.Cp(cp).wdl(model="lichess").expectation()
        assert win_probability(cp=cp) == pytest.approx(expectation, abs=1e-3)


@pytest.mark.parametrize("cp", [-2000, -350, -1, 0, 1, 35, 100, 800])
def test_centipawns_invert_the_win_probability(cp):
    assert centipawns(win_probability(cp=cp)) == pytest.approx(cp, abs=1e-6)


def test_centipawns_of_certain_results_are_infinite():
    assert centipawns(1.0) == math.inf and centipawns(0.0) == -math.inf


def test_even_is_one_half_and_symmetry():
    assert win_probability(cp=0) == 0.5
    assert win_probability(cp=123) + win_probability(cp=-123) == pytest.approx(1.0)


def test_huge_scores_do_not_overflow():
    assert win_probability(cp=10**6) == 1.0
    assert win_probability(cp=-(10**6)) == 0.0


@pytest.mark.parametrize("mate, p", [(1, 1.0), (12, 1.0), (-1, 0.0), (-30, 0.0), (0, 0.0)])
def test_mates(mate, p):
    assert win_probability(mate=mate) == p


def test_mate_zero_is_what_python_chess_reports_for_a_mated_board():
    score = chess.engine.Mate(-0)
    assert score.mate() == 0
    assert win_probability(mate=score.mate()) == 0.0


@pytest.mark.parametrize("kwargs", [{}, {"cp": 1, "mate": 1}])
def test_exactly_one_score(kwargs):
    with pytest.raises(ValueError, match="exactly one"):
        win_probability(**kwargs)


def test_vectorised_matches_scalar():
    cp = np.array([-300, 0, np.nan, np.nan, 57, np.nan])
    mate = np.array([np.nan, np.nan, 3, -2, np.nan, 0])
    expected = [win_probability(cp=-300), 0.5, 1.0, 0.0, win_probability(cp=57), 0.0]
    np.testing.assert_allclose(win_probabilities(cp, mate), expected, atol=1e-12)


def test_best_score_index_is_the_labels_and_the_oracles_tie_rule():
    scores = [Score(cp=30), Score(mate=5), Score(mate=-1), Score(mate=2), Score(mate=2)]
    assert best_score_index(scores) == 3  # the shortest mate, the first of equals
    assert best_score_index([Score(mate=0), Score(mate=-3), Score(cp=-900)]) == 2
    assert best_score_index([Score(cp=10), Score(cp=10)]) == 0
    with pytest.raises(ValueError):
        best_score_index([])
