"""The training loop and its CLI: annotated Parquet -> orbax checkpoints of an AV/SV/BC model.

    python -m model.train --config model/configs/small.toml \\
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
while the first holds `lock` there (core/dir_lock.py). Writes to --out: `config.toml` (the
resolved config), `checkpoints/<step>/` (see model.checkpoint), `metrics.jsonl` (one JSON
object per log or evaluation; a resumed run first cuts it back to the restored step, so it
ends up as an uninterrupted run's), and `tensorboard/` event files of the same numbers when
the `tensorboard` extra is installed (model/scalar_events.py). A full disk ends the command in
one line naming what it was writing; the same command then resumes.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import chess
import jax
import numpy as np
from jax.experimental import multihost_utils

from core.dir_lock import DirectoryBusy, dir_lock
from core.interrupts import exit_code, interrupted
from core.metrics import summarize
from core.outputs import (
    OutputError,
    check_dir,
    disk_full,
    disk_full_line,
    quiet_disk_full,
    writing,
)
from core.progress import format_duration
from core.schema import SchemaError, board_files
from model import config as config_lib
from model import scalar_events
from model.checkpoint import (
    Checkpointer,
    DamagedCheckpointError,
    abstract_like,
    checkpoints_dir,
    earlier_complete_steps,
    incomplete_text,
    latest_complete_step,
    read_meta,
    set_aside,
)
from model.config import Config, ConfigError, TrainConfig
from model.data import BoardData, DataError, fingerprint, load_boards, make_batches
from model.devices import cpu_warning, describe_devices, resolve_dtype
from model.predictor import Predictor
from model.scalar_events import ScalarEvents
from model.stream import StreamBatches, estimate_in_memory_bytes, should_stream, stream_fingerprint
from model.train_step import DATA_AXIS as DATA_AXIS
from model.train_step import Placement as Placement
from model.train_step import TrainState as TrainState
from model.train_step import compile_train_step as compile_train_step
from model.train_step import init_state as init_state
from model.train_step import jitted, learning_rate, maybe_initialize_distributed
from model.train_step import make_loss as make_loss
from model.train_step import make_optimizer as make_optimizer
from model.transformer import count_params

METRICS_FILE = "metrics.jsonl"
# Held (core.dir_lock) by the training writing the run dir; deleted when it ends.
LOCK_FILE = "lock"
# Signals that stop training at the next step with a checkpoint (exit code: core.interrupts).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
# Where orbax's save threads log their failures (absl) and their lost futures (asyncio).
LIBRARY_LOGGERS = ("absl", "asyncio")


# --- logging --------------------------------------------------------------------------


class MetricsLog:
    """metrics.jsonl (and TensorBoard event files when the package is installed), written by
    process 0 only.

    Opened at `resume_step`, it first drops the records of later steps (written by a run that
    was interrupted after its last checkpoint and will be redone), so that a resumed run's log
    equals an uninterrupted one's; a line torn by a kill goes too.
    """

    def __init__(self, run_dir: str, enabled: bool, resume_step: int = 0):
        self.enabled = enabled
        self._evaluated: set[int] = set()
        self._file = self._events = None
        if not enabled:
            return
        path = self.path = os.path.join(run_dir, METRICS_FILE)
        kept = _records_up_to(path, resume_step)
        with writing(path + ".tmp"), open(path + ".tmp", "w") as f:
            f.writelines(json.dumps(record) + "\n" for record in kept)
        os.replace(path + ".tmp", path)
        self._evaluated = {r["step"] for r in kept if r.get("kind") == "eval"}
        self._file = open(path, "a")  # noqa: SIM115 - closed by close()
        if scalar_events.available():
            # Events of the steps a resumed run redoes are dropped, as in metrics.jsonl.
            self._events = ScalarEvents(run_dir, purge_step=resume_step + 1 if resume_step else 0)

    def has_eval(self, step: int) -> bool:
        return step in self._evaluated

    def write(self, record: dict[str, Any]) -> None:
        if not self.enabled:
            return
        with writing(self.path):
            self._file.write(json.dumps(record) + "\n")
            self._file.flush()
        if record.get("kind") == "eval":
            self._evaluated.add(record["step"])
        if self._events is not None:
            self._events.write(record)

    def close(self) -> None:
        if self._file:
            self._file.close()
        if self._events is not None:
            self._events.close()


def _records_up_to(path: str, step: int) -> list[dict[str, Any]]:
    if not os.path.exists(path):
        return []
    kept = []
    with open(path) as f:
        for line in f:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # the last line, cut short by a kill
            if record.get("step", 0) <= step:
                kept.append(record)
    return kept


# --- evaluation -----------------------------------------------------------------------


class Evaluator:
    """Test loss and accuracy on fixed test batches, and action accuracy and Kendall's tau
    of the model's move scores against Stockfish's on a fixed subset of test boards."""

    def __init__(self, config: Config, test: BoardData, placement: Placement):
        t = config.train
        self.config = config
        self.placement = placement
        batches = make_batches(
            config.model.backbone,
            test,
            t.target,
            t.num_bins,
            t.batch_size,
            seed=t.seed,
            hl_gauss=t.hl_gauss,
            hl_gauss_sigma_ratio=t.hl_gauss_sigma_ratio,
            av_partial=t.av_partial,
            prefetch=0,
            process_index=jax.process_index(),
            process_count=jax.process_count(),
        )
        self.batches = [placement.global_batch(next(batches)) for _ in range(t.eval_batches)]
        self.step = jitted(config.model, t, placement).evaluate
        # Accuracy and tau compare every legal move, so they need complete boards.
        playable = np.flatnonzero((np.diff(test.pair_offsets) > 0) & ~test.partial)
        rng = np.random.default_rng(t.seed)
        chosen = np.sort(rng.choice(playable, min(t.eval_boards, len(playable)), replace=False))
        self.boards = [chess.Board(test.fens[i]) for i in chosen]
        self.truth = [
            dict(zip(test.legal_moves(i), test.move_win_probs(i), strict=True)) for i in chosen
        ]
        self.predictor: Predictor | None = None

    def __call__(self, params) -> dict[str, float]:
        sums: dict[str, float] = {}
        for batch in self.batches:
            for k, v in self.step(params, batch).items():
                sums[k] = sums.get(k, 0.0) + float(v)
        result = {f"test_{k}": v / len(self.batches) for k, v in sums.items()}
        host_params = jax.device_get(params)
        if self.predictor is None:
            self.predictor = Predictor(host_params, self.config)
        else:
            self.predictor.params = jax.device_put(host_params, jax.local_devices()[0])
        predicted, truth = [], []
        for (moves, scores), values in zip(
            self.predictor.move_values(self.boards), self.truth, strict=True
        ):
            predicted.append(scores)
            truth.append(np.array([values[m] for m in moves], np.float64))
        summary = summarize(predicted, truth)
        result.update(
            action_accuracy=summary["action_accuracy"],
            kendall_tau=summary["kendall_tau"],
            mean_abs_win_prob_error=summary["mean_abs_win_prob_error"],
            eval_boards=summary["boards"],
        )
        return result


# --- the loop -------------------------------------------------------------------------


@dataclass
class TrainResult:
    step: int
    state: TrainState
    data_position: int
    last_eval: dict[str, float] | None
    stopped_early: bool
    stop_signal: int | None = None  # the signal (SIGTERM, SIGINT) that stopped it, if any


def check_resumable(saved: Config, config: Config, out: str) -> None:
    """A run dir can only be resumed by a config that trains the same network."""
    same = (
        saved.model == config.model
        and saved.train.target == config.train.target
        and saved.train.num_bins == config.train.num_bins
    )
    if not same:
        raise ConfigError(
            f"{out} holds checkpoints of a different model or target (saved: {saved.model}, "
            f"target {saved.train.target}, {saved.train.num_bins} bins); use another --out"
        )


def train(
    config: Config,
    out: str,
    stop_after: int | None = None,
    log: Callable[[str], None] = print,
) -> TrainResult:
    """Trains (or resumes) `config` into run dir `out`; returns the final state.

    Validation, the resume check and data loading all happen before anything is compiled.
    `stop_after` stops (with a checkpoint) once that step is reached, as SIGTERM and SIGINT
    (Ctrl-C) do at the next step; a second SIGINT interrupts at once (KeyboardInterrupt).
    metrics.jsonl comes out the same as an uninterrupted run's (see MetricsLog and
    `_train_record`): each train record averages the steps since the previous multiple of
    `log_every`, the steps before a checkpoint travelling in its meta (`log_window`), and an
    evaluation the interruption cut off is made on resuming.
    A latest checkpoint that does not restore is moved aside for the one before (see
    model.checkpoint).
    """
    config_lib.validate(config)
    t = config.train
    placement = Placement.over_all_devices()
    if t.batch_size % len(jax.devices()):
        raise ConfigError(
            f"train.batch_size {t.batch_size} is not divisible by the {len(jax.devices())} devices"
        )
    is_main = jax.process_index() == 0
    with _run_dir_lock(out, is_main, log), contextlib.ExitStack() as cleanup:
        return _train(config, out, placement, is_main, stop_after, log, cleanup)


@contextlib.contextmanager
def _run_dir_lock(out: str, is_main: bool, log: Callable[[str], None]) -> Iterator[None]:
    """The run dir's lock (core.dir_lock), held by process 0 for the whole run: a second
    training into the same --out is refused before it touches anything there. DirectoryBusy on
    every process when process 0 could not take it."""
    held = contextlib.ExitStack()
    busy: DirectoryBusy | None = None
    if is_main:
        os.makedirs(out, exist_ok=True)
        try:
            held.enter_context(dir_lock(out, os.path.join(out, LOCK_FILE), "train", warn=log))
        except DirectoryBusy as e:
            busy = e
    if jax.process_count() > 1:
        refused = bool(multihost_utils.broadcast_one_to_all(np.asarray(busy is not None)))
        if refused and busy is None:
            busy = DirectoryBusy(f"{out} is being written by another run (process 0 says)")
    if busy is not None:
        raise busy
    with held:
        yield


def _train(
    config: Config,
    out: str,
    placement: Placement,
    is_main: bool,
    stop_after: int | None,
    log: Callable[[str], None],
    cleanup: contextlib.ExitStack,
) -> TrainResult:
    """`train` in its locked run dir, its checkpointer closed by `cleanup` however it ends: one
    left open by an error before the loop (bad data, say) has orbax's threads print tracebacks
    at exit."""
    t = config.train
    checkpointer, resume_step, meta = _open_run_dir(config, out, is_main, log)

    def close_checkpointer() -> None:  # the current one: a resume may replace it
        with writing(checkpoints_dir(out)):  # its last writes finish here: a full disk shows
            checkpointer.close()

    cleanup.callback(close_checkpointer)
    started = time.perf_counter()
    train_data, test_data = _load_data(config, meta, log)
    state = init_state(config, placement)
    start_step, position = 0, 0
    if resume_step is not None:
        checkpointer, state, meta = _resume(checkpointer, resume_step, state, placement, log)
        start_step, position = meta["step"], meta["data_position"]
        log(f"resumed from step {start_step} (data position {position}) in {out}")
    params = count_params(state.params)
    log(
        f"model {config.model.backbone} {config.model.size}: {params:,} parameters, target "
        f"{t.target}, {resolve_dtype(t.dtype)} compute, {describe_devices()} on "
        f"{jax.process_count()} process(es)"
    )
    warning = cpu_warning(config, params)
    if warning:
        log(warning)

    batches = train_data.batches(
        config,
        t.target,
        t.num_bins,
        t.batch_size,
        seed=t.seed,
        sampler=t.sampler,
        position=position,
        hl_gauss=t.hl_gauss,
        hl_gauss_sigma_ratio=t.hl_gauss_sigma_ratio,
        av_partial=t.av_partial,
        prefetch=t.prefetch,
        process_index=jax.process_index(),
        process_count=jax.process_count(),
    )
    if meta is not None and meta.get("loader", {"streaming": False}) != train_data.loader:
        log(
            f"warning: the loader differs from the checkpoint's ({meta.get('loader')} vs "
            f"{train_data.loader}): the data order does not continue exactly"
        )
    try:  # before anything is compiled: a batch larger than the data is no run. (The
        # evaluation's batches are as large and repeat a smaller test split within them.)
        batches.check_batch_size("data.train")
        evaluator = Evaluator(config, test_data, placement) if test_data else None
    except BaseException:
        batches.close()
        raise
    step_fn = compile_train_step(config, placement)
    metrics_log = MetricsLog(out, is_main, start_step)
    lr = learning_rate(t)
    # The steps since the last log record (their metrics), restored when resuming mid-window.
    window: list[dict] = list(meta.get("log_window", [])) if resume_step is not None else []

    stop_signal: list[int] = []
    previous_handlers: dict[int, Any] = {}

    def request_stop(number: int, _frame) -> None:
        stop_signal.append(number)
        if number == signal.SIGINT:  # a second Ctrl-C interrupts at once
            signal.signal(signal.SIGINT, previous_handlers[signal.SIGINT])

    if threading.current_thread() is threading.main_thread():
        for number in STOP_SIGNALS:
            if signal.getsignal(number) != signal.SIG_IGN:  # e.g. SIGINT under nohup: ignored
                previous_handlers[number] = signal.signal(number, request_stop)

    def save(step: int) -> None:
        # An asynchronous save: a full disk shows at the next save or at close.
        with writing(checkpoints_dir(out)):
            checkpointer.save(
                step,
                state.params,
                state.ema_params,
                state.opt_state,
                {
                    "step": step,
                    "data_position": batches.position,
                    "data_fingerprint": train_data.fingerprint,
                    "loader": train_data.loader,
                    "config": config.to_dict(),
                    "log_window": [{k: float(v) for k, v in m.items()} for m in window],
                },
            )

    def evaluate(step: int) -> dict[str, float]:
        result = evaluator(state.ema_params)
        metrics_log.write({"kind": "eval", "step": step, **result})
        log(
            f"eval step {step} (EMA): test loss {result['test_loss']:.4f} | "
            f"acc {result['test_accuracy']:.3f} | action accuracy "
            f"{result['action_accuracy']:.3f} | Kendall tau {result['kendall_tau']:.3f}"
        )
        return result

    def is_eval_step(step: int) -> bool:
        return step == t.num_steps or bool(t.eval_every and step % t.eval_every == 0)

    last_eval = None
    if evaluator is not None and start_step and is_eval_step(start_step):
        # The run before stopped (or was killed) between its checkpoint and this evaluation.
        missing = not metrics_log.has_eval(start_step)
        if jax.process_count() > 1:  # only process 0 reads the log; all must evaluate
            missing = bool(multihost_utils.broadcast_one_to_all(np.asarray(missing)))
        if missing:
            last_eval = evaluate(start_step)

    if stop_after is not None and start_step >= stop_after:
        log(f"{out} is at step {start_step}, not before --stop-after {stop_after}: nothing to do")
    step = start_step
    stopped_early = False
    timer_start, timer_step = time.perf_counter(), step
    try:
        while step < t.num_steps and not (stop_after is not None and step >= stop_after):
            state, metrics = step_fn(state, placement.global_batch(next(batches)))
            step += 1
            window.append(metrics)
            if placement.wait_each_step:
                jax.block_until_ready(metrics)
            if step == start_step + 1:
                jax.block_until_ready(metrics)
                log(f"step {step}: compiled and ran in {time.perf_counter() - started:.1f}s")
                # The rate leaves out the compilation.
                timer_start, timer_step = time.perf_counter(), step
            if step % t.log_every == 0 or step == t.num_steps:
                record = _train_record(window, step, timer_step, timer_start, t, lr)
                record["epoch"] = round(batches.epoch, 4)
                metrics_log.write(record)
                rate = record["examples_per_s"]
                eta = (t.num_steps - step) * t.batch_size / rate if rate else math.nan
                values = record.get("values_per_s")
                log(
                    f"step {step}/{t.num_steps} | loss {record['loss']:.4f} | "
                    f"acc {record['accuracy']:.3f} | {rate or 0:,.0f} ex/s | "
                    + (f"{values:,.0f} values/s | " if values is not None else "")
                    + f"epoch {record['epoch']:.2f} | ETA {format_duration(eta)}"
                )
                window, timer_start, timer_step = [], time.perf_counter(), step
            stopping = step < t.num_steps and (
                bool(stop_signal) or (stop_after is not None and step >= stop_after)
            )
            if step % t.checkpoint_every == 0 or step == t.num_steps or stopping:
                save(step)
            if evaluator is not None and is_eval_step(step) and not stopping:
                last_eval = evaluate(step)
            if stopping:
                stopped_early = True
                why = f" by {signal.Signals(stop_signal[0]).name}" if stop_signal else ""
                log(f"stopped{why} at step {step}; run the same command again to resume")
                break
        if start_step >= t.num_steps:
            log(f"{out} already reached step {start_step} of {t.num_steps}: nothing to do")
    finally:
        batches.close()
        metrics_log.close()
        for number, handler in previous_handlers.items():
            signal.signal(number, handler)
    return TrainResult(
        step,
        state,
        batches.position,
        last_eval,
        stopped_early,
        stop_signal[0] if stopped_early and stop_signal else None,
    )


def _open_run_dir(
    config: Config, out: str, is_main: bool, log: Callable[[str], None]
) -> tuple[Checkpointer, int | None, dict | None]:
    """Readies run dir `out`: incomplete checkpoints set aside, the latest complete one
    checked against `config`, config.toml written. Returns the checkpointer, the step to
    resume from (None: a fresh run) and that checkpoint's meta."""
    os.makedirs(out, exist_ok=True)
    directory = checkpoints_dir(out)
    resume_step, incomplete = latest_complete_step(directory)
    # They would block these steps' next saves.
    broken = [(step_dir, incomplete_text(step_dir, missing)) for step_dir, missing in incomplete]
    meta = None
    if resume_step is not None:
        meta, resume_step, damaged = _readable_meta(directory, resume_step)
        broken += damaged
    _set_aside(broken, log)
    checkpointer = Checkpointer(directory, keep=config.train.keep_checkpoints)
    if meta is not None:
        check_resumable(config_lib.from_dict(meta["config"]), config, out)
    if is_main:
        path = os.path.join(out, "config.toml")
        with writing(path), open(path, "w") as f:
            f.write(config_lib.to_toml(config))
    return checkpointer, resume_step, meta


@dataclass
class TrainData:
    """The training split as the loop reads it: loaded whole (`boards`) or streamed from
    `files` (model/stream.py)."""

    files: list[str]
    boards: BoardData | None
    memory_budget_gb: float
    window_items: int | None = None

    @property
    def streaming(self) -> bool:
        return self.boards is None

    @functools.cached_property
    def fingerprint(self) -> dict:
        """Read once: every checkpoint stores it, and streaming reads it from every footer."""
        return (
            fingerprint(self.boards) if self.boards is not None else stream_fingerprint(self.files)
        )

    @property
    def loader(self) -> dict:
        """What a resumed run must share to continue the same order (besides the data)."""
        if self.streaming:
            return {"streaming": True, "window_items": self.window_items}
        return {"streaming": False}

    def batches(self, config: Config, *args, **kwargs):
        """The loader over this split (arguments as model.data.Batches')."""
        if self.boards is not None:
            return make_batches(config.model.backbone, self.boards, *args, **kwargs)
        try:
            stream = StreamBatches(
                self.files, *args, memory_budget_gb=self.memory_budget_gb, **kwargs
            )
        except ValueError as e:  # a budget that cannot hold one block besides a window
            raise ConfigError(f"data.memory_budget_gb: {e}") from None
        self.window_items = stream.window_items
        return stream


def _size(num_bytes: float) -> str:
    return f"{num_bytes / 1e9:.1f} GB" if num_bytes >= 1e9 else f"{num_bytes / 1e6:.1f} MB"


def _load_data(
    config: Config, meta: dict | None, log: Callable[[str], None]
) -> tuple[TrainData, BoardData | None]:
    """The train split (loaded, or opened for streaming when `data.streaming` or when it would
    not fit in `data.memory_budget_gb`) and the test boards, with a warning when they are not
    the resumed run's."""
    d = config.data
    started = time.perf_counter()
    files = board_files(d.train)
    streaming = d.streaming or should_stream(files, d.memory_budget_gb)
    if streaming and not d.streaming:
        needed = estimate_in_memory_bytes(files) / 1e9
        problem = (
            "the gateau backbone loads boards whole"
            if config.model.backbone == "gateau"
            else f"train.sampler {config.train.sampler!r} needs the whole table"
            if config.train.sampler != "uniform"
            else None
        )
        if problem:
            raise ConfigError(
                f"data.train needs ~{needed:.1f} GB in memory, above data.memory_budget_gb = "
                f"{d.memory_budget_gb}, and streaming cannot serve it: {problem}; raise the budget"
            )
    test_data = load_boards(d.test) if d.test else None
    test = f"; test: {test_data.num_boards} boards" if test_data else "; no test split"
    if streaming:
        train = TrainData(files, None, d.memory_budget_gb)
        boards = train.fingerprint["boards"]
        why = (
            "data.streaming" if d.streaming else f"over data.memory_budget_gb {d.memory_budget_gb}"
        )
        log(
            f"data: streaming {boards} boards from {len(files)} shard(s) ({why}; "
            f"~{_size(estimate_in_memory_bytes(files))} if loaded){test}"
        )
    else:
        train = TrainData(files, load_boards(d.train), d.memory_budget_gb)
        log(
            f"data: {train.boards.num_boards} boards, {train.boards.num_pairs} action values "
            f"from {len(files)} shard(s) in {time.perf_counter() - started:.1f}s{test}"
        )
    if meta is not None and meta.get("data_fingerprint") != train.fingerprint:
        log(
            f"warning: the training data differ from the checkpoint's "
            f"({meta.get('data_fingerprint')} vs {train.fingerprint}): "
            "the data order does not continue exactly"
        )
    return train, test_data


def _set_aside(broken: list[tuple[str, str]], log: Callable[[str], None]) -> None:
    """Moves the (step dir, what is wrong with it) checkpoints out of the way (process 0)."""
    if jax.process_index() == 0:
        for step_dir, problem in broken:
            log(set_aside(step_dir, problem))
    if broken and jax.process_count() > 1:
        multihost_utils.sync_global_devices("broken checkpoints set aside")


def _readable_meta(directory: str, step: int) -> tuple[dict, int, list[tuple[str, str]]]:
    """(meta, step) of the latest of `step` and the complete steps before it whose meta
    reads, and the (step dir, problem) of those later that do not."""
    damaged = []
    for candidate in [step, *earlier_complete_steps(directory, step)]:
        step_dir = os.path.join(directory, str(candidate))
        try:
            return read_meta(step_dir), candidate, damaged
        except DamagedCheckpointError as e:
            damaged.append((step_dir, str(e)))
    raise DamagedCheckpointError(_none_restores(directory, damaged))


def _none_restores(directory: str, damaged: list[tuple[str, str]]) -> str:
    # Nothing is moved: starting over must be the owner's decision, not a side effect.
    return (
        f"no checkpoint in {directory} restores ({'; '.join(p for _, p in damaged)}); "
        "move them away to start the run over"
    )


def _resume(
    checkpointer: Checkpointer,
    step: int,
    state: TrainState,
    placement: Placement,
    log: Callable[[str], None],
) -> tuple[Checkpointer, TrainState, dict]:
    """(checkpointer, state, meta) of the latest of `step` and the complete steps before it
    that restores. Those later that do not are moved aside, and the checkpointer (which
    listed them) is replaced."""
    damaged = []
    for candidate in [step, *earlier_complete_steps(checkpointer.directory, step)]:
        try:
            state, meta = _restore(checkpointer, candidate, state, placement)
        except DamagedCheckpointError as e:
            damaged.append((checkpointer.step_dir(candidate), str(e)))
            continue
        if damaged:
            checkpointer.close()
            _set_aside(damaged, log)
            checkpointer = Checkpointer(checkpointer.directory, keep=checkpointer.keep)
        return checkpointer, state, meta
    raise DamagedCheckpointError(_none_restores(checkpointer.directory, damaged))


def _restore(
    checkpointer: Checkpointer, step: int, state: TrainState, placement: Placement
) -> tuple[TrainState, dict]:
    """The state saved at `step` (placed like `state`) and its meta."""
    restored = checkpointer.restore(
        step,
        {
            "params": abstract_like(state.params, placement.replicated),
            "ema_params": abstract_like(state.ema_params, placement.replicated),
            "opt_state": abstract_like(state.opt_state, placement.replicated),
        },
    )
    state = TrainState(restored["params"], restored["ema_params"], restored["opt_state"])
    return state, restored["meta"]


def _train_record(window, step, timer_step, timer_start, t: TrainConfig, lr) -> dict:
    """The record at `step`: the mean of each metric over `window`, the steps since the
    previous multiple of `log_every` (so it depends on the step alone, not on when the run
    was resumed), and the rate of the steps timed since `timer_step` (None when none was:
    the first step after a start is left out, as it includes the compilation)."""
    jax.block_until_ready(window[-1])  # steps run asynchronously: time them to completion
    seconds = time.perf_counter() - timer_start
    means = {k: float(np.mean([float(m[k]) for m in window])) for k in window[0]}
    timed = step - timer_step
    examples_per_s = timed * t.batch_size / max(seconds, 1e-9) if timed else None
    record = {
        "kind": "train",
        "step": step,
        **means,
        "learning_rate": float(lr(step - 1)),
        "examples_per_s": examples_per_s,
        "time": time.time(),
    }
    if "values_per_board" in means and examples_per_s is not None:
        # gateau: an example is a board with many labels
        record["values_per_s"] = examples_per_s * means["values_per_board"]
    return record


# --- CLI ------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m model.train", description=__doc__.split("\n\n")[0]
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


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        config = config_lib.validate(resolve_config(args))
        check_dir(args.out)
        maybe_initialize_distributed(args.distributed)
        with quiet_disk_full(*LIBRARY_LOGGERS):
            result = train(config, args.out, stop_after=args.stop_after)
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
