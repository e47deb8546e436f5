"""A multi-step job's annotation step (jobs/step_log.py, as `make cpu-model` and `make demo` run
it) stops on Ctrl-C as the annotate command does, and is resumed by the rerun."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

from core.schema import journal_path
from jobs import step_log
from jobs.step_log import StepLog, annotate_step, fingerprint
from tests.sessions import own_session, wait_for_a_journal_part

ROOT = pathlib.Path(__file__).resolve().parents[2]

# The step as `make cpu-model` runs it: Beam's multi-processing workers, two of them, whose
# own Ctrl-C tracebacks are what a bare `pipeline.annotate.annotate.run` let through.
STEP = """
import json, pathlib, sys
from jobs.step_log import StepLog, annotate_step
split_dir, argv = pathlib.Path(sys.argv[1]), json.loads(sys.argv[2])
steps = StepLog(split_dir.parent / "steps.json")
annotate_step(steps, "train", split_dir, argv, "key", lambda line: print(line, file=sys.stderr))
"""


@pytest.fixture
def games(tmp_path, sample_games) -> pathlib.Path:
    path = tmp_path / "selfplay4.pgn"
    path.write_text("\n\n".join(str(game) for game in sample_games("selfplay.pgn.zst", 4)) + "\n")
    return path


def _argv(games: pathlib.Path, out: pathlib.Path, engine: str) -> list[str]:
    return [str(games), "--out", str(out), "--split", "train", "--limit", "nodes=300",
            "--engine", engine, "--journal-every", "5", "--runner=DirectRunner",
            "--direct_num_workers=2", "--direct_running_mode=multi_processing"]  # fmt: skip


@pytest.mark.slow
def test_ctrl_c_in_a_step_is_one_line_with_130_and_the_rerun_resumes(games, stockfish, tmp_path):
    out = tmp_path / "annotated"
    split_dir = out / "train"
    journal = pathlib.Path(journal_path(str(split_dir)))
    argv = _argv(games, out, stockfish)
    log = tmp_path / "stopped.log"
    command = [sys.executable, "-c", STEP, str(split_dir), json.dumps(argv)]
    with own_session(command, log, cwd=ROOT, stdout=subprocess.DEVNULL) as process:
        wait_for_a_journal_part(process, journal, log)
        time.sleep(0.5)  # both workers searching
        os.killpg(process.pid, signal.SIGINT)
        assert process.wait(60) == 130
    stderr = log.read_text()
    assert "Traceback" not in stderr, stderr[-3000:]
    assert stderr.splitlines()[-1].startswith(
        f"annotate: stopped by SIGINT; the boards annotated so far are in the journal {journal}"
    )
    steps = StepLog(out / "steps.json")
    assert "annotate-train" not in steps.done

    lines: list[str] = []
    document = annotate_step(steps, "train", split_dir, argv, "key", lines.append)
    assert document["resumed"]["boards"] > 0 and document["boards"]["annotated"] > 0
    boards, resumed = document["boards"], document["resumed"]
    assert boards["annotated"] + resumed["boards"] == boards["unique"]
    assert StepLog(out / "steps.json").done["annotate-train"] == "key"


def test_a_step_fingerprints_the_same_in_another_checkout(monkeypatch, tmp_path):
    """The bundled puzzles named by absolute path in an annotate step's argv: a worktree or clone
    elsewhere is the same computation, so its finished steps are reused, not annotated again."""
    puzzles = ROOT / "data" / "sample" / "puzzles.csv"
    argv = ["--exclude", str(puzzles), "--limit", "nodes=200"]
    here = fingerprint(str(puzzles), argv)
    elsewhere = tmp_path / "clone"
    (elsewhere / "data" / "sample").mkdir(parents=True)
    (elsewhere / "data" / "sample" / "puzzles.csv").write_bytes(puzzles.read_bytes())
    moved = [
        str(elsewhere / "data" / "sample" / "puzzles.csv") if a == str(puzzles) else a for a in argv
    ]
    monkeypatch.setattr(step_log, "REPO", str(elsewhere))
    assert fingerprint(moved[1], moved) == here
    # What the step computes from still counts: other contents or other settings are new work.
    (elsewhere / "data" / "sample" / "puzzles.csv").write_text("PuzzleId,FEN,Moves\n")
    assert fingerprint(moved[1], moved) != here
    assert fingerprint(moved[1], [*moved[:-1], "nodes=300"]) != here
