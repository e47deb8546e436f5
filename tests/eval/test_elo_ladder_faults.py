"""The Elo ladder's faults with real Stockfish at toy size: an interrupted run resumed, an
earlier run's results kept (a typo, other settings), a full disk, two ladders on one --out, an
engine that is not one, and the wording of bounds and adjudications."""

from __future__ import annotations

import errno
import json
import os
import pathlib
import shutil
import stat

import chess.pgn
import pytest

from eval.elo.ladder import LOCK_NAME, main, run_ladder
from eval.elo.ladder_player import LadderConfig
from eval.elo.ladder_report import describe_fit, format_markdown, how_it_ended
from eval.elo.ladder_resume import player_identity
from runtime.dir_lock import dir_lock

# Random movers against the weakest level, drawn at 8 plies: a game takes well under a second.
FAST = ["--sf-time", "0.01", "--max-plies", "8", "--adjudicate", "", "--models"]
MODELS = pathlib.Path(__file__).resolve().parents[2] / "models"
CONFIG = LadderConfig(sf_time=0.01, max_plies=8, adjudicate="", baseline_games=4)


def _args(out: pathlib.Path, stockfish: str, games: int = 4, *players: str) -> list[str]:
    baselines = list(players or ["random"])
    return [
        "--out", str(out), "--engine", stockfish, *FAST, "--baselines", *baselines,
        "--baseline-games", str(games),
    ]  # fmt: skip


def _pgn_games(path: pathlib.Path) -> list[chess.pgn.Game]:
    games = []
    with open(path, encoding="utf-8") as f:
        while (game := chess.pgn.read_game(f)) is not None:
            games.append(game)
    return games


def test_an_interrupted_ladder_resumes_from_its_finished_games(stockfish, tmp_path):
    played: list[str] = []

    def interrupt_after_three(line: str) -> None:
        played.append(line)
        if sum(" game " in x for x in played) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_ladder([], ["random", "greedy"], tmp_path, CONFIG, stockfish, log=interrupt_after_three)
    first = _pgn_games(tmp_path / "games.pgn")
    assert len(first) == 3
    # The JSON matches the PGN: the interrupted player's three games, marked incomplete.
    saved = json.loads((tmp_path / "elo.json").read_text())
    assert saved["complete"] is False
    assert [(p["name"], p["stop"], len(p["games"])) for p in saved["players"]] == [
        ("random", "interrupted", 3)
    ]

    lines: list[str] = []
    doc = run_ladder([], ["random", "greedy"], tmp_path, CONFIG, stockfish, log=lines.append)
    assert any("resuming: 3 finished games" in x for x in lines)
    assert sum("(earlier run)" in x for x in lines) == 3
    assert doc["complete"] is True
    assert [len(p["games"]) for p in doc["players"]] == [4, 4]
    again = _pgn_games(tmp_path / "games.pgn")
    assert len(again) == 8
    # The three finished games are kept as they were played, not played again.
    assert [str(g) for g in again[:3]] == [str(g) for g in first]


def test_other_settings_set_the_earlier_results_aside(stockfish, tmp_path, capsys):
    assert main(_args(tmp_path, stockfish, 2)) == 0
    before = (tmp_path / "games.pgn").read_text()
    capsys.readouterr()
    assert main([*_args(tmp_path, stockfish, 2), "--max-plies", "6"]) == 0
    err = capsys.readouterr().err
    assert "games of other settings" in err and "starting over" in err
    (aside,) = tmp_path.glob("earlier-*")
    assert (aside / "games.pgn").read_text() == before
    assert (aside / "elo.json").exists()
    (player,) = json.loads((tmp_path / "elo.json").read_text())["players"]
    assert len(player["games"]) == 2 and all(g["plies"] <= 6 for g in player["games"])
    assert len(_pgn_games(tmp_path / "games.pgn")) == 2


def test_another_agent_under_an_earlier_players_name_sets_the_results_aside(
    stockfish, tmp_path, capsys
):
    assert main(_args(tmp_path, stockfish, 2)) == 0
    before = (tmp_path / "games.pgn").read_text()
    assert all(g.headers["LadderPlayer"] == "random" for g in _pgn_games(tmp_path / "games.pgn"))
    capsys.readouterr()
    # The same name, another player: its games are not the earlier player's.
    assert main(_args(tmp_path, stockfish, 2, "greedy:name=random")) == 0
    err = capsys.readouterr().err
    assert "games of other players" in err and "starting over" in err
    (aside,) = tmp_path.glob("earlier-*")
    assert (aside / "games.pgn").read_text() == before
    games = _pgn_games(tmp_path / "games.pgn")
    assert len(games) == 2 and {g.headers["LadderPlayer"] for g in games} == {"greedy:name=random"}


def test_games_that_do_not_name_their_player_are_set_aside(stockfish, tmp_path, capsys):
    assert main(_args(tmp_path, stockfish, 2)) == 0
    untagged = "".join(
        line
        for line in (tmp_path / "games.pgn").read_text().splitlines(keepends=True)
        if not line.startswith("[LadderPlayer ")
    )
    (tmp_path / "games.pgn").write_text(untagged)
    capsys.readouterr()
    # Who played them is unknown: they may be another agent's under the same name.
    assert main(_args(tmp_path, stockfish, 2)) == 0
    assert "2 games of other players" in capsys.readouterr().err
    (aside,) = tmp_path.glob("earlier-*")
    assert (aside / "games.pgn").read_text() == untagged


def test_a_model_retrained_in_place_is_another_player(stockfish, tmp_path, capsys):
    model = tmp_path / "model"
    shutil.copytree(MODELS / "cpu", model)
    out = tmp_path / "out"
    spec = f"neural:{model},name=m"
    assert main(_args(out, stockfish, 2, spec)) == 0
    (tag,) = {g.headers["LadderPlayer"] for g in _pgn_games(out / "games.pgn")}
    assert tag.startswith(spec + " #") and tag == player_identity(spec)
    capsys.readouterr()
    assert main(_args(out, stockfish, 2, spec)) == 0
    assert "resuming: 2 finished games" in capsys.readouterr().err
    # The same spec over other parameters: another model's games.
    shutil.rmtree(model)
    shutil.copytree(MODELS / "cpu-av", model)
    assert main(_args(out, stockfish, 2, spec)) == 0
    assert "2 games of other players" in capsys.readouterr().err
    assert (
        {g.headers["LadderPlayer"] for g in _pgn_games(out / "games.pgn")}
        == {player_identity(spec)}
        != {tag}
    )


def test_a_player_is_its_spec_and_the_checkpoints_it_reads(tmp_path):
    assert player_identity("random") == "random"
    policy, value = tmp_path / "policy", tmp_path / "value"
    shutil.copytree(MODELS / "cpu", policy)
    shutil.copytree(MODELS / "cpu-av", value)
    alone = player_identity(f"neural:{policy}")
    beside = player_identity(f"mcts:{policy},value={value}")
    assert (
        alone.split(" #")[0] == f"neural:{policy}" and beside.split(" #")[1] != alone.split(" #")[1]
    )
    assert player_identity(f"neural:{policy}") == alone  # the same files, the same player
    # A checkpoint's meta or parameters changed: another player.
    meta = next((policy / "checkpoints").glob("*/meta/metadata"))
    meta.write_bytes(meta.read_bytes() + b" ")
    assert player_identity(f"neural:{policy}") != alone


def test_a_typo_in_the_players_leaves_the_earlier_results_alone(stockfish, tmp_path, capsys):
    assert main(_args(tmp_path, stockfish, 2)) == 0
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    capsys.readouterr()
    assert main(_args(tmp_path, stockfish, 2, "random", "neural:no/such/run")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: baseline 'neural:no/such/run'")
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_a_full_disk_keeps_the_earlier_results_whole_and_names_the_file(
    stockfish, tmp_path, capsys, monkeypatch
):
    assert main(_args(tmp_path, stockfish, 2)) == 0
    before = (tmp_path / "elo.json").read_text()
    capsys.readouterr()
    real_fsync = os.fsync

    def full(fd: int) -> None:  # the disk fills as elo.json's new text is flushed
        if os.readlink(f"/proc/self/fd/{fd}").endswith("elo.json.tmp"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", full)
    assert main(_args(tmp_path, stockfish, 3)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: no space left on device writing ")
    assert str(tmp_path / "elo.json") in err[-1]
    assert (tmp_path / "elo.json").read_text() == before  # whole, the earlier run's
    assert not list(tmp_path.glob("*.tmp"))


def test_a_second_ladder_on_the_same_out_is_refused(stockfish, tmp_path, capsys):
    assert main(_args(tmp_path, stockfish, 2)) == 0
    before = (tmp_path / "games.pgn").read_text()
    capsys.readouterr()
    with dir_lock(str(tmp_path), str(tmp_path / LOCK_NAME), "elo ladder"):
        assert main(_args(tmp_path, stockfish, 4)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"error: {tmp_path} is being written by another run (elo ladder")
    assert (tmp_path / "games.pgn").read_text() == before


def test_an_engine_that_prints_garbage_is_one_line(stockfish, tmp_path, capsys):
    engine = tmp_path / "not-an-engine"
    engine.write_text("#!/bin/sh\necho 'hello, world'\n")
    engine.chmod(engine.stat().st_mode | stat.S_IXUSR)
    assert main(["--out", str(tmp_path / "elo"), "--engine", str(engine)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith(f"error: engine {engine} is not a UCI engine")
    assert "'hello, world'" in err[0]
    # The adjudication's own engine too, checked before the games start.
    adjudicate = f"stockfish:nodes=100,engine={engine}"
    argv = ["--out", str(tmp_path / "elo"), "--engine", stockfish, "--adjudicate", adjudicate]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: engine {engine} is not a UCI engine")
    assert not (tmp_path / "elo").exists()


def test_bounds_and_adjudications_are_worded_for_the_player():
    lost_all = {"bound": "upper", "upper": 1656.4, "lower": None, "confidence": 0.95}
    assert describe_fit(lost_all) == "< 1656 (no win or draw yet: 95% upper bound)"
    won_all = {"bound": "lower", "upper": None, "lower": 2101.0, "confidence": 0.95}
    assert describe_fit(won_all) == "> 2101 (no loss or draw yet: 95% lower bound)"
    termination = "adjudication: White ahead by 1000 cp or more for 6 plies (Stockfish, 10 nodes)"
    as_black = {"termination": termination, "colour": "black", "score": 0.0}
    assert how_it_ended(as_black) == (
        "adjudicated: it was behind by 1000 cp or more for 6 plies (Stockfish, 10 nodes)"
    )
    as_white = as_black | {"colour": "white", "score": 1.0}
    assert how_it_ended(as_white).startswith("adjudicated: it was ahead by 1000 cp")
    assert how_it_ended({"termination": "checkmate", "colour": "white"}) == "checkmate"


def test_the_table_explains_a_bound():
    lost = {"bound": "upper", "upper": 1123.0, "lower": None, "score": 0.0, "confidence": 0.95}
    player = {"name": "greedy", "fit": lost, "games": [{}] * 8, "stop": "game cap"}
    document = {
        "players": [player | {"levels": [{"elo": 1350, "games": 8}]}],
        "config": {"target": 60, "confidence": 0.95},
        "time_control": "tc",
        "anchor": "anchor",
        "command": "",
    }
    table = format_markdown(document)
    assert "| greedy | below 1123 (0% score) |" in table
    assert "no finite maximum-likelihood Elo" in table and "95% interval" in table
