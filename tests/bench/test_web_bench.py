"""bench/web.py, the web board's analysis latency, at a tiny scale: three sample puzzles
against the shipped models/cpu over real HTTP."""

from __future__ import annotations

import json
import pathlib

import pytest

from bench.web import main

ROOT = pathlib.Path(__file__).resolve().parents[2]
SAMPLE_PUZZLES = ROOT / "data" / "sample" / "puzzles.csv"


def test_it_times_each_position_and_prints_one_json(capsys):
    if not (ROOT / "models" / "cpu" / "checkpoints").is_dir():
        pytest.skip("models/cpu is not in this checkout")
    assert main(["--num", "3", "--puzzles", str(SAMPLE_PUZZLES)]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (report["model"], report["value_model"], report["positions"]) == ("cpu", None, 3)
    assert 0 < report["median_ms"] <= report["p90_ms"] <= report["max_ms"]
    assert 0 < report["handler_median_ms"]


def test_too_few_puzzles_is_one_line_and_exit_2(tmp_path, capsys):
    empty = tmp_path / "puzzles.csv"
    empty.write_text("PuzzleId,FEN,Moves,Rating\n")
    assert main(["--puzzles", str(empty)]) == 2
    assert "has fewer than 2 puzzles" in capsys.readouterr().err
