"""The UCI engine: the protocol loop with real agents, its options, pondering, full games
against real Stockfish through python-chess's engine client, the default model and model
paths from other directories, and a trained model playing over UCI."""

from __future__ import annotations

import dataclasses
import io
import os
import pathlib
import subprocess
import sys

import chess
import chess.engine
import pytest

from core.values import win_probability
from eval.agents.players import RandomAgent, make_agent
from eval.uci.choosers import AgentChooser, MoveRequest
from eval.uci.factories import ModelUnavailable
from eval.uci.info import wdl_per_mille, win_prob_to_cp
from eval.uci.options import OPTIONS, UciOptions
from eval.uci.position import parse_position
from eval.uci.server import UciServer, random_move

ROOT = pathlib.Path(__file__).resolve().parents[2]
# lichess-bot's config.yml.default `uci_options`, and Stockfish's and fastchess's usual ones.
GUI_OPTIONS = {"Move Overhead", "Threads", "Hash", "SyzygyPath", "UCI_ShowWDL", "Ponder"}


class Recorder:
    """A factory of choosers over real random agents that remembers the options each was
    built with; `unavailable` makes it report that there is no model."""

    def __init__(self, unavailable: str | None = None):
        self.built: list[UciOptions] = []
        self.agents: list[RandomAgent] = []
        self.unavailable = unavailable

    def __call__(self, options: UciOptions) -> AgentChooser:
        self.built.append(options)
        if self.unavailable:
            raise ModelUnavailable(self.unavailable)
        agent = RandomAgent(seed=options.seed)
        agent.closed = False
        agent.close = lambda a=agent: setattr(a, "closed", True)
        self.agents.append(agent)
        return AgentChooser(agent)


def session(lines: list[str], factory=None, **kwargs) -> tuple[list[str], UciServer]:
    out = io.StringIO()
    engine = UciServer(factory or Recorder(), out, **kwargs)
    engine.run(lines)
    return out.getvalue().splitlines(), engine


def bestmoves(out: list[str]) -> list[str]:
    return [line.split()[1] for line in out if line.startswith("bestmove ")]


def test_handshake_announces_every_option_gui_tools_send():
    out, _ = session(["uci", "isready", "quit", "isready"])
    assert out[0].startswith("id name ") and out[1].startswith("id author ")
    options = [line for line in out if line.startswith("option name ")]
    assert len(options) == len(OPTIONS)
    names = {spec.name for spec in OPTIONS}
    assert GUI_OPTIONS | {"WeightsFile", "Temperature", "UseEMA", "Seed"} <= names
    assert "option name Move Overhead type spin default 10 min 0 max 60000" in options
    assert "option name SyzygyPath type string default <empty>" in options
    assert out.index("uciok") == len(out) - 2 and out[-1] == "readyok"  # nothing after quit


def test_python_chess_accepts_every_default_value_of_lichess_bot():
    # python-chess checks a value against the announced type and range before sending it.
    out, _ = session(["uci"])
    options = {}
    for line in out:
        if line.startswith("option name "):
            name = line.removeprefix("option name ").split(" type ")[0]
            kind = line.split(" type ")[1].split()[0]
            numbers = line.split()
            low = int(numbers[numbers.index("min") + 1]) if "min" in numbers else None
            high = int(numbers[numbers.index("max") + 1]) if "max" in numbers else None
            options[name] = chess.engine.Option(name, kind, None, low, high, [])
    lichess_bot = {"Move Overhead": 100, "Threads": 4, "Hash": 512, "SyzygyPath": "./syzygy/"}
    for name, value in {**lichess_bot, "UCI_ShowWDL": True}.items():
        options[name].parse(value)  # raises EngineError when out of range


def test_options_are_applied_and_bad_values_refused():
    lines = [
        "setoption name Move Overhead value 250",
        "setoption name moveoverhead value 300",  # GUIs differ in case and spaces
        "setoption name Hash value 512",
        "setoption name SyzygyPath value ./syzygy/",
        "setoption name UCI_ShowWDL value true",
        "setoption name Ponder value true",
        "setoption name Threads value 3",
        "setoption name Hash value -1",
        "setoption name Ponder value",
    ]
    out, engine = session(lines)
    assert engine.options == UciOptions(
        move_overhead_ms=300,
        hash_mb=512,
        syzygy_path="./syzygy/",
        show_wdl=True,
        ponder=True,
        threads=3,
    )
    assert out == [
        "info string error: Hash must lie in 1..33554432, got -1",
        "info string error: Ponder '' is not true or false",
    ]


def test_go_answers_at_once_with_a_legal_move_for_any_time_control():
    goes = ["go", "go wtime 300000 btime 300000 winc 0 binc 0", "go movetime 50", "go depth 20"]
    goes += ["go nodes 1000", "go movestogo 40 wtime 1 btime 1", "go mate 3"]
    for go in goes:
        out, engine = session(["position startpos moves e2e4 c7c5 g1f3", go])
        [info, bestmove] = out
        move = chess.Move.from_uci(bestmove.split()[1])
        assert engine.board.is_legal(move), (go, bestmove)
        assert info.startswith("info depth 1 ") and info.endswith(f" pv {move}")


def test_infinite_and_ponder_hold_the_answer_until_stop_or_ponderhit():
    out, _ = session(["position startpos", "go infinite", "isready"])
    assert out[0].startswith("info depth") and out[1] == "readyok" and len(out) == 2
    out, _ = session(["position startpos", "go infinite", "isready", "stop", "stop"])
    assert out[1] == "readyok" and out[2].startswith("bestmove ") and len(out) == 3
    # go ponder holds its info line too: a GUI reads it after ponderhit, with the move.
    out, _ = session(["position startpos moves e2e4", "go ponder wtime 10", "isready"])
    assert out == ["readyok"]
    out, _ = session(["position startpos moves e2e4", "go ponder wtime 10", "ponderhit"])
    assert out[0].startswith("info depth") and out[1].startswith("bestmove ") and len(out) == 2
    # A go before the last one's stop: the held answer comes first, every go gets one.
    out, _ = session(["position startpos", "go infinite", "position startpos moves d2d4", "go"])
    moves = bestmoves(out)
    assert len(moves) == 2 and chess.Board().is_legal(chess.Move.from_uci(moves[0]))
    assert parse_position("startpos moves d2d4".split()).is_legal(chess.Move.from_uci(moves[1]))


def test_ponder_on_names_the_expected_reply():
    lines = ["setoption name Ponder value true", "position startpos moves e2e4", "go"]
    out, engine = session(lines)
    info, bestmove = out
    _, move, word, reply = bestmove.split()
    board = engine.board.copy()
    board.push_uci(move)
    assert word == "ponder" and board.is_legal(chess.Move.from_uci(reply))
    assert info.endswith(f" pv {move} {reply}")
    # No reply to expect once the game is over: a mate in one.
    out, _ = session(
        ["setoption name Ponder value true", "position fen 6k1/5ppp/8/8/8/8/8/R5K1 w - - 0 1"]
        + ["go searchmoves a1a8"]
    )
    assert out[-1] == "bestmove a1a8" and out[0].endswith(" pv a1a8")
    assert " score mate 1 " in out[0]


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
        "position moves e2e4",  # no startpos or fen
        "setoption name Temperature value hot",
        "setoption name Temperature value -0.5",
        "setoption name RepetitionWorkaround value maybe",
        "setoption name NoSuchOption value 1",
        "setoption",
        "joho isready",  # UCI: unknown words before a command are skipped
        "go",
    ]
    out, engine = session(lines)
    errors = [line for line in out if line.startswith("info string error: ")]
    assert len(errors) == 13, out
    assert "unknown command 'xyzzy'" in errors[0]
    assert "illegal move 'e2e4'" in errors[1]
    assert "invalid FEN" in errors[2] and "invalid FEN" in errors[3]
    assert "unknown option 'NoSuchOption'" in errors[10]
    assert "unknown command 'joho'; read from 'isready' on" in errors[12]
    assert "readyok" in out
    assert [m.uci() for m in engine.board.move_stack] == ["e2e4"]  # kept from the first line
    assert engine.board.is_legal(chess.Move.from_uci(bestmoves(out)[0]))


def test_options_rebuild_the_chooser_only_when_the_move_choice_depends_on_them():
    factory = Recorder()
    lines = ["isready", "setoption name Seed value 7", "setoption name Temperature value 0.5"]
    lines += ["setoption name Hash value 64", "setoption name UCI_ShowWDL value true"]
    lines += [
        "setoption name UseEMA value false",
        "setoption name RepetitionWorkaround value false",
    ]
    lines += ["position startpos moves e2e4", "ucinewgame", "go", "go", "quit"]
    out, engine = session(lines, factory)
    # Once a chooser is built, each option it depends on rebuilds it at once (the model is
    # loaded and compiled in `setoption`, not in the next `go`); Hash (no search) and
    # UCI_ShowWDL do not.
    seven = UciOptions(seed=7)
    hot = dataclasses.replace(seven, temperature=0.5)
    raw = dataclasses.replace(hot, hash_mb=64, show_wdl=True, use_ema=False)
    assert factory.built == [
        UciOptions(),
        seven,
        hot,
        raw,
        dataclasses.replace(raw, repetition_workaround=False),
    ]
    assert all(agent.closed for agent in factory.agents)  # replaced, then quit
    assert engine.board.move_stack == []  # ucinewgame went back to the start
    assert all(chess.Board().is_legal(chess.Move.from_uci(m)) for m in bestmoves(out))


def test_without_a_model_it_still_answers_and_plays_legal_moves():
    factory = Recorder(unavailable="no model: 'models/cpu' not found")
    lines = ["uci", "isready", "position startpos moves f2f3 e7e5 g2g4", "go", "go"]
    out, _ = session(lines, factory)
    assert "uciok" in out and "readyok" in out
    errors = [line for line in out if line.startswith("info string error: no model")]
    assert len(errors) == 3  # at isready and at each go
    assert errors[1].endswith("playing a random legal move")
    board = parse_position("startpos moves f2f3 e7e5 g2g4".split())
    assert all(board.is_legal(chess.Move.from_uci(m)) for m in bestmoves(out))
    assert len(factory.built) == 1  # not tried again at every go


def test_the_random_move_of_last_resort_is_the_seeds_whatever_the_move_order():
    board = parse_position("startpos moves e2e4".split())
    moves = list(board.legal_moves)
    drawn = random_move(board, None, seed=5)
    assert drawn == random_move(board, frozenset(reversed(moves)), seed=5)
    assert {random_move(board, None, seed) for seed in range(40)} > {drawn}  # the seed draws
    allowed = frozenset(chess.Move.from_uci(uci) for uci in ("a7a6", "h7h5"))
    assert {random_move(board, allowed, seed) for seed in range(40)} == allowed


def test_a_failing_chooser_is_answered_with_a_random_legal_move(stockfish):
    # A real agent that fails: a Stockfish agent whose engine was closed.
    agent = make_agent("stockfish:nodes=1", engine_path=stockfish)
    agent.close()
    out = io.StringIO()
    engine = UciServer(Recorder(), out, defaults=UciOptions(seed=3))
    board = parse_position("startpos moves e2e4".split())
    allowed = frozenset(chess.Move.from_uci(uci) for uci in ("a7a6", "b7b6", "h7h5"))
    for request in (MoveRequest(), MoveRequest(allowed=allowed)):
        decision = engine._choose(AgentChooser(agent), board, request)
        assert decision.move == random_move(board, request.allowed, 3)
    errors = out.getvalue().splitlines()
    assert len(errors) == 2 and all("is closed" in line for line in errors), errors
    assert errors[0].startswith(f"info string error: {agent.name} failed on {board.fen()!r}")
    assert errors[0].endswith("; playing a random legal move")


def test_no_legal_move_and_searchmoves():
    stalemate = "7k/5Q2/6K1/8/8/8/8/8 b - - 0 1"
    out, _ = session([f"position fen {stalemate}", "go"])
    assert out[-1] == "bestmove 0000" and out[0].startswith("info string error: no legal move")
    out, _ = session(["position startpos", "go searchmoves a2a3 wtime 100"])
    assert out[-1] == "bestmove a2a3"
    out, _ = session(["position startpos", "go searchmoves e2e5"])
    assert "not legal here" in out[0] and chess.Board().is_legal(
        chess.Move.from_uci(bestmoves(out)[0])
    )


def test_reported_score_and_wdl_invert_the_win_probability():
    for cp in (-900, -35, 0, 120, 2500):
        assert win_prob_to_cp(win_probability(cp=cp)) == cp
    assert win_prob_to_cp(1.0) == 10_000 and win_prob_to_cp(0.0) == -10_000
    assert wdl_per_mille(0.7) == (700, 0, 300) and wdl_per_mille(1.0) == (1000, 0, 0)
    assert sum(wdl_per_mille(0.12345)) == 1000


def play_through_uci(command: list[str], stockfish: str, max_plies: int, cwd=ROOT) -> chess.Board:
    """Our engine (White) against Stockfish (Black) via python-chess's engine client."""
    board = chess.Board()
    ours = chess.engine.SimpleEngine.popen_uci(command, cwd=cwd, timeout=300)
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


def run_engine(argv: list[str], lines: list[str], cwd) -> subprocess.CompletedProcess:
    return subprocess.run(
        argv,
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=600,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT)},  # this checkout's engine, from anywhere
    )


def test_with_no_model_anywhere_the_console_script_still_plays(tmp_path, console_script):
    # From a directory with no models/cpu, and none in the checkout (it is not shipped yet).
    if (ROOT / "models" / "cpu").exists():
        pytest.skip("models/cpu exists in this checkout: the default model loads")
    lines = ["uci", "isready", "position startpos moves e2e4", "go wtime 1000 btime 1000"]
    done = run_engine([console_script], lines, cwd=tmp_path)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    out = done.stdout.splitlines()
    assert "uciok" in out and "readyok" in out
    assert "option name WeightsFile type string default models/cpu" in out
    errors = [line for line in out if line.startswith("info string error: no model: ")]
    assert len(errors) == 2 and str(tmp_path / "models" / "cpu") in errors[0]
    assert str(ROOT / "models" / "cpu") in errors[0]
    board = parse_position("startpos moves e2e4".split())
    assert board.is_legal(chess.Move.from_uci(bestmoves(out)[0]))


def test_a_missing_checkpoint_is_an_error_at_start_up(tmp_path, console_script):
    lines = ["uci", "isready", "go", "quit"]
    done = run_engine([console_script, "--checkpoint", "runs/nope"], lines, cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""  # not one move played by a random mover
    assert done.stderr.startswith("searchless-uci: error: checkpoint 'runs/nope' not found")
    assert "--allow-missing-model" in done.stderr and len(done.stderr.splitlines()) == 1


def test_a_missing_checkpoint_allowed_is_reported_and_the_engine_stays_up(tmp_path, console_script):
    lines = ["uci", "isready", "go", "quit"]
    argv = [console_script, "--checkpoint", "runs/nope", "--allow-missing-model"]
    done = run_engine(argv, lines, cwd=tmp_path)
    assert done.returncode == 0
    assert done.stderr.startswith("searchless-uci: error: checkpoint 'runs/nope' not found")
    assert len(done.stderr.splitlines()) == 1
    out = done.stdout.splitlines()
    assert "readyok" in out and chess.Board().is_legal(chess.Move.from_uci(bestmoves(out)[0]))


# --- a trained model over UCI ------------------------------------------------------------


@pytest.mark.slow
def test_trained_model_plays_a_full_game_over_uci(trained_run, stockfish):
    board = play_through_uci(
        [sys.executable, "-m", "eval.uci", "--checkpoint", str(trained_run)],
        stockfish,
        max_plies=400,
    )
    assert len(board.move_stack) >= 2  # the model moved; every move was checked legal
    assert board.is_game_over(claim_draw=True) or len(board.move_stack) == 400
