import math

import numpy as np
import pytest

from core.move_metrics import BLUNDER_REGRET, is_best_action, kendall_tau, regret, summarize


def test_tau_of_identical_and_reversed_orders():
    truth = np.array([0.1, 0.4, 0.3, 0.9])
    assert kendall_tau(truth * 2, truth) == pytest.approx(1.0)
    assert kendall_tau(-truth, truth) == pytest.approx(-1.0)


def test_tau_by_hand_without_ties():
    # Pairs of (pred, truth): concordant unless orders disagree.
    # pred  = [1, 2, 3, 4], truth = [1, 3, 2, 4] -> 5 concordant, 1 discordant -> (5-1)/6.
    assert kendall_tau([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(4 / 6)


def test_tau_b_by_hand_with_ties():
    # pred = [1, 2, 3], truth = [1, 1, 2]: pairs (0,1) tied in truth only, (0,2) and (1,2)
    # concordant. tau_b = (C - D) / sqrt((n0 - n1)(n0 - n2)) = 2 / sqrt(3 * 2).
    assert kendall_tau([1, 2, 3], [1, 1, 2]) == pytest.approx(2 / math.sqrt(6))


def test_tau_is_on_values_not_on_argsort():
    # argsort of the predictions would be [2, 0, 1]; the values' ranks are [1, 2, 0].
    pred = np.array([0.5, 0.9, 0.1])
    truth = np.array([0.6, 0.8, 0.2])
    assert kendall_tau(pred, truth) == pytest.approx(1.0)
    assert kendall_tau(np.argsort(pred), truth) != pytest.approx(1.0)


def test_single_move_and_constant_values():
    assert kendall_tau([0.3], [0.9]) == 1.0
    assert math.isnan(kendall_tau([0.1, 0.2], [0.5, 0.5]))


def test_best_action_with_ties():
    truth = np.array([0.9, 0.2, 0.9])
    assert is_best_action(np.array([0.1, 0.0, 0.8]), truth)
    assert is_best_action(np.array([0.8, 0.0, 0.1]), truth)
    assert not is_best_action(np.array([0.1, 0.8, 0.0]), truth)


def test_summary():
    predicted = [np.array([0.9, 0.1]), np.array([0.2, 0.8, 0.5]), np.array([0.5])]
    truth = [np.array([0.7, 0.3]), np.array([0.6, 0.45, 0.5]), np.array([0.5])]
    summary = summarize(predicted, truth)
    assert summary["boards"] == 3
    assert summary["action_accuracy"] == pytest.approx(2 / 3)
    assert summary["kendall_tau"] == pytest.approx((1.0 - 1.0 + 1.0) / 3)
    assert summary["mean_abs_win_prob_error"] == pytest.approx(
        np.mean([0.2, 0.2, 0.4, 0.35, 0.0, 0.0])
    )
    # The second board's first choice (0.8) is worth 0.45 against the best move's 0.6.
    assert summary["mean_regret"] == pytest.approx(0.15 / 3)
    assert summary["blunder_share"] == 0.0 and 0.15 < BLUNDER_REGRET


def test_regret_of_the_first_choice():
    truth = np.array([0.9, 0.2, 0.9, 0.6])
    assert regret(np.array([0.1, 0.0, 0.8, 0.3]), truth) == 0.0  # a tie for the best
    assert regret(np.array([0.1, 0.0, 0.2, 0.3]), truth) == pytest.approx(0.3)
    assert regret(np.array([0.1, 0.9, 0.2, 0.3]), truth) == pytest.approx(0.7)
    blunder = summarize([np.array([0.1, 0.9]), np.array([0.9, 0.1])], [truth[:2], truth[:2]])
    assert blunder["blunder_share"] == pytest.approx(0.5) and 0.7 > BLUNDER_REGRET
    assert blunder["mean_regret"] == pytest.approx(0.35)


def test_shape_mismatch_is_an_error():
    with pytest.raises(ValueError):
        kendall_tau([1, 2], [1, 2, 3])
