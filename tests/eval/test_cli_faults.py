"""The evaluation commands under a hostile user: a binary file given as puzzles or EPD, a
neural agent whose directory has no checkpoint, a missing plot input, and Ctrl-C. Each ends
in one line naming what is wrong (no traceback) and an exit code that says so."""

from __future__ import annotations

import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import pytest

from eval.elo.tournament import PGN_NAME, read_finished
from eval.elo.tournament import main as tournament_main
from eval.metrics import main as metrics_main
from eval.plot import main as plot_main
from eval.puzzles import main as puzzles_main
from eval.puzzles import read_puzzles
from eval.suites import main as suites_main
from eval.suites import read_suite
from runtime.text_files import NotTextError

ROOT = pathlib.Path(__file__).resolve().parents[2]
PUZZLES = ROOT / "data" / "sample" / "puzzles.csv"
EPD = '2k5/8/8/8/8/8/6PP/R5K1 w - - bm Ra8#; id "mate.1";'
# A PNG's first bytes, then the rest of a made-up image: not UTF-8 from the first byte.
BINARY = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8


def one_error_line(captured) -> str:
    """The one error line on stderr (progress and summary lines may come before it)."""
    errors = [line for line in captured.err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in captured.err, captured.err
    assert captured.err.strip().splitlines()[-1] == errors[0]
    return errors[0]


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("p.csv", BINARY, "is not a text file (not UTF-8"),
        ("p.csv.zst", BINARY, "is not a readable .zst file"),
        ("one-line.csv", b"a" * 200_000, "is not a CSV text file (field larger"),
    ],
)
def test_a_binary_puzzle_file_is_one_line_naming_it(tmp_path, capsys, name, data, message):
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(NotTextError, match=re.escape(f"{path} {message}")):
        read_puzzles(str(path))
    assert puzzles_main(["--agent", "random", "--puzzles", str(path), "--out", ""]) == 1
    assert f"{path} {message}" in one_error_line(capsys.readouterr())


def test_a_binary_epd_file_is_one_line_naming_it(tmp_path, capsys):
    path = tmp_path / "suite.epd"
    path.write_bytes(BINARY)
    with pytest.raises(NotTextError, match=rf"{path} is not a text file"):
        read_suite(str(path))
    assert suites_main(["--agent", "random", "--epd", str(path), "--out", ""]) == 1
    assert f"{path} is not a text file" in one_error_line(capsys.readouterr())


def test_a_neural_agent_without_a_checkpoint_is_one_line(tmp_path, capsys):
    empty = tmp_path / "run"
    empty.mkdir()
    epd = tmp_path / "s.epd"
    epd.write_text(EPD + "\n")
    agent = f"neural:{empty}"
    commands = [
        (puzzles_main, ["--agent", agent, "--puzzles", str(PUZZLES), "--out", ""], 2),
        (suites_main, ["--agent", agent, "--epd", str(epd), "--out", ""], 2),
        (tournament_main, ["--agents", "random", agent, "--out", str(tmp_path / "t")], 2),
    ]
    for main, argv, code in commands:
        assert main([*argv, "--quiet"]) == code, main
        line = one_error_line(capsys.readouterr())
        assert f"agent {agent!r}" in line and f"no checkpoints under {str(empty)!r}" in line


def test_plot_of_a_missing_or_foreign_file_is_one_line(tmp_path, capsys):
    out = str(tmp_path / "p.png")
    assert plot_main([str(tmp_path / "missing.json"), "--out", out]) == 1
    line = one_error_line(capsys.readouterr())
    assert "missing.json" in line and "No such file" in line
    (tmp_path / "other.json").write_text('{"results": []}')
    assert plot_main([str(tmp_path / "other.json"), "--out", out]) == 1
    assert "other.json is not an eval.puzzles result" in one_error_line(capsys.readouterr())
    assert not os.path.exists(out)


def interrupt(command: list[str], ready) -> subprocess.CompletedProcess:
    """Runs `command`, sends SIGINT once `ready(stderr lines so far)` holds, waits for it."""
    process = subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    lines: list[str] = []
    while not ready(lines):
        line = process.stderr.readline()
        assert line, f"ended before it was interrupted: {''.join(lines)}"
        lines.append(line)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)
    return subprocess.CompletedProcess(command, process.returncode, out, "".join(lines) + err)


def assert_interrupted(run: subprocess.CompletedProcess, message: str) -> None:
    assert run.returncode == 130, run.stderr
    assert "Traceback" not in run.stderr and "KeyboardInterrupt" not in run.stderr
    assert run.stderr.strip().splitlines()[-1].startswith(message), run.stderr


@pytest.mark.slow
def test_ctrl_c_in_puzzles_and_suites_is_one_line_and_exit_130(tmp_path, stockfish):
    # A search of 50M nodes per move: still thinking when the signal comes.
    slow = f"stockfish:nodes=50000000,engine={stockfish}"
    command = [sys.executable, "-m", "eval.puzzles", "--agent", slow, "--puzzles", str(PUZZLES)]
    command += ["--out", str(tmp_path / "p.json")]
    run = interrupt(command, lambda lines: any(" puzzles from " in line for line in lines))
    assert_interrupted(run, "puzzles: interrupted; the results are written only once")
    epd = tmp_path / "s.epd"
    epd.write_text(EPD + "\n")
    command = [sys.executable, "-m", "eval.suites", "--agent", slow, "--epd", str(epd)]
    command += ["--out", str(tmp_path / "s.json")]
    run = interrupt(command, lambda lines: any(" positions" in line for line in lines))
    assert_interrupted(run, "suites: interrupted; the results are written only once")
    assert not any(tmp_path.glob("*.json"))


@pytest.mark.slow
def test_ctrl_c_in_a_tournament_keeps_the_finished_games(tmp_path, stockfish):
    out = tmp_path / "t"
    pgn = out / PGN_NAME
    command = [sys.executable, "-m", "eval.elo.tournament", "--agents", "random"]
    command += [f"stockfish:nodes=2000,engine={stockfish}", "--games", "40", "--out", str(out)]

    def one_game_played(_lines) -> bool:
        deadline = time.monotonic() + 120
        while not (pgn.exists() and read_finished(pgn)):
            assert time.monotonic() < deadline, "no game finished"
            time.sleep(0.05)
        return True

    run = interrupt(command, one_game_played)
    assert_interrupted(run, "tournament: interrupted; the finished games are in")
    assert "--resume" in run.stderr.strip().splitlines()[-1]
    finished = read_finished(pgn)
    assert 1 <= len(finished) < 40


def test_a_directory_given_as_puzzles_or_epd_is_one_line_naming_it(tmp_path, capsys):
    with pytest.raises(NotTextError, match=rf"puzzle file '{tmp_path}' is a directory"):
        read_puzzles(str(tmp_path))
    assert puzzles_main(["--agent", "random", "--puzzles", str(tmp_path), "--out", ""]) == 1
    assert f"'{tmp_path}' is a directory" in one_error_line(capsys.readouterr())
    with pytest.raises(NotTextError, match=rf"EPD file '{tmp_path}' is a directory"):
        read_suite(str(tmp_path))
    assert suites_main(["--agent", "random", "--epd", str(tmp_path), "--out", ""]) == 1
    assert f"'{tmp_path}' is a directory" in one_error_line(capsys.readouterr())


def test_an_output_that_cannot_be_written_is_refused_before_any_work(tmp_path, capsys):
    """Each command checks its outputs first: an evaluation may run for hours before it
    writes them. (A path below a regular file: unwritable even for root.)"""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    epd = tmp_path / "suite.epd"
    epd.write_text(EPD + "\n")
    stockfish = ["--engine", str(tmp_path / "no-engine-needed")]  # no agent starts
    out = blocker / "results.json"
    commands = {
        "puzzles --out": (puzzles_main, ["--agent", "stockfish:nodes=1", "--puzzles", str(PUZZLES),
                                         "--out", str(out), *stockfish]),
        "puzzles --plot": (puzzles_main, ["--agent", "stockfish:nodes=1", "--puzzles", str(PUZZLES),
                                          "--out", "", "--plot", str(out), *stockfish]),
        "suites --out": (suites_main, ["--agent", "stockfish:nodes=1", "--epd", str(epd),
                                       "--out", str(out), *stockfish]),
        "metrics --out": (metrics_main, ["--checkpoint", str(tmp_path / "no-run"),
                                         "--data", str(tmp_path / "no-data"), "--out", str(out)]),
        "tournament --out": (tournament_main, ["--agents", "stockfish:nodes=1", "random",
                                               "--out", str(out), *stockfish]),
        "plot --out": (plot_main, [str(tmp_path / "no-results.json"), "--out", str(out)]),
    }  # fmt: skip
    for name, (main, argv) in commands.items():
        assert main(argv) == 1, name
        captured = capsys.readouterr()
        option = name.split()[1]
        expected = f"error: {option} {out} cannot be written: {blocker} is not a directory"
        assert captured.err.strip() == expected, (name, captured.err)
        assert captured.out == "", name
