"""The Elo ladder at toy size with real Stockfish: a few very fast games on two levels."""

from __future__ import annotations

import json

import pytest

from eval.elo.fixed_opponents import RatedGame, fit_against_fixed
from eval.elo.ladder import main, run_ladder
from eval.elo.ladder_player import JUMP, Engine, LadderConfig, next_level

ENGINE = Engine("stockfish", "Stockfish", 1350, 2850)


def test_next_level_aims_at_the_estimate_within_the_range():
    even = fit_against_fixed([RatedGame(1500, 1.0), RatedGame(1500, 0.0)])
    assert next_level(even, 1500, ENGINE, 10) == 1500
    three_quarters = fit_against_fixed([RatedGame(1500, 1.0)] * 3 + [RatedGame(1500, 0.0)])
    assert next_level(three_quarters, 1500, ENGINE, 10) == 1690  # 1690.8 rounded to 10
    lost = fit_against_fixed([RatedGame(1350, 0.0)] * 4)
    assert next_level(lost, 1350, ENGINE, 10) == 1350  # cannot go below the engine's floor
    won = fit_against_fixed([RatedGame(1350, 1.0)] * 2)
    assert next_level(won, 1350, ENGINE, 10) == 1350 + JUMP
    won_high = fit_against_fixed([RatedGame(2800, 1.0)] * 2)
    assert next_level(won_high, 2800, ENGINE, 10) == 2850


def test_a_toy_ladder_with_real_stockfish(stockfish, tmp_path):
    # A strong Stockfish as the "model" beats the weakest level and climbs; a random mover as
    # the baseline stays at the floor. Stockfish's side thinks 10 ms a move.
    config = LadderConfig(
        sf_time=0.01,
        pairs_per_step=1,
        max_games=4,
        baseline_games=2,
        max_plies=300,
        max_minutes=3,
        adjudicate="stockfish:nodes=1000",
    )
    lines = []
    doc = run_ladder(
        ["stockfish:nodes=5000,name=strong"],
        ["random"],
        tmp_path,
        config,
        stockfish,
        "toy",
        log=lines.append,
    )
    low, high = doc["engine"]["low"], doc["engine"]["high"]
    assert low < high
    baseline, model = doc["players"]
    assert (baseline["name"], baseline["role"], len(baseline["games"])) == ("random", "baseline", 2)
    assert baseline["levels"] == [{"elo": low, "games": 2, "points": 0.0}]
    # Two lost games only bound it from above (two games say little: the bound is near low).
    assert baseline["fit"]["bound"] == "upper" and baseline["fit"]["lower"] is None
    assert baseline["stop"] == "game cap"
    assert model["name"] == "strong" and len(model["games"]) == 4
    levels = [lv["elo"] for lv in model["levels"]]
    assert levels[0] == low and len(levels) == 2 and levels[1] > low  # it climbed
    assert [g["colour"] for g in model["games"]] == ["white", "black"] * 2
    assert all(g["score"] in (0, 0.5, 1) and g["plies"] > 0 for g in model["games"])
    assert doc["time_control"].startswith("Stockfish 0.01 s per move")
    assert doc["time_control"].endswith("adjudicated by stockfish:nodes=1000")
    assert "UCI_Elo" in doc["anchor"] and "not a Lichess" in doc["anchor"]
    assert f"{low}..{high}" in doc["anchor"]
    saved = json.loads((tmp_path / "elo.json").read_text())
    assert saved["players"][1]["fit"] == model["fit"]
    table = (tmp_path / "elo.md").read_text()
    assert "| strong |" in table and "| random | below" in table and "Scale:" in table
    assert (tmp_path / "elo.png").stat().st_size > 10_000
    assert (tmp_path / "games.pgn").read_text().count("[Event ") == 6
    # Progress lines carry the rate and the ETA.
    game_lines = [line for line in lines if " game " in line]
    assert len(game_lines) == 6 and all("games/min" in x and "ETA" in x for x in game_lines)
    assert all(" as white " in x or " as black " in x for x in game_lines)
    # --replot redraws the table and the plot from the JSON, playing nothing.
    (tmp_path / "elo.png").unlink()
    assert main(["--out", str(tmp_path), "--replot"]) == 0
    assert (tmp_path / "elo.md").read_text() == table and (tmp_path / "elo.png").exists()


def test_replot_without_a_result_is_one_line(tmp_path, capsys):
    assert main(["--out", str(tmp_path), "--replot"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: cannot redraw from ")


def test_an_unwritable_output_fails_before_any_game(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["--out", str(blocker / "elo"), "--models", "random"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and str(blocker) in err[0]


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="positive"):
        LadderConfig(sf_time=0)
    with pytest.raises(SystemExit):
        main(["--max-games", "0"])
