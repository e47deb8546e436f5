"""A checkpoint the reference code wrote in the released layout, imported by
model.import_reference, predicts what the reference's own predictor predicts (raw and EMA
parameters), and its agents choose the moves of the reference's engines."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import chess
import numpy as np
import pytest

from bench import oracle
from core.actions import NUM_ACTIONS, legal_actions, moves_to_indices
from eval.agents.players import NeuralAgent
from model.import_reference import main as import_main
from model.predictor import Predictor

ROOT = pathlib.Path(__file__).resolve().parents[2]

TOLERANCE = 1e-4
ENGINE_BOARDS = 20


def reference_last_log_probs(ref, predictor, params, sequences: np.ndarray) -> np.ndarray:
    """Their predict on their sequences, read at the last position as their engines do
    (in batches of 256 rows: a single shape compiles)."""
    return oracle.predict_fn(predictor, params, batch_size=256)(sequences)[:, -1]


def reference_sequences(ref, fen: str, actions=None) -> np.ndarray:
    """Their engines' input: the tokenized board, the action (AV), a dummy last token."""
    state = ref.tokenizer.tokenize(fen).astype(np.int32)
    if actions is None:
        return np.concatenate([state, [0]])[None]
    rows = np.repeat(state[None], len(actions), axis=0)
    dummy = np.zeros((len(actions), 1), np.int32)
    return np.concatenate([rows, np.asarray(actions, np.int32)[:, None], dummy], axis=1)


@pytest.mark.slow
@pytest.mark.parametrize("target", ["av", "sv", "bc"])
def test_imported_predictions_equal_the_reference(ref, imported_run, real_boards, target):
    run, predictor, params, ema = imported_run(target)
    fens = [b.fen() for b in real_boards]
    moves = [legal_actions(b) for b in real_boards]
    if target == "av":
        actions = [[ref.utils.MOVE_TO_ACTION[m] for m in legal] for legal in moves]
        sequences = np.concatenate(
            [reference_sequences(ref, f, a) for f, a in zip(fens, actions, strict=True)]
        )
    else:
        sequences = np.concatenate([reference_sequences(ref, fen) for fen in fens])
    values = oracle.bucket_values(ref, 128)
    for use_ema, tree in ((True, ema), (False, params)):
        ours = Predictor.from_checkpoint(run, use_ema=use_ema)
        assert ours.step == 12345 and ours.config.model.num_heads == 8
        theirs = reference_last_log_probs(ref, predictor, tree, sequences)
        if target == "av":
            mine = np.concatenate(ours.action_values(fens, moves))
            assert np.abs(np.exp(theirs) @ values - mine).max() <= TOLERANCE
        elif target == "sv":
            mine = ours.state_values(fens)
            assert np.abs(np.exp(theirs) @ values - mine).max() <= TOLERANCE
        else:
            mine = ours.move_log_probs(fens)
            assert mine.shape == (len(fens), NUM_ACTIONS)
            assert np.abs(np.exp(theirs) - np.exp(mine)).max() <= TOLERANCE
            assert np.abs(theirs - mine).max() <= 1e-3  # log-probabilities too


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


@pytest.mark.slow
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
        predict_fn=oracle.predict_fn(predictor, params, batch_size=64),
    )
    agent = NeuralAgent.from_checkpoint(run, use_ema=False)
    boards = real_boards
    if target == "sv":
        boards = [b for b in real_boards if not moves_leading_to_game_end(b)]
    boards = boards[:ENGINE_BOARDS]
    assert len(boards) == ENGINE_BOARDS
    disagreements = []
    for board in boards:
        theirs = engine.play(board.copy()).uci()
        moves, scores = agent.scored_moves(board.copy())
        ours = moves[int(np.argmax(scores))]
        # Equal choices, unless two moves' scores are within float noise of each other.
        if ours != theirs and abs(scores[moves.index(ours)] - scores[moves.index(theirs)]) > 1e-6:
            disagreements.append((board.fen(), ours, theirs))
    assert not disagreements


def test_import_errors_are_one_line(ref, reference_model, imported_run, tmp_path, capsys):
    released = str(tmp_path / "released")
    oracle.save_released(released, 7, *reference_model("av")[1:])
    bc_run = imported_run("bc")[0]
    cases = [
        ([released, "--target", "bc"], "--target bc needs a head over the 1968 actions"),
        ([released, "--target", "av", "--step", "8"], "no step 8; steps there: [7]"),
        ([str(tmp_path / "nothing"), "--target", "av"], "no checkpoint in the released layout"),
        ([released, "--target", "av", "--num-heads", "5"], "not divisible by model.num_heads 5"),
        (
            [os.path.join(os.path.dirname(bc_run), "checkpoint"), "--target", "sv"],
            "a behavioural-cloning model",
        ),
        ([released, "--target", "av", "--out", bc_run], "already holds checkpoints"),
    ]
    for args, message in cases:
        out = [] if "--out" in args else ["--out", str(tmp_path / "out")]
        code = import_main([*args, *out])
        err = capsys.readouterr().err.strip()
        assert code == 2 and message in err and len(err.splitlines()) == 1, (args, err)

    # A network no config here can hold: the reference with qk layer norm.
    config = oracle.transformer_config(ref, 1, 32, 128)
    config.apply_qk_layernorm = True
    qk_params = oracle.init_params(ref.transformer.build_transformer_predictor(config))
    oracle.save_released(str(tmp_path / "qk"), 3, qk_params, qk_params)
    code = import_main([str(tmp_path / "qk"), "--target", "av", "--out", str(tmp_path / "o2")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "not the released architecture" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "out").exists() and not (tmp_path / "o2").exists()


def test_a_damaged_checkpoint_is_one_line_without_orbax_logs(ref, reference_model, tmp_path):
    # Every file of the parameter trees cut short. Orbax logs through absl and from its
    # threads, at exit too: only a process of its own shows all it prints.
    damaged = tmp_path / "damaged"
    oracle.save_released(str(damaged), 7, *reference_model("av")[1:])
    for path in damaged.rglob("*"):
        if path.is_file() and path.parent.name == "d":
            os.truncate(path, 50)
    done = subprocess.run(
        [sys.executable, "-m", "model.import_reference", str(damaged), "--target", "av"]
        + ["--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert done.returncode == 2
    assert lines[0].startswith(
        f"error: {damaged / '7' / 'params'}: not a readable orbax checkpoint"
    )
    assert not (tmp_path / "out").exists()


def test_move_indices_and_order_are_the_references(ref, real_boards):
    for board in real_boards:
        moves = legal_actions(board)
        assert list(moves_to_indices(moves)) == [ref.utils.MOVE_TO_ACTION[m] for m in moves]
        assert moves == [m.uci() for m in ref.engine.get_ordered_legal_moves(board)]
