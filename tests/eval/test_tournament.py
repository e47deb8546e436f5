"""Tournaments between real agents (random movers, a weak real Stockfish), and the openings."""

from __future__ import annotations

import io
import json

import chess
import chess.pgn
import pytest

from core.game_end import board_outcome
from core.openings import (
    DEFAULT_OPENINGS,
    Opening,
    OpeningsError,
    choose_openings,
    load_openings,
)
from eval.agents.base import AgentBase
from eval.agents.players import RandomAgent, make_agent
from eval.elo.tournament import TournamentConfig, main, run_tournament, schedule
from eval.game import AdjudicationConfig, play_game

START = Opening("start", "", chess.STARTING_FEN, ())


def read_pgn(path) -> list[chess.pgn.Game]:
    games = []
    with open(path, encoding="utf-8") as f:
        while (game := chess.pgn.read_game(f)) is not None:
            assert not game.errors, game.errors
            games.append(game)
    return games


# --- openings ----------------------------------------------------------------------------


def test_bundled_openings_are_varied_legal_and_named():
    openings = load_openings()
    assert len(openings) >= 50
    assert len({o.name for o in openings}) == len(openings)
    assert len({o.board().fen() for o in openings}) == len(openings)
    for o in openings:
        assert o.fen == chess.STARTING_FEN and len(o.moves) >= 6
        assert len(o.eco) == 3 and o.eco[0] in "ABCDE" and o.eco[1:].isdigit(), o
        assert not o.board().is_game_over()
    # Every ECO volume (A..E) is represented.
    assert {o.eco[0] for o in openings} == set("ABCDE")


def test_epd_openings_and_bad_files(tmp_path):
    epd = tmp_path / "o.epd"
    epd.write_text(
        "# a comment\n"
        'rnbqkbnr/pppp1ppp/8/4p3/4P3/8/PPPP1PPP/RNBQKBNR w KQkq - id "Open Game"; eco "C20";\n'
        "\n"
        "rnbqkbnr/pp1ppppp/8/2p5/4P3/8/PPPP1PPP/RNBQKBNR w KQkq -\n"
    )
    openings = load_openings(epd)
    assert [(o.name, o.eco, o.moves) for o in openings] == [
        ("Open Game", "C20", ()),
        ("o line 4", "", ()),
    ]
    assert openings[1].board().piece_at(chess.C5) == chess.Piece.from_symbol("p")

    epd.write_text("rnbqkbnr/pppp1ppp/8/4p3/4P3/8/PPPP1PPP/RNBQKBNR w KQkq -\nnot a fen\n")
    with pytest.raises(OpeningsError, match=r"o\.epd, line 2"):
        load_openings(epd)
    pgn = tmp_path / "o.pgn"
    pgn.write_text('[Opening "ok"]\n\n1. e4 e5 *\n\n[Opening "bad"]\n\n1. e4 e4 *\n')
    with pytest.raises(OpeningsError, match=r"o\.pgn, game 2"):
        load_openings(pgn)
    pgn.write_text('[Opening "mated"]\n\n1. f3 e5 2. g4 Qh4# *\n')
    with pytest.raises(OpeningsError, match="already over"):
        load_openings(pgn)
    with pytest.raises(OpeningsError, match="cannot read"):
        load_openings(tmp_path / "missing.pgn")


def test_choose_openings_is_seeded_and_cycles():
    openings = load_openings(DEFAULT_OPENINGS)
    first = choose_openings(openings, 5, seed=1)
    assert first == choose_openings(openings, 5, seed=1)
    assert first != choose_openings(openings, 5, seed=2)
    cycled = choose_openings(openings, len(openings) + 3, seed=0)
    assert cycled[len(openings) :] == cycled[:3]


# --- one game ----------------------------------------------------------------------------


def after(moves: str, fen: str = chess.STARTING_FEN) -> chess.Board:
    board = chess.Board(fen)
    for san in moves.split():
        board.push_san(san)
    return board


def test_board_outcome_by_the_rules():
    assert board_outcome(chess.Board()) is None
    mate = board_outcome(after("f3 e5 g4 Qh4#"))
    assert (mate.result, mate.termination) == ("0-1", "checkmate")
    stalemate = board_outcome(chess.Board("7k/5Q2/6K1/8/8/8/8/8 b - - 0 1"))
    assert (stalemate.result, stalemate.termination) == ("1/2-1/2", "stalemate")
    bare = board_outcome(chess.Board("8/8/4k3/8/8/3NK3/8/8 w - - 0 1"))
    assert bare.termination == "insufficient material"
    twice = after("Nf3 Nf6 Ng1 Ng8 Nf3 Nf6 Ng1")
    assert board_outcome(twice) is None  # the start position has occurred twice only
    twice.push_san("Ng8")
    assert board_outcome(twice).termination == "threefold repetition"
    fifty = board_outcome(chess.Board("8/8/4k3/8/8/3RK3/8/8 w - - 100 80"))
    assert (fifty.result, fifty.termination) == ("1/2-1/2", "fifty-move rule")
    # Mate on the hundredth halfmove is still mate.
    mate_late = board_outcome(chess.Board("k7/1Q6/1K6/8/8/8/8/8 b - - 100 90"))
    assert mate_late.termination == "checkmate" and mate_late.result == "1-0"


def test_random_game_is_capped_and_legal():
    opening = load_openings()[0]
    with RandomAgent(seed=1) as white, RandomAgent(seed=2) as black:
        board, outcome = play_game(white, black, opening, max_plies=20)
    assert len(board.move_stack) == len(opening.moves) + 20
    assert outcome.result == "1/2-1/2" and outcome.termination == "max plies (20)"
    replay = chess.Board()
    for move in board.move_stack:
        assert replay.is_legal(move)
        replay.push(move)
    assert [m.uci() for m in board.move_stack[: len(opening.moves)]] == list(opening.moves)


class IllegalMover(AgentBase):
    """Always answers e2e4, legal or not: the only way to reach the forfeit path."""

    name = "illegal"

    def choose_move(self, board: chess.Board) -> chess.Move:
        return chess.Move.from_uci("e2e4")


def test_an_illegal_move_loses():
    with RandomAgent() as random_agent:
        board, outcome = play_game(IllegalMover(), random_agent, START, max_plies=10)
        assert len(board.move_stack) == 2  # 1. e4 is legal once, not twice
        assert outcome.result == "0-1" and "illegal move: e2e4 by illegal" in outcome.termination
        _, outcome = play_game(random_agent, IllegalMover(), START, max_plies=10)
        assert outcome.result == "1-0"


def test_schedule_plays_every_opening_with_both_colours():
    games = schedule(3, load_openings(), TournamentConfig(games_per_pair=4))
    assert len(games) == 3 * 4
    assert len({g.round for g in games}) == len(games)
    for a, b in [(0, 1), (0, 2), (1, 2)]:
        pair = [g for g in games if {g.white, g.black} == {a, b}]
        assert len(pair) == 4
        for opening in {g.opening for g in pair}:
            colours = sorted((g.white, g.black) for g in pair if g.opening == opening)
            assert colours == [(a, b), (b, a)]
    with pytest.raises(ValueError, match="even"):
        TournamentConfig(games_per_pair=3)


# --- whole tournaments -------------------------------------------------------------------


def test_round_robin_against_weak_stockfish(tmp_path, stockfish):
    specs = ["random", "random:seed=1", f"stockfish:nodes=500,engine={stockfish}"]
    agents = [make_agent(s) for s in specs]
    try:
        config = TournamentConfig(games_per_pair=4, max_plies=160, anchor="random")
        summary = run_tournament(agents, tmp_path, config, progress=False)
    finally:
        for agent in agents:
            agent.close()

    games = read_pgn(tmp_path / "games.pgn")
    assert len(games) == summary["games"] == 12
    for game in games:
        h = game.headers
        assert {"Event", "White", "Black", "Result", "Opening", "Termination"} <= set(h)
        board = game.end().board()
        assert h["Result"] in ("1-0", "0-1", "1/2-1/2")
        if h["Termination"] == "checkmate":
            assert board.is_checkmate()
            assert h["Result"] == ("0-1" if board.turn == chess.WHITE else "1-0")
        elif h["Termination"].startswith("max plies"):
            assert h["Result"] == "1/2-1/2"
        opening = next(o for o in load_openings() if o.name == h["Opening"])
        assert [m.uci() for m in game.mainline_moves()][: len(opening.moves)] == list(opening.moves)

    stockfish_name = specs[2]
    saved = json.loads((tmp_path / "tournament.json").read_text())
    assert saved["agents"] == specs and saved["games"] == 12
    elo = {p["name"]: p for p in saved["elo"]["players"]}
    assert elo["random"]["elo"] == 0 and elo["random"]["ci"] == 0
    sf = elo[stockfish_name]
    assert sf["wins"] >= 6 and sf["losses"] == 0  # a real engine against random movers
    assert saved["elo"]["players"][0]["name"] == stockfish_name and sf["elo"] > 100
    pair = next(p for p in saved["pairs"] if p["b"] == stockfish_name and p["a"] == "random")
    assert pair["games"] == 4 and pair["a_score"] < 0.5
    assert sum(saved["terminations"].values()) == 12
    assert "(anchor)" in saved["table"]


def test_resume_reuses_finished_games(tmp_path):
    def run(resume):
        agents = [RandomAgent(seed=1, name="r1"), RandomAgent(seed=2, name="r2")]
        config = TournamentConfig(games_per_pair=4, max_plies=30)
        return run_tournament(agents, tmp_path, config, resume=resume, progress=False)

    first = run(resume=False)
    text = (tmp_path / "games.pgn").read_text()
    # Cut the file inside the third game, as an interrupted run would leave it.
    cut = text.index("[Event", text.index("[Event", text.index("[Event") + 1) + 1) + 200
    (tmp_path / "games.pgn").write_text(text[:cut])
    second = run(resume=True)
    assert second["reused_games"] == 2 and second["games"] == 4
    assert [g["round"] for g in second["game_list"]] == [g["round"] for g in first["game_list"]]
    assert second["game_list"][:2] == first["game_list"][:2]
    assert len(read_pgn(tmp_path / "games.pgn")) == 4
    third = run(resume=True)
    assert third["reused_games"] == 4 and third["game_list"] == second["game_list"]


def test_adjudication_ends_lost_games_early(tmp_path, stockfish):
    adjudication = AdjudicationConfig.parse("stockfish:nodes=2000,cp=400,plies=2", stockfish)
    assert (adjudication.nodes, adjudication.threshold_cp, adjudication.plies) == (2000, 400, 2)
    agents = [
        make_agent(f"stockfish:nodes=500,engine={stockfish}", engine_path=stockfish),
        RandomAgent(seed=5),
    ]
    try:
        summary = run_tournament(
            agents,
            tmp_path,
            TournamentConfig(games_per_pair=2, max_plies=200),
            adjudication=adjudication,
            progress=False,
        )
    finally:
        for agent in agents:
            agent.close()
    assert summary["terminations"].get("adjudication", 0) >= 1
    for game in summary["game_list"]:
        if game["termination"].startswith("adjudication"):
            winner = game["white"] if game["result"] == "1-0" else game["black"]
            assert winner == agents[0].name
            # Named by the side ahead, not by the sign of White's score.
            colour = "White" if game["result"] == "1-0" else "Black"
            assert game["termination"].startswith(f"adjudication: {colour} ahead by 400 cp")
    with pytest.raises(ValueError, match="bad item"):
        AdjudicationConfig.parse("stockfish:depth=3")
    with pytest.raises(ValueError, match="only stockfish"):
        AdjudicationConfig.parse("lc0:nodes=3")


def test_cli_prints_the_table_and_writes_files(tmp_path, capsys):
    out = tmp_path / "t"
    code = main(
        ["--agents", "random", "random:seed=9", "--games", "2", "--max-plies", "40"]
        + ["--anchor", "random:seed=9", "--anchor-elo", "1000", "--out", str(out), "--quiet"]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "(anchor)" in printed and "random vs random:seed=9" in printed
    saved = json.loads((out / "tournament.json").read_text())
    anchor = next(p for p in saved["elo"]["players"] if p["name"] == "random:seed=9")
    assert anchor["elo"] == 1000
    assert len(read_pgn(out / "games.pgn")) == 2
    with pytest.raises(SystemExit):
        main(["--agents", "random", "random:seed=1", "--games", "3", "--out", str(out)])
    assert main(["--agents", "random", "random", "--out", str(out), "--quiet"]) == 2
    assert "names must differ" in capsys.readouterr().err


def test_pgn_headers_round_trip_through_a_reader():
    # The PGN a tournament writes is what standard tools read: exercise the writer directly.
    from core.game_end import Outcome
    from eval.game import ScheduledGame, to_pgn

    opening = Opening("Test", "", "8/8/4k3/8/8/3RK3/8/8 w - - 0 1", ("d3d4",))
    board = opening.board()
    board.push_san("Ke7")
    game = ScheduledGame("1.1.1", 0, 1, opening)
    pgn = to_pgn(
        board,
        Outcome("1/2-1/2", "max plies (1)"),
        game,
        ["a", "b"],
        TournamentConfig().event,
        "2026.01.01",
    )
    parsed = chess.pgn.read_game(io.StringIO(str(pgn)))
    assert parsed.headers["FEN"] == opening.fen and parsed.headers["SetUp"] == "1"
    assert [m.uci() for m in parsed.mainline_moves()] == ["d3d4", "e6e7"]
    assert parsed.headers["Termination"] == "max plies (1)" and "ECO" not in parsed.headers


def test_anchor_name_equals_rating_shifts_every_rating(tmp_path, capsys):
    # The same games (random movers are seeded) rated with the anchor at 0 and at 1500:
    # every rating moves by 1500, the intervals stay.
    common = ["--agents", "random", "random:seed=9", "greedy", "--games", "2"]
    common += ["--max-plies", "40", "--quiet"]
    assert main([*common, "--anchor", "random", "--out", str(tmp_path / "a")]) == 0
    assert main([*common, "--anchor", "random=1500", "--out", str(tmp_path / "b")]) == 0
    # A spec holding `=` itself: the whole text is a name first, then NAME=RATING.
    spec_anchor = ["--anchor", "random:seed=9=-200", "--out", str(tmp_path / "c")]
    assert main([*common, *spec_anchor]) == 0
    fits = [
        {
            p["name"]: p
            for p in json.loads((tmp_path / d / "tournament.json").read_text())["elo"]["players"]
        }
        for d in "abc"
    ]
    assert fits[0]["random"]["elo"] == 0 and fits[1]["random"]["elo"] == 1500
    assert fits[2]["random:seed=9"]["elo"] == -200
    for name in fits[0]:
        assert fits[1][name]["elo"] == pytest.approx(fits[0][name]["elo"] + 1500, abs=1e-6)
        assert fits[1][name]["ci"] == pytest.approx(fits[0][name]["ci"], abs=1e-6)
    capsys.readouterr()
    assert main([*common, "--anchor", "random=strong", "--out", str(tmp_path / "d")]) == 2
    assert "rating 'strong' is not a number" in capsys.readouterr().err
    assert main([*common, "--anchor", "nobody=1500", "--out", str(tmp_path / "d")]) == 2
    assert "is none of the agents" in capsys.readouterr().err


def test_a_stockfish_elo_anchor_sits_at_its_own_rating(tmp_path, stockfish, capsys):
    # `--anchor stockfish:elo=N` without a rating: the engine's calibrated N, not 0.
    spec = "stockfish:elo=1350,time=0.01"
    common = ["--agents", spec, "random", "--games", "2", "--max-plies", "30", "--quiet"]
    common += ["--engine", stockfish]
    assert main([*common, "--anchor", spec, "--out", str(tmp_path / "a")]) == 0
    assert main([*common, "--anchor", spec, "--anchor-elo", "0", "--out", str(tmp_path / "b")]) == 0
    ratings = [
        {
            p["name"]: p["elo"]
            for p in json.loads((tmp_path / d / "tournament.json").read_text())["elo"]["players"]
        }
        for d in "ab"
    ]
    # (The two runs' games differ: Stockfish plays on time. Only the anchors are compared.)
    [engine] = [name for name in ratings[0] if name != "random"]
    assert ratings[0][engine] == 1350 and ratings[1][engine] == 0
    capsys.readouterr()
