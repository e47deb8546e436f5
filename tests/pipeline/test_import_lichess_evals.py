"""pipeline/lichess_evals/import_lichess_evals.py (the streaming import) on small
eval-database files the tests write themselves: rows, failures, stats, damaged inputs, and the
trainer on what it made."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import zstandard

from core.schema import SOURCE_LICHESS_EVALS, meta_dir, stats_path
from pipeline.lichess_evals.import_lichess_evals import import_lichess_evals, main
from pipeline.lichess_evals.input import split_lines
from pipeline.lichess_evals.lines import ENGINE, REASONS
from pipeline.lichess_evals.settings import LichessEvalsConfig
from runtime.text_files import InputError
from tests.pipeline.lichess_evals_files import (
    AFTER_E4,
    BAD_LINES,
    ONE_MOVE,
    START,
    contents,
    pv,
    realistic_lines,
    record,
    rows_of,
    write_input,
)

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
    assert list(split_lines(chunks)) == [b"one", b"two", b"three", b"", b"five"]
    assert list(split_lines(chunks, skip=2)) == [b"three", b"", b"five"]
    assert list(split_lines(chunks, skip=4)) == [b"five"]
    with pytest.raises(ValueError, match="lines to skip"):
        list(split_lines(chunks, skip=6))


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


# --- the trainer on imported evaluations ------------------------------------------------------


@pytest.mark.parametrize("target", ["av", "sv", "bc"])
def test_the_trainer_runs_on_imported_evaluations(tmp_path, target):
    from model import config as config_lib
    from model.data.loader import load_boards, make_view
    from model.training.train import train

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
