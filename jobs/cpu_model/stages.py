"""The steps of `make cpu-model` (jobs/cpu_model/recipe.py says what each does and why), one
function each, in the order the job runs them; each records what it was computed from in the
job's StepLog, so a rerun reuses it while that is unchanged."""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import pathlib
import shutil
import time
from collections.abc import Iterator

from core.engine_settings import EngineLimit
from core.positions import position_key
from core.schema import board_files, read_boards
from eval.agents.players import NeuralAgent, make_agent
from eval.metrics import evaluate_checkpoint
from jobs.cpu_model.judging import brief, held_out_rows, judge, judged_sets, neural
from jobs.cpu_model.settings import (
    BASELINES,
    CHECKS_SPLIT,
    OWN_GAMES_SPLIT,
    STOCKFISH,
    Paths,
    Scale,
    exclusion_files,
    lichess_games,
    log,
    own_games_on,
    split_glob,
    train_glob,
)
from jobs.step_log import StepLog, annotate_step, fingerprint
from model import config as config_lib
from model.checkpoint import checkpoints_dir, latest_complete_step
from model.predictor import Predictor
from model.training.train import train as train_model
from pipeline import select_boards, selfplay
from pipeline.exclude import load_exclusions
from pipeline.overlap import overlap
from runtime.interrupts import exit_code

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
            limit=EngineLimit.parse(scale.selfplay_limit),
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
    the single searches of the real games, of the boards after a random move and of the
    model's own games (when on), and the checks selected from the check pool."""
    pool = check_pool(scale, paths)
    searched = [s for s in annotation_jobs(scale, paths) if s.startswith("search-")]
    splits = [s for s in searched if s not in pool] + ([CHECKS_SPLIT] if pool else [])
    splits += [OWN_GAMES_SPLIT] if own_games_on(scale, paths) else []
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
    config = config_lib.load(paths.config)
    model, play = dict(scale.model), {}
    if target != "bc":  # a value head beside the policy is BC's alone (the AV and SV ablations)
        model["policy_value"] = False
        play["successor_weight"] = 0.0  # and so is the policy it mixes with
    return config.replace(
        model=model,
        play=play,
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


def train_run(
    name: str, config, run: pathlib.Path, steps: StepLog, data: StepLog, depends: list[str]
) -> dict:
    """`run` trained (or reused) on the data `depends` names: steps of the `data` log."""
    with run_lock(run):
        steps.reload()
        return _train_run(name, config, run, steps, [data.done.get(d) for d in depends])


def _train_run(name: str, config, run: pathlib.Path, steps: StepLog, made: list) -> dict:
    key = fingerprint(config.to_dict(), made)
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


def train_main(scale: Scale, paths: Paths, steps: StepLog, data_steps: StepLog) -> dict:
    data = main_data(scale, paths)
    config = run_config(scale, paths, scale.target, scale.steps, data, scale.curve_points)
    searches = [f"annotate-{split}" for split in annotation_jobs(scale, paths) if "search" in split]
    selected = [f"select-{CHECKS_SPLIT}"] if check_pool(scale, paths) else []
    own = [f"annotate-{OWN_GAMES_SPLIT}"] if own_games_on(scale, paths) else []
    depends = [*ANNOTATE_STEPS, *searches, *selected, *own]
    return train_run("main", config, paths.runs / "main", steps, data_steps, depends)


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


def ablations(
    scale: Scale, paths: Paths, steps: StepLog, data_steps: StepLog, annotated: dict
) -> dict:
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
        key = fingerprint(config.to_dict(), [data_steps.done.get(d) for d in ANNOTATE_STEPS])
        if document["rows"].get(name, {}).get("key") == key:
            continue
        run = paths.runs / name
        trained = train_run(f"ablation-{name}", config, run, steps, data_steps, ANNOTATE_STEPS)
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
