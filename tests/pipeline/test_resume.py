"""An interrupted annotation run resumes from its journal (`<split>.meta/journal/`).

The real CLI is killed with SIGKILL (or stopped with Ctrl-C) once its first journal part
exists and run again; the rerun must reuse the journaled boards and write the same shards, byte
for byte, as a run that was never interrupted (node-limited searches give the same row for a
board every time).
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pyarrow.parquet as pq
import pytest

from core.schema import JOURNAL_RUN_FILE, journal_path, meta_dir, stats_path
from pipeline.annotate import annotate, split_output
from pipeline.annotate.arguments import parse_args
from pipeline.annotate.journal import JOURNAL_SECONDS, JournalWriter
from pipeline.beam.split_lock import SplitBusy, split_lock
from tests.sessions import group_ends, own_session, wait_for_a_journal_part

ROOT = pathlib.Path(__file__).resolve().parents[2]
GAMES = 3  # the first three self-play games: ~300 unique boards
LIMIT = "nodes=200"


@pytest.fixture(scope="module")
def games(tmp_path_factory, sample_games) -> pathlib.Path:
    """The first GAMES games of the bundled self-play sample, as a plain PGN."""
    chosen = [str(game) for game in sample_games("selfplay.pgn.zst", GAMES)]
    path = tmp_path_factory.mktemp("games") / "selfplay3.pgn"
    path.write_text("\n\n".join(chosen) + "\n")
    return path


def _argv(games: pathlib.Path, out: pathlib.Path, engine: str, *more: str) -> list[str]:
    return [str(games), "--out", str(out), "--limit", LIMIT, "--num-shards", "2",
            "--engine", engine, *more]  # fmt: skip


@pytest.fixture(scope="module")
def reference(games, stockfish, tmp_path_factory) -> tuple[pathlib.Path, dict]:
    """An uninterrupted run: its split directory and stats."""
    out = tmp_path_factory.mktemp("reference")
    document = annotate.run(_argv(games, out, stockfish))
    return out / "train", document


def _files(split: pathlib.Path) -> dict[str, pathlib.Path]:
    """The split's files and its meta folder's (by name: they never clash)."""
    meta = pathlib.Path(meta_dir(str(split)))
    return {p.name: p for d in (split, meta) for p in sorted(d.iterdir())}


def _assert_same_outputs(split: pathlib.Path, reference_split: pathlib.Path) -> None:
    mine, theirs = _files(split), _files(reference_split)
    assert sorted(mine) == sorted(theirs)  # in particular: no journal left behind
    for name, path in theirs.items():
        if name.endswith(".parquet"):
            assert pq.read_table(mine[name]).equals(pq.read_table(path))
            assert mine[name].read_bytes() == path.read_bytes(), name


def _row(fen: str) -> dict:
    return {"fen": fen, "count": 1, "moves": ["e2e4"], "win_probs": [0.5], "cp": [0],
            "mate": [None], "best_move": "e2e4", "state_win_prob": 0.5, "state_cp": 0,
            "state_mate": None, "partial": False, "source": "annotate", "engine": "test",
            "limit": LIMIT}  # fmt: skip


def test_the_journal_writer_flushes_every_n_rows_or_after_a_minute(tmp_path):
    now = [0.0]
    writer = JournalWriter(str(tmp_path), every=3, clock=lambda: now[0])
    assert [writer.add(_row(f"fen{i}")) for i in range(3)][:2] == [None, None]
    parts = sorted(tmp_path.glob("part-*.parquet"))
    assert len(parts) == 1 and parts[0].name == f"part-{writer.writer}-000000.parquet"
    assert pq.read_table(parts[0]).num_rows == 3
    assert writer.add(_row("fen3")) is None  # the clock starts at the first buffered row
    now[0] += JOURNAL_SECONDS - 1
    assert writer.add(_row("fen4")) is None
    now[0] += 1
    written = writer.add(_row("fen5"))
    assert written.endswith("-000001.parquet") and pq.read_table(written).num_rows == 3
    assert writer.flush() is None  # nothing buffered, nothing written
    writer.add(_row("fen6"))
    assert writer.flush().endswith("-000002.parquet")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        f"part-{writer.writer}-{i:06d}.parquet" for i in range(3)
    ]  # no temporary file left
    other = JournalWriter(str(tmp_path), every=3)
    assert other.writer != writer.writer


def test_a_killed_run_resumes_from_its_journal_with_identical_shards(
    games, stockfish, reference, tmp_path
):
    reference_split, reference_stats = reference
    out = tmp_path / "out"
    journal = pathlib.Path(journal_path(str(out / "train")))
    more = ("--journal-every", "20", "--progress-seconds", "0.2")
    command = [sys.executable, "-m", "pipeline.annotate", *_argv(games, out, stockfish, *more)]
    with open(tmp_path / "killed.log", "wb") as log:
        process = subprocess.Popen(
            command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            deadline = time.monotonic() + 120
            while not list(journal.glob("part-*.parquet")):
                if process.poll() is not None:
                    log.flush()
                    log_text = (tmp_path / "killed.log").read_text()[-3000:]
                    pytest.fail(f"the run ended before writing a journal part:\n{log_text}")
                assert time.monotonic() < deadline, "no journal part after 120 s"
                time.sleep(0.02)
            process.send_signal(signal.SIGKILL)
            assert process.wait(30) == -signal.SIGKILL
        finally:
            try:  # the engine the killed run left behind (it also quits on its stdin's EOF)
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert (journal / JOURNAL_RUN_FILE).exists()
    assert not pathlib.Path(stats_path(str(out / "train"))).exists()

    rerun = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "resuming the interrupted run" in rerun.stderr
    document = json.loads(rerun.stdout)
    boards, resumed = document["boards"], document["resumed"]
    assert resumed["boards"] > 0 and resumed["journal_parts"] > 0
    assert resumed["journal_parts_unreadable"] == 0 and resumed["journal_rows_unused"] == 0
    assert 0 < boards["annotated"] < boards["unique"]
    assert boards["annotated"] + resumed["boards"] == boards["unique"]
    assert boards["unique"] == reference_stats["boards"]["unique"]
    assert document["action_values"] == reference_stats["action_values"]
    assert f"{resumed['boards']:,} resumed" in rerun.stderr  # the final line
    assert f"{resumed['boards']:,} more resumed from the journal" in rerun.stderr  # progress
    assert not journal.exists()
    _assert_same_outputs(out / "train", reference_split)


@pytest.mark.slow
def test_ctrl_c_stops_in_one_line_with_130_and_the_rerun_resumes(
    games, stockfish, reference, tmp_path
):
    reference_split, _ = reference
    out = tmp_path / "out"
    split = out / "train"
    journal = pathlib.Path(journal_path(str(split)))
    argv = _argv(games, out, stockfish, "--journal-every", "5")
    log = tmp_path / "stopped.log"
    command = [sys.executable, "-m", "pipeline.annotate", *argv]
    with own_session(command, log, cwd=ROOT, stdout=subprocess.DEVNULL) as process:
        wait_for_a_journal_part(process, journal, log)
        with pytest.raises(SplitBusy):  # the running command holds the split
            with split_lock(str(split), "test"):
                pass
        os.killpg(process.pid, signal.SIGINT)
        assert process.wait(60) == 130
        assert group_ends(process.pid, 30), "a process of the stopped run lives on"
    stderr = log.read_text()
    assert "Traceback" not in stderr, stderr[-3000:]
    last = stderr.splitlines()[-1]
    assert last.startswith(f"annotate: stopped by SIGINT; the boards annotated so far are in "
                           f"the journal {journal}")  # fmt: skip
    assert last.endswith("rerun the same command to resume")
    assert (journal / JOURNAL_RUN_FILE).exists()

    document = annotate.run(argv)
    assert document["resumed"]["boards"] > 0
    _assert_same_outputs(split, reference_split)


def test_unreadable_parts_and_rows_of_other_boards_are_skipped(
    games, stockfish, reference, tmp_path
):
    reference_split, reference_stats = reference
    out = tmp_path / "out"
    argv = _argv(games, out, stockfish)
    config, _ = parse_args(argv)
    identity = split_output.annotate_identity(config, [str(games)], annotate.uci_name(stockfish))
    split_output.prepare_output(config, identity)
    rows = [row for shard in sorted(reference_split.glob("boards-*.parquet"))
            for row in pq.read_table(shard).to_pylist()]  # fmt: skip
    kept = rows[::2]
    writer = JournalWriter(config.journal_dir, every=40)
    for row in kept:
        writer.add(dict(row, count=row["count"] + 1000))  # the current count must win
    writer.add(dict(rows[0], fen="4k3/8/8/8/8/8/8/4K2R w K - 0 1"))  # not a board of this run
    writer.flush()
    journal = pathlib.Path(journal_path(str(out / "train")))
    (journal / "part-damaged-000000.parquet").write_bytes(b"PAR1 cut short")
    (journal / "part-killed-000000.parquet.tmp").write_bytes(b"PAR1 half written")
    # A completed run's outputs refuse a rerun; an interrupted run's partial ones do not.
    pathlib.Path(stats_path(str(out / "train"))).write_text("{}")

    document = annotate.run(argv)
    assert document["resumed"] == {
        "boards": len(kept),
        "action_values": sum(len(r["moves"]) for r in kept),
        "journal_parts": writer.parts_written,
        "journal_parts_unreadable": 1,
        "journal_rows_unused": 1,
    }
    assert document["boards"]["annotated"] == len(rows) - len(kept)
    assert document["boards"]["total"] == reference_stats["boards"]["total"]
    _assert_same_outputs(out / "train", reference_split)


def test_a_journal_of_other_settings_is_an_error_naming_them_until_overwrite(
    tmp_path, pgn_samples, stockfish, capsys
):
    (tmp_path / "in.pgn").write_text(pgn_samples.scholars_mate)
    out = tmp_path / "out"
    argv = [str(tmp_path / "in.pgn"), "--out", str(out), "--engine", stockfish]
    config, _ = parse_args([*argv, "--limit", "nodes=30", "--seed", "1"])
    identity = split_output.annotate_identity(
        config, [str(tmp_path / "in.pgn")], annotate.uci_name(stockfish)
    )
    split_output.prepare_output(config, identity)
    journal = pathlib.Path(journal_path(str(out / "train")))
    assert json.loads((journal / JOURNAL_RUN_FILE).read_text())["run"]["limit"] == "nodes=30"

    changed = [*argv, "--limit", "nodes=20", "--seed", "1"]
    with pytest.raises(
        split_output.JournalMismatch, match=r"--limit \(\"nodes=30\".*\"nodes=20\""
    ) as e:
        annotate.run(changed)
    assert "seed" not in str(e.value) and "engine" not in str(e.value)
    assert "--overwrite" in str(e.value)
    assert annotate.main([*argv, "--limit", "nodes=20"]) == 1
    message = capsys.readouterr().err
    assert "--limit (" in message and "--seed (1 in the journal's run, 0 now)" in message

    document = annotate.run([*changed, "--overwrite"])
    assert document["resumed"]["boards"] == 0 and document["boards"]["annotated"] == 7
    assert not journal.exists()
    assert sorted(os.listdir(out / "train")) == ["boards-00000-of-00001.parquet"]
    assert sorted(os.listdir(meta_dir(str(out / "train")))) == [
        "failures-00000-of-00001.parquet",
        "stats.json",
    ]
    with pytest.raises(FileExistsError, match="--overwrite"):  # a completed run is kept
        annotate.run(changed)


def test_a_journal_of_another_engine_is_not_resumed(tmp_path, pgn_samples, stockfish):
    (tmp_path / "in.pgn").write_text(pgn_samples.scholars_mate)
    argv = [str(tmp_path / "in.pgn"), "--out", str(tmp_path / "out"), "--engine", stockfish]
    config, _ = parse_args(argv)
    inputs = [str(tmp_path / "in.pgn")]
    split_output.prepare_output(
        config, split_output.annotate_identity(config, inputs, "Stockfish 11")
    )
    with pytest.raises(
        split_output.JournalMismatch, match=r"--engine \(its name\) \(\"Stockfish 11\""
    ):
        annotate.run(argv)
    # The identity names the engine the run would use: this machine's.
    assert annotate.uci_name(stockfish).startswith("Stockfish")
