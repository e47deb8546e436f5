"""`make cpu-model`: the strongest searchless model two cores make in under two hours, with its
evidence.

    python -m jobs.cpu_model [--scale full|quick] [--work data/cpu-model] [--runs runs/cpu-model]
        [--results results/cpu-model] [--models models/cpu] [--shared ../shared/data] [--fresh]

Steps, each with its progress line, each reused on a rerun when what it was computed from is
unchanged (`<results>/steps.json`, see jobs/steps.py; an interrupted annotation or training
resumes from its journal or checkpoint):

1. positions: Stockfish self-play games (pipeline.selfplay: the bundled ECO lines, a few
   random plies, some random moves later) for training, and other games (another seed) for
   the held-out test split.
2. annotate: full action values at a small node limit (pipeline.annotate) of the self-play
   games and of some real Lichess games in `<shared>/games` where present (`train-*`, and the
   `test` split), and one search per board (`--mode search`, ~1/16 of the cost: best move
   and state value) of all those real games (`search-lichess`), with `--exclude` of every
   puzzle CSV and EPD suite found (`<shared>/puzzles/*.csv`, `<shared>/epd/*.epd`,
   data/sample/puzzles.csv), and of those games' boards after a random move (one split per
   seed); of the splits of the check pool's seeds (`check_seeds`: none at the full scale, where
   they did not help) only the boards whose best move gives check are kept
   (pipeline.select_boards: the `search-random-move-checks` split); then an overlap
   check: training boards that are evaluation positions (must be 0) and test boards also in
   training.
3. train: model/configs/cpu.toml (the gateau edge backbone, told which moves give check) on
   the best move of every training board (BC: the paper's cheapest target, and at this scale
   the one that learns to play fastest, see 6.), with checkpoints along the way.
4. curve: every checkpoint on FIXED subsets (the first puzzles of the puzzle file, every
   k-th STS position): puzzle accuracy and STS points against training examples.
5. evaluate: the last checkpoint on the held-out test split (action accuracy, Kendall's tau,
   log-loss), the first 1,000 puzzles and all of STS, beside `greedy`, `random` and
   `stockfish:nodes=100000` (the ceiling on a subset at the quick scale).
6. ablations at equal compute (same network, steps and batch): AV vs SV vs BC on the same
   boards (the `train-*` ones, which have full action values), and AV on a quarter of them;
   each row with its data and compute cost.
7. ship: the final run's config and last checkpoint to `<models>` (models/cpu: a normal
   run directory, loaded by `neural:models/cpu` and by `searchless-uci` by default).

Writes `<results>/summary.json`, one JSON per step, `curve.png` and `ablations.png`.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import json
import logging
import pathlib
import shutil
import sys
import time
from collections.abc import Iterator

import matplotlib

from core.interrupts import exit_code, interrupted
from core.outputs import OutputError, check_dir
from core.positions import position_key
from core.progress import Progress, format_duration
from core.schema import board_files, read_boards
from eval.engines import NeuralAgent, make_agent
from eval.metrics import evaluate_checkpoint
from jobs.cpu_model_judging import brief, held_out_rows, judge, judged_sets, neural
from jobs.cpu_model_plots import plot_ablations, plot_curve
from jobs.cpu_model_settings import (
    BASELINES,
    CHECKS_SPLIT,
    MAIN_CONFIG,
    SCALES,
    STOCKFISH,
    Paths,
    Scale,
    banner,
    exclusion_files,
    lichess_games,
    log,
    split_glob,
    train_glob,
)
from jobs.steps import StepLog, annotate_step, fingerprint
from model import config as config_lib
from model.checkpoint import checkpoints_dir, latest_complete_step
from model.predictor import Predictor
from model.train import train as train_model
from pipeline import select_boards, selfplay
from pipeline.engine import Limit
from pipeline.exclude import load_exclusions
from pipeline.overlap import overlap

# --- 1. positions ----------------------------------------------------------------------------


def positions(scale: Scale, paths: Paths, steps: StepLog) -> dict:
    games = {"train": (scale.selfplay_games, 0), "test": (scale.test_games, 1)}
    out = {}
    for split, (count, seed) in games.items():
        path = paths.work / f"selfplay-{split}.pgn.zst"
        summary = paths.work / f"selfplay-{split}.json"
        config = selfplay.SelfPlayConfig(
            games=count,
            out=str(path),
            limit=Limit.parse(scale.selfplay_limit),
            seed=seed,
            random_plies=6,
            random_prob=0.05,
            workers=2,
            overwrite=True,
        )
        key = fingerprint(dataclasses.asdict(config) | {"workers": None})
        if steps.finished(f"selfplay-{split}", key, [path, summary]):
            log(f"selfplay {split}: reusing {path}")
        else:
            paths.work.mkdir(parents=True, exist_ok=True)
            document = selfplay.run(config)
            summary.write_text(json.dumps(document, indent=2) + "\n")
            steps.mark(f"selfplay-{split}", key)
        document = json.loads(summary.read_text())
        out[split] = {k: document[k] for k in ("out", "games", "boards", "wall_time_s", "settings")}
        log(f"selfplay {split}: {document['games']:,} games, {document['boards']:,} boards")
    return out


# --- 2. annotate -----------------------------------------------------------------------------


def annotation_jobs(scale: Scale, paths: Paths) -> dict[str, tuple[list[str], str, list[str]]]:
    """split -> (inputs, limit, extra flags). `train-*`: full action values; `search-*`: one
    search per board, ~1/16 of the cost, for the main model's best-move (BC) labels."""
    shards = ["--num-shards", "8"]  # the data-size ablation takes 2 of the 8
    label = scale.label_limit
    jobs = {"train-selfplay": ([str(paths.work / "selfplay-train.pgn.zst")], label, shards)}
    real = lichess_games(paths)
    if real and scale.lichess_games:
        jobs["train-lichess"] = (real, label, [*shards, "--max-games", str(scale.lichess_games)])
    jobs["test"] = ([str(paths.work / "selfplay-test.pgn.zst")], label, [])
    search = [*shards, "--mode", "search", "--max-games", str(scale.search_games)]
    if real and scale.search_games:
        jobs["search-lichess"] = (real, scale.search_limit, search)
    for seed in (*scale.random_move_seeds, *scale.check_seeds) if real else ():
        moved = [*search, "--random-move", "1", *(["--seed", str(seed)] if seed else [])]
        jobs[random_move_split(seed)] = (real, scale.search_limit, moved)
    return jobs


def check_pool(scale: Scale, paths: Paths) -> list[str]:
    """The annotated splits of which only the boards whose best move gives check are trained on."""
    jobs = annotation_jobs(scale, paths)
    return [s for s in map(random_move_split, scale.check_seeds) if s in jobs]


def main_data(scale: Scale, paths: Paths) -> str:
    """Every training board of the main model (a comma list of globs): full action values,
    the single searches of the real games and of the boards after a random move, and the
    checks selected from the check pool."""
    pool = check_pool(scale, paths)
    searched = [s for s in annotation_jobs(scale, paths) if s.startswith("search-")]
    splits = [s for s in searched if s not in pool] + ([CHECKS_SPLIT] if pool else [])
    # In the order of their files' paths, as one glob of them all would list them: the order
    # the examples are drawn in is that of the files.
    splits.sort(key=lambda split: f"{split}/")
    return ",".join([train_glob(paths), *(split_glob(paths, s) for s in splits)])


def random_move_split(seed: int) -> str:
    """The split of the real games' boards after a random move chosen with `seed`."""
    return "search-random-move" + (f"-seed{seed}" if seed else "")


def _say(prefix: str):
    return lambda line: log(prefix + line)


def annotate(scale: Scale, paths: Paths, steps: StepLog) -> dict:
    exclude = exclusion_files(paths)
    out = {}
    for split, (inputs, limit, flags) in annotation_jobs(scale, paths).items():
        split_dir = paths.work / "annotated" / split
        argv = [*inputs, "--out", str(paths.work / "annotated"), "--split", split]
        argv += ["--limit", limit, *flags, "--exclude", *exclude]
        argv += ["--runner=DirectRunner", "--direct_num_workers=2"]
        argv += ["--direct_running_mode=multi_processing"]
        key = fingerprint(*inputs, *exclude, argv)
        stats = annotate_step(steps, split, split_dir, argv, key, _say(f"annotate {split}: "))
        out[split] = {
            "inputs": len(inputs),
            "games": stats["games"]["used"],
            "boards": stats["boards"]["unique"],
            "action_values": stats["action_values"],
            "failed": stats["boards"]["failed"],
            "excluded": stats["excluded"],
            "after_random_move": stats["boards"].get("after_random_move", 0),
            "exclude_positions": stats["exclude"]["positions"],
            "limit": stats.get("row_limit", stats["limit"]),  # search:... in search mode
            "wall_time_s": stats["wall_time_s"],
            "engine_busy_s": round(sum(w["busy_s"] for w in stats["workers"]), 1),
        }
        log(
            f"annotate {split}: {out[split]['games']:,} games, {out[split]['boards']:,} boards, "
            f"{out[split]['action_values']:,} action values, "
            f"{out[split]['excluded']['boards']:,} evaluation positions dropped"
        )
    return out


def select_checks(scale: Scale, paths: Paths, steps: StepLog) -> dict | None:
    """The check pool's boards whose best move gives check, as the split CHECKS_SPLIT."""
    pool = check_pool(scale, paths)
    if not pool:
        return None
    annotated = paths.work / "annotated"
    config = select_boards.SelectConfig(
        inputs=tuple(str(annotated / split) for split in pool),
        out=str(annotated),
        split=CHECKS_SPLIT,
        best_move="check",
        num_shards=8,
        overwrite=True,
    )
    key = fingerprint(dataclasses.asdict(config), [steps.done.get(f"annotate-{s}") for s in pool])
    stats = annotated / f"{CHECKS_SPLIT}.meta" / "stats.json"
    if not steps.finished(f"select-{CHECKS_SPLIT}", key, [stats]):
        select_boards.run(config, say=_say(f"select {CHECKS_SPLIT}: "))
        steps.mark(f"select-{CHECKS_SPLIT}", key)
    document = json.loads(stats.read_text())
    log(f"select {CHECKS_SPLIT}: {document['kept']:,} of {document['rows']:,} boards")
    return {"from": pool, "boards": document["kept"], "of": document["rows"]}


def overlap_check(scale: Scale, paths: Paths, steps: StepLog) -> dict:
    """Training boards that are evaluation positions (must be 0), test boards in training."""
    target = paths.results / "overlap.json"
    exclude = exclusion_files(paths)
    data = main_data(scale, paths)
    made = [steps.done.get(k) for k in sorted(steps.done) if k.startswith(("annot", "select"))]
    key = fingerprint(exclude, data, made)
    if not steps.finished("overlap", key, [target]):
        exclusions = load_exclusions(exclude)
        fens = read_boards(data, ["fen"])["fen"].to_pylist()
        hits = [fen for fen in fens if position_key(fen) in exclusions.keys]
        document = {
            "evaluation_positions": len(exclusions),
            "evaluation_files": exclude,
            "train_boards": len(fens),
            "train_boards_in_evaluation_sets": len(hits),
            "examples": hits[:5],
            "test_in_train": overlap(data, str(paths.work / "annotated" / "test")),
        }
        target.write_text(json.dumps(document, indent=2) + "\n")
        steps.mark("overlap", key)
    document = json.loads(target.read_text())
    if document["train_boards_in_evaluation_sets"]:
        raise RuntimeError(
            f"{document['train_boards_in_evaluation_sets']} training boards are evaluation "
            f"positions (e.g. {document['examples'][0]}): see {target}"
        )
    log(
        f"overlap: 0 of {document['train_boards']:,} training boards are among the "
        f"{document['evaluation_positions']:,} evaluation positions"
    )
    return document


# --- 3. train --------------------------------------------------------------------------------


def run_config(scale: Scale, paths: Paths, target: str, steps: int, data: str, points: int):
    every = max(1, steps // points)
    config = config_lib.load(MAIN_CONFIG)
    model = dict(scale.model)
    return config.replace(
        model=model,
        train={
            "target": target,
            "num_steps": steps,
            "batch_size": scale.batch_size,
            "warmup_steps": min(config.train.warmup_steps, steps // 10),
            "checkpoint_every": every,
            "keep_checkpoints": points + 1,
            "eval_every": 0,
            "log_every": max(1, min(config.train.log_every, steps // 10)),
        },
        data={"train": data, "test": str(paths.work / "annotated" / "test")},
    )


@contextlib.contextmanager
def run_lock(run: pathlib.Path) -> Iterator[None]:
    """One process at a time trains `run` (a step may be run on its own beside the recipe);
    the other waits. flock: released by the kernel however the holder ends."""
    run.parent.mkdir(parents=True, exist_ok=True)
    with open(run.parent / f".{run.name}.lock", "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"train: another process is training {run}; waiting for it")
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def train_run(name: str, config, run: pathlib.Path, steps: StepLog, depends: list[str]) -> dict:
    with run_lock(run):
        steps.reload()
        return _train_run(name, config, run, steps, depends)


def _train_run(name: str, config, run: pathlib.Path, steps: StepLog, depends: list[str]) -> dict:
    key = fingerprint(config.to_dict(), [steps.done.get(d) for d in depends])
    if not steps.finished(f"train-{name}", key, [pathlib.Path(checkpoints_dir(str(run)))]):
        if steps.done.get(f"train-{name}-started") != key and run.exists():
            shutil.rmtree(run)  # other data or settings: resuming would mix two experiments
        steps.mark(f"train-{name}-started", key)  # an interrupted run of this key resumes
        started = time.monotonic()
        result = train_model(config, str(run), log=log)
        if result.stopped_early:
            log("training stopped early; run the recipe again to resume it")
            raise SystemExit(exit_code(result.stop_signal) if result.stop_signal else 1)
        seconds = round(time.monotonic() - started, 1)
        (run / "recipe-train.json").write_text(
            json.dumps({"seconds": seconds, "examples": result.data_position}) + "\n"
        )
        steps.mark(f"train-{name}", key)
    record = json.loads((run / "recipe-train.json").read_text())
    return {"run": str(run), "steps": config.train.num_steps, **record}


def train_main(scale: Scale, paths: Paths, steps: StepLog) -> dict:
    data = main_data(scale, paths)
    config = run_config(scale, paths, scale.target, scale.steps, data, scale.curve_points)
    searches = [f"annotate-{split}" for split in annotation_jobs(scale, paths) if "search" in split]
    selected = [f"select-{CHECKS_SPLIT}"] if check_pool(scale, paths) else []
    depends = [*ANNOTATE_STEPS, *searches, *selected]
    return train_run("main", config, paths.runs / "main", steps, depends)


# The steps whose boards a run trains on: the ablations (full action values only), the main
# model (also the single searches).
ANNOTATE_STEPS = ["annotate-train-selfplay", "annotate-train-lichess", "annotate-test"]


# --- 4. the learning curve -------------------------------------------------------------------


def curve(scale: Scale, paths: Paths, steps: StepLog, trained: dict) -> dict:
    """Every checkpoint of the main run on the fixed subsets (one JSON entry per checkpoint,
    kept across reruns of the same run)."""
    target = paths.results / "curve.json"
    sets = judged_sets(paths, scale.curve_puzzles, scale.curve_sts_every)
    key = fingerprint(steps.done.get("train-main"), sets.describe())
    document = json.loads(target.read_text()) if target.exists() else {}
    if document.get("key") != key:
        document = {"key": key, "sets": sets.describe(), "points": {}}
    run = pathlib.Path(trained["run"])
    step_dirs = sorted(int(p.name) for p in pathlib.Path(checkpoints_dir(str(run))).iterdir())
    batch = scale.batch_size
    for step in step_dirs:
        if str(step) in document["points"]:
            continue
        log(f"curve: checkpoint {step} of {scale.steps}")
        entry = {"step": step, "boards_seen": step * batch}
        entry |= judge(neural(str(run / "checkpoints" / str(step)), f"step-{step}"), sets)
        document["points"][str(step)] = entry
        target.write_text(json.dumps(document, indent=2) + "\n")
        log(f"curve: step {step}: {brief(entry)}")
    steps.mark("curve", key)
    return document


# --- 5. the final evaluation -----------------------------------------------------------------


def baselines(scale: Scale, paths: Paths) -> dict:
    """The floors and the ceiling on the final sets; they do not depend on the model, so
    they are kept (`baselines.json`, per agent) for as long as the sets are the same."""
    target = paths.results / "baselines.json"
    sets = judged_sets(paths, scale.final_puzzles, scale.final_sts_every)
    ceiling = judged_sets(paths, scale.ceiling_puzzles, scale.ceiling_sts_every)
    key = fingerprint(sets.describe(), ceiling.describe(), BASELINES, STOCKFISH)
    document = json.loads(target.read_text()) if target.exists() else {}
    if document.get("key") != key:
        document = {"key": key, "sets": sets.describe(), "ceiling_sets": ceiling.describe()}
        document["agents"] = {}
    for spec in (*BASELINES, STOCKFISH):
        if spec in document["agents"]:
            continue
        with make_agent(spec) as agent:
            entry = judge(agent, ceiling if spec == STOCKFISH else sets)
        document["agents"][spec] = entry
        paths.results.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(document, indent=2) + "\n")
        log(f"evaluate: {spec}: {brief(entry)}")
    return document


def evaluate(scale: Scale, paths: Paths, steps: StepLog, trained: dict) -> dict:
    target = paths.results / "evaluation.json"
    sets = judged_sets(paths, scale.final_puzzles, scale.final_sts_every)
    key = fingerprint(steps.done.get("train-main"), sets.describe(), scale.metrics_boards)
    if not steps.finished("evaluate", key, [target]):
        predictor = Predictor.from_checkpoint(trained["run"])
        rows, in_train = held_out_rows(paths, scale.metrics_boards, main_data(scale, paths))
        entry = {"metrics": evaluate_checkpoint(predictor, rows)}
        entry["metrics"]["test_boards_left_out_as_in_train"] = in_train
        entry |= judge(NeuralAgent(predictor, name="model"), sets)
        target.write_text(json.dumps({"key": key, "sets": sets.describe(), "model": entry}))
        steps.mark("evaluate", key)
    model = json.loads(target.read_text())["model"]
    log(f"evaluate: model: {brief(model)}")
    floors = baselines(scale, paths)
    return {
        "sets": floors["sets"],
        "ceiling_sets": floors["ceiling_sets"],
        "agents": {"model": model, **floors["agents"]},
    }


# --- 6. ablations ----------------------------------------------------------------------------


ABLATIONS = {
    # name: (target, shards of the 8 each training split has, steps: "targets" (AV vs SV vs
    # BC: Scale.ablation_steps) or "data" (Scale.data_steps, enough for the quarter to be
    # seen several times while the whole is seen about once))
    "av": ("av", "*", "targets"),
    "sv": ("sv", "*", "targets"),
    "bc": ("bc", "*", "targets"),
    "av-all-data": ("av", "*", "data"),
    "av-quarter-data": ("av", "0000[01]", "data"),
}


def ablations(scale: Scale, paths: Paths, steps: StepLog, annotated: dict) -> dict:
    target = paths.results / "ablations.json"
    sets = judged_sets(paths, scale.curve_puzzles, scale.curve_sts_every)
    rows, _ = held_out_rows(paths, scale.metrics_boards, train_glob(paths))
    document = json.loads(target.read_text()) if target.exists() else {}
    document.setdefault("rows", {})
    document["sets"] = sets.describe()
    document["equal_compute"] = {
        "targets_steps": scale.ablation_steps,
        "data_steps": scale.data_steps,
        "batch_boards": scale.batch_size,
        "note": "within a group: same network shape, steps, batch of boards and schedule",
    }
    train_splits = [s for s in annotated if s.startswith("train")]
    label_seconds = sum(annotated[s]["engine_busy_s"] for s in train_splits)
    for name, (kind, shards, group) in ABLATIONS.items():
        data = train_glob(paths, shards)
        num_steps = scale.ablation_steps if group == "targets" else scale.data_steps
        config = run_config(scale, paths, kind, num_steps, data, 1)
        key = fingerprint(config.to_dict(), [steps.done.get(d) for d in ANNOTATE_STEPS])
        if document["rows"].get(name, {}).get("key") == key:
            continue
        trained = train_run(f"ablation-{name}", config, paths.runs / name, steps, ANNOTATE_STEPS)
        files = board_files(data)
        table = read_boards(data, ["moves"])
        boards = table.num_rows
        values = int(sum(len(m) for m in table["moves"].to_pylist()))
        share = len(files) / len(board_files(train_glob(paths)))
        predictor = Predictor.from_checkpoint(trained["run"])
        entry = {
            "key": key,
            "target": kind,
            "group": group,
            "data": {
                "boards": boards,
                "action_values": values,
                "labels_used": {"av": values, "sv": boards, "bc": boards}[kind],
                "engine_seconds": round(label_seconds * share, 1),
            },
            "compute": {
                "run": trained["run"],
                "steps": trained["steps"],
                "boards_seen": trained["steps"] * scale.batch_size,
                "train_seconds": trained["seconds"],
            },
            "metrics": evaluate_checkpoint(predictor, rows),
        }
        entry |= judge(NeuralAgent(predictor, name=name), sets)
        document["rows"][name] = entry
        target.write_text(json.dumps(document, indent=2) + "\n")
        log(f"ablation {name}: {brief(entry)}")
    document["rows"] = {n: document["rows"][n] for n in ABLATIONS if n in document["rows"]}
    target.write_text(json.dumps(document, indent=2) + "\n")
    return document


# --- 7. ship ---------------------------------------------------------------------------------


def ship(paths: Paths, trained: dict) -> dict:
    """The last checkpoint (parameters, EMA parameters, meta) and the run's config as a
    normal run directory in `paths.models`."""
    run = pathlib.Path(trained["run"])
    step, _ = latest_complete_step(checkpoints_dir(str(run)))
    if paths.models.exists():
        shutil.rmtree(paths.models)
    (paths.models / "checkpoints").mkdir(parents=True)
    shutil.copy(run / "config.toml", paths.models / "config.toml")
    source = run / "checkpoints" / str(step)
    # Without the optimiser state (half the bytes): every reader loads it, only training
    # could not resume from it (model/checkpoint.py).
    shutil.copytree(
        source,
        paths.models / "checkpoints" / str(step),
        ignore=lambda where, names: ["opt_state"] if pathlib.Path(where) == source else [],
    )
    size = sum(p.stat().st_size for p in paths.models.rglob("*") if p.is_file())
    log(f"ship: step {step} of {run} -> {paths.models} ({size / 1e6:.1f} MB)")
    return {"from": str(run), "step": step, "path": str(paths.models), "bytes": size}


# --- the job ---------------------------------------------------------------------------------


def run(scale_name: str, paths: Paths, fresh: bool = False) -> dict:
    scale = SCALES[scale_name]
    if fresh:
        for path in (paths.results, paths.work, paths.runs):
            shutil.rmtree(path, ignore_errors=True)
    paths.results.mkdir(parents=True, exist_ok=True)
    paths.work.mkdir(parents=True, exist_ok=True)
    steps = StepLog(paths.results / "steps.json")
    began = time.monotonic()
    seconds: dict[str, float] = {}
    progress = Progress("cpu-model", 7, "steps", every=0)

    def timed(number: int, name: str, title: str, fn):
        banner(number, title)
        started = time.monotonic()
        value = fn()
        seconds[name] = round(time.monotonic() - started, 1)
        progress.update(number, f"({name} took {format_duration(seconds[name])})")
        return value

    games = timed(1, "positions", "self-play games", lambda: positions(scale, paths, steps))
    annotated = timed(
        2,
        "annotate",
        "action values and single searches, evaluation positions excluded",
        lambda: annotate(scale, paths, steps),
    )
    selected = select_checks(scale, paths, steps)
    checked = overlap_check(scale, paths, steps)
    trained = timed(3, "train", "the main model", lambda: train_main(scale, paths, steps))
    learning = timed(4, "curve", "learning curve", lambda: curve(scale, paths, steps, trained))
    final = timed(5, "evaluate", "final evaluation", lambda: evaluate(scale, paths, steps, trained))
    ablated = timed(
        6,
        "ablations",
        "ablations at equal compute",
        lambda: ablations(scale, paths, steps, annotated),
    )
    shipped = timed(7, "ship", f"copy to {paths.models}", lambda: ship(paths, trained))
    matplotlib.use("Agg")  # files only: no display needed
    plot_curve(learning, final, paths.results / "curve.png")
    plot_ablations(ablated, paths.results / "ablations.png")
    summary = {
        "scale": scale_name,
        "settings": dataclasses.asdict(scale),
        "config": str(MAIN_CONFIG),
        "positions": games,
        "annotated": annotated,
        "selected": selected,
        "overlap": {
            "train_boards_in_evaluation_sets": checked["train_boards_in_evaluation_sets"],
            "test_in_train": checked["test_in_train"],
        },
        "training": trained,
        "evaluation": {
            name: {k: v for k, v in entry.items() if k != "metrics"}
            | (
                {
                    "metrics": {
                        k: entry["metrics"][k]
                        for k in (
                            "boards",
                            "action_accuracy",
                            "kendall_tau",
                            "log_loss",
                            "uniform_log_loss",
                            "test_boards_left_out_as_in_train",
                        )
                    }
                }
                if "metrics" in entry
                else {}
            )
            for name, entry in final["agents"].items()
        },
        "evaluation_sets": final["sets"],
        "ceiling_sets": final["ceiling_sets"],
        "curve": [
            {k: v for k, v in p.items()}
            for p in sorted(learning["points"].values(), key=lambda p: p["step"])
        ],
        "ablations": ablated,
        "shipped": shipped,
        "step_seconds": seconds,
        "wall_seconds": round(time.monotonic() - began, 1),
    }
    (paths.results / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def print_summary(summary: dict) -> None:
    print("\n=== cpu-model summary ===")
    for name, entry in summary["evaluation"].items():
        print(f"{name}: {brief(entry)}")
    for name, row in summary["ablations"]["rows"].items():
        print(f"ablation {name}: {brief(row)}")
    print(f"shipped {summary['shipped']['path']} ({summary['shipped']['bytes'] / 1e6:.1f} MB)")
    print(f"done in {format_duration(summary['wall_seconds'])}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jobs.cpu_model", description=__doc__)
    parser.add_argument("--scale", choices=sorted(SCALES), default="full")
    parser.add_argument("--work", default="data/cpu-model", help="games and annotated Parquet")
    parser.add_argument("--runs", default="runs/cpu-model", help="training runs")
    parser.add_argument("--results", default="results/cpu-model")
    parser.add_argument("--models", default="models/cpu", help="where the final run is copied")
    parser.add_argument(
        "--shared", default="../shared/data", help="real games, puzzles, EPD (optional)"
    )
    parser.add_argument("--fresh", action="store_true", help="recompute every step")
    args = parser.parse_args(argv)
    logging.getLogger("apache_beam").setLevel(logging.ERROR)
    paths = Paths(
        work=pathlib.Path(args.work),
        runs=pathlib.Path(args.runs),
        results=pathlib.Path(args.results),
        models=pathlib.Path(args.models),
        shared=pathlib.Path(args.shared),
    )
    try:
        for option in ("work", "runs", "results", "models"):
            check_dir(getattr(args, option), f"--{option}")
    except OutputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    try:
        print_summary(run(args.scale, paths, fresh=args.fresh))
    except KeyboardInterrupt:
        return interrupted("cpu-model: interrupted; run it again: finished steps are reused")
    return 0


if __name__ == "__main__":
    sys.exit(main())
