"""The annotate command's exit codes and messages on faults, through the real command line.

Each test runs `python -m pipeline.annotate` in a subprocess with the real Stockfish, except
where the fault is the engine's: there a small script plays the engine that fails.
(Ctrl-C is tested in test_resume.py, beside the killed run it resumes like.)
"""

from __future__ import annotations

import errno
import json
import os
import pathlib
import re
import stat
import subprocess
import sys
import textwrap

import pyarrow.parquet as pq
import pytest
import zstandard

from core.schema import lock_path, meta_dir, stats_path
from pipeline.annotate import annotate
from pipeline.beam.split_lock import SplitBusy, split_lock

ROOT = pathlib.Path(__file__).resolve().parents[2]
# What Beam logs of itself when it is imported (e.g. "WARNING:root:apitools not found"):
# not the command's words.
_BEAM_LOG = re.compile(r"^(DEBUG|INFO|WARNING|ERROR):(root|apache_beam|__main__)[.:]")


def _run(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "pipeline.annotate", *args]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)


def _said(result: subprocess.CompletedProcess) -> list[str]:
    """The command's own lines on stderr (checked to hold no traceback)."""
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    return [line for line in result.stderr.splitlines() if not _BEAM_LOG.match(line)]


def _script(path: pathlib.Path, body: str) -> str:
    path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@pytest.fixture
def scholar(tmp_path, pgn_samples) -> pathlib.Path:
    path = tmp_path / "scholar.pgn"
    path.write_text(pgn_samples.scholars_mate)
    return path


def test_a_run_in_which_every_board_failed_exits_1_saying_so(tmp_path, scholar):
    crasher = _script(
        tmp_path / "crash_on_go.py",
        """
        import sys
        for line in sys.stdin:
            if line.startswith("uci"):
                print("id name CrashOnGo\\nuciok", flush=True)
            elif line.startswith("isready"):
                print("readyok", flush=True)
            elif line.startswith("go"):
                sys.exit(3)
        """,
    )
    out = tmp_path / "out"
    result = _run(str(scholar), "--out", str(out), "--limit", "nodes=10", "--engine", crasher,
                  "--retries", "0")  # fmt: skip
    assert result.returncode == 1
    failures = pathlib.Path(meta_dir(str(out / "train"))) / "failures-00000-of-00001.parquet"
    said = _said(result)
    assert said[-1].startswith(f"error: every board failed (7; they are in {failures}); the first")
    assert "code 3" in said[-1]
    assert pq.read_table(failures).num_rows == 7  # all of them, for a look or a rerun


def test_an_empty_pgn_is_named_and_a_run_that_read_no_game_exits_1(
    tmp_path, scholar, stockfish, capfd
):
    empty = tmp_path / "empty.pgn"
    empty.write_text("")
    result = _run(str(empty), "--out", str(tmp_path / "out"), "--limit", "nodes=10")
    assert result.returncode == 1
    said = _said(result)
    assert said.count(f"WARNING: {empty}: no game in it (empty, or not PGN)") == 1
    assert said[-1] == "error: no game read from the input: nothing to annotate"

    # Beside an input with games: named, counted, and the run succeeds.
    both = tmp_path / "both"
    assert annotate.main([str(empty), str(scholar), "--out", str(both), "--limit", "nodes=10"]) == 0
    assert f"WARNING: {empty}: no game in it" in capfd.readouterr().err
    document = json.loads(pathlib.Path(stats_path(str(both / "train"))).read_text())
    assert document["games"]["inputs_without_games"] == 1 and document["games"]["read"] == 1
    assert document["examples"]["no_games"] == [str(empty)]


def test_a_second_run_into_a_split_being_written_is_refused(tmp_path, scholar, stockfish):
    out = tmp_path / "out"
    split = out / "train"
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(
            """
            import sys, time
            from pipeline.beam.split_lock import split_lock
            with split_lock(sys.argv[1], "annotate"):
                print("locked", flush=True)
                time.sleep(600)
            """), str(split)],
        cwd=ROOT, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline() == "locked\n"
        argv = [str(scholar), "--out", str(out), "--limit", "nodes=10"]
        refused = _run(*argv)
        assert refused.returncode == 1
        said = _said(refused)
        assert len(said) == 1 and said[0].startswith(
            f"error: {split} is being written by another run (annotate pid {holder.pid}"
        )
        assert os.listdir(meta_dir(str(split))) == ["lock"]  # it touched nothing
        assert not split.exists()
    finally:
        holder.kill()  # SIGKILL: the kernel releases its lock, the file stays behind
        holder.wait()
    assert pathlib.Path(lock_path(str(split))).exists()
    after = _run(*argv)
    assert after.returncode == 0, after.stderr[-3000:]
    assert sorted(p.name for p in split.iterdir()) == ["boards-00000-of-00001.parquet"]
    assert sorted(os.listdir(meta_dir(str(split)))) == [
        "failures-00000-of-00001.parquet",
        "stats.json",
    ]  # the lock file is gone with the run that held it last


def test_the_split_lock_is_exclusive_and_released(tmp_path):
    split = str(tmp_path / "split")
    with split_lock(split, "first"):
        with pytest.raises(SplitBusy, match=rf"another run \(first pid {os.getpid()}"):
            with split_lock(split, "second"):
                pass
    with split_lock(split, "third"):
        pass
    assert os.listdir(meta_dir(split)) == []  # the lock beside the split, gone
    assert not os.path.exists(split)  # readers of the split folder never meet it


def test_an_engine_that_dies_in_the_handshake_is_one_line(tmp_path, scholar):
    dying = _script(
        tmp_path / "dies_at_uci.py",
        """
        import sys
        sys.stdin.readline()
        print("Segmentation fault", flush=True)
        sys.exit(11)
        """,
    )
    result = _run(str(scholar), "--out", str(tmp_path / "out"), "--engine", dying)
    assert result.returncode == 1
    (line,) = _said(result)
    assert re.fullmatch(
        rf"error: engine '{re.escape(dying)}' failed the UCI handshake: exited \(code 11\) "
        r"\[pid \d+\]",
        line,
    ), line


def test_fail_on_input_error_stops_in_one_line_naming_the_file(tmp_path, pgn_samples, stockfish):
    cut = tmp_path / "cut.pgn.zst"
    compressor = zstandard.ZstdCompressor(write_checksum=True)
    cut.write_bytes(compressor.compress(pgn_samples.italian.encode())[:-12])
    result = _run(str(cut), "--out", str(tmp_path / "out"), "--limit", "nodes=10",
                  "--fail-on-input-error")  # fmt: skip
    assert result.returncode == 1
    said = _said(result)
    assert said[-1].startswith(f"error: {cut}: truncated zstd stream"), said
    assert len(said) == 2  # the run's first line, then the error


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--split", "../x"], "argument --split: expected a plain name (no '/', not '.' or '..'), "
                              "got '../x'"),
        (["--split", "a/b"], "argument --split: expected a plain name"),
        (["--num-shards", "100000"], "argument --num-shards: expected an integer >= 1 and "
                                     "<= 10,000, got 100000"),
        (["--retries", "-1"], "argument --retries: expected an integer >= 0, got -1"),
        (["--hash", "0"], "argument --hash: expected an integer >= 1, got 0"),
        (["--threads", "0"], "argument --threads: expected an integer >= 1, got 0"),
        (["--engine-timeout", "0"], "argument --engine-timeout: expected a number > 0, got 0"),
        (["--engine-timeout", "nan"], "argument --engine-timeout: expected a number > 0, got nan"),
        (["--journal-every", "-5"], "argument --journal-every: expected an integer >= 0, got -5"),
    ],
)  # fmt: skip
def test_bad_numbers_and_a_split_outside_out_are_refused_while_parsing(
    tmp_path, scholar, capsys, flags, message
):
    with pytest.raises(SystemExit) as stopped:
        annotate.main([str(scholar), "--out", str(tmp_path / "out"), *flags])
    assert stopped.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("python -m pipeline.annotate: error: ") and message in last, last
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scholar.pgn"]  # nothing written


def test_an_unwritable_out_is_refused_before_any_work(tmp_path, scholar):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    result = _run(str(scholar), "--out", str(blocker / "out"), "--engine", "/no/engine")
    assert result.returncode == 1
    assert _said(result) == [
        f"error: --out {blocker / 'out'} cannot be written: {blocker} is not a directory"
    ]


def test_a_full_disk_is_one_line_and_the_rerun_resumes(tmp_path, stockfish, capfd, monkeypatch):
    """The disk fills as the second journal part is written (the OSError a write to a full
    disk raises, injected where the journal writes), inside Beam's worker."""
    from apache_beam.io.filesystems import FileSystems

    games = ROOT / "data" / "sample" / "games.pgn.zst"
    out = tmp_path / "out"
    argv = [str(games), "--out", str(out), "--limit", "nodes=10", "--max-games", "2",
            "--journal-every", "10", "--engine", stockfish]  # fmt: skip
    create, parts = FileSystems.create, []

    def create_until_full(path, *args, **kwargs):
        if "/journal/part-" in path:
            parts.append(path)
            if len(parts) > 1:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return create(path, *args, **kwargs)

    monkeypatch.setattr(FileSystems, "create", staticmethod(create_until_full))
    assert annotate.main(argv) == 1
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Errno" not in err, err[-3000:]
    journal = meta_dir(str(out / "train")) + "/journal"
    said = [line for line in err.splitlines() if not _BEAM_LOG.match(line)]
    assert said[-1] == (
        f"error: no space left on device writing {parts[1].removesuffix('.tmp')}; free some "
        f"space: rerun the same command to resume from the journal {journal}"
    )
    assert [line for line in said if line.startswith("error")] == said[-1:]

    monkeypatch.setattr(FileSystems, "create", staticmethod(create))
    document = annotate.run(argv)
    assert document["resumed"]["boards"] == 10  # the part written before the disk filled
    assert document["boards"]["annotated"] + 10 == document["boards"]["unique"]
