"""The bundled sample in data/sample/: games that parse and replay legally, and Lichess-format
puzzles whose every solution Stockfish confirms (checked here independently of the script that
made them)."""

from __future__ import annotations

import csv
import pathlib

import chess
import chess.engine
import chess.pgn
import pytest

from core.values import win_probability

SAMPLE = pathlib.Path(__file__).resolve().parent.parent / "data" / "sample"
LICHESS_HEADER = [
    "PuzzleId",
    "FEN",
    "Moves",
    "Rating",
    "RatingDeviation",
    "Popularity",
    "NbPlays",
    "Themes",
    "GameUrl",
    "OpeningTags",
]
GAME_HEADERS = {"Event", "Site", "Date", "White", "Black", "Result", "WhiteElo", "BlackElo"}
GAME_HEADERS |= {"TimeControl", "Termination", "GameId"}
VERIFY_NODES = 200_000
VERIFY_GAP = 0.2  # an alternative to a non-mating solver move must be this much worse


def read_puzzles() -> list[dict[str, str]]:
    with open(SAMPLE / "puzzles.csv", encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == LICHESS_HEADER
        return list(reader)


@pytest.mark.parametrize(
    "name,minimum", [("games.pgn.zst", 30), ("selfplay.pgn.zst", 8), ("mismatch.pgn.zst", 32)]
)
def test_games_are_legal_lichess_style_pgn(name, minimum, sample_games):
    games = sample_games(name)
    assert len(games) >= minimum
    ids = [g.headers["GameId"] for g in games]
    assert len(set(ids)) == len(ids)
    for game in games:
        assert not game.errors, (game.headers["GameId"], game.errors)
        assert GAME_HEADERS <= set(game.headers), game.headers["GameId"]
        assert "FEN" not in game.headers  # every game starts from the initial position
        moves = list(game.mainline_moves())
        assert len(moves) >= 8
        board = game.board()
        for move in moves:
            assert board.is_legal(move)
            board.push(move)
        result = game.headers["Result"]
        assert result in ("1-0", "0-1", "1/2-1/2")
        if board.is_checkmate():
            assert result == ("0-1" if board.turn == chess.WHITE else "1-0")
        if board.is_stalemate() or board.is_insufficient_material():
            assert result == "1/2-1/2"


def test_sample_size_suits_the_demo(sample_games):
    """Enough boards to learn from, few enough to annotate in minutes on two cores."""
    fens = set()
    for name in ("games.pgn.zst", "selfplay.pgn.zst", "mismatch.pgn.zst"):
        for game in sample_games(name):
            board = game.board()
            for move in game.mainline_moves():
                fens.add(board.fen())
                board.push(move)
    assert 5000 <= len(fens) <= 9000


def test_puzzles_are_well_formed():
    puzzles = read_puzzles()
    assert 50 <= len(puzzles) <= 100
    assert len({p["PuzzleId"] for p in puzzles}) == len(puzzles)
    assert len({p["FEN"] for p in puzzles}) == len(puzzles)
    for p in puzzles:
        board = chess.Board(p["FEN"])
        assert board.is_valid(), p["PuzzleId"]
        moves = p["Moves"].split()
        assert len(moves) >= 2 and len(moves) % 2 == 0  # the setup move, then pairs
        for uci in moves:
            move = chess.Move.from_uci(uci)
            assert board.is_legal(move), (p["PuzzleId"], uci)
            board.push(move)
        assert 400 <= int(p["Rating"]) <= 3000
        assert int(p["RatingDeviation"]) > 0 and p["Themes"]
        if "mate" in p["Themes"].split():
            assert board.is_checkmate(), p["PuzzleId"]
    kinds = {t for p in puzzles for t in p["Themes"].split()}
    assert {"mate", "oneMove"} <= kinds and ({"crushing", "advantage"} & kinds)


def _win(score: chess.engine.Score) -> float:
    mate = score.mate()
    return win_probability(mate=mate) if mate is not None else win_probability(cp=score.score())


def _mates(score: chess.engine.Score | None) -> bool:
    return score is not None and score.mate() is not None and score.mate() > 0


@pytest.mark.slow
def test_every_puzzle_solution_is_confirmed_by_stockfish(stockfish):
    """Each solver move either mates at once or is Stockfish's best, and every alternative is
    clearly worse: it does not mate when the solution mates, else it loses >= VERIFY_GAP."""
    engine = chess.engine.SimpleEngine.popen_uci(stockfish)
    engine.configure({"Threads": 1, "Hash": 16})
    problems = []
    try:
        for p in read_puzzles():
            board = chess.Board(p["FEN"])
            moves = [chess.Move.from_uci(m) for m in p["Moves"].split()]
            board.push(moves[0])
            for i in range(1, len(moves), 2):
                after = board.copy(stack=False)
                after.push(moves[i])
                if not after.is_checkmate():
                    infos = engine.analyse(
                        board, chess.engine.Limit(nodes=VERIFY_NODES), multipv=2, game=object()
                    )
                    best_move = infos[0]["pv"][0]
                    best = infos[0]["score"].pov(board.turn)
                    second = infos[1]["score"].pov(board.turn) if len(infos) > 1 else None
                    if best_move != moves[i]:
                        problems.append(f"{p['PuzzleId']}: move {i} {moves[i]} vs {best_move}")
                    elif _mates(best) and _mates(second):
                        problems.append(f"{p['PuzzleId']}: move {i} has a second mate")
                    elif not _mates(best) and second is not None:
                        if _win(best) - _win(second) < VERIFY_GAP:
                            problems.append(f"{p['PuzzleId']}: move {i} has a close second")
                board.push(moves[i])
                if i + 1 < len(moves):
                    board.push(moves[i + 1])
    finally:
        engine.quit()
    assert not problems, problems
