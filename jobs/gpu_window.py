"""One training in a lent accelerator's fixed time, bringing back a model whatever happens.

    python -m jobs.gpu_window --config model/configs/gpu-squares.toml \\
        --data gpu-carry/data --out $OUT --minutes 8 [--epochs 5 | --steps 9000] [--dry-run]

The trainer is model/training/train.py's, stopped by the clock (model/training/wall_clock.py): it
trains until `--minutes` minus `--reserve-s` have passed since the command started, checkpoints, and
leaves the reserve to export and evaluate. Every `--save-every-s` (a minute) it checkpoints
into its run directory (`--run`, outside `--out`) and writes to `--out`, so a command killed
at its limit still brings back the model of the minute before:

- `model.tar.NN`: the EMA parameters in bfloat16 as a normal run directory (jobs/gpu_export.py;
  `cat model.tar.* | tar -x -C models/gpu`, then `neural:models/gpu`, `searchless-uci
  --checkpoint models/gpu`, `Predictor.from_checkpoint("models/gpu")`);
- `window.json`: the device, JAX's version, the config, the data (files, boards), the steps,
  examples seen, the wall time so far, the load and compile times, each part's sha256, and
  at the end a short evaluation (puzzle accuracy of the exported model);
- `metrics.jsonl`: the trainer's log records; `log.txt`: the command's lines.

`--data` may be a games pack (jobs/pack_games.py): it is unpacked on every core into board
shards beside the run directory (`<run>-data`, kept for a second call on the warm machine)
before anything else, inside the budget. XLA's compiled programs are kept beside it too
(`<run>-xla`, JAX's persistent compilation cache): a second call on the warm machine reads
the step and the evaluation back instead of compiling them again.

`--dry-run`: toy sizes on the CPU (one layer of width 16, batches of 8, float32) over a
budget of seconds, end to end, as a test runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from core.schema import SchemaError, board_files, read_metadata
from pipeline.game_pack import PackError, is_pack, unpack
from runtime.outputs import OutputError, check_dir, folder_bytes
from runtime.workers import usable_cores

DEFAULT_CONFIG = "model/configs/gpu-squares.toml"
DEFAULT_PUZZLES = "data/sample/puzzles.csv"
# What --dry-run changes: a network and batch that compile and step in seconds on a CPU.
DRY_RUN_SETTINGS = (
    'model.size="custom"',
    "model.num_layers=1",
    "model.embedding_dim=16",
    "model.num_heads=2",
    "train.batch_size=8",
    "train.num_steps=100000",
    'train.dtype="float32"',
    "train.warmup_steps=0",
    "train.log_every=5",
    "train.checkpoint_every=100000",
    "train.keep_checkpoints=2",
)
DRY_RUN_SECONDS = 8.0  # training time of a dry run (the first step's compilation included)
DRY_RUN_SAVE_EVERY_S = 2.0


@dataclass
class Window:
    """What the command knows so far, written to `<out>/window.json` at every checkpoint."""

    out: str
    started: float = field(default_factory=time.monotonic)
    lines: list[str] = field(default_factory=list)
    document: dict[str, Any] = field(default_factory=dict)

    def log(self, line: str) -> None:
        line = f"[{time.monotonic() - self.started:7.1f}s] {line}"
        print(line, flush=True)
        with open(os.path.join(self.out, "log.txt"), "a") as f:
            f.write(line + "\n")

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def write(self) -> None:
        self.document["wall_s"] = round(time.monotonic() - self.started, 1)
        path = os.path.join(self.out, "window.json")
        with open(path + ".partial", "w") as f:
            json.dump(self.document, f, indent=2)
            f.write("\n")
        os.replace(path + ".partial", path)


def data_summary(path: str) -> dict[str, Any]:
    """The training files, their boards (from the Parquet footers) and bytes."""
    files = board_files(path)
    return {
        "path": path,
        "files": [os.path.basename(f) for f in files],
        "boards": sum(read_metadata(f).num_rows for f in files),
        "bytes": sum(os.path.getsize(f) for f in files),
    }


def training_data(window: Window, data: str, run: str) -> tuple[str, dict[str, Any] | None]:
    """`data` itself, or for a games pack (jobs/pack_games.py) the board shards it unpacks to
    beside the run directory, on every core; a second call on the still-warm machine with the
    same --data finds them there."""
    if not is_pack(data):
        return data, None
    target = os.path.normpath(run) + "-data"
    done = os.path.join(target, "unpacked.json")
    if os.path.exists(done):
        with open(done) as f:
            info = json.load(f)
        if info.get("path") == data:
            return target, info
    shutil.rmtree(target, ignore_errors=True)
    began = time.monotonic()
    rows = unpack(data, target, workers=usable_cores())
    info = {
        "path": data,
        "bytes": folder_bytes(data),
        "rows": rows,
        "unpack_s": round(time.monotonic() - began, 1),
    }
    with open(done, "w") as f:
        json.dump(info, f)
    window.log(f"unpacked {rows:,} boards of the games pack {data} in {info['unpack_s']}s")
    return target, info


def compilation_cache(run: str) -> str:
    """Where a window keeps XLA's compiled programs: beside its run, as its unpacked data."""
    return os.path.normpath(run) + "-xla"


def keep_compilations(run: str) -> None:
    """Before JAX is imported: JAX's persistent compilation cache in compilation_cache(run),
    every program kept (the step's ~77 s compile on the H200 and the evaluation's ~25 s are
    then read back by a second call on the warm machine). A cache the user set is left alone;
    in a process that has imported JAX already (a test's), JAX has read its settings and
    nothing is changed."""
    if "jax" in sys.modules:
        return
    os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", compilation_cache(run))
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")


def environment() -> dict[str, Any]:
    import jax
    import jaxlib

    from model.devices import describe_devices

    return {
        "device": describe_devices(),
        "device_kind": jax.devices()[0].device_kind,
        "platform": jax.default_backend(),
        "jax_version": jax.__version__,
        "jaxlib_version": jaxlib.__version__,
        "python": platform.python_version(),
        "host": platform.node(),
    }


def export(window: Window, run: str, config, step: int, state) -> None:
    """The EMA parameters at `step` as a compact run in parts in --out, and window.json."""
    from jobs.gpu_export import write_compact_run, write_parts

    began = time.monotonic()
    compact = os.path.join(run, "export")
    batch = config.train.batch_size
    data = window.document["data"]
    # The model's own meta says where and on what it was trained, whatever reads it later.
    meta = {
        "source": "gpu_window",
        "environment": window.document["environment"],
        "data": {k: data[k] for k in ("path", "boards", "bytes", "pack") if k in data},
        "examples_seen": step * batch,
        "wall_s": round(window.elapsed(), 1),
    }
    size = write_compact_run(compact, config, step, state.ema_params, meta)
    parts = write_parts(compact, window.out)
    window.document.update(
        step=step,
        examples_seen=step * batch,
        model={"step": step, "bytes": size, "dtype": "bfloat16", "parts": parts},
    )
    metrics = os.path.join(run, "metrics.jsonl")
    if os.path.exists(metrics):
        shutil.copy(metrics, os.path.join(window.out, "metrics.jsonl"))
    window.write()
    window.log(
        f"exported step {step} ({size / 1e6:.1f} MB, {len(parts)} part(s)) "
        f"in {time.monotonic() - began:.1f}s"
    )


def test_metrics(config, ema_params) -> dict[str, float]:
    """The trainer's evaluation (test loss, move accuracy; AV: Kendall's tau) of the EMA
    parameters on data.test: a clock's stop skips the one the trainer makes at its end."""
    from model.data.loader import load_boards
    from model.training.evaluator import Evaluator
    from model.training.step import Placement

    evaluator = Evaluator(config, load_boards(config.data.test), Placement.over_all_devices())
    result = evaluator(ema_params)  # a metric the target has not is None
    return {k: None if v is None else round(float(v), 4) for k, v in result.items()}


def evaluate(window: Window, puzzles_path: str, count: int) -> dict[str, Any]:
    """Puzzle accuracy of the exported model, loaded back from its parts as a reader would."""
    from core.eval_sets import read_puzzles
    from eval.agents.players import make_agent
    from eval.puzzles import evaluate as play
    from jobs.gpu_export import unpack_parts

    loaded = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"gpu-window-loaded-{os.getpid()}")
    unpack_parts(window.out, loaded)
    puzzles, _ = read_puzzles(puzzles_path, count)
    result = play(make_agent(f"neural:{loaded}"), puzzles, show_progress=False)
    shutil.rmtree(loaded, ignore_errors=True)
    return {k: result[k] for k in ("solved", "total", "accuracy", "seconds")} | {
        "file": puzzles_path
    }


def schedule_steps(epochs: float, boards: int, batch_size: int) -> int:
    """The schedule's length for `epochs` passes over `boards` in batches of `batch_size`:
    the window's data is a fixed set, and how many passes it bears is what was measured
    (results/gpu-window/epochs.json), whatever its size."""
    return max(1, round(epochs * boards / batch_size))


def run_window(args: argparse.Namespace, window: Window) -> int:
    from model import config as config_lib
    from model.training.train import resolve_config, train
    from model.training.wall_clock import WallClock

    overrides = list(DRY_RUN_SETTINGS if args.dry_run else ()) + list(args.set)
    train_data, pack = training_data(window, args.data, args.run)
    config = resolve_config(
        argparse.Namespace(
            config=args.config,
            set=overrides,
            data=train_data,
            test_data=args.test_data or "",
            steps=args.steps,
            batch_size=None,
            target=None,
        )
    )
    config = config_lib.validate(config)
    data = data_summary(config.data.train)
    if pack is not None:
        data["pack"] = pack
    if args.epochs is not None:
        steps = schedule_steps(args.epochs, data["boards"], config.train.batch_size)
        config = replace(config, train=replace(config.train, num_steps=steps))
    train_s = (
        DRY_RUN_SECONDS if args.dry_run else args.minutes * 60 - args.reserve_s - window.elapsed()
    )
    if train_s <= 0:
        raise config_lib.ConfigError(
            f"--minutes {args.minutes} leaves no training time after --reserve-s {args.reserve_s}"
        )
    window.document.update(
        config_file=args.config,
        config=config.to_dict(),
        data=data,
        epochs=args.epochs,
        environment=environment(),
        train_budget_s=round(train_s, 1),
        dry_run=args.dry_run,
    )
    window.write()
    env = window.document["environment"]
    window.log(f"JAX {env['jax_version']} on {env['device']}; training for {train_s:.0f}s")
    save_every = DRY_RUN_SAVE_EVERY_S if args.dry_run else args.save_every_s
    exported: list[int] = []

    def on_save(step: int, state) -> None:
        export(window, args.run, config, step, state)
        exported.append(step)

    clock = WallClock.starting_now(train_s, save_every, on_save)
    began = time.monotonic()
    result = train(config, args.run, log=window.log, clock=clock)
    window.document["train_s"] = round(time.monotonic() - began, 1)
    if not exported or exported[-1] != result.step:
        export(window, args.run, config, result.step, result.state)
    if config.data.test:
        window.document["test"] = test_metrics(config, result.state.ema_params)
        window.log(f"test (EMA): {window.document['test']}")
        window.write()
    if args.puzzles and args.puzzle_count:
        window.document["puzzles"] = evaluate(window, args.puzzles, args.puzzle_count)
        p = window.document["puzzles"]
        window.log(f"puzzles: {p['solved']}/{p['total']} ({p['accuracy']:.1%})")
    window.document["finished"] = True
    window.write()
    window.log(f"done: step {result.step}, {result.step * config.train.batch_size:,} examples")
    return 0


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m jobs.gpu_window", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--config", default=DEFAULT_CONFIG, help="any model/configs/*.toml")
    parser.add_argument(
        "--data", required=True, help="training shards (dir, file or glob), or a games pack"
    )
    parser.add_argument("--test-data", help="test shards, for the trainer's evaluation")
    parser.add_argument("--out", required=True, help="what comes back ($OUT on the device)")
    parser.add_argument("--run", help="the run directory (default: /tmp/gpu-window-run)")
    parser.add_argument("--minutes", type=float, default=8.0, help="the whole command's budget")
    parser.add_argument("--reserve-s", type=float, default=75.0, help="kept to export, evaluate")
    parser.add_argument("--save-every-s", type=float, default=60.0, help="checkpoint interval")
    schedule = parser.add_mutually_exclusive_group()
    schedule.add_argument("--steps", type=int, help="train.num_steps (the learning-rate schedule)")
    schedule.add_argument(
        "--epochs", type=float, help="train.num_steps as passes over the data's boards"
    )
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--puzzles", default=DEFAULT_PUZZLES, help="CSV for the last check")
    parser.add_argument("--puzzle-count", type=int, default=77, help="0: no puzzle check")
    parser.add_argument("--dry-run", action="store_true", help="toy sizes on the CPU")
    args = parser.parse_args(argv)
    if args.run is None:
        args.run = os.path.join(os.environ.get("TMPDIR", "/tmp"), "gpu-window-run")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.dry_run:
        # Before JAX is imported: the dry run is the CPU's, whatever the machine has.
        os.environ["JAX_PLATFORMS"] = "cpu"
    keep_compilations(args.run)
    from model.checkpoint import DamagedCheckpointError
    from model.config import ConfigError
    from model.data.loader import DataError

    try:
        check_dir(args.out)
        os.makedirs(args.out, exist_ok=True)
        window = Window(args.out)
        return run_window(args, window)
    except ConfigError as e:
        print(f"config error: {e}", file=sys.stderr)
        return 2
    except (DataError, SchemaError, FileNotFoundError, DamagedCheckpointError, PackError) as e:
        print(f"data error: {e}", file=sys.stderr)
        return 1
    except OutputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
