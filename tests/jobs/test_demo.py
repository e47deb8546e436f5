"""`make demo` (jobs.demo) end to end on a few sample games with small settings: every step
runs for real (Beam + Stockfish, JAX training, metrics, puzzles, tournament), its outputs are
where the summary says, and a second run reuses every finished step."""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

import chess.pgn
import pytest

from core.schema import stats_path
from jobs import demo
from jobs.step_log import StepLog, fingerprint
from tools.make_sample import unique_boards

ROOT = pathlib.Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data" / "sample"


def write_pgn(games: list[chess.pgn.Game], path: pathlib.Path) -> pathlib.Path:
    path.write_text("\n\n".join(str(g) for g in games) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def small_demo(tmp_path, stockfish, sample_games) -> demo.DemoConfig:
    train_games = sample_games("mismatch.pgn.zst", 3)
    test_games = sample_games("selfplay.pgn.zst", 1)
    settings = (ROOT / "model" / "configs" / "demo.toml").read_text()
    for old, new in (
        ("num_steps = 3000", "num_steps = 40"),
        ("warmup_steps = 200", "warmup_steps = 5"),
        ("log_every = 500", "log_every = 20"),
        ("checkpoint_every = 500", "checkpoint_every = 20"),
    ):
        assert old in settings, old  # the test follows the demo's own config
        settings = settings.replace(old, new)
    (tmp_path / "demo.toml").write_text(settings)
    puzzles = (SAMPLE / "puzzles.csv").read_text().splitlines()[:6]
    (tmp_path / "puzzles.csv").write_text("\n".join(puzzles) + "\n")
    return demo.DemoConfig(
        results=str(tmp_path / "results"),
        work=str(tmp_path / "work"),
        run=str(tmp_path / "run"),
        train_inputs=(str(write_pgn(train_games, tmp_path / "train.pgn")),),
        test_inputs=(str(write_pgn(test_games, tmp_path / "test.pgn")),),
        limit="nodes=50",
        workers=1,
        train_config=str(tmp_path / "demo.toml"),
        puzzles=str(tmp_path / "puzzles.csv"),
        metrics_boards=20,
        stockfish="stockfish:nodes=2000,name=stockfish-2k",
        tournament_games=2,
        tournament_max_plies=30,
        adjudicate="stockfish:nodes=200,cp=600,plies=4",
        engine=stockfish,
    )


@pytest.mark.slow
def test_the_demo_runs_every_step_and_reuses_them(small_demo, sample_games, capsys):
    config = small_demo
    summary = demo.run(config)

    train_games = sample_games("mismatch.pgn.zst", 3)
    assert summary["data"]["train"]["unique_boards"] == unique_boards(train_games)
    assert summary["data"]["train"]["failed"] == 0
    assert summary["data"]["test"]["unique_boards"] == unique_boards(
        sample_games("selfplay.pgn.zst", 1)
    )
    assert summary["training"]["steps"] == 40 and summary["training"]["target"] == "sv"
    assert summary["metrics"]["boards"] == 20
    assert set(summary["puzzles"]) == {"model", "random", "stockfish-2k"}
    assert summary["puzzles"]["stockfish-2k"]["accuracy"] > summary["puzzles"]["random"]["accuracy"]
    # Three agents, 2 games per pair: each of the model's pairings is in the summary.
    assert summary["tournament"]["model_vs_random"]["games"] == 2
    assert summary["tournament"]["model_vs_weak_stockfish"]["games"] == 2
    pgn = pathlib.Path(summary["tournament"]["pgn"]).read_text()
    assert pgn.count("[Event ") == 6
    for name in ("summary", "metrics", "puzzles", "plot"):
        assert pathlib.Path(summary["outputs"][name]).is_file(), name
    assert pathlib.Path(summary["outputs"]["plot"]).read_bytes().startswith(b"\x89PNG")
    on_disk = json.loads(pathlib.Path(summary["outputs"]["summary"]).read_text())
    assert on_disk["data"] == summary["data"] and on_disk["metrics"] == summary["metrics"]

    steps = json.loads((pathlib.Path(config.results) / "steps.json").read_text())
    assert {"annotate-train", "annotate-test", "train", "metrics", "puzzles", "tournament"} <= set(
        steps
    )
    capsys.readouterr()
    again = demo.run(config)
    printed = capsys.readouterr().out
    assert "train: reusing" in printed and "test: reusing" in printed
    assert f"reusing the finished run in {config.run}" in printed
    assert json.loads((pathlib.Path(config.results) / "steps.json").read_text()) == steps
    assert again["metrics"] == summary["metrics"] and again["puzzles"] == summary["puzzles"]
    assert again["tournament"]["table"] == summary["tournament"]["table"]

    # Other settings over the finished splits: the annotate step redoes them in place.
    changed = dataclasses.replace(config, limit="nodes=60")
    redone = demo.annotate(changed, demo.StepLog(pathlib.Path(config.results) / "steps.json"))
    assert "starting over" in capsys.readouterr().out
    assert redone["train"]["unique_boards"] == summary["data"]["train"]["unique_boards"]
    stats = json.loads(
        pathlib.Path(stats_path(str(pathlib.Path(config.work) / "train"))).read_text()
    )
    assert stats["limit"] == "nodes=60"


@pytest.mark.slow
def test_ctrl_c_while_the_training_step_imports_prints_one_line_and_exits_130(
    tmp_path, stockfish, sample_games
):
    # Both splits annotated for real (tiny), and marked done as the demo marks them, so that
    # each run below goes straight to the training step, whose first act is importing JAX.
    from pipeline.annotate import annotate

    limit = "nodes=20"
    work, results, run = tmp_path / "work", tmp_path / "results", tmp_path / "run"
    pgn = write_pgn(sample_games("selfplay.pgn.zst", 1), tmp_path / "games.pgn")
    for split in ("train", "test"):
        annotate.run([str(pgn), "--out", str(work), "--split", split, "--limit", limit,
                      "--engine", stockfish])  # fmt: skip
    defaults = demo.DemoConfig()
    log = StepLog(results / "steps.json")
    log.mark("annotate-train", fingerprint(*defaults.train_inputs, limit))
    log.mark("annotate-test", fingerprint(*defaults.test_inputs, limit))
    command = [sys.executable, "-m", "jobs.demo", "--results", str(results), "--work", str(work),
               "--run", str(run), "--limit", limit, "--engine", stockfish]  # fmt: skip
    # Importing the trainer takes seconds: every delay lands in it, each in another module
    # (a C extension starting, a garbage-collector callback: see runtime.interrupts.sigint_exits).
    for delay in (0.0, 0.1, 0.25, 0.5):
        process = subprocess.Popen(
            command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True,  # the Ctrl-C goes to the whole group, as a terminal's
        )  # fmt: skip
        seen = []
        while "demo step 2/5" not in (line := process.stdout.readline()):
            assert line, f"the demo ended before training: {seen}"
            seen.append(line)
        time.sleep(delay)
        os.killpg(process.pid, signal.SIGINT)
        _, stderr = process.communicate(timeout=120)
        assert process.returncode == 130, (delay, stderr[-3000:])
        assert stderr.splitlines() == [demo._INTERRUPTED], (delay, stderr[-3000:])
        shutil.rmtree(run, ignore_errors=True)
