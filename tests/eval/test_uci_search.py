"""The UCI engine searching (Simulations > 0), driven through python-chess's engine client as
GUIs and lichess-bot drive it, with a tiny randomly initialised model: `go nodes`, `go
movetime`, `go infinite` + `stop`, clocks, pondering, the info lines, tree reuse, and
Simulations 0 being the searchless engine exactly."""

from __future__ import annotations

import io
import random
import sys
import time

import chess
import chess.engine
import pytest

from eval.uci.choosers import PolicyChooser, SearchChooser
from eval.uci.factories import AgentFactory, NeuralFactory
from eval.uci.info import score_words
from eval.uci.server import UciServer
from tests.eval.uci_inprocess import bestmoves, search_lines

SEARCH = {"Simulations": 1_000_000, "SearchBatch": 4}  # limited by `go`, not by the option
MIDDLEGAME = "r1bqkb1r/pppp1ppp/2n2n2/4p3/2B1P3/5N2/PPPP1PPP/RNBQK2R w KQkq - 4 4"


@pytest.fixture(scope="module")
def engine(tiny_run, tmp_path_factory):
    """One engine process for the module (each test sets the options it needs)."""
    command = [sys.executable, "-m", "eval.uci", "--checkpoint", str(tiny_run)]
    cwd = tmp_path_factory.mktemp("gui")
    with chess.engine.SimpleEngine.popen_uci(command, cwd=cwd, timeout=300) as engine:
        yield engine


def searching(engine: chess.engine.SimpleEngine, **options) -> chess.engine.SimpleEngine:
    engine.configure({**SEARCH, "UCI_ShowWDL": True, **options})
    engine.ping()  # isready: the model is loaded and compiled before any clock runs
    return engine


def test_go_nodes_plays_a_legal_move_after_that_many_playouts(engine):
    searching(engine)
    board = chess.Board(MIDDLEGAME)
    for nodes in (1, 40):
        result = engine.play(board, chess.engine.Limit(nodes=nodes), info=chess.engine.INFO_ALL)
        info = result.info
        assert board.is_legal(result.move) and info["nodes"] == nodes, info
        assert info["pv"][0] == result.move and 1 <= info["depth"] <= info["seldepth"]
        assert "nps" in info and isinstance(info["score"].relative, chess.engine.Cp)
        assert sum(info["wdl"].relative) == 1000
        line = board.copy()
        for move in info["pv"]:  # the most visited line is a line of legal moves
            assert line.is_legal(move)
            line.push(move)
    assert len(info["pv"]) >= 2 and result.ponder is None  # no ponder word without Ponder
    # search-contempt (the opponent's replies frozen after 3 visits) counts the same way.
    engine.configure({"SearchContempt": 3})
    result = engine.play(board, chess.engine.Limit(nodes=30), info=chess.engine.INFO_ALL)
    assert board.is_legal(result.move) and result.info["nodes"] == 30
    engine.configure({"SearchContempt": 0})
    # searchmoves: the best of the moves allowed.
    result = engine.play(
        board, chess.engine.Limit(nodes=16), root_moves=[chess.Move.from_uci("a2a3")]
    )
    assert result.move == chess.Move.from_uci("a2a3")


def test_go_movetime_returns_in_time_with_info_lines_on_the_way(engine):
    searching(engine)
    board = chess.Board(MIDDLEGAME)
    start = time.monotonic()
    with engine.analysis(board, chess.engine.Limit(time=2.2)) as analysis:
        infos = [info for info in analysis if "nodes" in info]
        best = analysis.wait()
    elapsed = time.monotonic() - start
    # Move Overhead (10 ms) is kept back and no batch is started that would end past the
    # time; the slack is python-chess's and a loaded machine's (batches then vary in length).
    assert 1.0 < elapsed < 2.2 + 0.8, elapsed
    assert board.is_legal(best.move)
    assert len(infos) >= 3, infos  # one a second, then the final one
    nodes = [info["nodes"] for info in infos]
    assert nodes == sorted(nodes) and nodes[0] > 0
    assert infos[-1]["pv"][0] == best.move


def test_go_infinite_searches_until_stop(engine):
    searching(engine)
    board = chess.Board(MIDDLEGAME)
    with engine.analysis(board) as analysis:  # `go infinite`; leaving the block sends stop
        for info in analysis:
            if info.get("nodes", 0) > 0 and info.get("time", 0) > 1.0:
                break
    best = analysis.wait()
    assert board.is_legal(best.move)
    assert analysis.info["nodes"] > 0 and analysis.info["pv"][0] == best.move


def play_on_the_clock(engine, plies: int, clock: float, increment: float, ponder: bool):
    """Our engine (both clocks given, as a GUI does) against replies made at once: the
    expected reply on every other move when pondering (ponderhit), another move otherwise
    (stop). Returns our clock after each of our moves, the results and the game."""
    rng = random.Random(17)
    board = chess.Board()
    ours, clocks, results = clock, [], []
    while len(board.move_stack) < plies and not board.is_game_over(claim_draw=True):
        limit = chess.engine.Limit(
            white_clock=ours, black_clock=clock, white_inc=increment, black_inc=increment
        )
        start = time.monotonic()
        result = engine.play(board, limit, ponder=ponder, info=chess.engine.INFO_ALL)
        ours -= time.monotonic() - start
        clocks.append(ours)
        if ours <= 0:
            break
        ours += increment
        assert board.is_legal(result.move), (board.fen(), result)
        results.append(result)
        board.push(result.move)
        if board.is_game_over(claim_draw=True):
            break
        replies = list(board.legal_moves)
        if result.ponder is not None and len(results) % 2 == 0:
            reply = result.ponder
        else:
            reply = rng.choice([m for m in replies if m != result.ponder] or replies)
        board.push(reply)
    return clocks, results, board


def test_a_small_clock_is_never_lost_on_time(engine):
    searching(engine)
    clocks, results, board = play_on_the_clock(engine, 30, clock=3.0, increment=0.1, ponder=False)
    assert len(results) == 15 or board.is_game_over(claim_draw=True)
    assert len(results) >= 8 and min(clocks) > 0, clocks
    # It searched on the clock (a move whose budget the root's evaluation takes is the
    # network's own, with 0 playouts) and spent a fair share of the time.
    assert sum(r.info["nodes"] for r in results) > len(results), [r.info for r in results]
    assert clocks[-1] < 3.0 + len(results) * 0.1 - 0.5, clocks


def test_pondering_searches_until_ponderhit_or_stop(engine):
    searching(engine, Simulations=60)
    clocks, results, board = play_on_the_clock(engine, 20, clock=60, increment=0.0, ponder=True)
    # How long pondering ran before ponderhit varies, so the moves do, and a game against
    # random replies may end early.
    assert len(results) == 10 or board.is_game_over(claim_draw=True)
    assert len(results) >= 6 and min(clocks) > 0
    replies = board.move_stack[1::2]
    hits = sum(r.ponder == reply for r, reply in zip(results, replies, strict=False))
    assert hits >= 2 and len(replies) - hits >= 2  # both ponderhit and stop happened
    # Every move came with the reply it expects, legal after the move; a move that ends the
    # game (mate, or a draw to claim) has none to expect.
    replay = chess.Board()
    for i, move in enumerate(board.move_stack):
        if i % 2 == 0:
            result = results[i // 2]
            after = replay.copy()
            after.push(move)
            assert result.move == move
            if after.is_game_over(claim_draw=True):
                assert result.ponder is None, (replay.fen(), result)
            else:
                assert result.ponder is not None, (replay.fen(), result)
                assert after.is_legal(result.ponder)
        replay.push(move)


def test_simulations_zero_is_the_searchless_engine_exactly(engine):
    """The default engine's answers, then the same after a search was switched on and off."""

    def answers():
        board, out = chess.Board(), []
        for _ in range(8):
            result = engine.play(board, chess.engine.Limit(nodes=50), info=chess.engine.INFO_ALL)
            info = {k: v for k, v in result.info.items() if k not in ("time", "nps")}
            out.append((result.move, info))
            board.push(result.move)
        return out

    engine.configure({"Simulations": 0})
    default = answers()
    searching(engine, Simulations=64)
    searched = answers()
    engine.configure({"Simulations": 0})
    assert answers() == default
    assert searched != default  # the search plays differently (here, at least its info)


# --- in the process: the tree kept between the moves of a game ----------------------------


def test_the_tree_is_reused_along_a_game_and_reset_otherwise(tiny_run):
    out = io.StringIO()
    engine = UciServer(NeuralFactory(str(tiny_run)), out)

    def go(position: str) -> bool:
        engine.handle(position)
        engine.handle("go nodes 24")
        engine.handle("isready")  # answered at once, the search going on
        done = len(bestmoves(out)) + 1
        deadline = time.monotonic() + 120
        while len(bestmoves(out)) < done and time.monotonic() < deadline:
            time.sleep(0.01)
        return chooser.search.reused

    for line in ("setoption name WeightsFile value " + str(tiny_run), "isready"):
        engine.handle(line)
    assert isinstance(engine.chooser(), PolicyChooser)  # Simulations 0: no search
    engine.handle("setoption name Simulations value 32")
    engine.handle("isready")
    chooser = engine.chooser()
    assert isinstance(chooser, SearchChooser)
    assert not go("position startpos")
    first = engine.board.copy()
    move = bestmoves(out)[-1]
    reply = chooser.search.expected_reply(chess.Move.from_uci(move))
    assert go(f"position startpos moves {move} {reply}")  # continues the game: reused
    assert not go("position startpos moves a2a3 a7a6")  # another game
    engine.handle("ucinewgame")
    assert chooser.search.root is None  # forgotten
    assert first.move_stack == []
    assert not go("position startpos")
    # A game over by the rules with moves left (fifty moves): nothing to search, the policy
    # answers (its info counts the legal moves it valued).
    fifty = "8/8/4k3/8/8/3K4/8/R7 w - - 100 90"
    go(f"position fen {fifty}")
    legal = chess.Board(fifty).legal_moves.count()
    # The last move's info, whether `isready`'s readyok came before or after its bestmove
    # (the policy answers at once, on the search's thread).
    lines = out.getvalue().splitlines()
    last_move = max(i for i, line in enumerate(lines) if line.startswith("bestmove"))
    info = [line for line in lines[:last_move] if line.startswith("info ")][-1]
    assert f" nodes {legal} " in info
    assert chess.Board(fifty).is_legal(chess.Move.from_uci(bestmoves(out)[-1]))
    engine.run([])  # ends it: quit
    lines = out.getvalue().splitlines()
    assert lines.count("readyok") == 7
    assert len(bestmoves(out)) == 5


def test_a_line_ending_in_mate_is_scored_as_mate():
    board = chess.Board("6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1")
    mate_in_one = [chess.Move.from_uci("a1a8")]
    assert score_words(board, mate_in_one, 0.7, exact=False) == ("score mate 1", (1000, 0, 0))
    # Mate in two: 1. Rd1 Na3 2. Rd8#.
    board = chess.Board("6k1/5ppp/8/1n6/8/8/5PPP/R5K1 w - - 0 1")
    line = [chess.Move.from_uci(m) for m in ("a1d1", "b5a3", "d1d8")]
    assert score_words(board, line, 1.0, exact=True) == ("score mate 2", (1000, 0, 0))
    assert score_words(board, line, 1.0, exact=False)[0] == "score cp 10000"
    assert score_words(board, line, 0.9, exact=True)[0].startswith("score cp ")
    # Being mated: 1. b5 Ra1#.
    black = chess.Board("r6k/6pp/8/8/1P6/8/6PP/7K w - - 0 1")
    line = [chess.Move.from_uci(m) for m in ("b4b5", "a8a1")]
    assert score_words(black, line, 0.0, exact=True)[0] == "score mate -1"


def test_a_policy_model_says_it_cannot_search_and_plays(tmp_path, tiny_bc_run):
    out = io.StringIO()
    engine = UciServer(NeuralFactory(str(tmp_path)), out)
    lines = [
        f"setoption name WeightsFile value {tiny_bc_run}",
        "setoption name Simulations value 8",
    ]
    engine.run([*lines, "isready", "position startpos", "go nodes 8"])
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("info string Simulations 8 ignored: a BC model needs a value model")
    assert lines[1] == "readyok" and chess.Board().is_legal(chess.Move.from_uci(bestmoves(out)[0]))


def test_a_policy_model_with_a_value_file_reports_a_score_and_searches(
    tmp_path, tiny_bc_run, tiny_run
):
    out = io.StringIO()
    engine = UciServer(NeuralFactory(str(tmp_path)), out)
    setup = [
        f"setoption name WeightsFile value {tiny_bc_run}",
        f"setoption name ValueFile value {tiny_run}",
        "setoption name UCI_ShowWDL value true",
    ]
    engine.run([*setup, "isready", "position startpos moves e2e4", "go nodes 1"])
    lines = out.getvalue().splitlines()
    assert not [line for line in lines if line.startswith("info string")], lines
    [info] = [line for line in lines if line.startswith("info depth")]
    assert " score cp " in info and " wdl " in info, info
    # The score is the value model's value of the policy's move.
    from eval.uci.choosers import move_value
    from model.predictor import Predictor

    board = chess.Board()
    board.push_uci("e2e4")
    move = chess.Move.from_uci(bestmoves(out)[0])
    value = move_value(Predictor.from_checkpoint(str(tiny_run)), board, move)
    assert f"score {score_words(board, [move], value, exact=False)[0].split(' ', 1)[1]}" in info

    # With Simulations it searches: the policy's priors, the value model's values.
    lines = search_lines(tmp_path, setup)
    assert not [line for line in lines if line.startswith("info string")], lines
    assert [line for line in lines if " nodes 8 " in line and " score cp " in line], lines


@pytest.mark.parametrize("value_file", ["bc", "missing"])
def test_a_value_file_that_cannot_serve_is_named_and_the_policy_plays(
    tmp_path, tiny_bc_run, value_file
):
    out = io.StringIO()
    engine = UciServer(NeuralFactory(str(tmp_path)), out)
    path = tiny_bc_run if value_file == "bc" else tmp_path / "nowhere"
    engine.run(
        [
            f"setoption name WeightsFile value {tiny_bc_run}",
            f"setoption name ValueFile value {path}",
        ]
        + ["isready", "position startpos", "go nodes 1"]
    )
    lines = out.getvalue().splitlines()
    expected = "is a BC model, not an AV or SV one" if value_file == "bc" else "no value model"
    assert lines[0].startswith("info string") and expected in lines[0], lines
    assert chess.Board().is_legal(chess.Move.from_uci(bestmoves(out)[0]))
    assert not [line for line in lines if " score " in line], lines


def test_the_search_options_are_announced_and_checked():
    out = io.StringIO()
    engine = UciServer(AgentFactory("random"), out)
    engine.run(
        ["uci", "setoption name CPuct value 0", "setoption name PriorTemperature value warm"]
        + ["setoption name SearchBatch value 0", "setoption name Simulations value -1"]
        + ["setoption name Simulations value 64", "setoption name CPuct value 2.5"]
        + ["setoption name SearchContempt value 5", "setoption name SearchBatch value 16"]
    )
    lines = out.getvalue().splitlines()
    assert "option name Simulations type spin default 0 min 0 max 1000000000" in lines
    assert "option name CPuct type string default 1.5" in lines
    assert "option name SearchBatch type spin default 8 min 1 max 256" in lines
    errors = [line for line in lines if line.startswith("info string error: ")]
    assert len(errors) == 4 and "CPuct must be a finite number > 0, got '0'" in errors[0]
    assert "PriorTemperature 'warm' is not a number" in errors[1]
    options = engine.options
    assert (options.simulations, options.cpuct, options.search_contempt) == (64, 2.5, 5)
    assert options.search_batch == 16
