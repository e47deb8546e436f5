"""A BC policy mixed with one ply of its own value head (`[play] successor_weight`): the mixing
rule, the agent that plays it, the spec and config that choose the weight, and the models that
cannot play it."""

from __future__ import annotations

import io
import math

import chess
import jax
import numpy as np
import pytest

from core.eval_sets import read_puzzles
from eval.agents.players import NeuralAgent, make_agent, successor_mixed
from eval.agents.specs import parse_agent_spec
from eval.uci.factories import NeuralFactory
from eval.uci.options import UciOptions, option_lines
from eval.uci.server import UciServer
from model import config as config_lib
from model.checkpoint import Checkpointer
from model.networks import gateau
from model.predictor import Predictor
from tests.conftest import ROOT, SAMPLE
from tests.eval.test_neural import REPEATING, board_after
from tests.eval.uci_inprocess import bestmoves

CPU = str(ROOT / "models" / "cpu")

MATE_IN_ONE = "6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1"  # Ra8#


def tiny(policy_value: bool = True, weight: float = 0.0) -> config_lib.Config:
    return config_lib.from_dict(
        {
            "model": {
                "backbone": "gateau",
                "num_layers": 1,
                "embedding_dim": 16,
                "num_heads": 2,
                "widening_factor": 2,
                "policy_value": policy_value,
            },
            "train": {"target": "bc", "num_bins": 16, "dtype": "float32"},
            "play": {"successor_weight": weight},
        }
    )


def predictor(config: config_lib.Config) -> Predictor:
    # Noisy weights: an untrained head may start uniform, under which every move scores alike.
    rng = np.random.default_rng(4)
    params = jax.tree_util.tree_map(
        lambda x: (0.3 * rng.standard_normal(x.shape)).astype(np.float32),
        gateau.param_shapes(config),
    )
    return Predictor(params, config, max_batch=64)


@pytest.fixture(scope="module")
def mixed():
    return predictor(tiny(weight=2.0))


def test_the_rule_is_the_policys_log_probability_plus_the_weighted_log_odds():
    probs = np.array([0.5, 0.3, 0.2])
    wins = np.array([0.2, 0.5, 0.9])
    for weight in (0.0, 0.5, 2.0):
        logits = np.log(probs) + weight * np.log(wins / (1 - wins))
        expected = np.exp(logits) / np.exp(logits).sum()
        np.testing.assert_allclose(successor_mixed(probs, wins, weight), expected, rtol=1e-12)
    np.testing.assert_allclose(successor_mixed(probs, wins, 0.0), probs, rtol=1e-12)
    # A large weight follows the values, as the paper's SV rule does.
    assert int(np.argmax(successor_mixed(probs, wins, 50.0))) == 2
    # Certain values are read at the clip, never as infinite odds.
    certain = successor_mixed(probs, np.array([0.0, 0.999999, 0.5]), 1.0)
    assert np.isfinite(certain).all() and certain[0] > 0


def test_a_move_that_mates_takes_the_whole_probability():
    probs = np.array([0.7, 0.1, 0.15, 0.05])
    wins = np.array([0.99, 1.0, 0.3, 1.0])  # moves 1 and 3 checkmate
    np.testing.assert_allclose(successor_mixed(probs, wins, 1.0), [0, 2 / 3, 0, 1 / 3], rtol=1e-12)


@pytest.mark.parametrize(
    "probs, wins, weight, message",
    [
        ([0.5, 0.5], [0.5], 1.0, "equal 1-D shapes"),
        ([0.5, 0.5], [0.5, 0.5], -1.0, "finite and >= 0"),
        ([0.5, 0.5], [0.5, 0.5], math.nan, "finite and >= 0"),
    ],
)
def test_the_rule_refuses_bad_arguments(probs, wins, weight, message):
    with pytest.raises(ValueError, match=message):
        successor_mixed(np.array(probs), np.array(wins), weight)


def test_the_agent_plays_the_mix_of_its_policy_and_its_value_heads_successors(mixed):
    board = board_after(["e2e4", "e7e5", "g1f3", "b8c6"])  # no move mates
    agent = NeuralAgent(mixed)
    assert agent.successor_weight == 2.0  # the model's own [play] weight
    moves, scores = agent.scored_moves(board)
    [(policy_moves, probs)] = mixed.move_values([board])
    assert moves == policy_moves
    # The value head, asked board by board: 1 - its value of the board after each move.
    wins = []
    for uci in moves:
        after = board.copy(stack=False)
        after.push_uci(uci)
        wins.append(1.0 - float(mixed.state_values([after.fen()])[0]))
    tolerance = {"rtol": 1e-4, "atol": 1e-7}  # float32 network outputs batched differently
    np.testing.assert_allclose(scores, successor_mixed(probs, np.array(wins), 2.0), **tolerance)
    assert agent.choose_move(board).uci() == moves[int(np.argmax(scores))]
    # Weight 0 is the policy alone.
    alone = NeuralAgent(mixed, successor_weight=0.0)
    np.testing.assert_allclose(alone.scored_moves(board)[1], probs, rtol=1e-6)


def test_the_mixed_agent_takes_a_mate_in_one_whatever_its_policy_says(mixed):
    board = chess.Board(MATE_IN_ONE)
    assert NeuralAgent(mixed).choose_move(board) == chess.Move.from_uci("a1a8")


def test_a_move_allowing_a_threefold_claim_is_valued_as_a_draw(mixed):
    board = board_after(REPEATING)
    claim = chess.Move.from_uci("f6g8")
    assert claim in board.legal_moves
    agent = NeuralAgent(mixed)
    moves, scores = agent.scored_moves(board)
    probs = dict(zip(*mixed.move_values([board])[0], strict=True))
    wins = mixed.successor_values(board, moves)
    i = moves.index(claim.uci())
    wins[i] = 0.5
    np.testing.assert_allclose(
        scores, successor_mixed(np.array([probs[m] for m in moves]), wins, 2.0), rtol=1e-5
    )
    unadjusted = NeuralAgent(mixed, repetition_workaround=False).scored_moves(board)[1]
    assert not np.isclose(unadjusted[i], scores[i])


def test_a_policy_without_a_value_head_cannot_mix(mixed):
    plain = predictor(tiny(policy_value=False))
    assert NeuralAgent(plain).successor_weight == 0.0
    with pytest.raises(ValueError, match="needs a BC policy with a value head"):
        NeuralAgent(plain, successor_weight=1.0)
    with pytest.raises(ValueError, match="finite and >= 0"):
        NeuralAgent(mixed, successor_weight=-0.5)


def test_the_config_refuses_a_weight_without_a_value_head_or_below_zero():
    with pytest.raises(config_lib.ConfigError, match="needs model.policy_value"):
        config_lib.validate(tiny(policy_value=False, weight=1.0), check_data=False)
    with pytest.raises(config_lib.ConfigError, match="play.successor_weight must be >= 0"):
        config_lib.validate(tiny(weight=-1.0), check_data=False)
    assert config_lib.validate(tiny(weight=1.5), check_data=False).play.successor_weight == 1.5
    with pytest.raises(config_lib.ConfigError, match="unknown key"):
        config_lib.from_dict({"play": {"succesor_weight": 1.0}})


def test_the_spec_sets_the_weight_and_checks_it(tmp_path):
    spec = parse_agent_spec("neural:runs/x,successor_weight=0.5")
    assert spec.options["successor_weight"] == "0.5"
    for bad in ("-1", "inf", "two"):
        with pytest.raises(ValueError, match="successor_weight"):
            parse_agent_spec(f"neural:runs/x,successor_weight={bad}")
    with pytest.raises(ValueError, match="unknown option 'successor_weight'"):
        parse_agent_spec("mcts:runs/x,successor_weight=1")


def test_a_saved_model_plays_with_its_weight_unless_the_spec_says_otherwise(tmp_path, mixed):
    checkpoints = Checkpointer(str(tmp_path / "run" / "checkpoints"), keep=1)
    checkpoints.save(1, None, mixed.params, None, {"step": 1, "config": mixed.config.to_dict()})
    checkpoints.close()
    assert make_agent(f"neural:{tmp_path / 'run'}").successor_weight == 2.0
    assert make_agent(f"neural:{tmp_path / 'run'},successor_weight=0").successor_weight == 0.0


# --- the UCI engine ------------------------------------------------------------------------


def _differing_board() -> tuple[chess.Board, str, str]:
    """A board of the bundled puzzles where models/cpu's mix and its policy alone differ."""
    mixed, alone = make_agent(f"neural:{CPU}"), make_agent(f"neural:{CPU},successor_weight=0")
    assert mixed.successor_weight > 0, "models/cpu plays with its [play] successor_weight"
    for puzzle in read_puzzles(str(SAMPLE / "puzzles.csv"), 60)[0]:
        board = chess.Board(puzzle.fen)
        board.push_uci(puzzle.moves[0])
        a, b = mixed.choose_move(board), alone.choose_move(board)
        if a != b:
            return board, a.uci(), b.uci()
    raise AssertionError("the mix and the policy agree on every sample puzzle")


def test_the_uci_engine_plays_the_models_weight_and_the_option_overrides_it():
    board, mixed_move, policy_move = _differing_board()
    out = io.StringIO()
    engine = UciServer(NeuralFactory(str(ROOT), warm_up=False), out, start_dir=str(ROOT))

    def move(*setup: str) -> str:
        for line in [*setup, f"position fen {board.fen()}", "go movetime 1000"]:
            engine.handle(line)
        return bestmoves(out)[-1]

    assert move() == mixed_move
    assert move("setoption name SuccessorWeight value 0") == policy_move
    assert move("setoption name SuccessorWeight value <empty>") == mixed_move
    engine.handle("setoption name SuccessorWeight value -1")
    assert "info string error: SuccessorWeight must be a finite number >= 0, got '-1'" in (
        out.getvalue().splitlines()
    )
    # A model without a value head beside its policy plays its policy and says why.
    engine.handle(f"setoption name WeightsFile value {ROOT / 'models' / 'cpu-transformer'}")
    engine.handle("setoption name SuccessorWeight value 1")
    move()
    assert any(
        line.startswith("info string SuccessorWeight ignored: successor_weight 1 needs a BC")
        for line in out.getvalue().splitlines()
    )
    engine.handle("quit")
    assert "option name SuccessorWeight type string default <empty>" in option_lines(UciOptions())
