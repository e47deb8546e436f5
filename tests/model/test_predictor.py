"""The predictor: batched predictions equal the network's, for every target."""

from __future__ import annotations

import chess
import jax
import numpy as np
import pytest

from core import bins
from core.actions import legal_actions, moves_to_indices
from core.tokenizer import tokenize_batch
from model import config as config_lib
from model import predictor as predictor_lib
from model.networks.transformer import build, init_params
from model.predictor import Predictor, TargetError

BOARDS = [
    chess.Board(),
    chess.Board("r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3"),
    chess.Board("6k1/5ppp/8/8/8/8/8/R5K1 w - - 0 1"),  # a1a8 mates
    chess.Board("k7/8/1Q6/8/8/8/8/7K w - - 0 1"),  # h1g1 (among others) stalemates
]


def random_params(config: config_lib.Config):
    """Initial parameters with noise on every leaf: the zero-initialised head would make
    every prediction the same, and these tests compare predictions."""
    params = init_params(config)
    leaves, tree = jax.tree_util.tree_flatten(params)
    keys = jax.random.split(jax.random.PRNGKey(9), len(leaves))
    noisy = [x + 0.2 * jax.random.normal(k, x.shape) for x, k in zip(leaves, keys, strict=True)]
    return jax.tree_util.tree_unflatten(tree, noisy)


def tiny(target: str) -> config_lib.Config:
    return config_lib.from_dict(
        {
            "model": {"num_layers": 1, "embedding_dim": 32, "num_heads": 2},
            # float32 on every device: the tests compare the predictor's paths with the
            # network applied directly, in float32.
            "train": {"target": target, "num_bins": 16, "seed": 4, "dtype": "float32"},
        }
    )


@pytest.fixture(scope="module")
def predictors() -> dict[str, Predictor]:
    """One predictor per target, shared so that each shape compiles once per module."""
    result = {}
    for target in ("av", "sv", "bc"):
        config = tiny(target)
        result[target] = Predictor(random_params(config), config, max_batch=64)
    return result


@pytest.fixture(params=["av", "sv", "bc"])
def predictor(request, predictors):
    return predictors[request.param]


def direct(predictor, fens, actions=None):
    """The network applied to exactly these rows, unpadded, as log-probs."""
    apply = jax.jit(build(predictor.config).apply)
    return np.asarray(apply(predictor.params, tokenize_batch(fens), actions))


def test_action_values_are_the_networks_expected_values(predictors):
    shared = predictors["av"]
    predictor = Predictor(shared.params, shared.config, max_batch=16)  # forces 3 chunks
    fens = [b.fen() for b in BOARDS[:2]]
    moves = [legal_actions(b) for b in BOARDS[:2]]  # 20 + 27 rows
    values = predictor.action_values(fens, moves)
    assert [len(v) for v in values] == [20, 27]
    rows = [(fen, m) for fen, ms in zip(fens, moves, strict=True) for m in ms]
    log_probs = direct(predictor, [f for f, _ in rows], moves_to_indices([m for _, m in rows]))
    expected = bins.expected_value(log_probs)
    np.testing.assert_allclose(np.concatenate(values), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("rows_per_pass", [None, 1, 5, 64])
def test_row_passes_compute_what_the_whole_batch_computes(predictors, rows_per_pass):
    shared = predictors["av"]
    predictor = Predictor(shared.params, shared.config, max_batch=64, rows_per_pass=rows_per_pass)
    assert predictor.rows_per_pass == rows_per_pass
    fens = [b.fen() for b in BOARDS[:2]]
    moves = [legal_actions(b) for b in BOARDS[:2]]  # 47 rows: passes of several sizes
    rows = [(fen, m) for fen, ms in zip(fens, moves, strict=True) for m in ms]
    expected = bins.expected_value(
        direct(predictor, [f for f, _ in rows], moves_to_indices([m for _, m in rows]))
    )
    values = np.concatenate(predictor.action_values(fens, moves))
    np.testing.assert_allclose(values, expected, rtol=1e-5, atol=1e-6)
    log_probs = predictor.log_probs(
        tokenize_batch([f for f, _ in rows]), moves_to_indices([m for _, m in rows])
    )
    assert log_probs.shape == (47, 16) and np.isfinite(log_probs).all()


@pytest.mark.parametrize("step", [1, 2, 5, 8])
def test_pass_sizes_cover_the_rows_exactly_in_few_shapes(step):
    shapes = set()
    for rows in range(0, 100):
        sizes = predictor_lib.pass_sizes(rows, step)
        assert sum(sizes) == rows and all(0 < size <= step for size in sizes)
        assert sizes == sorted(sizes, reverse=True)  # the largest passes first
        assert sizes.count(step) == rows // step
        shapes.update(sizes)
    assert shapes == {step} | {1 << bit for bit in range(step.bit_length()) if 1 << bit < step}
    assert predictor_lib.pass_sizes(13, 8) == [8, 4, 1]


def test_rows_per_pass_must_be_positive(predictors):
    shared = predictors["sv"]
    for bad in (0, -2):
        with pytest.raises(ValueError, match="rows_per_pass"):
            Predictor(shared.params, shared.config, rows_per_pass=bad)


def test_sizes_within_a_bucket_share_one_compilation():
    config = tiny("sv").replace(train={"num_bins": 13})  # an architecture of its own
    # Padded buckets, as on an accelerator (a CPU's row passes: the warm-up test below).
    predictor = Predictor(init_params(config), config, max_batch=64, rows_per_pass=None)
    for n in (17, 20, 31, 32):
        predictor.state_values([BOARDS[0].fen()] * n)
    assert predictor._values._cache_size() == 1
    # Another predictor of the same architecture reuses the compilation.
    second = Predictor(init_params(config, seed=5), config, max_batch=64, rows_per_pass=None)
    second.state_values(["8/8/8/8/8/8/8/K6k w - - 0 1"] * 25)
    assert predictor._values._cache_size() == 1


def test_state_values_and_log_probs_match_the_network(predictors):
    fens = [b.fen() for b in BOARDS]
    sv, bc = predictors["sv"], predictors["bc"]
    np.testing.assert_allclose(
        sv.state_values(fens), bins.expected_value(direct(sv, fens)), rtol=1e-5
    )
    log_probs = bc.move_log_probs(fens)
    assert log_probs.shape == (4, 1968)
    np.testing.assert_allclose(log_probs, direct(bc, fens), rtol=1e-5, atol=1e-6)
    raw = sv.log_probs(tokenize_batch(fens))
    np.testing.assert_allclose(raw, direct(sv, fens), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="actions exactly"):
        sv.log_probs(tokenize_batch(fens), np.zeros(4, int))


def test_log_probs_and_values_come_from_one_pass_and_equal_the_separate_calls(predictors):
    av, sv = predictors["av"], predictors["sv"]
    fens = [b.fen() for b in BOARDS[:2]]
    moves = [legal_actions(b) for b in BOARDS[:2]]
    states = np.repeat(tokenize_batch(fens), [len(m) for m in moves], axis=0)
    actions = moves_to_indices(np.concatenate(moves))
    log_probs, values = av.log_probs_and_values(states, actions)
    # Each call is its own jitted program (log_probs alone, or with the expected values), and
    # XLA may fuse and order them differently per CPU: equal up to float32 rounding, no more.
    np.testing.assert_allclose(log_probs, av.log_probs(states, actions), rtol=1e-6, atol=1e-6)
    # action_values scores a board's moves through the one-board forward (the first block
    # projects the board once): other matrix shapes, so the last bits may differ by CPU
    # (seen here: 1.2e-7 on an AMD EPYC).
    separate = np.concatenate(av.action_values(fens, moves))
    np.testing.assert_allclose(values, separate, rtol=1e-6, atol=1e-7)
    log_probs, values = sv.log_probs_and_values(tokenize_batch(fens))
    np.testing.assert_allclose(values, sv.state_values(fens), rtol=1e-6, atol=1e-7)
    with pytest.raises(TargetError, match="AV or SV"):
        predictors["bc"].log_probs_and_values(tokenize_batch(fens))


def test_move_values_score_every_legal_move_in_action_order(predictor):
    results = predictor.move_values(BOARDS)
    for board, (moves, scores) in zip(BOARDS, results, strict=True):
        assert moves == legal_actions(board)
        assert scores.shape == (len(moves),)
        assert np.all((scores >= 0) & (scores <= 1))
        if predictor.config.target == "bc":
            np.testing.assert_allclose(scores.sum(), 1.0, rtol=1e-5)
    best = predictor.best_moves(BOARDS)
    assert all(m in legal_actions(b) for m, b in zip(best, BOARDS, strict=True))


def test_state_value_policy_knows_mate_and_stalemate(predictors):
    predictor = predictors["sv"]
    (mate_moves, mate_scores), (stale_moves, stale_scores) = predictor.move_values(BOARDS[2:])
    assert mate_scores[mate_moves.index("a1a8")] == 1.0
    assert stale_scores[stale_moves.index("h1g1")] == 0.5
    assert predictor.best_moves([BOARDS[2]]) == ["a1a8"]


def test_a_board_without_moves_gets_an_empty_score(predictor):
    mated = chess.Board("R5k1/5ppp/8/8/8/8/8/6K1 b - - 1 1")
    [(moves, scores)] = predictor.move_values([mated])
    assert moves == [] and scores.shape == (0,)


def test_asking_the_wrong_target_is_a_clear_error(predictors):
    predictor = predictors["av"]
    with pytest.raises(TargetError, match="state_values needs a model trained for target 'sv'"):
        predictor.state_values([BOARDS[0].fen()])
    with pytest.raises(TargetError, match="'bc'"):
        predictor.move_log_probs([BOARDS[0].fen()])


@pytest.mark.parametrize(
    "target, rows_per_pass, shapes",
    [
        # Padded buckets: up to 218 rows for AV (moves) and SV (successors) in chunks of 64.
        ("av", None, [16, 32, 64]),
        ("sv", None, [16, 32, 64]),
        ("bc", None, [16]),  # one row per board
        # Row passes (a CPU's default): full passes, the rest in powers of two below.
        ("av", 4, [1, 2, 4]),
        ("sv", 6, [1, 2, 4, 6]),
    ],
)
def test_warm_up_compiles_every_shape_a_one_board_move_can_need(target, rows_per_pass, shapes):
    # An architecture of its own per case (num_bins), so no other test has compiled its
    # shapes; max_batch 64 keeps the compilations few and splits the 218-move board.
    num_bins = 11 if rows_per_pass is None else 12
    config = tiny(target).replace(train={"num_bins": num_bins})
    predictor = Predictor(random_params(config), config, max_batch=64, rows_per_pass=rows_per_pass)
    fn = predictor._scoring_fn()
    assert predictor.warm_up(max_boards=1) == shapes
    compiled = fn._cache_size()
    assert compiled == len(shapes)
    # Positions with 1, 2, 20, 48 and 218 legal moves: no new compilation.
    boards = [
        chess.Board("k7/8/8/8/8/8/5PPP/5RK1 b - - 0 1"),  # ...one king move
        chess.Board("7k/8/6QK/8/8/8/8/8 b - - 0 1"),
        chess.Board(),
        chess.Board("r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1"),
        chess.Board("R6R/3Q4/1Q4Q1/4Q3/2Q4Q/Q4Q2/pp1Q4/kBNN1KB1 w - - 0 1"),
    ]
    assert [b.legal_moves.count() for b in boards][2:] == [20, 48, 218]
    for board in boards:
        predictor.move_values([board])
    assert fn._cache_size() == compiled


def test_counters_beyond_three_digits_are_clamped_for_the_model(predictors):
    late = chess.Board("4k3/8/8/8/8/8/4P3/4K3 b - - 1200 1000")
    same = chess.Board("4k3/8/8/8/8/8/4P3/4K3 b - - 999 999")
    for target, predictor in predictors.items():
        # SV scores successor boards, whose fullmove number is one more: 1000 after Black.
        [(moves, scores)] = predictor.move_values([late])
        [(_, expected)] = predictor.move_values([same])
        assert len(moves) == 5, target
        assert late.fen().endswith("1200 1000")  # the board itself is untouched
        # Exact on purpose: the clamped board is tokenized to the very tokens of `same`, and
        # the two calls run one compiled program on inputs of one shape, so any difference
        # means the clamping differs, not rounding.
        np.testing.assert_array_equal(scores, expected)
