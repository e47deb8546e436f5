"""pipeline/lichess_evals/lines.py (one line -> one row) and
pipeline/lichess_evals/import_lichess_evals.py (the streaming import) on small eval-database
files the tests write themselves."""

from __future__ import annotations

import dataclasses
import functools
import json
import multiprocessing
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import chess
import pyarrow.parquet as pq
import pytest
import zstandard

from core.actions import move_to_index
from core.schema import (
    BOARD_SCHEMA,
    FAILURE_SCHEMA,
    SOURCE_LICHESS_EVALS,
    check_schema,
    import_path,
    meta_dir,
    stats_path,
)
from core.values import win_probability
from pipeline.lichess_evals import import_lichess_evals as lev
from pipeline.lichess_evals.import_lichess_evals import (
    ImportMismatch,
    InputError,
    LichessEvalsConfig,
    import_lichess_evals,
    main,
)
from pipeline.lichess_evals.lines import ENGINE, REASONS, BadLine, convert_line

ROOT = Path(__file__).resolve().parents[2]

START = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq -"
AFTER_E4 = "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq -"
ONE_MOVE = "k7/8/8/8/8/8/1r6/K7 w - -"  # only a1b2
TWO_MOVES = "7k/8/8/8/8/8/8/K5r1 w - -"  # only a1b2 and a1a2
CASTLING = "r3k2r/8/8/8/8/8/8/R3K2R w KQkq -"
CHECKMATED = "7k/6Q1/6K1/8/8/8/8/8 b - -"


def pv(line: str, cp: int | None = None, mate: int | None = None) -> dict:
    out: dict = {"line": line}
    if cp is not None:
        out["cp"] = cp
    if mate is not None:
        out["mate"] = mate
    return out


def record(fen: str, *pvs: dict, depth: int = 30, knodes: int = 1000) -> str:
    return json.dumps({"fen": fen, "evals": [{"pvs": list(pvs), "knodes": knodes, "depth": depth}]})


def write_input(path: Path, lines: list[str], compressed: bool = True) -> Path:
    data = "".join(line + "\n" for line in lines).encode()
    path.write_bytes(zstandard.ZstdCompressor().compress(data) if compressed else data)
    return path


def rows_of(split_dir: Path, prefix: str = "boards") -> list[dict]:
    rows = []
    schema = BOARD_SCHEMA if prefix == "boards" else FAILURE_SCHEMA
    directory = split_dir if prefix == "boards" else Path(meta_dir(str(split_dir)))
    for file in sorted(directory.glob(f"{prefix}-*.parquet")):
        check_schema(pq.read_schema(file), str(file), schema)
        rows.extend(pq.read_table(file).to_pylist())
    return rows


def contents(split_dir: Path) -> dict[str, list[dict]]:
    """Every Parquet file of a finished split (and its meta folder) by name, as rows."""
    files = [*split_dir.glob("*.parquet"), *Path(meta_dir(str(split_dir))).glob("*.parquet")]
    return {f.name: pq.read_table(f).to_pylist() for f in sorted(files)}


def row(line: str) -> dict:
    return convert_line(line).row


def reason(line: str) -> str:
    with pytest.raises(BadLine) as caught:
        convert_line(line)
    return caught.value.reason


def random_positions(count: int, seed: int = 0) -> list[chess.Board]:
    rng = random.Random(seed)
    boards = []
    while len(boards) < count:
        board = chess.Board()
        for _ in range(rng.randrange(60)):
            moves = list(board.legal_moves)
            if not moves:
                break
            board.push(rng.choice(moves))
        if any(board.legal_moves):
            boards.append(board)
    return boards


def realistic_lines(count: int, seed: int = 0) -> list[str]:
    """Lines shaped like the database's: several evaluations, up to 5 PVs, real moves."""
    rng = random.Random(seed)
    lines = []
    for board in random_positions(count, seed):
        legal = [board.uci(m) for m in board.legal_moves]
        evals = []
        for _ in range(rng.choice([1, 2])):
            firsts = rng.sample(legal, min(len(legal), rng.choice([1, 3, 5])))
            pvs = [pv(f"{m} e7e5", cp=rng.randrange(-300, 300)) for m in firsts]
            evals.append({"pvs": pvs, "knodes": rng.randrange(10**6), "depth": rng.randrange(40)})
        lines.append(json.dumps({"fen": board.epd(), "evals": evals}))
    return lines


# --- the conversion of one line ---------------------------------------------------------------


def test_deepest_evaluation_wins_ties_to_more_knodes_then_first():
    evals = [
        {"pvs": [pv("e2e4", cp=1)], "knodes": 900, "depth": 20},
        {"pvs": [pv("d2d4", cp=2)], "knodes": 500, "depth": 36},
        {"pvs": [pv("c2c4", cp=3)], "knodes": 700, "depth": 36},
        {"pvs": [pv("g1f3", cp=4)], "knodes": 700, "depth": 36},
        {"pvs": [pv("b1c3", cp=5)], "knodes": 10**6, "depth": 30},
    ]
    got = row(json.dumps({"fen": START, "evals": evals}))
    assert got["moves"] == ["c2c4"] and got["cp"] == [3]
    assert got["limit"] == "depth=36,knodes=700"


def test_white_view_scores_become_the_side_to_moves():
    white = row(record(START, pv("e2e4 e7e5", cp=100)))
    assert white["cp"] == [100] and white["state_cp"] == 100 and white["state_mate"] is None
    assert white["win_probs"] == [win_probability(cp=100)] and white["state_win_prob"] > 0.5

    black = row(record(AFTER_E4, pv("e7e5 g1f3", cp=100)))
    assert black["cp"] == [-100] and black["state_cp"] == -100
    assert black["win_probs"] == [win_probability(cp=-100)] and black["state_win_prob"] < 0.5

    black_mates = row(record(AFTER_E4, pv("e7e5", mate=-3)))
    assert black_mates["mate"] == [3] and black_mates["cp"] == [None]
    assert black_mates["state_mate"] == 3 and black_mates["state_win_prob"] == 1.0
    black_mated = row(record(AFTER_E4, pv("e7e5", mate=2)))
    assert black_mated["mate"] == [-2] and black_mated["state_win_prob"] == 0.0
    white_mated = row(record(START, pv("e2e4", mate=-4)))
    assert white_mated["mate"] == [-4] and white_mated["state_win_prob"] == 0.0


def test_missing_clocks_get_the_defaults_and_given_ones_stay():
    assert row(record(START, pv("e2e4", cp=0)))["fen"] == START + " 0 1"
    assert row(record(START + " 7 42", pv("e2e4", cp=0)))["fen"] == START + " 7 42"


def test_fen_is_written_as_python_chess_writes_it():
    # An en passant square without a legal capture is dropped.
    got = row(record("4k3/8/8/8/4P3/8/8/4K2R b K e3", pv("e8d7", cp=0)))
    assert got["fen"] == "4k3/8/8/8/4P3/8/8/4K2R b K - 0 1"
    # Crazyhouse's promoted-piece mark: python-chess accepts it, board.fen() leaves it out.
    assert row(record("k7/8/8/8/8/8/8/KQ~6 w - -", pv("b1b8", cp=0)))["fen"] == (
        "k7/8/8/8/8/8/8/KQ6 w - - 0 1"
    )
    legal_ep = "rnbqkbnr/ppp1p1pp/8/3pPp2/8/8/PPPP1PPP/RNBQKBNR w KQkq f6"
    assert row(record(legal_ep, pv("e5f6", cp=0)))["fen"] == legal_ep + " 0 1"
    for board in random_positions(200, seed=1):
        fen = board.fen(en_passant="fen")  # an en passant square after every double push
        first = next(iter(board.legal_moves)).uci()
        assert row(record(fen, pv(first, cp=0)))["fen"] == chess.Board(fen).fen()


def test_moves_are_legal_distinct_and_in_action_space_order():
    got = convert_line(
        record(
            START,
            pv("g1f3", cp=30),
            pv("e2e4", cp=25),
            pv("a2a3", cp=-10),
            pv("g1f3 d7d5", cp=0),  # the same first move again: the first PV's score stays
            pv("b1c3", cp=12),
        )
    )
    moves = got.row["moves"]
    assert moves == sorted(moves, key=move_to_index) and len(moves) == 4
    board = chess.Board(START + " 0 1")
    assert all(chess.Move.from_uci(m) in board.legal_moves for m in moves)
    scores = dict(zip(moves, got.row["cp"], strict=True))
    assert scores == {"g1f3": 30, "e2e4": 25, "a2a3": -10, "b1c3": 12}
    assert got.row["win_probs"] == [win_probability(cp=scores[m]) for m in moves]
    assert got.duplicate_pv_moves == 1


def test_castling_as_king_takes_rook_is_normalised():
    got = row(record(CASTLING, pv("e1h1 e8g8", cp=10), pv("e1a1", cp=5)))
    assert got["moves"] == sorted(["e1g1", "e1c1"], key=move_to_index)
    assert got["best_move"] == "e1g1"


def test_partial_unless_the_pvs_cover_every_legal_move():
    assert row(record(START, pv("e2e4", cp=20), pv("d2d4", cp=15)))["partial"] is True
    assert row(record(ONE_MOVE, pv("a1b2", cp=-50)))["partial"] is False
    assert row(record(TWO_MOVES, pv("a1b2", cp=0), pv("a1a2", cp=-20)))["partial"] is False
    # Two PVs, but both start with the same move: one of two legal moves is valued.
    assert row(record(TWO_MOVES, pv("a1b2", cp=0), pv("a1b2 g1g2", cp=-5)))["partial"] is True


def test_best_move_is_the_first_pv_unless_a_later_one_is_strictly_better():
    first = convert_line(record(START, pv("e2e4", cp=40), pv("d2d4", cp=40), pv("c2c4", cp=10)))
    assert first.row["best_move"] == "e2e4" and not first.best_pv_not_first
    # Black to move: white-view cp 50 is -50 for black, cp -30 is +30, so d7d5 is better.
    later = convert_line(record(AFTER_E4, pv("e7e5", cp=50), pv("d7d5", cp=-30)))
    assert later.row["best_move"] == "d7d5" and later.best_pv_not_first
    assert later.row["state_cp"] == 30 and later.row["state_mate"] is None
    assert later.row["state_win_prob"] == win_probability(cp=30) == max(later.row["win_probs"])
    mate = row(record(AFTER_E4, pv("e7e5", cp=-900), pv("g8f6", mate=-1)))
    assert mate["best_move"] == "g8f6" and mate["state_mate"] == 1 and mate["state_cp"] is None


def test_row_provenance():
    got = row(record(START, pv("e2e4", cp=20), depth=41, knodes=123456))
    assert got["source"] == SOURCE_LICHESS_EVALS and got["engine"] == ENGINE
    assert got["limit"] == "depth=41,knodes=123456" and got["count"] == 1


BAD_LINES = {
    "not_json": "{this is not json",
    "bad_record": json.dumps({"fen": START}),
    "bad_fen": record("rnbqkbnr/pppppppp/8/8 w KQkq -", pv("e2e4", cp=0)),
    "invalid_position": record("8/8/8/8/8/8/8/8 w - -", pv("e2e4", cp=0)),
    "no_legal_moves": record(CHECKMATED),
    "no_pvs": record(START),
    "illegal_move": record(START, pv("e2e4", cp=0), pv("e2e5", cp=0)),
    "no_score": record(START, pv("e2e4", cp=0), pv("d2d4")),
    "bad_score": record(START, pv("e2e4", cp=0, mate=3)),
}


@pytest.mark.parametrize("expected", sorted(BAD_LINES))
def test_each_kind_of_bad_line_is_recognised(expected):
    assert reason(BAD_LINES[expected]) == expected


def test_more_bad_lines():
    assert reason("") == "not_json"
    assert reason(b"\xff\xfe") == "not_json"
    assert reason("[1, 2]") == "bad_record"
    assert reason(json.dumps({"fen": START, "evals": [{"pvs": [], "depth": 3}]})) == "bad_record"
    assert reason(record(START, pv("", cp=0))) == "illegal_move"
    assert reason(record(START, pv("e2e4", cp=1.5))) == "bad_score"
    assert reason(record(START, pv("e2e4", cp=2**31))) == "bad_score"
    assert reason(record(AFTER_E4, pv("e7e5", cp=-(2**31)))) == "bad_score"  # negated: 2**31
    assert row(record(AFTER_E4, pv("e7e5", cp=2**31 - 1)))["cp"] == [-(2**31) + 1]
    assert reason(record(START, pv("e2e4", mate=0))) == "bad_score"  # mated, yet it has moves
    assert reason(record(CHECKMATED, pv("", mate=0))) == "no_legal_moves"


# --- the import ------------------------------------------------------------------------------


def test_import_writes_rows_failures_and_stats(tmp_path):
    good = [
        record(START, pv("e2e4", cp=20), pv("d2d4", cp=15)),
        record(ONE_MOVE, pv("a1b2", cp=-50)),
        record(AFTER_E4, pv("e7e5", cp=50), pv("d7d5", cp=-30)),
    ]
    bad = [BAD_LINES[r] for r in sorted(BAD_LINES)]
    lines = [good[0], *bad[:5], good[1], *bad[5:], good[2]]
    source = write_input(tmp_path / "evals.jsonl.zst", lines)
    config = LichessEvalsConfig(rows_per_shard=2)
    document = import_lichess_evals(str(source), str(tmp_path / "out"), config)
    split = tmp_path / "out" / "train"

    boards, failures = rows_of(split), rows_of(split, "failures")
    assert [b["fen"] for b in boards] == [json.loads(g)["fen"] + " 0 1" for g in good]
    assert len(boards) + len(failures) == len(lines) == document["lines"]
    for failure, line in zip(failures, bad, strict=True):
        number = lines.index(line) + 1
        assert failure["error"].startswith(f"{source}:{number}: ")
        assert failure["count"] == 1 and failure["engine"] == ENGINE
    by_reason = dict(zip(sorted(BAD_LINES), failures, strict=True))
    assert by_reason["bad_fen"]["fen"] == "rnbqkbnr/pppppppp/8/8 w KQkq -"  # as given
    assert by_reason["not_json"]["fen"] == "{this is not json"  # no FEN: the line itself
    assert by_reason["not_json"]["limit"] is None
    assert by_reason["bad_score"]["limit"] == "depth=30,knodes=1000"
    assert sorted(os.listdir(split)) == [
        "boards-00000-of-00002.parquet",
        "boards-00001-of-00002.parquet",
    ]
    assert sorted(os.listdir(meta_dir(str(split)))) == [
        "failures-00000-of-00002.parquet",
        "failures-00001-of-00002.parquet",
        "stats.json",
    ]
    # The first shard holds two boards and the failures of the lines up to the second board.
    assert len(rows_of(split, "failures-00000")) == 5

    stats = json.loads(Path(stats_path(str(split))).read_text())
    assert stats == document
    assert stats["input"] == str(source) and stats["input_bytes"] == source.stat().st_size
    assert stats["lines"] == 12 and stats["boards"] == 3 and stats["shards"] == 2
    assert stats["partial_boards"] == 2 and stats["complete_boards"] == 1
    assert stats["action_values"] == 5 and stats["best_pv_not_first"] == 1
    assert stats["failures"] == {"total": 9, "by_reason": {r: 1 for r in REASONS}}
    illegal = lines.index(BAD_LINES["illegal_move"]) + 1
    assert stats["examples"]["illegal_move"][0].startswith(f"{source}:{illegal}: illegal_move: ")
    assert stats["lines_converted"] == 12 and stats["resumed"] == {"parts": 0, "lines": 0}
    assert stats["elapsed_s"] > 0 and stats["lines_per_s"] > 0
    assert stats["settings"]["rows_per_shard"] == 2 and stats["source"] == SOURCE_LICHESS_EVALS


def test_plain_jsonl_and_multi_frame_zstd_read_the_same(tmp_path):
    lines = realistic_lines(30)
    plain = write_input(tmp_path / "evals.jsonl", lines, compressed=False)
    compressor = zstandard.ZstdCompressor()
    frames = tmp_path / "frames.jsonl.zst"  # two frames, cut mid-way through the lines
    frames.write_bytes(
        compressor.compress("".join(x + "\n" for x in lines[:13]).encode())
        + compressor.compress("".join(x + "\n" for x in lines[13:]).encode())
    )
    import_lichess_evals(str(plain), str(tmp_path / "a"))
    import_lichess_evals(str(frames), str(tmp_path / "b"))
    assert contents(tmp_path / "a" / "train") == contents(tmp_path / "b" / "train")
    assert len(rows_of(tmp_path / "a" / "train")) == 30


def test_split_lines_skips_across_chunks_and_keeps_a_last_line_without_newline():
    chunks = [b"one\r\ntw", b"o\nthr", b"ee\n\nfive"]
    assert list(lev.split_lines(chunks)) == [b"one", b"two", b"three", b"", b"five"]
    assert list(lev.split_lines(chunks, skip=2)) == [b"three", b"", b"five"]
    assert list(lev.split_lines(chunks, skip=4)) == [b"five"]
    with pytest.raises(ValueError, match="lines to skip"):
        list(lev.split_lines(chunks, skip=6))


def test_max_lines_and_empty_input(tmp_path):
    source = write_input(tmp_path / "evals.jsonl.zst", realistic_lines(10))
    document = import_lichess_evals(
        str(source), str(tmp_path / "out"), LichessEvalsConfig(max_lines=4)
    )
    assert document["lines"] == 4 and len(rows_of(tmp_path / "out" / "train")) == 4

    empty = write_input(tmp_path / "empty.jsonl.zst", [])
    document = import_lichess_evals(str(empty), str(tmp_path / "none"))
    assert document["lines"] == 0 and document["shards"] == 1
    assert rows_of(tmp_path / "none" / "train") == []
    assert rows_of(tmp_path / "none" / "train", "failures") == []


def test_unreadable_input_is_an_error_naming_it(tmp_path, capsys):
    missing = tmp_path / "nope.jsonl.zst"
    with pytest.raises(InputError, match="nope.jsonl.zst"):
        import_lichess_evals(str(missing), str(tmp_path / "out"))
    assert main(["--input", str(missing), "--output", str(tmp_path / "out")]) == 1
    assert "nope.jsonl.zst" in capsys.readouterr().err

    empty = tmp_path / "empty.jsonl.zst"
    empty.write_bytes(b"")
    assert main(["--input", str(empty), "--output", str(tmp_path / "out3")]) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"error: {empty}: empty file (0 bytes): not an evaluations export"
    ]


@pytest.mark.parametrize("compressed", [True, False])
def test_a_truncated_input_keeps_every_line_before_the_cut(tmp_path, capsys, compressed):
    lines = realistic_lines(3000, seed=8)
    data = ("\n".join(lines) + "\n").encode()
    whole = zstandard.ZstdCompressor().compress(data) if compressed else data
    cut = tmp_path / "cut.jsonl.zst"
    cut.write_bytes(whole[: len(whole) * 2 // 3])
    out = tmp_path / "out"
    code = main(["--input", str(cut), "--output", str(out), "--rows-per-shard", "500"])
    assert code == (1 if compressed else 0)  # plain text cannot tell a cut from an end
    err = capsys.readouterr().err
    warnings = [line for line in err.splitlines() if line.startswith("WARNING")]
    document = json.loads((tmp_path / "out" / "train.meta" / "stats.json").read_text())
    kept = document["lines"]
    if compressed:  # zstd decodes whole blocks (up to 128 KiB): the cut one's lines are lost
        assert 1000 < kept < len(lines)
    else:  # every whole line, and the cut one as a bad line
        assert kept == whole[: len(whole) * 2 // 3].count(b"\n") + 1
    assert len(rows_of(out / "train")) + len(rows_of(out / "train", "failures")) == kept
    if compressed:
        (error,) = document["input_errors"]
        assert error["file"] == str(cut) and "truncated zstd" in error["error"]
        assert len(warnings) == 1 and str(cut) in warnings[0]
    else:  # plain text cut mid-line: the last line is merely a bad one
        assert document["input_errors"] == [] and warnings == []


def test_progress_goes_to_stderr(tmp_path, capsys):
    source = write_input(tmp_path / "evals.jsonl.zst", realistic_lines(20))
    code = main(["--input", str(source), "--output", str(tmp_path / "out")])
    assert code == 0
    captured = capsys.readouterr()
    assert "20 lines" in captured.err and "lines/s" in captured.err and "ETA" in captured.err
    assert json.loads(captured.out)["boards"] == 20


# --- resumption -----------------------------------------------------------------------------


class Crash(BaseException):
    """A stand-in for the process dying (not an Exception: nothing may catch it)."""


def _mixed_lines() -> list[str]:
    lines = realistic_lines(11, seed=3)
    lines.insert(1, BAD_LINES["illegal_move"])
    lines.insert(9, "not json")
    # 13 lines, 11 boards; with 2 rows a shard the parts are lines 1-3, 4-5, 6-7, 8-9, 10-12, 13.
    return lines


def _reference(tmp_path: Path, source: Path) -> tuple[dict, dict]:
    document = import_lichess_evals(
        str(source), str(tmp_path / "ref"), LichessEvalsConfig(rows_per_shard=2)
    )
    return document, contents(tmp_path / "ref" / "train")


def _same_stats(resumed: dict, reference: dict) -> None:
    volatile = {"resumed", "lines_converted", "elapsed_s", "lines_per_s", "finished_at", "output"}
    volatile.add("workers")  # how the run went, not what it made
    assert {k: v for k, v in resumed.items() if k not in volatile} == {
        k: v for k, v in reference.items() if k not in volatile
    }


def test_resume_after_a_crash_between_parts(tmp_path, monkeypatch):
    source = write_input(tmp_path / "evals.jsonl.zst", _mixed_lines())
    ref_stats, ref_files = _reference(tmp_path, source)
    out, config = tmp_path / "out", LichessEvalsConfig(rows_per_shard=2)

    commit, committed = lev._Part.commit, []

    def crash_after_two_parts(self, last_line):
        manifest = commit(self, last_line)
        committed.append(manifest)
        if len(committed) == 2:
            raise Crash
        return manifest

    monkeypatch.setattr(lev._Part, "commit", crash_after_two_parts)
    with pytest.raises(Crash):
        import_lichess_evals(str(source), str(out), config)
    monkeypatch.undo()
    assert not Path(stats_path(str(out / "train"))).exists()
    assert committed[-1]["last_line"] == 5  # two parts: lines 1-5 (4 boards, 1 failure)

    converted = []
    monkeypatch.setattr(
        lev, "convert_line", lambda text: converted.append(text) or convert_line(text)
    )
    document = import_lichess_evals(str(source), str(out), config)
    assert len(converted) == 13 - 5  # the completed parts' lines are skipped, not parsed
    assert document["resumed"] == {"parts": 2, "lines": 5}
    assert contents(out / "train") == ref_files
    _same_stats(document, ref_stats)
    assert not Path(import_path(str(out / "train"))).exists()


def test_resume_after_a_crash_inside_a_part(tmp_path, monkeypatch):
    source = write_input(tmp_path / "evals.jsonl.zst", _mixed_lines())
    ref_stats, ref_files = _reference(tmp_path, source)
    out, config = tmp_path / "out", LichessEvalsConfig(rows_per_shard=2)

    seen = []

    def crash_at_line_ten(text):
        seen.append(text)
        if len(seen) == 10:
            raise Crash
        return convert_line(text)

    monkeypatch.setattr(lev, "convert_line", crash_at_line_ten)
    with pytest.raises(Crash):
        import_lichess_evals(str(source), str(out), config)
    monkeypatch.undo()
    import_dir = Path(import_path(str(out / "train")))
    (import_dir / "boards-part-00004.parquet.tmp").write_bytes(b"half a file")
    (import_dir / "part-00009.json").write_text("{}")  # not after the last complete part

    document = import_lichess_evals(str(source), str(out), config)
    assert document["resumed"]["parts"] == 4  # lines 1-9; the crash came at line 10
    assert contents(out / "train") == ref_files
    _same_stats(document, ref_stats)


def test_resume_after_a_crash_while_renaming(tmp_path, monkeypatch):
    source = write_input(tmp_path / "evals.jsonl.zst", _mixed_lines())
    ref_stats, ref_files = _reference(tmp_path, source)
    out, config = tmp_path / "out", LichessEvalsConfig(rows_per_shard=2)

    replace, renamed = os.replace, []

    def crash_on_the_third_rename(src, dst):
        if "-of-" in os.path.basename(dst):
            renamed.append(dst)
            if len(renamed) == 3:
                raise Crash
        replace(src, dst)

    monkeypatch.setattr(lev.os, "replace", crash_on_the_third_rename)
    with pytest.raises(Crash):
        import_lichess_evals(str(source), str(out), config)
    monkeypatch.undo()

    converted = []
    monkeypatch.setattr(
        lev, "convert_line", lambda text: converted.append(text) or convert_line(text)
    )
    document = import_lichess_evals(str(source), str(out), config)
    assert converted == []  # the input had been read: only the renaming is left
    assert contents(out / "train") == ref_files
    _same_stats(document, ref_stats)


def test_resume_after_the_process_is_killed(tmp_path):
    source = write_input(tmp_path / "evals.jsonl.zst", realistic_lines(300, seed=5) * 10)
    out = tmp_path / "out"
    args = ["--input", str(source), "--output", str(out), "--rows-per-shard", "50"]
    process = subprocess.Popen(
        [sys.executable, "-m", "pipeline.import_lichess_evals", *args],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    third = Path(import_path(str(out / "train"))) / "part-00002.json"
    deadline = time.monotonic() + 30
    while not third.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    process.send_signal(signal.SIGKILL)
    assert process.wait() == -signal.SIGKILL, "the import ended before it could be killed"

    assert main([*args]) == 0
    stats = json.loads(Path(stats_path(str(out / "train"))).read_text())
    assert stats["resumed"]["parts"] >= 3 and stats["lines"] == 3000
    reference = tmp_path / "ref"
    assert main(["--input", str(source), "--output", str(reference), "--rows-per-shard", "50"]) == 0
    assert contents(out / "train") == contents(reference / "train")


def test_ctrl_c_keeps_the_completed_parts_in_one_line_with_130(tmp_path):
    source = write_input(tmp_path / "evals.jsonl.zst", realistic_lines(300, seed=5) * 10)
    out = tmp_path / "out"
    args = ["--input", str(source), "--output", str(out), "--rows-per-shard", "50"]
    process = subprocess.Popen(
        [sys.executable, "-m", "pipeline.import_lichess_evals", *args, "--workers", "2"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        start_new_session=True,  # the Ctrl-C goes to the whole group, as a terminal's
    )  # fmt: skip
    import_dir = Path(import_path(str(out / "train")))
    third = import_dir / "part-00002.json"
    deadline = time.monotonic() + 30
    while not third.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    os.killpg(process.pid, signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr[-3000:]
    assert "Traceback" not in stderr
    kept = re.fullmatch(
        rf"import: stopped by SIGINT; (\d+) completed part\(s\) kept in "
        rf"{re.escape(str(import_dir))}: rerun the same command to resume",
        stderr.splitlines()[-1],
    )
    assert kept and int(kept.group(1)) >= 3

    assert main([*args]) == 0
    stats = json.loads(Path(stats_path(str(out / "train"))).read_text())
    assert stats["resumed"]["parts"] >= 3 and stats["lines"] == 3000


def test_a_rerun_with_other_settings_is_refused_and_overwrite_starts_over(tmp_path, monkeypatch):
    source = write_input(tmp_path / "evals.jsonl.zst", _mixed_lines())
    out = tmp_path / "out"
    monkeypatch.setattr(lev._Part, "commit", lambda self, last_line: (_ for _ in ()).throw(Crash))
    with pytest.raises(Crash):
        import_lichess_evals(str(source), str(out), LichessEvalsConfig(rows_per_shard=2))
    monkeypatch.undo()

    with pytest.raises(ImportMismatch, match=r"--rows-per-shard \(2 then, 3 now\)"):
        import_lichess_evals(str(source), str(out), LichessEvalsConfig(rows_per_shard=3))
    other = write_input(tmp_path / "other.jsonl.zst", realistic_lines(4))
    with pytest.raises(ImportMismatch, match="--input"):
        import_lichess_evals(str(other), str(out), LichessEvalsConfig(rows_per_shard=2))
    code = main(["--input", str(source), "--output", str(out), "--max-lines", "5"])
    assert code == 1

    document = import_lichess_evals(
        str(source), str(out), LichessEvalsConfig(rows_per_shard=3, overwrite=True)
    )
    assert document["resumed"]["parts"] == 0 and document["shards"] == 4


def test_a_finished_output_is_refused_unless_overwrite(tmp_path):
    source = write_input(tmp_path / "evals.jsonl.zst", realistic_lines(5))
    out = tmp_path / "out"
    import_lichess_evals(str(source), str(out), LichessEvalsConfig(rows_per_shard=2))
    with pytest.raises(FileExistsError, match="--overwrite"):
        import_lichess_evals(str(source), str(out), LichessEvalsConfig(rows_per_shard=2))
    document = import_lichess_evals(str(source), str(out), LichessEvalsConfig(overwrite=True))
    assert document["shards"] == 1
    assert sorted(p.name for p in (out / "train").iterdir()) == ["boards-00000-of-00001.parquet"]
    assert sorted(p.name for p in Path(meta_dir(str(out / "train"))).iterdir()) == [
        "failures-00000-of-00001.parquet",
        "stats.json",
    ]


# --- worker processes -----------------------------------------------------------------------


def _files(split_dir: Path) -> dict[str, bytes]:
    """Every Parquet file of a finished split (boards, and failures in its meta folder) by
    name, as bytes."""
    folders = (split_dir, Path(meta_dir(str(split_dir))))
    return {f.name: f.read_bytes() for d in folders for f in sorted(d.glob("*.parquet"))}


def _many_mixed_lines() -> list[str]:
    """200 lines, among them two bad lines of each reason and an empty one."""
    lines = realistic_lines(181, seed=7)
    rng = random.Random(7)
    for bad in [*sorted(BAD_LINES.values()) * 2, ""]:
        lines.insert(rng.randrange(len(lines) + 1), bad)
    return lines


def _not_in_the_parent(text: bytes):
    raise AssertionError("with workers, the parent process converted a line")


def test_workers_write_byte_identical_output(tmp_path, monkeypatch):
    source = write_input(tmp_path / "evals.jsonl.zst", _many_mixed_lines())
    config = LichessEvalsConfig(rows_per_shard=17)
    one = import_lichess_evals(str(source), str(tmp_path / "one"), config)
    assert one["shards"] == 11 and one["failures"]["total"] == 19 and one["workers"] == 1

    monkeypatch.setattr(lev, "_BATCH_LINES", 7)  # many batches, cut across parts
    monkeypatch.setattr(lev, "convert_line", _not_in_the_parent)
    two = import_lichess_evals(
        str(source), str(tmp_path / "two"), dataclasses.replace(config, workers=2)
    )
    assert _files(tmp_path / "two" / "train") == _files(tmp_path / "one" / "train")
    _same_stats(two, one)
    assert two["workers"] == 2 and "workers" not in two["settings"]
    monkeypatch.undo()

    # The command line: spawned workers find the conversion in a `python -m` main module too.
    args = ["--input", str(source), "--output", str(tmp_path / "cli"), "--rows-per-shard", "17"]
    subprocess.run(
        [sys.executable, "-m", "pipeline.import_lichess_evals", *args, "--workers", "2"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    assert _files(tmp_path / "cli" / "train") == _files(tmp_path / "one" / "train")


@pytest.mark.parametrize(("first", "then"), [(2, 1), (1, 2)])
def test_resume_across_worker_counts(tmp_path, monkeypatch, first, then):
    source = write_input(tmp_path / "evals.jsonl.zst", _mixed_lines())
    ref_stats, _ = _reference(tmp_path, source)
    out = tmp_path / "out"

    monkeypatch.setattr(lev, "_BATCH_LINES", 2)  # batches in flight beyond the crash
    add_board, added = lev._Part.add_board, []

    def crash_at_the_ninth_board(self, converted):
        added.append(converted)
        if len(added) == 9:  # line 11, in the part of lines 10-12
            raise Crash
        add_board(self, converted)

    monkeypatch.setattr(lev._Part, "add_board", crash_at_the_ninth_board)
    with pytest.raises(Crash):
        import_lichess_evals(
            str(source), str(out), LichessEvalsConfig(rows_per_shard=2, workers=first)
        )
    monkeypatch.undo()
    assert multiprocessing.active_children() == []  # the crash stopped the workers

    config = LichessEvalsConfig(rows_per_shard=2, workers=then)
    document = import_lichess_evals(str(source), str(out), config)
    assert document["resumed"] == {"parts": 4, "lines": 9}
    assert document["lines_converted"] == 4 and document["workers"] == then
    assert _files(out / "train") == _files(tmp_path / "ref" / "train")
    _same_stats(document, ref_stats)


def test_workers_0_means_one_per_usable_core(tmp_path, monkeypatch, capsys):
    assert 1 <= lev.usable_cores() <= (os.cpu_count() or 1)
    monkeypatch.setattr(lev, "usable_cores", lambda: 3)
    source = write_input(tmp_path / "evals.jsonl.zst", realistic_lines(5))
    assert main(["--input", str(source), "--output", str(tmp_path / "out"), "--workers", "0"]) == 0
    assert json.loads(capsys.readouterr().out)["workers"] == 3
    assert LichessEvalsConfig(workers=0).worker_count == 3
    assert LichessEvalsConfig().worker_count == 1
    with pytest.raises(ValueError, match="--workers"):
        LichessEvalsConfig(workers=-1)


def test_a_worker_that_dies_is_an_error_not_a_hang(tmp_path, monkeypatch, capsys):
    source = write_input(tmp_path / "evals.jsonl.zst", _mixed_lines())
    args = ["--input", str(source), "--output", str(tmp_path / "out"), "--rows-per-shard", "2"]
    # Each worker kills itself as it starts. (The initializer reaches the worker pickled by
    # name: a partial of stdlib functions can be, a function of this module may not import.)
    suicide = functools.partial(signal.raise_signal, signal.SIGKILL)
    monkeypatch.setattr(lev, "worker_start", suicide)
    codes = []
    thread = threading.Thread(target=lambda: codes.append(main([*args, "--workers", "2"])))
    thread.start()
    thread.join(60)
    assert not thread.is_alive(), "the import hangs on a dead worker"
    assert codes == [1]
    assert "error: a worker process died" in capsys.readouterr().err
    monkeypatch.undo()
    assert main([*args, "--workers", "2"]) == 0  # the rerun resumes


def _children(pid: int) -> list[int]:
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has ended


@pytest.mark.skipif(
    not Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").exists(),
    reason="needs Linux's /proc/PID/task/PID/children",
)
def test_workers_end_when_the_import_is_killed(tmp_path):
    source = write_input(tmp_path / "evals.jsonl.zst", realistic_lines(200, seed=5) * 100)
    out = tmp_path / "out"
    args = ["--input", str(source), "--output", str(out), "--rows-per-shard", "50"]
    process = subprocess.Popen(
        [sys.executable, "-m", "pipeline.import_lichess_evals", *args, "--workers", "2"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    first = (
        Path(import_path(str(out / "train"))) / "part-00000.json"
    )  # so the workers are converting
    deadline = time.monotonic() + 30
    while not first.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    workers = _children(process.pid)
    process.send_signal(signal.SIGKILL)
    assert process.wait() == -signal.SIGKILL, "the import ended before it could be killed"
    assert len(workers) >= 2  # and the resource tracker

    deadline = time.monotonic() + 10
    while any(map(_running, workers)) and time.monotonic() < deadline:
        time.sleep(0.01)
    survivors = [pid for pid in workers if _running(pid)]
    for pid in survivors:  # not to leave them behind
        os.kill(pid, signal.SIGKILL)
    assert survivors == [], "workers outlive the killed import"


# --- the trainer on imported evaluations ------------------------------------------------------


@pytest.mark.parametrize("target", ["av", "sv", "bc"])
def test_the_trainer_runs_on_imported_evaluations(tmp_path, target):
    from model import config as config_lib
    from model.data import load_boards, make_view
    from model.train import train

    source = write_input(tmp_path / "evals.jsonl.zst", realistic_lines(60, seed=4))
    import_lichess_evals(
        str(source), str(tmp_path / "data"), LichessEvalsConfig(progress_seconds=60)
    )
    settings = {
        "target": target,
        "batch_size": 16,
        "num_steps": 4,
        "log_every": 2,
        "checkpoint_every": 4,
        "eval_every": 0,
        "learning_rate": 1e-3,
        "num_bins": 32,
    }
    model = {"num_layers": 1, "embedding_dim": 32, "num_heads": 2}
    data = {"train": str(tmp_path / "data" / "train"), "test": ""}  # fmt: skip
    config = config_lib.from_dict({"model": model, "train": settings, "data": data})
    if target == "av":
        # Mostly only principal variations are valued: AV takes those boards when told to.
        loaded = load_boards(data["train"])
        assert 0 < loaded.partial.sum() < loaded.num_boards
        complete_pairs = sum(
            len(loaded.legal_moves(i)) for i in range(loaded.num_boards) if not loaded.partial[i]
        )
        assert len(make_view(loaded, "av", 32)) == complete_pairs
        assert len(make_view(loaded, "av", 32, av_partial=True)) == loaded.num_pairs
        config = config.replace(train={"av_partial": True})
    result = train(config, str(tmp_path / "run"), log=lambda _: None)
    assert result.step == 4
    losses = [json.loads(line).get("loss") for line in open(tmp_path / "run" / "metrics.jsonl")]
    assert [x for x in losses if x is not None] and all(x > 0 for x in losses if x is not None)
