"""bench/search_report.py, what search adds measured in one command, at a tiny scale: a random
tiny model, three puzzles, two games per match."""

from __future__ import annotations

import json
import pathlib

import chess
import pytest

from bench.search_report import main, queen_odds, wilson_interval
from core.openings import Opening

SAMPLE_PUZZLES = pathlib.Path(__file__).resolve().parents[2] / "data" / "sample" / "puzzles.csv"


def test_every_part_writes_its_json(tiny_run, tmp_path, capsys):
    out = tmp_path / "search"
    argv = ["--model", str(tiny_run), "--out", str(out), "--puzzles", str(SAMPLE_PUZZLES)]
    argv += ["--num", "3", "--sims", "0", "2", "--baselines", "random", "greedy"]
    argv += ["--elo-sims", "2", "--elo-games", "2", "--odds-sims", "2", "--odds-games", "2"]
    argv += ["--contempt", "1", "--max-plies", "8", "--speed-positions", "1", "--speed-sims", "4"]
    assert main(argv) == 0
    printed = json.loads(capsys.readouterr().out)
    report = json.loads((out / "search.json").read_text())
    assert printed == report and list(report["parts"]) == ["speed", "puzzles", "elo", "odds"]
    speed = report["parts"]["speed"]
    assert speed["batch_1"]["playouts"] == speed["batch_8"]["playouts"] == 4
    assert speed["batch_8_vs_1"] > 0
    puzzles = report["parts"]["puzzles"]
    assert puzzles["num"] == 3
    assert set(puzzles["accuracy"]) == {"mcts sims=0", "mcts sims=2", "random", "greedy"}
    gain = 100 * (puzzles["accuracy"]["mcts sims=2"] - puzzles["accuracy"]["mcts sims=0"])
    assert puzzles["gain_points"] == {"mcts sims=2": pytest.approx(gain, abs=0.1)}
    full = json.loads((out / "puzzles.json").read_text())
    assert [len(agent["puzzles"]) for agent in full["agents"]] == [3, 3, 3, 3]
    elo = report["parts"]["elo"]
    assert elo["games"] == 2 and sum(elo["wins_draws_losses"]) == 2
    assert (out / "elo" / "games.pgn").exists()
    odds = report["parts"]["odds"]
    assert odds["opponent"] == "greedy" and odds["n_scl"] == 1
    for variant in ("puct", "contempt"):
        result = odds["variants"][variant]
        assert sum(result["wins_draws_losses"]) == result["games"] == 2
        low, high = result["win_pct_ci95"]
        assert 0 <= low <= result["win_pct"] <= high <= 100
    games = json.loads((out / "odds" / "odds.json").read_text())["games"]
    assert len(games) == 4 and {g["searching_side"] for g in games} == {"white", "black"}


def test_queen_odds_takes_the_searching_sides_queen():
    opening = Opening("Open", "C20", chess.STARTING_FEN, ("e2e4", "e7e5"))
    odds = queen_odds(opening, chess.WHITE).board()
    assert not odds.pieces(chess.QUEEN, chess.WHITE) and odds.pieces(chess.QUEEN, chess.BLACK)
    assert odds.turn == chess.WHITE and odds.piece_at(chess.E4) is not None
    # A queen shielding its king: taking it off would leave the side not to move (White,
    # after a2a3) in check, an illegal position.
    pinned = Opening("Pin", "", "4r1k1/8/8/8/8/8/P3Q3/4K3 w - - 0 1", ("a2a3",))
    assert queen_odds(pinned, chess.WHITE) is None
    assert queen_odds(Opening("None", "", "4k3/8/8/8/8/8/8/4K3 w - - 0 1", ()), chess.WHITE) is None


def test_wilson_interval():
    low, high = wilson_interval(5, 10)
    assert low == pytest.approx(1 - high) and low == pytest.approx(0.2366, abs=1e-4)
    assert wilson_interval(0, 2) == (0.0, pytest.approx(0.6576, abs=1e-4))
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_a_missing_model_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--model", str(tmp_path / "nope"), "--out", str(tmp_path)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "--model" in err and "not found" in err and "Traceback" not in err
