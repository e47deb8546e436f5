"""Self-play games with the real Stockfish: deterministic whatever the workers, Lichess-style
headers, read by the annotation pipeline as any PGN."""

from __future__ import annotations

import dataclasses
import io
import json

import chess
import chess.pgn
import pytest
import zstandard

from core.engine_settings import EngineLimit
from core.openings import load_openings
from pipeline import pgn
from pipeline.annotate import annotate
from pipeline.selfplay import SelfPlayConfig, main, run
from pipeline.sources import read_lines


def small(tmp_path, name: str, stockfish: str, **changes) -> SelfPlayConfig:
    settings = dict(
        games=4, out=str(tmp_path / name), limit=EngineLimit.parse("nodes=100"), max_plies=40,
        random_prob=0.1, engine=stockfish,
    )  # fmt: skip
    return SelfPlayConfig(**(settings | changes))


def read_games(path: str) -> list[chess.pgn.Game]:
    data = open(path, "rb").read()
    if path.endswith(".zst"):
        data = zstandard.ZstdDecompressor().decompressobj().decompress(data)
    stream, games = io.StringIO(data.decode()), []
    while (game := chess.pgn.read_game(stream)) is not None:
        games.append(game)
    return games


def test_games_are_the_same_whatever_the_worker_count(stockfish, tmp_path):
    one = run(small(tmp_path, "one.pgn.zst", stockfish, workers=1), show_progress=False)
    two = run(small(tmp_path, "two.pgn.zst", stockfish, workers=2), show_progress=False)
    assert (tmp_path / "one.pgn.zst").read_bytes() == (tmp_path / "two.pgn.zst").read_bytes()
    assert one["workers"] == 1 and two["workers"] == 2
    same = ("boards", "engine_moves", "random_moves", "nodes", "results", "terminations")
    assert {k: one[k] for k in same} == {k: two[k] for k in same}
    assert one["reproducible"] and one["boards"] > 4 * 7 and one["random_moves"] >= 4 * 4
    # Game i depends on the seed and i only: a shorter run is a prefix of a longer one.
    run(small(tmp_path, "two_games.pgn", stockfish, games=2), show_progress=False)
    four = [str(g) for g in read_games(str(tmp_path / "one.pgn.zst"))]
    assert [str(g) for g in read_games(str(tmp_path / "two_games.pgn"))] == four[:2]
    other = run(small(tmp_path, "other.pgn", stockfish, seed=1), show_progress=False)
    first = [str(g.mainline_moves()) for g in read_games(str(tmp_path / "one.pgn.zst"))]
    assert first != [str(g.mainline_moves()) for g in read_games(str(tmp_path / "other.pgn"))]
    assert other["first_game_id"] != one["first_game_id"]


def test_games_carry_lichess_headers_and_follow_their_settings(stockfish, tmp_path):
    config = small(tmp_path, "games.pgn", stockfish, games=3, random_prob=0.0, date="2026.11.23")
    document = run(config, show_progress=False)
    games = read_games(config.out)
    openings = {o.name: o for o in load_openings()}
    ids = set()
    for number, game in enumerate(games, 1):
        h = game.headers
        assert list(h)[:7] == ["Event", "Site", "Date", "Round", "White", "Black", "Result"]
        assert h["Date"] == "2026.11.23" and h["White"] == h["Black"]
        assert h["White"].startswith("Stockfish") and h["White"].endswith("nodes=100")
        assert h["GameId"].endswith(f"-{number:06d}") and h["GameId"] in h["Site"]
        ids.add(h["GameId"])
        opening = openings[h["Opening"]]
        assert h["ECO"] == opening.eco
        moves = [m.uci() for m in game.mainline_moves()]
        assert tuple(moves[: len(opening.moves)]) == opening.moves
        played = len(moves) - len(opening.moves)
        board = game.end().board()
        if h["Result"] == "*":
            assert (played, h["Termination"]) == (40, "Unterminated")
        else:
            assert h["Termination"] == "Normal" and board.is_game_over(claim_draw=True)
    assert len(ids) == 3
    assert document["boards"] == sum(len(list(g.mainline_moves())) for g in games)
    assert document["random_moves"] == 3 * 4
    # The annotator reads them as any PGN: every game used, each with its own id.
    texts = [t for t in pgn.split_games(read_lines(config.out)) if isinstance(t, pgn.GameText)]
    assert {pgn.game_id(t) for t in texts} == ids
    parsed = [pgn.parse_game(t) for t in texts]
    assert all(isinstance(p, pgn.GameBoards) for p in parsed)
    assert sum(len(p.fens) for p in parsed) == document["boards"]


def test_the_annotation_pipeline_takes_the_games(stockfish, tmp_path):
    config = small(tmp_path, "games.pgn.zst", stockfish, games=2, max_plies=6, random_plies=2)
    made = run(config, show_progress=False)
    stats = annotate.run(
        [config.out, "--out", str(tmp_path / "data"), "--limit", "nodes=20",
         "--engine", stockfish, "--progress-seconds", "3600"]
    )  # fmt: skip
    assert stats["games"]["used"] == 2 and stats["games"]["skipped_total"] == 0
    assert stats["boards"]["total"] == made["boards"]


def test_the_command_line_reports_in_one_line(stockfish, tmp_path, capsys):
    out = str(tmp_path / "cli.pgn")
    args = ["--games", "1", "--out", out, "--limit", "nodes=50", "--max-plies", "4",
            "--engine", stockfish, "--quiet"]  # fmt: skip
    assert main(args) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["games"] == 1 and document["boards"] >= 4
    assert main(args) == 1
    assert capsys.readouterr().err.strip() == f"error: {out} exists: pass --overwrite to replace it"
    assert main([*args, "--overwrite"]) == 0
    capsys.readouterr()
    assert main(["--games", "0", "--out", str(tmp_path / "x.txt")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--games must be >= 1" in err and "must end in .pgn" in err
    assert main([*args[:3], str(tmp_path / "y.pgn"), "--engine", "/no/such/engine"]) == 1
    assert "/no/such/engine" in capsys.readouterr().err
    assert not (tmp_path / "y.pgn").exists()


def test_config_checks_its_values():
    with pytest.raises(ValueError, match="random-prob"):
        SelfPlayConfig(games=1, out="a.pgn", random_prob=1.5)
    with pytest.raises(ValueError, match="--date '23.11.2026' is not YYYY.MM.DD"):
        SelfPlayConfig(games=1, out="a.pgn", date="23.11.2026")
    assert dataclasses.replace(SelfPlayConfig(games=3, out="a.pgn"), workers=8).worker_count == 3
