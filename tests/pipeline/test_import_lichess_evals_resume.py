"""pipeline/lichess_evals/import_lichess_evals.py interrupted and rerun (crashes, kills,
Ctrl-C, other settings) and with worker processes (the same output whatever their number)."""

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

import pytest

from core.schema import import_path, meta_dir, stats_path
from pipeline.lichess_evals import convert
from pipeline.lichess_evals import settings as evals_settings
from pipeline.lichess_evals.import_lichess_evals import import_lichess_evals, main
from pipeline.lichess_evals.lines import convert_line
from pipeline.lichess_evals.parts import Part
from pipeline.lichess_evals.settings import LichessEvalsConfig
from pipeline.lichess_evals.split_output import ImportMismatch
from tests.pipeline.lichess_evals_files import (
    BAD_LINES,
    ROOT,
    contents,
    realistic_lines,
    write_input,
)

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

    commit, committed = Part.commit, []

    def crash_after_two_parts(self, last_line):
        manifest = commit(self, last_line)
        committed.append(manifest)
        if len(committed) == 2:
            raise Crash
        return manifest

    monkeypatch.setattr(Part, "commit", crash_after_two_parts)
    with pytest.raises(Crash):
        import_lichess_evals(str(source), str(out), config)
    monkeypatch.undo()
    assert not Path(stats_path(str(out / "train"))).exists()
    assert committed[-1]["last_line"] == 5  # two parts: lines 1-5 (4 boards, 1 failure)

    converted = []
    monkeypatch.setattr(
        convert, "convert_line", lambda text: converted.append(text) or convert_line(text)
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

    monkeypatch.setattr(convert, "convert_line", crash_at_line_ten)
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

    monkeypatch.setattr(os, "replace", crash_on_the_third_rename)
    with pytest.raises(Crash):
        import_lichess_evals(str(source), str(out), config)
    monkeypatch.undo()

    converted = []
    monkeypatch.setattr(
        convert, "convert_line", lambda text: converted.append(text) or convert_line(text)
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
        [sys.executable, "-m", "pipeline.lichess_evals.import_lichess_evals", *args],
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
        [sys.executable, "-m", "pipeline.lichess_evals.import_lichess_evals", *args, "--workers",
        "2"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
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
    monkeypatch.setattr(Part, "commit", lambda self, last_line: (_ for _ in ()).throw(Crash))
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

    monkeypatch.setattr(convert, "_BATCH_LINES", 7)  # many batches, cut across parts
    monkeypatch.setattr(convert, "convert_line", _not_in_the_parent)
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
        [
            sys.executable,
            "-m",
            "pipeline.lichess_evals.import_lichess_evals",
            *args,
            "--workers",
            "2",
        ],
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

    monkeypatch.setattr(convert, "_BATCH_LINES", 2)  # batches in flight beyond the crash
    add_board, added = Part.add_board, []

    def crash_at_the_ninth_board(self, converted):
        added.append(converted)
        if len(added) == 9:  # line 11, in the part of lines 10-12
            raise Crash
        add_board(self, converted)

    monkeypatch.setattr(Part, "add_board", crash_at_the_ninth_board)
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
    assert 1 <= evals_settings.usable_cores() <= (os.cpu_count() or 1)
    monkeypatch.setattr(evals_settings, "usable_cores", lambda: 3)
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
    monkeypatch.setattr(convert, "worker_start", suicide)
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
        [
            sys.executable,
            "-m",
            "pipeline.lichess_evals.import_lichess_evals",
            *args,
            "--workers",
            "2",
        ],
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
