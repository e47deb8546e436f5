"""`make cpu-model`'s positions from the model's own games (jobs/cpu_model/own_games.py): the
games are played and annotated as a split the main model trains on, only when the step is on,
and a rerun reuses both."""

from __future__ import annotations

import dataclasses
import pathlib

import chess
import pytest

from core.schema import read_boards
from jobs.cpu_model import recipe as cpu_model
from jobs.cpu_model import stages
from jobs.cpu_model.own_games import model_digest, own_games
from jobs.cpu_model.settings import OWN_GAMES_SPLIT, SCALES, Paths, split_glob
from jobs.step_log import StepLog


def _paths(tmp_path: pathlib.Path, model: pathlib.Path) -> Paths:
    shared = tmp_path / "shared"  # no real games, puzzles or suites: the bundled puzzles only
    shared.mkdir(parents=True, exist_ok=True)
    return Paths(
        tmp_path / "work",
        tmp_path / "runs",
        tmp_path / "results",
        tmp_path / "models",
        shared,
        own_games_model=model,
    )


def _splits(scale, paths: Paths) -> list[str]:
    return [pathlib.Path(g).parent.name for g in stages.main_data(scale, paths).split(",")]


def test_the_main_data_has_the_own_games_split_only_when_the_step_is_on(tmp_path, capsys):
    model = tmp_path / "model"
    model.mkdir()
    full = SCALES["full"]
    assert full.own_games == 0  # off at the full scale: measured, no stronger in games
    assert OWN_GAMES_SPLIT not in _splits(full, _paths(tmp_path, model))
    on = dataclasses.replace(full, own_games=2)
    assert _splits(on, _paths(tmp_path, model))[-1] == OWN_GAMES_SPLIT
    # On, but no model to play: the step is skipped with a line, and nothing is trained on.
    missing = _paths(tmp_path, tmp_path / "absent")
    assert OWN_GAMES_SPLIT not in _splits(on, missing)
    assert own_games(on, missing, StepLog(tmp_path / "steps.json")) is None
    assert "own games: skipped, no model at" in capsys.readouterr().err
    assert SCALES["quick"].own_games > 0  # exercised at the quick scale


def test_a_model_retrained_in_the_same_place_is_another_model(tmp_path):
    # A model shipped over the one whose games were played: its games are played again.
    model = tmp_path / "model"
    (model / "checkpoints" / "24").mkdir(parents=True)
    (model / "config.toml").write_text("[model]\n")
    (model / "checkpoints" / "24" / "params").write_bytes(b"\x00\x01")
    before = model_digest(model)
    assert model_digest(model) == before
    (model / "checkpoints" / "24" / "params").write_bytes(b"\x00\x02")
    assert model_digest(model) != before


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--own-games", "3"], "--own-games must be even"),
        (["--own-games", "-2"], "--own-games must be even"),
        (["--own-games-opponent", "bogus:x"], "bogus"),
        (["--own-games", "2", "--own-games-model", "no/such/model"], "no such model directory"),
    ],
)
def test_bad_own_games_options_stop_with_one_line(tmp_path, capsys, flags, message):
    argv = ["--scale", "quick", *flags]
    for name in ("work", "runs", "results", "models"):
        argv += [f"--{name}", str(tmp_path / name)]
    assert cpu_model.main(argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0], err
    assert not (tmp_path / "work").exists()  # stopped before any step


@pytest.mark.slow
def test_own_games_are_played_annotated_and_reused(tmp_path, stockfish, tiny_bc_run, capsys):
    scale = dataclasses.replace(SCALES["quick"], own_games=2, own_games_opponent="greedy")
    paths = _paths(tmp_path, tiny_bc_run)
    steps = StepLog(paths.work / "steps.json")
    document = own_games(scale, paths, steps)

    assert document["games"] == 2 and document["opponent"] == "greedy"
    assert document["limit"].startswith("search:nodes=50")
    pgn = pathlib.Path(document["pgn"])
    assert pgn.read_text().count("[Event ") == 2
    split = paths.work / "annotated" / OWN_GAMES_SPLIT
    boards = read_boards(str(split), ["fen", "best_move"])
    assert boards.num_rows == document["boards"] > 0
    for fen, move in zip(boards["fen"].to_pylist(), boards["best_move"].to_pylist(), strict=True):
        assert chess.Move.from_uci(move) in chess.Board(fen).legal_moves
    # The main model trains on it, and the overlap check (which reads the main data) sees it.
    assert split_glob(paths, OWN_GAMES_SPLIT) in stages.main_data(scale, paths).split(",")
    assert set(steps.done) >= {"own-games", f"annotate-{OWN_GAMES_SPLIT}"}

    # A rerun reuses the games and their annotation.
    stamps = {p: p.stat().st_mtime_ns for p in [pgn, *split.iterdir()]}
    capsys.readouterr()
    again = own_games(scale, paths, StepLog(paths.work / "steps.json"))
    err = capsys.readouterr().err
    assert "own games: reusing" in err and f"annotate {OWN_GAMES_SPLIT}: reusing" in err
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps
    assert {k: v for k, v in again.items() if k != "seconds"} == {
        k: v for k, v in document.items() if k != "seconds"
    }
