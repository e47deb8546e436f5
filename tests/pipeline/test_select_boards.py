"""pipeline/select_boards.py: the boards whose best move is a check, a capture, or either."""

from __future__ import annotations

import json

import chess
import pyarrow.parquet as pq
import pytest

from core.schema import make_board_row, read_boards, write_boards
from pipeline import select_boards
from pipeline.select_boards import SelectConfig, best_move_is

# Scholar's mate threat: Qxf7# is a capture that checks; Qh5-e5 no; Bb5 quiet; Nxe5 a capture.
FEN = "r1bqkbnr/pppp1ppp/2n5/4p2Q/2B1P3/8/PPPP1PPP/RNB1K1NR w KQkq - 4 4"


@pytest.mark.parametrize(
    "move, check, capture, forcing",
    [
        ("h5f7", True, True, True),  # Qxf7#: both
        ("c4f7", True, True, True),  # Bxf7+
        ("h5e5", True, True, True),  # Qxe5+
        ("h5g4", False, False, False),  # a quiet queen move
        ("h5h7", False, True, True),  # Qxh7: a capture, no check
        ("c4b5", False, False, False),
    ],
)
def test_best_move_kinds(move, check, capture, forcing):
    assert best_move_is(FEN, move, "check") is check
    assert best_move_is(FEN, move, "capture") is capture
    assert best_move_is(FEN, move, "forcing") is forcing


def test_a_check_that_captures_nothing_and_the_boards_with_no_move():
    fen = "6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1"
    assert best_move_is(fen, "a1a8", "check")  # the back-rank mate
    assert not best_move_is(fen, "a1a8", "capture")
    assert not best_move_is(fen, "", "forcing")  # a mated board's row has no best move


def test_unreadable_rows_raise():
    with pytest.raises(ValueError, match="not legal"):
        best_move_is(FEN, "e1e3", "check")
    with pytest.raises(ValueError):
        best_move_is("not a fen", "e2e4", "check")


def _row(fen, best):
    return make_board_row(fen, engine="Stockfish", limit="search:nodes=1", moves=[best],
                          win_probs=[0.5], best_move=best, partial=True)  # fmt: skip


def test_run_keeps_the_check_rows_in_order_in_shards_and_counts_the_rest(tmp_path, capsys):
    rows = [
        _row(FEN, "h5f7"),
        _row(FEN, "h5g4"),
        _row(FEN, "e1e3"),  # illegal: skipped with a line naming the file and row
        _row(chess.STARTING_FEN, "e2e4"),
        _row("6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1", "a1a8"),
    ]
    write_boards(rows[:3], str(tmp_path / "in" / "a" / "boards-00000-of-00001.parquet"))
    write_boards(rows[3:], str(tmp_path / "in" / "b" / "boards-00000-of-00001.parquet"))
    config = SelectConfig((str(tmp_path / "in" / "a"), str(tmp_path / "in" / "b")),
                          str(tmp_path / "out"), "checks", "check", num_shards=2)  # fmt: skip
    lines = []
    document = select_boards.run(config, say=lines.append)

    kept = read_boards(str(tmp_path / "out" / "checks"))
    assert kept["best_move"].to_pylist() == ["h5f7", "a1a8"]
    assert sorted(p.name for p in (tmp_path / "out" / "checks").iterdir()) == [
        "boards-00000-of-00002.parquet", "boards-00001-of-00002.parquet"
    ]  # fmt: skip
    assert [
        pq.read_metadata(p).num_rows for p in sorted((tmp_path / "out" / "checks").iterdir())
    ] == [1, 1]
    assert (document["rows"], document["kept"], document["skipped"]) == (5, 2, 1)
    assert len(lines) == 1 and "in/a/boards-00000-of-00001.parquet: row 2: skipped" in lines[0]
    stats = json.loads((tmp_path / "out" / "checks.meta" / "stats.json").read_text())
    assert stats["source"] == "select" and stats["kept"] == 2
    card = (tmp_path / "out" / "README.md").read_text()
    assert "### checks" in card and "2 of 5 boards" in card

    # Forcing moves: the captures too; the output is replaced only when asked.
    with pytest.raises(FileExistsError):
        select_boards.run(config, say=lines.append)
    forcing = SelectConfig(config.inputs, config.out, "checks", "forcing", overwrite=True)
    assert select_boards.run(forcing, say=lines.append)["kept"] == 2
    capture = SelectConfig(config.inputs, config.out, "captures", "capture")
    assert select_boards.run(capture, say=lines.append)["kept"] == 1  # Qxf7#

    # An input that cannot be read leaves the split it would have replaced whole.
    (tmp_path / "in" / "b" / "boards-00000-of-00001.parquet").write_text("not parquet")
    with pytest.raises(ValueError):
        select_boards.run(forcing, say=lines.append)
    assert read_boards(str(tmp_path / "out" / "checks")).num_rows == 2


def test_the_command_reports_user_mistakes_in_one_line(tmp_path, capsys):
    code = select_boards.main([str(tmp_path / "nowhere"), "--out", str(tmp_path), "--split", "x"])
    err = capsys.readouterr().err
    assert code == 1 and len(err.strip().splitlines()) == 1 and "nowhere" in err
    write_boards([_row(FEN, "h5f7")], str(tmp_path / "a" / "boards-00000-of-00001.parquet"))
    code = select_boards.main([str(tmp_path / "a"), "--out", str(tmp_path), "--split", "a"])
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("error:") and "is one of the inputs" in err
    (tmp_path / "file").write_text("")  # an output directory that is a file
    code = select_boards.main(
        [str(tmp_path / "a"), "--out", str(tmp_path / "file"), "--split", "b"]
    )
    err = capsys.readouterr().err
    assert code == 1 and len(err.strip().splitlines()) == 1 and "file" in err
    assert select_boards.main([str(tmp_path / "a"), "--out", str(tmp_path), "--split", "b"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["kept"] == 1 and "kept 1 of 1 boards" in out.err


def _two_inputs(tmp_path):
    write_boards([_row(FEN, "h5f7"), _row(FEN, "h5g4")],
                 str(tmp_path / "in" / "boards-00000-of-00001.parquet"))  # fmt: skip
    return str(tmp_path / "in")


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--split", "../x"], "argument --split: expected a plain name (no '/', not '.' or '..'), "
                              "got '../x'"),
        (["--split", "a/b"], "argument --split: expected a plain name"),
        (["--split", ".."], "argument --split: expected a plain name"),
        (["--split", "x", "--num-shards", "100000"], "argument --num-shards: expected an integer "
                                                     ">= 1 and <= 10,000, got 100000"),
        (["--split", "x", "--num-shards", "0"], "argument --num-shards: expected an integer >= 1"),
    ],
)  # fmt: skip
def test_a_split_outside_out_and_a_shard_count_past_the_cap_are_refused_while_parsing(
    tmp_path, capsys, flags, message
):
    with pytest.raises(SystemExit) as stopped:
        select_boards.main([_two_inputs(tmp_path), "--out", str(tmp_path / "out"), *flags])
    assert stopped.value.code == 2
    assert message in capsys.readouterr().err.strip().splitlines()[-1]
    assert not (tmp_path / "out").exists() and not (tmp_path / "x").exists()


def test_more_shards_than_boards_selected_is_one_line_and_writes_nothing(tmp_path, capsys):
    argv = [_two_inputs(tmp_path), "--out", str(tmp_path / "out"), "--split", "c"]
    assert select_boards.main([*argv, "--num-shards", "2"]) == 1  # one of the two gives check
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "error: --num-shards 2 is more than the 1 boards selected: some shards would be empty"
    )
    assert not (tmp_path / "out" / "c").exists()
    assert select_boards.main([*argv, "--num-shards", "1"]) == 0


def test_an_unwritable_out_is_refused_before_reading_the_inputs(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    argv = [str(tmp_path / "no-such-input"), "--out", str(blocker / "out"), "--split", "c"]
    assert select_boards.main(argv) == 1
    assert capsys.readouterr().err.strip() == (
        f"error: --out {blocker / 'out'} cannot be written: {blocker} is not a directory"
    )
