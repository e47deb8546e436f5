"""`make cpu-model` (jobs.cpu_model) at its quick scale on small real evaluation sets, and the
shipped models/cpu: it loads and plays legal moves as `neural:models/cpu` and as the UCI
engine's default model."""

from __future__ import annotations

import dataclasses
import json
import pathlib
import subprocess

import chess
import pytest

from core.schema import read_boards
from eval.agents.players import make_agent
from eval.uci.position import parse_position
from jobs.cpu_model import recipe as cpu_model
from jobs.cpu_model import stages
from jobs.cpu_model.settings import (
    CHECKS_SPLIT,
    OWN_GAMES_SPLIT,
    PUZZLE_FILE,
    SCALES,
    STS_FILE,
    Paths,
    train_glob,
)
from model.checkpoint import checkpoints_dir

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "data"


def _small_shared(tmp_path: pathlib.Path) -> pathlib.Path:
    """A ../shared/data in miniature: the first lines of the real puzzle, STS and game files."""
    if not (SHARED / "puzzles" / PUZZLE_FILE).exists():
        pytest.skip(f"{SHARED} is absent (real puzzles, EPD suites and games)")
    shared = tmp_path / "shared"
    for sub in ("puzzles", "epd", "games"):
        (shared / sub).mkdir(parents=True)
    puzzles = (SHARED / "puzzles" / PUZZLE_FILE).read_text().splitlines()[:40]
    (shared / "puzzles" / PUZZLE_FILE).write_text("\n".join(puzzles) + "\n")
    sts = (SHARED / "epd" / STS_FILE).read_text().splitlines()[:40]
    (shared / "epd" / STS_FILE).write_text("\n".join(sts) + "\n")
    games = sorted((SHARED / "games").glob("*.pgn"))[0].read_text()
    cut = games.index("[Event ", games.index("[Event ", 1) + 1)  # two games
    (shared / "games" / "lichess.pgn").write_text(games[:cut])
    return shared


@pytest.mark.slow
def test_quick_recipe_makes_data_trains_evaluates_and_ships(tmp_path, stockfish, capsys):
    shared = _small_shared(tmp_path)
    argv = ["--scale", "quick", "--shared", str(shared)]
    for name in ("work", "runs", "results", "models"):
        argv += [f"--{name}", str(tmp_path / name)]
    assert cpu_model.main(argv) == 0
    results = tmp_path / "results"
    summary = json.loads((results / "summary.json").read_text())

    # Every evaluation file was excluded, none of its positions reached training.
    assert summary["overlap"]["train_boards_in_evaluation_sets"] == 0
    excluded = {s: a["exclude_positions"] for s, a in summary["annotated"].items()}
    assert set(excluded) == {
        "train-selfplay", "train-lichess", "test", "search-lichess", "search-random-move",
        "search-random-move-seed1",
    }  # fmt: skip
    assert all(n > 40 for n in excluded.values())  # the puzzles' lines and the STS positions
    assert summary["annotated"]["train-lichess"]["games"] == 2
    # The cheap labels: one search per board of the real games, for the main model only.
    search = summary["annotated"]["search-lichess"]
    assert search["games"] == 2 and search["limit"].startswith("search:nodes=50")
    # And of the boards after a random move from those (positions after a mistake).
    punish = summary["annotated"]["search-random-move"]
    assert punish["games"] == 2 and punish["limit"] == search["limit"]
    assert punish["after_random_move"] > 0.9 * search["boards"]
    assert search["after_random_move"] == 0
    # Of the check pool (seed 1 at this scale) only the boards whose best move gives check.
    pool = summary["annotated"]["search-random-move-seed1"]
    assert summary["selected"] == {
        "from": ["search-random-move-seed1"], "boards": summary["selected"]["boards"],
        "of": pool["boards"],
    }  # fmt: skip
    checks = read_boards(str(tmp_path / "work" / "annotated" / CHECKS_SPLIT))
    assert 0 < checks.num_rows == summary["selected"]["boards"] < pool["boards"]
    for fen, move in zip(checks["fen"].to_pylist(), checks["best_move"].to_pylist(), strict=True):
        assert chess.Board(fen).gives_check(chess.Move.from_uci(move))
    # The shipped model's own games (2 at this scale), valued by one search per board.
    own = summary["own_games"]
    assert own["games"] == 2 and own["model"] == str(ROOT / "models" / "cpu")
    assert own["boards"] > 0 and own["limit"] == search["limit"]
    main_config = (tmp_path / "runs" / "main" / "config.toml").read_text()
    assert 'target = "bc"' in main_config
    assert OWN_GAMES_SPLIT + "/" in main_config
    assert "search-lichess/" in main_config and "search-random-move/" in main_config
    assert CHECKS_SPLIT + "/" in main_config and "seed1" not in main_config
    ablation_config = (tmp_path / "runs" / "bc" / "config.toml").read_text()
    assert "search-" not in ablation_config

    # The learning curve has one point per checkpoint, on the same fixed subsets.
    steps = [p["step"] for p in summary["curve"]]
    assert steps == [12, 24]
    assert {p["puzzles"]["total"] for p in summary["curve"]} == {6}
    assert {p["sts"]["positions"] for p in summary["curve"]} == {4}

    agents = summary["evaluation"]
    assert set(agents) == {"model", "greedy", "random", "stockfish:nodes=100000"}
    assert agents["model"]["puzzles"]["total"] == 10 and agents["model"]["sts"]["positions"] == 8
    assert agents["stockfish:nodes=100000"]["puzzles"]["total"] == 3
    assert 0 <= agents["model"]["metrics"]["action_accuracy"] <= 1

    rows = summary["ablations"]["rows"]
    assert list(rows) == ["av", "sv", "bc", "av-all-data", "av-quarter-data"]
    assert [r["compute"]["steps"] for r in rows.values()] == [8, 8, 8, 16, 16]
    assert rows["av-quarter-data"]["data"]["boards"] < rows["av"]["data"]["boards"]
    assert rows["sv"]["data"]["labels_used"] == rows["sv"]["data"]["boards"]
    assert (results / "curve.png").stat().st_size > 0
    assert (results / "ablations.png").stat().st_size > 0

    # The shipped run is the main run's last checkpoint and plays legal moves.
    models = tmp_path / "models"
    assert summary["shipped"]["step"] == 24
    assert [p.name for p in pathlib.Path(checkpoints_dir(str(models))).iterdir()] == ["24"]
    assert not (models / "checkpoints" / "24" / "opt_state").exists()  # readers need none
    with make_agent(f"neural:{models}") as agent:
        board = chess.Board()
        for _ in range(6):
            move = agent.choose_move(board)
            assert board.is_legal(move)
            board.push(move)

    # A rerun reuses every step: nothing is annotated or trained again.
    main_run = tmp_path / "runs" / "main" / "checkpoints" / "24"
    before = main_run.stat().st_mtime_ns
    capsys.readouterr()
    assert cpu_model.main(argv) == 0
    err = capsys.readouterr().err
    assert "selfplay train: reusing" in err and "annotate test: reusing" in err
    assert "own games: reusing" in err and f"annotate {OWN_GAMES_SPLIT}: reusing" in err
    assert "step 1:" not in err  # no training step ran
    assert main_run.stat().st_mtime_ns == before

    # The square-token transformer's recipe on the same work: the data is reused, its own
    # runs, results and model are made.
    other = ["--config", str(ROOT / "model" / "configs" / "cpu-transformer.toml")]
    for name in ("runs", "results", "models"):
        other += [f"--{name}", str(tmp_path / f"transformer-{name}")]
    argv_transformer = [*argv[: argv.index("--runs")], *other]
    assert cpu_model.main(argv_transformer) == 0
    err = capsys.readouterr().err
    assert "selfplay train: reusing" in err and "annotate search-lichess: reusing" in err
    with make_agent(f"neural:{tmp_path / 'transformer-models'}") as agent:
        assert agent.predictor.config.model.backbone == "squares"
        assert chess.Board().is_legal(agent.choose_move(chess.Board()))
    assert main_run.stat().st_mtime_ns == before  # the gateau's run is untouched


def _paths(tmp_path: pathlib.Path, games: bool) -> Paths:
    shared = tmp_path / "shared"
    (shared / "games").mkdir(parents=True)
    if games:
        (shared / "games" / "lichess.pgn").write_text("")
    work = tmp_path / "work"
    return Paths(work, tmp_path / "runs", tmp_path / "results", tmp_path / "models", shared)


def test_the_main_model_trains_on_the_splits_the_recipe_makes_not_on_stale_ones(tmp_path):
    paths = _paths(tmp_path, games=True)
    # A split an earlier recipe made (four random-move seeds, then two) is still on disk.
    stale = paths.work / "annotated" / "search-random-move-seed3"
    stale.mkdir(parents=True)
    full = SCALES["full"]
    data = stages.main_data(full, paths).split(",")
    splits = [pathlib.Path(glob).parent.name for glob in data]
    # In the order one glob of all their files lists them (the order examples are drawn in).
    assert splits == [
        "train-*", "search-lichess", "search-random-move-seed1", "search-random-move"
    ]  # fmt: skip
    checked = dataclasses.replace(full, check_seeds=(2, 3))
    splits = [
        pathlib.Path(glob).parent.name for glob in stages.main_data(checked, paths).split(",")
    ]
    assert splits[-3:] == [CHECKS_SPLIT, "search-random-move-seed1", "search-random-move"]
    assert not any("seed2" in s or "seed3" in s for s in splits)
    assert stages.check_pool(checked, paths) == [
        "search-random-move-seed2", "search-random-move-seed3"
    ]  # fmt: skip
    # Without real games: the self-play boards only, and no check pool.
    bare = _paths(tmp_path / "bare", games=False)
    assert stages.main_data(checked, bare) == train_glob(bare)
    assert stages.check_pool(checked, bare) == []


SHIPPED = ROOT / "models" / "cpu"


@pytest.mark.parametrize("name", ["cpu", "cpu-av", "cpu-transformer", "gpu"])
def test_shipped_model_plays_legal_moves_as_a_neural_agent(name):
    shipped = ROOT / "models" / name
    assert (shipped / "config.toml").exists(), f"models/{name} is committed"
    board = chess.Board("r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3")
    with make_agent(f"neural:models/{name}") as agent:
        for _ in range(8):
            move = agent.choose_move(board)
            assert board.is_legal(move)
            board.push(move)


@pytest.mark.parametrize("named", [None, "models/cpu", str(SHIPPED)])
def test_shipped_model_is_the_uci_engines_default(tmp_path, console_script, named):
    chosen = [f"setoption name WeightsFile value {named}"] if named else []
    lines = ["uci", *chosen, "isready", "position startpos moves e2e4 e7e5", "go nodes 1", "quit"]
    done = subprocess.run(
        [console_script],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,  # not the checkout: the default models/cpu is found in it
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert not [line for line in out if line.startswith("info string error")], out
    best = [line.split()[1] for line in out if line.startswith("bestmove ")]
    board = parse_position("startpos moves e2e4 e7e5".split())
    assert len(best) == 1 and board.is_legal(chess.Move.from_uci(best[0]))
    # The default policy is BC with a value head of its own, which gives the move a score,
    # however the default model is named.
    [info] = [line for line in out if line.startswith("info depth")]
    assert " score " in info, info


def test_a_bc_model_without_a_value_head_scores_and_searches_with_none(
    tmp_path, console_script, tiny_bc_run
):
    # A BC model without a value head of its own gets none: it reports no score, and says it
    # cannot search.
    lines = [
        "uci",
        f"setoption name WeightsFile value {tiny_bc_run}",
        "setoption name Simulations value 4",
        "isready",
        "position startpos",
        "go nodes 4",
        "quit",
    ]
    done = subprocess.run(
        [console_script], input="\n".join(lines) + "\n", capture_output=True, text=True,
        timeout=600, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert any(line.startswith("info string Simulations 4 ignored: a BC model") for line in out)
    assert not [line for line in out if line.startswith("info depth") and " score " in line], out


def test_the_shipped_transformer_plays_through_the_uci_engine(tmp_path, console_script):
    # The square-token transformer is served by the same engine as the gateau: it warms up,
    # answers isready and plays a legal move with the policy's own choice.
    lines = ["uci", "isready", "position startpos moves e2e4", "go movetime 200", "quit"]
    done = subprocess.run(
        [console_script, "--checkpoint", str(ROOT / "models" / "cpu-transformer")],
        input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=600,
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert "readyok" in out
    assert not [line for line in out if line.startswith("info string error")], out
    best = [line.split()[1] for line in out if line.startswith("bestmove ")]
    board = parse_position("startpos moves e2e4".split())
    assert len(best) == 1 and board.is_legal(chess.Move.from_uci(best[0]))
