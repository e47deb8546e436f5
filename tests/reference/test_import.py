"""A checkpoint the reference code wrote in the released layout, imported by
model.import_reference, predicts what the reference's own predictor predicts, and its agents
choose the moves of the reference's engines."""

from __future__ import annotations

import chess
import jax
import numpy as np
import pytest

from bench import oracle
from core.actions import NUM_ACTIONS, legal_actions, moves_to_indices
from eval.engines import NeuralAgent
from model.import_reference import main as import_main
from model.predictor import Predictor

TOLERANCE = 1e-4


def reference_log_probs(ref, predictor, params, sequences: np.ndarray) -> np.ndarray:
    """Their predict on their sequences, read at the last position as their engines do."""
    out = jax.jit(predictor.predict)(params=params, targets=sequences, rng=None)
    return np.asarray(out)[:, -1]


def reference_sequences(ref, fen: str, actions=None) -> np.ndarray:
    """Their engines' input: the tokenized board, the action (AV), a dummy last token."""
    state = ref.tokenizer.tokenize(fen).astype(np.int32)
    if actions is None:
        return np.concatenate([state, [0]])[None]
    rows = np.repeat(state[None], len(actions), axis=0)
    dummy = np.zeros((len(actions), 1), np.int32)
    return np.concatenate([rows, np.asarray(actions, np.int32)[:, None], dummy], axis=1)


@pytest.mark.parametrize("use_ema", [True, False], ids=["ema", "raw"])
def test_imported_av_values_equal_the_reference(ref, imported_run, real_boards, use_ema):
    run, predictor, params, ema = imported_run("av")
    ours = Predictor.from_checkpoint(run, use_ema=use_ema)
    assert ours.step == 12345 and ours.config.model.num_heads == 8
    values = oracle.bucket_values(ref, 128)
    fens = [b.fen() for b in real_boards]
    moves = [legal_actions(b) for b in real_boards]
    predicted = ours.action_values(fens, moves)
    worst = 0.0
    for fen, legal, mine in zip(fens, moves, predicted, strict=True):
        actions = [ref.utils.MOVE_TO_ACTION[m] for m in legal]
        log_probs = reference_log_probs(
            ref, predictor, ema if use_ema else params, reference_sequences(ref, fen, actions)
        )
        worst = max(worst, float(np.abs(np.exp(log_probs) @ values - mine).max()))
    assert worst <= TOLERANCE


@pytest.mark.parametrize("use_ema", [True, False], ids=["ema", "raw"])
def test_imported_sv_values_and_bc_log_probs_equal_the_reference(
    ref, imported_run, real_boards, use_ema
):
    fens = [b.fen() for b in real_boards]
    values = oracle.bucket_values(ref, 128)

    run, predictor, params, ema = imported_run("sv")
    mine = Predictor.from_checkpoint(run, use_ema=use_ema).state_values(fens)
    theirs = [
        np.exp(reference_log_probs(ref, predictor, ema if use_ema else params, s))[0] @ values
        for s in (reference_sequences(ref, fen) for fen in fens)
    ]
    assert np.abs(np.asarray(theirs) - mine).max() <= TOLERANCE

    run, predictor, params, ema = imported_run("bc")
    mine = Predictor.from_checkpoint(run, use_ema=use_ema).move_log_probs(fens)
    assert mine.shape == (len(fens), NUM_ACTIONS)
    for fen, row in zip(fens, mine, strict=True):
        theirs = reference_log_probs(
            ref, predictor, ema if use_ema else params, reference_sequences(ref, fen)
        )[0]
        assert np.abs(np.exp(theirs) - np.exp(row)).max() <= TOLERANCE
        # Log-probabilities too, where they are not vanishingly small.
        assert np.abs(theirs - row).max() <= 1e-3


def moves_leading_to_game_end(board: chess.Board) -> bool:
    """A legal move ends the game at once (mate, stalemate, dead position): the SV agent
    scores those successors by the rules (1 / 0.5) where the reference asks the network."""
    for move in board.legal_moves:
        board.push(move)
        over = board.is_checkmate() or board.is_stalemate() or board.is_insufficient_material()
        board.pop()
        if over:
            return True
    return False


@pytest.mark.parametrize("target", ["av", "sv", "bc"])
def test_agents_choose_the_reference_engines_moves(ref, imported_run, real_boards, target):
    run, predictor, params, _ = imported_run(target)
    engine_class = {
        "av": ref.neural_engines.ActionValueEngine,
        "sv": ref.neural_engines.StateValueEngine,
        "bc": ref.neural_engines.BCEngine,
    }[target]
    # Their engines load `params`, not the EMA (training_utils.load_parameters' default).
    engine = engine_class(
        return_buckets_values=oracle.bucket_values(ref, 128),
        predict_fn=ref.neural_engines.wrap_predict_fn(predictor, params, batch_size=32),
    )
    agent = NeuralAgent.from_checkpoint(run, use_ema=False)
    boards = real_boards
    if target == "sv":
        boards = [b for b in real_boards if not moves_leading_to_game_end(b)]
    assert len(boards) >= 25
    disagreements = []
    for board in boards:
        theirs = engine.play(board.copy()).uci()
        moves, scores = agent.scored_moves(board.copy())
        ours = moves[int(np.argmax(scores))]
        assert agent.choose_move(board.copy()).uci() == ours
        # Equal choices, unless two moves' scores are within float noise of each other.
        if ours != theirs and abs(scores[moves.index(ours)] - scores[moves.index(theirs)]) > 1e-6:
            disagreements.append((board.fen(), ours, theirs))
    assert not disagreements


def test_import_errors_are_one_line(ref, reference_model, imported_run, tmp_path, capsys):
    run, _, params, ema = imported_run("bc")
    released = str(tmp_path / "released")
    oracle.save_released(released, 7, *reference_model("av")[1:])

    cases = [
        ([released, "--target", "bc"], "--target bc needs a head over the 1968 actions"),
        ([released, "--target", "av", "--step", "8"], "no step 8; steps there: [7]"),
        ([str(tmp_path / "nothing"), "--target", "av"], "no checkpoint in the released layout"),
        ([released, "--target", "av", "--num-heads", "5"], "not divisible by model.num_heads 5"),
        ([run.replace("run", "checkpoint"), "--target", "sv"], "a behavioural-cloning model"),
    ]
    for args, message in cases:
        code = import_main([*args, "--out", str(tmp_path / "out")])
        err = capsys.readouterr().err.strip()
        assert code == 2 and message in err and len(err.splitlines()) == 1, (args, err)

    # A network no config here can hold: the reference with qk layer norm.
    config = oracle.transformer_config(ref, 1, 32, 128)
    config.apply_qk_layernorm = True
    qk = ref.transformer.build_transformer_predictor(config)
    qk_params = oracle.init_params(qk)
    oracle.save_released(str(tmp_path / "qk"), 3, qk_params, qk_params)
    code = import_main([str(tmp_path / "qk"), "--target", "av", "--out", str(tmp_path / "o2")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "not the released architecture" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "out").exists() and not (tmp_path / "o2").exists()


def test_imported_move_indices_are_the_references(ref, real_boards):
    for board in real_boards:
        moves = legal_actions(board)
        assert list(moves_to_indices(moves)) == [ref.utils.MOVE_TO_ACTION[m] for m in moves]
        ordered = [m.uci() for m in ref.engine.get_ordered_legal_moves(board)]
        assert moves == ordered
