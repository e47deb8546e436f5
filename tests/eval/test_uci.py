"""The UCI engine: the protocol loop with real agents, full games against real Stockfish through
python-chess's engine client, malformed input, and a freshly trained model playing over UCI."""

from __future__ import annotations

import io
import pathlib
import subprocess
import sys

import chess
import chess.engine
import pytest

from core.values import win_probability
from eval.engines import RandomAgent
from eval.uci import UciEngine, UciOptions, parse_position, win_prob_to_cp

ROOT = pathlib.Path(__file__).resolve().parents[2]


class Recorder:
    """A factory of real random agents that remembers the options each was built with."""

    def __init__(self):
        self.built: list[UciOptions] = []
        self.agents: list[RandomAgent] = []

    def __call__(self, options: UciOptions) -> RandomAgent:
        self.built.append(options)
        agent = RandomAgent(seed=options.seed)
        agent.closed = False
        agent.close = lambda a=agent: setattr(a, "closed", True)
        self.agents.append(agent)
        return agent


def session(lines: list[str], factory=None) -> tuple[list[str], UciEngine]:
    out = io.StringIO()
    engine = UciEngine(factory or Recorder(), out)
    engine.run(lines)
    return out.getvalue().splitlines(), engine


def test_handshake_and_options():
    out, _ = session(["uci", "isready", "quit", "isready"])
    assert out[0].startswith("id name ") and out[1].startswith("id author ")
    options = [line for line in out if line.startswith("option name ")]
    names = {line.split()[2] for line in options}
    assert {"Temperature", "RepetitionWorkaround", "UseEMA", "Seed"} <= names
    assert out.index("uciok") == len(out) - 2 and out[-1] == "readyok"  # nothing after quit


def test_go_answers_at_once_with_a_legal_move_for_any_time_control():
    goes = ["go", "go wtime 300000 btime 300000 winc 0 binc 0", "go movetime 50", "go depth 20"]
    goes += ["go nodes 1000", "go movestogo 40 wtime 1 btime 1", "go mate 3"]
    for go in goes:
        out, engine = session(["position startpos moves e2e4 c7c5 g1f3", go])
        [bestmove] = out
        move = chess.Move.from_uci(bestmove.split()[1])
        assert engine.board.is_legal(move), (go, bestmove)


def test_infinite_and_ponder_wait_for_stop():
    out, _ = session(["position startpos", "go infinite", "isready"])
    assert out == ["readyok"]
    out, _ = session(["position startpos", "go infinite", "isready", "stop", "stop"])
    assert out[0] == "readyok" and out[1].startswith("bestmove ") and len(out) == 2
    out, _ = session(["position startpos moves e2e4", "go ponder wtime 10", "ponderhit"])
    assert len(out) == 1 and out[0].startswith("bestmove ")


def test_position_keeps_the_whole_history():
    shuffle = "g1f3 g8f6 f3g1 f6g8 g1f3 g8f6 f3g1 f6g8"
    _, engine = session([f"position startpos moves {shuffle}"])
    assert len(engine.board.move_stack) == 8 and engine.board.is_repetition(3)
    fen = "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3"
    _, engine = session([f"position fen {fen} moves f1b5 a7a6"])
    assert engine.board.root().fen() == fen and [m.uci() for m in engine.board.move_stack] == [
        "f1b5",
        "a7a6",
    ]
    assert parse_position(["startpos"]).fen() == chess.STARTING_FEN


def test_malformed_input_is_reported_and_the_engine_keeps_running():
    lines = [
        "position startpos moves e2e4",
        "xyzzy 1 2 3",  # unknown command
        "position startpos moves e2e4 e2e4",  # illegal move: previous position kept
        "position fen not/a/fen w - - 0 1",  # unparsable FEN
        "position fen 8/8/8/8/8/8/8/8 w - - 0 1",  # parses, but no kings
        "position",
        "position sideways",
        "setoption name Temperature value hot",
        "setoption name Temperature value -0.5",
        "setoption name RepetitionWorkaround value maybe",
        "setoption name NoSuchOption value 1",
        "setoption",
        "go",
    ]
    out, engine = session(lines)
    errors = [line for line in out if line.startswith("info string error: ")]
    assert len(errors) == 11, out
    assert "unknown command 'xyzzy'" in errors[0]
    assert "illegal move 'e2e4'" in errors[1]
    assert "invalid FEN" in errors[2] and "invalid FEN" in errors[3]
    assert "unknown option 'NoSuchOption'" in errors[9]
    assert [m.uci() for m in engine.board.move_stack] == ["e2e4"]  # kept from the first line
    bestmove = chess.Move.from_uci(out[-1].split()[1])
    assert out[-1].startswith("bestmove ") and engine.board.is_legal(bestmove)


def test_options_rebuild_the_agent_and_newgame_resets():
    factory = Recorder()
    lines = ["isready", "setoption name Seed value 7", "setoption name Temperature value 0.5"]
    lines += [
        "setoption name UseEMA value false",
        "setoption name RepetitionWorkaround value false",
    ]
    lines += ["position startpos moves e2e4", "ucinewgame", "go", "quit"]
    out, engine = session(lines, factory)
    assert factory.built == [
        UciOptions(),
        UciOptions(temperature=0.5, repetition_workaround=False, use_ema=False, seed=7),
    ]
    assert factory.agents[0].closed and factory.agents[1].closed  # replaced, then quit
    assert engine.board.move_stack == []  # ucinewgame went back to the start
    assert chess.Board().is_legal(chess.Move.from_uci(out[-1].split()[1]))


def test_no_legal_move_and_searchmoves():
    stalemate = "7k/5Q2/6K1/8/8/8/8/8 b - - 0 1"
    out, _ = session([f"position fen {stalemate}", "go"])
    assert out[-1] == "bestmove 0000" and out[0].startswith("info string error: no legal move")
    out, _ = session(["position startpos", "go searchmoves a2a3 wtime 100"])
    assert out == ["bestmove a2a3"]
    out, _ = session(["position startpos", "go searchmoves e2e5"])
    assert "not legal" in out[0]


def test_reported_score_inverts_the_win_probability():
    for cp in (-900, -35, 0, 120, 2500):
        assert win_prob_to_cp(win_probability(cp=cp)) == cp
    assert win_prob_to_cp(1.0) == 10_000 and win_prob_to_cp(0.0) == -10_000


def play_through_uci(command: list[str], stockfish: str, max_plies: int) -> chess.Board:
    """Our engine (White) against Stockfish (Black) via python-chess's engine client."""
    board = chess.Board()
    ours = chess.engine.SimpleEngine.popen_uci(command, cwd=ROOT)
    theirs = chess.engine.SimpleEngine.popen_uci(stockfish)
    try:
        assert ours.id["name"].startswith("searchless-chess")
        ours.configure({"Temperature": "0", "RepetitionWorkaround": True})
        while not board.is_game_over(claim_draw=True) and len(board.move_stack) < max_plies:
            engine = ours if board.turn == chess.WHITE else theirs
            # Ours answers at once whatever the limit; the time is python-chess's patience,
            # generous for the model's first move, which loads and compiles it.
            limit = (
                chess.engine.Limit(time=30.0) if engine is ours else chess.engine.Limit(nodes=200)
            )
            move = engine.play(board, limit).move
            assert move is not None and board.is_legal(move), (board.fen(), move)
            board.push(move)
    finally:
        ours.quit()
        theirs.quit()
    return board


def test_full_game_against_stockfish_through_python_chess(stockfish):
    board = play_through_uci(
        [sys.executable, "-m", "eval.uci", "--agent", "random:seed=3"], stockfish, max_plies=400
    )
    # A random mover against Stockfish: the game is played out to a rule-based end.
    assert board.is_game_over(claim_draw=True)
    assert board.outcome(claim_draw=True).winner is not chess.WHITE


def test_subprocess_survives_malformed_input():
    script = "\n".join(
        ["uci", "hello", "position fen garbage", "position startpos moves e2e4 e7e5 e4e5"]
        + ["isready", "position startpos moves e2e4", "go movetime 10", "quit", ""]
    )
    done = subprocess.run(
        [sys.executable, "-m", "eval.uci", "--agent", "random"],
        input=script,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert sum(line.startswith("info string error") for line in out) == 3
    assert "readyok" in out and out[-1].startswith("bestmove ")
    board = chess.Board()
    board.push_uci("e2e4")
    assert board.is_legal(chess.Move.from_uci(out[-1].split()[1]))


def test_missing_checkpoint_is_a_clear_error(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "eval.uci", "--checkpoint", str(tmp_path / "nope")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert done.returncode == 2 and "does not exist" in done.stderr


# --- a trained model over UCI ------------------------------------------------------------

TRAIN_BOARDS = 24


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory, stockfish) -> pathlib.Path:
    """A small AV model trained for a few steps on boards Stockfish annotated (nodes=50)."""
    from core.actions import legal_actions
    from core.engine_path import engine_id
    from core.schema import shard_name, write_boards
    from model.train import main as train_main

    root = tmp_path_factory.mktemp("uci_model")
    board, rows = chess.Board(), []
    engine = chess.engine.SimpleEngine.popen_uci(stockfish)
    try:
        name = engine_id(stockfish)
        while len(rows) < TRAIN_BOARDS and not board.is_game_over():
            moves = legal_actions(board)
            scores = []
            for uci in moves:
                info = engine.analyse(
                    board, chess.engine.Limit(nodes=50), root_moves=[chess.Move.from_uci(uci)]
                )
                scores.append(info["score"].pov(board.turn))
            probs = [
                win_probability(mate=s.mate()) if s.is_mate() else win_probability(cp=s.score())
                for s in scores
            ]
            best = max(range(len(moves)), key=probs.__getitem__)
            rows.append(
                {
                    "fen": board.fen(),
                    "count": 1,
                    "moves": moves,
                    "win_probs": probs,
                    "cp": [s.score() for s in scores],
                    "mate": [s.mate() for s in scores],
                    "best_move": moves[best],
                    "state_win_prob": probs[best],
                    "state_cp": scores[best].score(),
                    "state_mate": scores[best].mate(),
                    "engine": name,
                    "limit": "nodes=50",
                }
            )
            board.push_uci(moves[best])
    finally:
        engine.quit()
    write_boards(rows, str(root / "data" / shard_name("boards", 0, 1)))
    run = root / "run"
    data = str(root / "data")
    args = ["--config", str(ROOT / "model/configs/small.toml"), "--data", data, "--test-data", data]
    args += ["--out", str(run), "--steps", "4", "--batch-size", "16"]
    args += ["--set", "train.checkpoint_every=4", "--set", "train.eval_every=0"]
    assert train_main(args) == 0
    return run


@pytest.mark.slow
def test_trained_model_plays_a_full_game_over_uci(tiny_checkpoint, stockfish):
    board = play_through_uci(
        [sys.executable, "-m", "eval.uci", "--checkpoint", str(tiny_checkpoint)],
        stockfish,
        max_plies=400,
    )
    assert len(board.move_stack) >= 2  # the model moved; every move was checked legal
    assert board.is_game_over(claim_draw=True) or len(board.move_stack) == 400


@pytest.mark.slow
def test_trained_model_reports_a_score_and_handles_errors(tiny_checkpoint):
    script = "\n".join(
        ["uci", "setoption name Temperature value 1.5", "isready", "bogus"]
        + ["position startpos moves e2e4 e7e5 g1f3 b8c6 f3g1 c6b8 g1f3 b8c6 f3g1 c6b8"]
        + ["go wtime 1000 btime 1000", "position fen bad", "go", "quit", ""]
    )
    done = subprocess.run(
        [sys.executable, "-m", "eval.uci", "--checkpoint", str(tiny_checkpoint)],
        input=script,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert "uciok" in out and "readyok" in out
    assert sum(line.startswith("info string error") for line in out) == 2
    infos = [line for line in out if line.startswith("info depth 1")]
    bestmoves = [line.split()[1] for line in out if line.startswith("bestmove ")]
    assert len(infos) == 2 and len(bestmoves) == 2
    assert " score cp " in infos[0] and infos[0].endswith(f"pv {bestmoves[0]}")
    board = parse_position(
        "startpos moves e2e4 e7e5 g1f3 b8c6 f3g1 c6b8 g1f3 b8c6 f3g1 c6b8".split()
    )
    for uci in bestmoves:
        assert board.is_legal(chess.Move.from_uci(uci))
