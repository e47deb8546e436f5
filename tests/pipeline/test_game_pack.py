"""Annotated splits carried as their games (pipeline/game_pack.py, jobs/pack_games.py): real
Stockfish rows of real games, packed and unpacked back to the very same rows."""

from __future__ import annotations

import json
import os
import pathlib

import chess
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from core.schema import read_boards, write_boards
from jobs import pack_games
from pipeline import game_pack, pgn
from pipeline.annotate import annotate
from pipeline.sources import read_lines

ROOT = pathlib.Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data/sample/games.pgn.zst"
NUM_GAMES = 6  # of the sample's real games
SPLITS = ("search", "after-move", "multipv")


def sorted_rows(table: pa.Table) -> list[dict]:
    return sorted(table.to_pylist(), key=repr)  # two splits may hold the same board


@pytest.fixture(scope="module")
def games_file(tmp_path_factory) -> pathlib.Path:
    texts = [
        item.text
        for item in pgn.split_games(read_lines(str(SAMPLE)))
        if isinstance(item, pgn.GameText)
    ]
    path = tmp_path_factory.mktemp("games") / "games.pgn"
    path.write_text("\n\n".join(texts[:NUM_GAMES]) + "\n")
    return path


@pytest.fixture(scope="module")
def annotated(stockfish, games_file, tmp_path_factory) -> pathlib.Path:
    """Three splits of the same games: one search a board, one search a board after a random
    move from each, and three lines a board (a shape a game cannot say)."""
    out = tmp_path_factory.mktemp("annotated")
    common = ["--out", str(out), "--mode", "search", "--limit", "nodes=30",
              "--engine", stockfish, "--progress-seconds", "3600"]  # fmt: skip
    annotate.run([str(games_file), *common, "--split", "search"])
    annotate.run([str(games_file), *common, "--split", "after-move", "--random-move", "1"])
    annotate.run([str(games_file), *common, "--split", "multipv", "--multipv", "3"])
    return out


def splits(annotated: pathlib.Path, names=SPLITS) -> list[game_pack.SplitCount]:
    return [
        game_pack.SplitCount(name, str(annotated / name), name == "after-move") for name in names
    ]


def games(path: pathlib.Path, limit: int = NUM_GAMES) -> list[game_pack.Game]:
    return list(pack_games.read_games([str(path)], progress=False))[:limit]


def test_move_codes_say_every_legal_move_and_zero_is_none():
    boards = [
        chess.Board(),
        chess.Board("r3k2r/1P6/8/8/8/8/6p1/R3K2R w KQkq - 0 1"),  # castling, promotions
        chess.Board("r3k2r/1P6/8/8/8/8/6p1/R3K2R b KQkq - 0 1"),
        chess.Board("4k3/8/8/3pP3/8/8/8/4K3 w - d6 0 2"),  # en passant
    ]
    for board in boards:
        codes = {game_pack.move_code(m) for m in board.legal_moves}
        assert len(codes) == board.legal_moves.count()
        assert game_pack.NO_MOVE not in codes
        for move in board.legal_moves:
            assert game_pack.code_move(game_pack.move_code(move)) == move


def test_unpacked_rows_are_the_annotated_rows(annotated, games_file, tmp_path):
    manifest = game_pack.pack(splits(annotated), games(games_file), str(tmp_path / "pack"))
    counts = {s["name"]: s for s in manifest["splits"]}
    # Every board of the games and every board one move past them is said by a game...
    for name in ("search", "after-move"):
        assert counts[name]["rows"] > 50
        assert counts[name]["in_games"] == counts[name]["rows"] and counts[name]["loose"] == 0
    # ...and rows of several lines are carried as they are (a board of one legal move has one).
    lines = read_boards(str(annotated / "multipv"), ["moves"]).column("moves").to_pylist()
    assert counts["multipv"]["loose"] == sum(len(m) > 1 for m in lines) > 50
    assert manifest["boards"] == sum(s["rows"] for s in manifest["splits"])
    rows = game_pack.unpack(str(tmp_path / "pack"), str(tmp_path / "out"))
    assert rows == manifest["boards"]
    source = pa.concat_tables([read_boards(str(annotated / name)) for name in SPLITS])
    unpacked = read_boards(str(tmp_path / "out"))
    assert unpacked.schema.equals(source.schema, check_metadata=True)
    assert sorted_rows(unpacked) == sorted_rows(source)


def test_a_board_of_no_given_game_is_carried_loose(annotated, games_file, tmp_path):
    only = splits(annotated, ("search", "after-move"))
    manifest = game_pack.pack(only, games(games_file, NUM_GAMES - 2), str(tmp_path / "pack"))
    loose = {s["name"]: s["loose"] for s in manifest["splits"]}
    assert loose["search"] > 0 and loose["after-move"] > 0
    game_pack.unpack(str(tmp_path / "pack"), str(tmp_path / "out"))
    source = pa.concat_tables([read_boards(s.path) for s in only])
    assert sorted_rows(read_boards(str(tmp_path / "out"))) == sorted_rows(source)


def test_the_same_board_twice_in_a_split_comes_back_twice(annotated, tmp_path):
    rows = read_boards(str(annotated / "search")).to_pylist()[:20]
    folder = tmp_path / "twice"
    write_boards(rows, str(folder / "boards-00000-of-00002.parquet"))
    write_boards(
        [{**row, "count": row["count"] + 1} for row in rows],
        str(folder / "boards-00001-of-00002.parquet"),
    )
    only = [game_pack.SplitCount("twice", str(folder), False)]
    manifest = game_pack.pack(only, [], str(tmp_path / "pack"))  # in no game: all loose
    assert manifest["splits"][0]["loose"] == 40
    game_pack.unpack(str(tmp_path / "pack"), str(tmp_path / "out"))
    assert sorted_rows(read_boards(str(tmp_path / "out"))) == sorted_rows(read_boards(str(folder)))


def test_an_empty_split_or_a_used_folder_is_refused(annotated, tmp_path):
    empty = tmp_path / "empty"
    write_boards([], str(empty / "boards-00000-of-00001.parquet"))
    with pytest.raises(game_pack.PackError, match="no rows to pack"):
        game_pack.pack([game_pack.SplitCount("e", str(empty), False)], [], str(tmp_path / "a"))
    used = tmp_path / "used"
    used.mkdir()
    (used / "old.parquet").write_text("x")
    with pytest.raises(game_pack.PackError, match="is not empty"):
        game_pack.pack(splits(annotated, ("search",)), [], str(used))


def test_unpacking_on_several_workers_gives_the_same_shards(annotated, games_file, tmp_path):
    game_pack.pack(splits(annotated, ("search",)), games(games_file), str(tmp_path / "pack"))
    game_pack.unpack(str(tmp_path / "pack"), str(tmp_path / "one"), workers=1)
    game_pack.unpack(str(tmp_path / "pack"), str(tmp_path / "two"), workers=2)
    names = sorted(os.listdir(tmp_path / "one"))
    assert names == sorted(os.listdir(tmp_path / "two"))
    for name in names:
        assert pq.read_table(tmp_path / "one" / name) == pq.read_table(tmp_path / "two" / name)


def test_a_damaged_pack_is_refused_in_one_line(annotated, games_file, tmp_path):
    with pytest.raises(game_pack.PackError, match="no readable pack.json"):
        game_pack.unpack(str(tmp_path), str(tmp_path / "out"))
    pack = tmp_path / "pack"
    game_pack.pack(splits(annotated, ("search",)), games(games_file), str(pack))
    boards = pq.read_table(pack / game_pack.BOARDS_FILE)
    ply = boards.column("ply").to_pylist()
    ply[-1] = 60_000  # past the end of its game
    index = boards.schema.get_field_index("ply")
    pq.write_table(
        boards.set_column(index, boards.schema.field(index), pa.array(ply, pa.uint16())),
        pack / game_pack.BOARDS_FILE,
    )
    with pytest.raises(game_pack.PackError, match="ply 60000 of a game of"):
        game_pack.unpack(str(pack), str(tmp_path / "out"))
    ply[-1], ply[1] = ply[1], ply[2] + 1  # a game's boards out of order
    pq.write_table(
        boards.set_column(index, boards.schema.field(index), pa.array(ply, pa.uint16())),
        pack / game_pack.BOARDS_FILE,
    )
    with pytest.raises(game_pack.PackError, match="not in order"):
        game_pack.unpack(str(pack), str(tmp_path / "out"))
    pq.write_table(boards.slice(1), pack / game_pack.BOARDS_FILE)  # a row lost
    with pytest.raises(game_pack.PackError, match="the pack is damaged"):
        game_pack.unpack(str(pack), str(tmp_path / "out"))
    pq.write_table(boards.drop_columns(["cp"]), pack / game_pack.BOARDS_FILE)
    with pytest.raises(game_pack.PackError, match="not the pack's"):
        game_pack.unpack(str(pack), str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()  # nothing written by a refused unpack
    pq.write_table(boards, pack / game_pack.BOARDS_FILE)
    manifest = json.loads((pack / game_pack.MANIFEST).read_text())
    (pack / game_pack.MANIFEST).write_text(json.dumps({**manifest, "splits": None}))
    with pytest.raises(game_pack.PackError, match="pack.json: no"):
        game_pack.unpack(str(pack), str(tmp_path / "out"))
    (pack / game_pack.MANIFEST).write_text(json.dumps({**manifest, "version": 99}))
    assert not game_pack.is_pack(str(tmp_path / "nowhere"))
    with pytest.raises(game_pack.PackError, match="version 99"):
        game_pack.unpack(str(pack), str(tmp_path / "out"))


def test_pack_command_reports_and_keeps_to_its_budget(annotated, games_file, tmp_path, capsys):
    out = tmp_path / "pack"
    argv = ["--out", str(out), "--split", str(annotated / "search"), "--after-move",
            str(annotated / "after-move"), "--games", str(games_file), "--quiet"]  # fmt: skip
    assert pack_games.main([*argv, "--budget-mib", "8"]) == 0
    said = capsys.readouterr().out
    assert "search:" in said and "0 loose" in said and "packed" in said
    assert game_pack.is_pack(str(out))
    before = (out / game_pack.BOARDS_FILE).read_bytes()
    # A failed run leaves the earlier pack as it was: over the budget, a typo in a split or
    # in the games (found before any work).
    assert pack_games.main([*argv, "--budget-mib", "0.001"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "over the budget" in err
    typo = ["--out", str(out), "--split", str(annotated / "serch"), "--games", str(games_file)]
    assert pack_games.main(typo) == 1
    assert capsys.readouterr().err.startswith("error: no annotated board shards at")
    typo = [*argv[:-3], "--games", str(games_file) + ".missing", "--quiet"]
    assert pack_games.main(typo) == 1
    assert capsys.readouterr().err.startswith("error: no input matches")
    assert (out / game_pack.BOARDS_FILE).read_bytes() == before
    assert not pathlib.Path(f"{out}.partial").exists()
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    assert pack_games.main([*argv[2:], "--out", str(other), "--budget-mib", "8"]) == 1
    assert "holds no pack.json" in capsys.readouterr().err
    assert (other / "notes.txt").exists()
