import json
import math
import pathlib
import shutil
import subprocess
import sys

import chess
import chess.engine
import jax
import numpy as np
import pytest

from core.actions import legal_actions
from core.schema import read_boards
from eval.agents.players import NeuralAgent, make_agent
from eval.metrics import main as metrics_main
from eval.puzzles import main as puzzles_main
from model.config import Config
from model.networks.transformer import init_params
from model.predictor import Predictor

ROOT = pathlib.Path(__file__).resolve().parents[2]
REPEATING = ("g1f3", "g8f6", "f3g1", "f6g8", "g1f3", "g8f6", "f3g1")  # ...Ng8 allows a claim


def board_after(moves) -> chess.Board:
    board = chess.Board()
    for uci in moves:
        board.push_uci(uci)
    return board


@pytest.fixture(scope="module")
def predictors():
    """Untrained one-layer predictors of each target with random weights, built in memory
    (one layer: the agent's logic is under test here, and compiling it is quick). Noise is
    added to every parameter because the initialiser may start the head at a uniform output,
    under which every move would score the same."""
    out = {}
    rng = np.random.default_rng(1)
    for target in ("av", "sv", "bc"):
        config = Config().replace(train={"target": target}, model={"num_layers": 1})
        params = jax.tree_util.tree_map(
            lambda p: p + rng.normal(0.0, 0.05, p.shape).astype(p.dtype),
            init_params(config, seed=1),
        )
        out[target] = Predictor(params, config)
    return out


@pytest.mark.parametrize("target", ["av", "sv", "bc"])
def test_neural_agent_plays_the_predictors_best_move(predictors, target):
    predictor = predictors[target]
    agent = NeuralAgent(predictor, name=f"neural-{target}")
    boards = [
        chess.Board(),
        chess.Board("r1bqkbnr/pppp1ppp/2n5/4p3/2B1P3/5Q2/PPPP1PPP/RNB1K1NR w KQkq - 2 4"),
    ]
    # With no repetition on the board the argmax is the predictor's own best move.
    assert [agent.choose_move(b).uci() for b in boards] == predictor.best_moves(boards)


@pytest.mark.parametrize("target", ["av", "sv", "bc"])
def test_sampling_is_seeded_and_legal(predictors, target):
    board = chess.Board()
    games = []
    for _ in range(2):
        agent = NeuralAgent(predictors[target], temperature=1.0, seed=5)
        games.append([agent.choose_move(board).uci() for _ in range(30)])
    assert games[0] == games[1]
    assert set(games[0]) <= set(legal_actions(board))
    assert len(set(games[0])) > 1  # it does sample


def test_repetition_workaround_only_for_value_targets(predictors):
    board = board_after(REPEATING)
    for target, applies in (("av", True), ("sv", True), ("bc", False)):
        moves, scores = NeuralAgent(predictors[target]).scored_moves(board)
        assert (scores[moves.index("f6g8")] == 0.5) == applies
        _, raw = NeuralAgent(predictors[target], repetition_workaround=False).scored_moves(board)
        assert raw[moves.index("f6g8")] != 0.5


# --- a model trained here (session fixture: real Stockfish labels, real training) ----------


@pytest.mark.slow
def test_neural_spec_loads_the_checkpoint(trained_run):
    with make_agent(f"neural:{trained_run}") as agent:
        assert agent.target == "av" and agent.name == f"neural:{trained_run}"
        board = chess.Board()
        assert agent.choose_move(board) in board.legal_moves
        ema = agent.scored_moves(board)[1]
    with make_agent(f"neural:{trained_run},ema=false,temperature=0.5,name=raw") as raw:
        assert raw.name == "raw" and raw.temperature == 0.5
        assert not np.allclose(raw.scored_moves(board)[1], ema)


@pytest.mark.slow
def test_metrics_cli_on_the_trained_model(trained_run, annotated, tmp_path, capsys):
    out = tmp_path / "metrics.json"
    argv = ["--checkpoint", str(trained_run), "--data", str(annotated / "test"), "--quiet"]
    assert metrics_main([*argv, "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert json.loads(capsys.readouterr().out) == result
    test = read_boards(str(annotated / "test"))
    assert result["boards"] == test.num_rows == 20
    assert result["target"] == "av" and result["step"] == 80
    # One log-loss example per (board, move); training has pushed it below uniform.
    assert result["log_loss_examples"] == sum(len(m) for m in test.column("moves").to_pylist())
    assert result["log_loss"] < result["uniform_log_loss"] == pytest.approx(math.log(128))
    assert 0 <= result["action_accuracy"] <= 1
    assert 0 < result["mean_abs_win_prob_error"] < 0.5
    assert -1 <= result["kendall_tau"] <= 1
    assert metrics_main([*argv, "--max-boards", "5"]) == 0
    assert json.loads(capsys.readouterr().out)["boards"] == 5


def test_metrics_cli_reports_missing_data(tmp_path, capsys):
    argv = ["--checkpoint", str(tmp_path), "--data", str(tmp_path / "none"), "--quiet"]
    assert metrics_main(argv) == 1
    assert "no annotated board shards" in capsys.readouterr().err


@pytest.mark.slow
def test_puzzles_cli_with_the_trained_model(trained_run, tmp_path, shared_data):
    puzzles = (
        shared_data / "puzzles" / "lichess_puzzles_10k_fen_moves_rating__jorgenwh_alpha-nonzero.csv"
    )
    out = tmp_path / "p.json"
    argv = ["--agent", f"neural:{trained_run}", "--puzzles", str(puzzles), "--num", "10"]
    assert puzzles_main([*argv, "--out", str(out), "--quiet"]) == 0
    [result] = json.loads(out.read_text())["agents"]
    assert result["total"] == 10 and len(result["puzzles"]) == 10


@pytest.mark.slow
def test_every_consumer_skips_an_incomplete_checkpoint(trained_run, annotated, tmp_path, capsys):
    """A later step's directory left empty: the neural agent (eval.puzzles, suites,
    tournament), eval.metrics and the UCI engine all load step 80, with one warning line."""
    run = tmp_path / "run"
    shutil.copytree(trained_run, run)
    (run / "checkpoints" / "500").mkdir()
    with make_agent(f"neural:{run}") as agent:
        assert agent.predictor.step == 80
    capsys.readouterr()
    argv = ["--checkpoint", str(run), "--data", str(annotated / "test"), "--quiet"]
    assert metrics_main([*argv, "--max-boards", "3"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["step"] == 80
    [warning] = captured.err.splitlines()
    assert warning == (
        f"warning: {run / 'checkpoints' / '500'} is an incomplete checkpoint (no ema_params, "
        "meta): skipped, using step 80"
    )
    command = [sys.executable, "-m", "eval.uci", "--checkpoint", str(run)]
    engine = chess.engine.SimpleEngine.popen_uci(command, cwd=ROOT, stderr=subprocess.DEVNULL)
    try:
        board = chess.Board()
        assert engine.play(board, chess.engine.Limit(nodes=1)).move in board.legal_moves
    finally:
        engine.quit()
