import numpy as np
import pytest

from core.actions import MAX_LEGAL_MOVES, NUM_ACTIONS
from core.targets import AV, BC, SV, TARGETS, VALUE_TARGETS, target_kind


def test_each_name_has_one_kind():
    assert TARGETS == ("av", "sv", "bc")
    assert [target_kind(name).name for name in TARGETS] == list(TARGETS)
    assert VALUE_TARGETS == ("av", "sv")


def test_unknown_target_is_named():
    with pytest.raises(ValueError, match="unknown target 'q'.*'av', 'sv', 'bc'"):
        target_kind("q")


def test_heads_and_rows():
    assert (AV.output_size(32), SV.output_size(32), BC.output_size(32)) == (32, 32, NUM_ACTIONS)
    assert [k.takes_action for k in (AV, SV, BC)] == [True, False, False]
    assert [k.rows_per_board for k in (AV, SV, BC)] == [MAX_LEGAL_MOVES, MAX_LEGAL_MOVES, 1]
    assert [k.label_column for k in (AV, SV, BC)] == ["win_probs", "state_win_prob", "best_move"]


def test_policy_scores_sample_as_log_probabilities():
    scores = np.array([0.5, 0.25, 0.0])
    np.testing.assert_array_equal(AV.sampling_logits(scores), scores)
    logits = BC.sampling_logits(scores)
    np.testing.assert_allclose(logits[:2], np.log([0.5, 0.25]))
    assert np.isfinite(logits[2])  # a zero probability is a very low logit, not -inf
