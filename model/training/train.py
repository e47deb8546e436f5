"""The training loop and its CLI: annotated Parquet -> orbax checkpoints of an AV/SV/BC model.

    python -m model.training.train --config model/configs/small.toml \\
        --data data/annotated/train --test-data data/annotated/test --out runs/small

Data-parallel over every device of every process (a `data` mesh axis; parameters
replicated, batches split). Several hosts: set JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES and
JAX_PROCESS_ID (or pass --distributed where JAX auto-detects the cluster, e.g. TPU pods or
SLURM) and start the same command on every host; each reads its slice of every batch.

Re-running the same command in the same --out resumes from the latest checkpoint: parameters,
EMA, optimiser state and the loader's position, so the run continues exactly where it was
(`--stop-after N`, SIGTERM or Ctrl-C saves and stops at a step, for preemptible machines; a
signal's stop exits 128 + its number: 143, 130).

One training at a time per --out: a second one is refused, naming the first's PID and host,
while the first holds `lock` there (runtime/dir_lock.py). Writes to --out: `config.toml` (the
resolved config), `checkpoints/<step>/` (see model.checkpoint), `metrics.jsonl` (one JSON
object per log or evaluation; a resumed run first cuts it back to the restored step, so it
ends up as an uninterrupted run's), and `tensorboard/` event files of the same numbers when
the `tensorboard` extra is installed (model/training/scalar_events.py). A full disk ends the
command in one line naming what it was writing; the same command then resumes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import jax
import numpy as np
from jax.experimental import multihost_utils

from core.schema import SchemaError
from model import config as config_lib
from model.checkpoint import DamagedCheckpointError, checkpoints_dir, latest_complete_step
from model.config import Config, ConfigError
from model.data.loader import DataError
from model.data.train_data import load_data
from model.devices import cpu_warning, describe_devices, resolve_dtype
from model.networks.transformer import count_params
from model.training import peer_loss, run_dir
from model.training.evaluator import Evaluator, format_eval
from model.training.metrics_log import MetricsLog, train_record
from model.training.run_dir import open_run_dir, resume, run_dir_lock
from model.training.step import (
    Placement,
    TrainState,
    compile_train_step,
    init_state,
    learning_rate,
    maybe_initialize_distributed,
)
from model.training.wall_clock import WallClock
from runtime.dir_lock import DirectoryBusy
from runtime.interrupts import StopRequests, exit_code, interrupted
from runtime.outputs import OutputError, check_dir, disk_full, disk_full_line, quiet_disk_full
from runtime.progress import format_duration

# Where orbax's save threads log their failures (absl) and their lost futures (asyncio).
LIBRARY_LOGGERS = ("absl", "asyncio")


@dataclass
class TrainResult:
    step: int
    state: TrainState
    data_position: int
    last_eval: dict[str, float] | None
    stopped_early: bool
    stop_signal: int | None = None  # the signal (SIGTERM, SIGINT) that stopped it, if any


def train(
    config: Config,
    out: str,
    stop_after: int | None = None,
    log: Callable[[str], None] = print,
    clock: WallClock | None = None,
) -> TrainResult:
    """Trains (or resumes) `config` into run dir `out`; returns the final state.

    Validation, the resume check and data loading all happen before anything is compiled
    (`_Run`). `stop_after` stops (with a checkpoint) once that step is reached, as SIGTERM and
    SIGINT (Ctrl-C) do at the next step; a second SIGINT interrupts at once (KeyboardInterrupt).
    metrics.jsonl comes out the same as an uninterrupted run's (see model.training.metrics_log):
    each train record averages the steps since the previous multiple of `log_every`, the steps
    before a checkpoint travelling in its meta (`log_window`), and an evaluation the
    interruption cut off is made on resuming. A latest checkpoint that does not restore is
    moved aside for the one before (model.training.run_dir). `clock` (model.training.wall_clock,
    one process only) adds a checkpoint every so many seconds and a stop, with a checkpoint, at a
    time.
    """
    config_lib.validate(config)
    t = config.train
    placement = Placement.over_all_devices()
    if clock is not None and jax.process_count() > 1:
        raise ConfigError("a wall-clock stop needs one process: the hosts' clocks disagree")
    if t.batch_size % len(jax.devices()):
        raise ConfigError(
            f"train.batch_size {t.batch_size} is not divisible by the {len(jax.devices())} devices"
        )
    is_main = jax.process_index() == 0
    # The cleanup closes the checkpointer however the run ends: one left open by an error
    # before the loop (bad data, say) has orbax's threads print tracebacks at exit.
    with run_dir_lock(out, is_main, log), contextlib.ExitStack() as cleanup:
        run = _Run(config, out, placement, is_main, log, cleanup)
        with StopRequests() as stops:
            last_eval = run.catch_up_eval()
            step = start = run.start_step
            if stop_after is not None and start >= stop_after:
                log(
                    f"{out} is at step {start}, not before --stop-after {stop_after}: nothing to do"
                )
            stopped_early = False
            while step < t.num_steps and not (stop_after is not None and step >= stop_after):
                batch = placement.global_batch(next(run.batches))
                run.state, metrics = run.step_fn(run.state, batch)
                step += 1
                run.window.append(metrics)
                if placement.wait_each_step:
                    jax.block_until_ready(metrics)
                if step == start + 1:
                    run.compiled(step, metrics)
                if step % t.log_every == 0 or step == t.num_steps:
                    run.log_train(step)
                stopping = step < t.num_steps and (
                    stops.signal is not None
                    or (stop_after is not None and step >= stop_after)
                    or (clock is not None and clock.stop_due())
                )
                timed_save = clock is not None and clock.save_due()
                if step % t.checkpoint_every == 0 or step == t.num_steps or stopping or timed_save:
                    run.save(step)
                    if clock is not None:
                        clock.saved(step, run.state)
                if run.evaluator is not None and run.is_eval_step(step) and not stopping:
                    last_eval = run.evaluate(step)
                if stopping:
                    stopped_early = True
                    why = f" by {signal.Signals(stops.signal).name}" if stops.signal else ""
                    if not why and clock is not None and clock.stop_due():
                        why = " by the clock"
                    log(f"stopped{why} at step {step}; run the same command again to resume")
                    break
            if start >= t.num_steps:
                log(f"{out} already reached step {start} of {t.num_steps}: nothing to do")
            stop_signal = stops.signal if stopped_early else None
            return TrainResult(
                step, run.state, run.batches.position, last_eval, stopped_early, stop_signal
            )


class _Run:
    """A training's parts between its steps: the state, the loader, the logs and the
    checkpointer. Made, the run dir is ready, the data loaded and the state resumed, all
    before anything is compiled; `cleanup` closes what it opened."""

    def __init__(
        self,
        config: Config,
        out: str,
        placement: Placement,
        is_main: bool,
        log: Callable[[str], None],
        cleanup: contextlib.ExitStack,
    ):
        t = config.train
        self.config, self.out, self.placement, self.log = config, out, placement, log
        self.checkpointer, resume_step, meta = open_run_dir(config, out, is_main, log)
        # The current one: a resume may replace it.
        cleanup.callback(lambda: run_dir.close(self.checkpointer))
        self.started = time.perf_counter()
        self.train_data, test_data = load_data(config, meta, log)
        self.state = init_state(config, placement)
        self.start_step, position = 0, 0
        if resume_step is not None:
            self.checkpointer, self.state, meta = resume(
                self.checkpointer, resume_step, self.state, placement, log
            )
            self.start_step, position = meta["step"], meta["data_position"]
            log(f"resumed from step {self.start_step} (data position {position}) in {out}")
        self._describe_model()
        self.batches = self.train_data.batches(config, position)
        cleanup.callback(self.batches.close)
        loader = self.train_data.loader
        if meta is not None and meta.get("loader", {"streaming": False}) != loader:
            log(
                f"warning: the loader differs from the checkpoint's ({meta.get('loader')} vs "
                f"{loader}): the data order does not continue exactly"
            )
        # Before anything is compiled: a batch larger than the data is no run. (The
        # evaluation's batches are as large and repeat a smaller test split within them.)
        self.batches.check_batch_size("data.train")
        self.evaluator = Evaluator(config, test_data, placement) if test_data else None
        self.step_fn = compile_train_step(config, placement)
        self.metrics_log = MetricsLog(out, is_main, self.start_step)
        cleanup.callback(self.metrics_log.close)
        self.lr = learning_rate(t)
        # The steps since the last log record (their metrics), restored when resuming mid-window.
        self.window: list[dict] = (
            list(meta.get("log_window", [])) if resume_step is not None else []
        )
        self.timer_start, self.timer_step = time.perf_counter(), self.start_step

    def _describe_model(self) -> None:
        config, t = self.config, self.config.train
        params = count_params(self.state.params)
        self.log(
            f"model {config.model.backbone} {config.model.size}: {params:,} parameters, target "
            f"{t.target}, {resolve_dtype(t.dtype)} compute, {describe_devices()} on "
            f"{jax.process_count()} process(es)"
        )
        warning = cpu_warning(config, params)
        if warning:
            self.log(warning)

    def is_eval_step(self, step: int) -> bool:
        t = self.config.train
        return step == t.num_steps or bool(t.eval_every and step % t.eval_every == 0)

    def catch_up_eval(self) -> dict[str, float] | None:
        """The evaluation at the start step when the run before stopped (or was killed)
        between its checkpoint and that evaluation."""
        start = self.start_step
        if self.evaluator is None or not start or not self.is_eval_step(start):
            return None
        missing = not self.metrics_log.has_eval(start)
        if jax.process_count() > 1:  # only process 0 reads the log; all must evaluate
            missing = bool(multihost_utils.broadcast_one_to_all(np.asarray(missing)))
        return self.evaluate(start) if missing else None

    def compiled(self, step: int, metrics: dict) -> None:
        """After the first step: its time, and the rate's timer started after it (the rate
        leaves out the compilation)."""
        jax.block_until_ready(metrics)
        self.log(f"step {step}: compiled and ran in {time.perf_counter() - self.started:.1f}s")
        self.timer_start, self.timer_step = time.perf_counter(), step

    def log_train(self, step: int) -> None:
        t = self.config.train
        record = train_record(self.window, step, self.timer_step, self.timer_start, t, self.lr)
        record["epoch"] = round(self.batches.epoch, 4)
        self.metrics_log.write(record)
        rate = record["examples_per_s"]
        eta = (t.num_steps - step) * t.batch_size / rate if rate else math.nan
        values = record.get("values_per_s")
        self.log(
            f"step {step}/{t.num_steps} | loss {record['loss']:.4f} | "
            f"acc {record['accuracy']:.3f} | {rate or 0:,.0f} ex/s | "
            + (f"{values:,.0f} values/s | " if values is not None else "")
            + f"epoch {record['epoch']:.2f} | ETA {format_duration(eta)}"
        )
        self.window, self.timer_start, self.timer_step = [], time.perf_counter(), step

    def save(self, step: int) -> None:
        meta = {
            "step": step,
            "data_position": self.batches.position,
            "data_fingerprint": self.train_data.fingerprint,
            "loader": self.train_data.loader,
            "config": self.config.to_dict(),
            "log_window": [{k: float(v) for k, v in m.items()} for m in self.window],
        }
        run_dir.save(self.checkpointer, step, self.state, meta)

    def evaluate(self, step: int) -> dict[str, float]:
        result = self.evaluator(self.state.ema_params)
        self.metrics_log.write({"kind": "eval", "step": step, **result})
        self.log(f"eval step {step} (EMA): {format_eval(result)}")
        return result


# --- CLI ------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m model.training.train", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--config", required=True, help="a TOML file (model/configs/*.toml)")
    parser.add_argument("--data", help="training boards (overrides data.train)")
    parser.add_argument("--test-data", help="test boards for evaluation (overrides data.test)")
    parser.add_argument("--out", required=True, help="run directory (resumed if it exists)")
    parser.add_argument("--steps", type=int, help="overrides train.num_steps")
    parser.add_argument("--batch-size", type=int, help="overrides train.batch_size")
    parser.add_argument("--target", help="overrides train.target (av, sv or bc)")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override any field, e.g. --set train.learning_rate=1e-4 --set num_layers=2",
    )
    parser.add_argument("--stop-after", type=int, help="checkpoint and stop at this step")
    parser.add_argument(
        "--distributed", action="store_true", help="jax.distributed.initialize (auto-detect)"
    )
    return parser.parse_args(argv)


def resolve_config(args: argparse.Namespace) -> Config:
    overrides = list(args.set)
    flags = {
        "data.train": args.data,
        "data.test": args.test_data,
        "train.num_steps": args.steps,
        "train.batch_size": args.batch_size,
        "train.target": args.target,
    }
    for key, value in flags.items():
        if value is not None:
            overrides.append(f"{key}={json.dumps(value)}")
    return config_lib.load(args.config, overrides)


def resume_text(out: str) -> str:
    """What the same command resumes from, for a run that stops abruptly."""
    step, _ = latest_complete_step(checkpoints_dir(out))
    if step is None:
        return f"{out} holds no complete checkpoint yet; the same command starts it afresh"
    return (
        f"the last complete checkpoint in {out} is step {step}; the same command on every "
        "process resumes from it"
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    watch = None
    try:
        config = config_lib.validate(resolve_config(args))
        check_dir(args.out)
        peer_loss.peer_timeout()  # a bad setting said before anything starts
        maybe_initialize_distributed(args.distributed)
        watch = peer_loss.watch_peers(lambda: resume_text(args.out))
        with quiet_disk_full(*LIBRARY_LOGGERS):
            result = train(config, args.out, stop_after=args.stop_after)
        if watch is not None:  # not on an error: the others are to stop too
            watch.finished()
    except ConfigError as e:
        print(f"config error: {e}", file=sys.stderr)
        return 2
    except DamagedCheckpointError as e:
        print(f"checkpoint error: {e}", file=sys.stderr)
        return 1
    except (OutputError, DirectoryBusy) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except (DataError, SchemaError, FileNotFoundError) as e:
        print(f"data error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # before the loop, or a second Ctrl-C while stopping
        return interrupted(
            f"interrupted: nothing saved since the last checkpoint in {args.out}; "
            "run the same command again to resume"
        )
    except Exception as e:  # a full disk, wherever orbax or a log write met it
        full = disk_full(e)
        if full is None:
            if watch is not None and watch.explains(e):
                return peer_loss.EXIT_PEER_LOST  # the watch has said the line
            raise
        print(
            disk_full_line(
                full, args.out, "run the same command again to resume from the last checkpoint"
            ),
            file=sys.stderr,
        )
        return 1
    return exit_code(result.stop_signal) if result.stop_signal else 0


if __name__ == "__main__":
    sys.exit(main())
