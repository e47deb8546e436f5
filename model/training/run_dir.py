"""A training's run dir (--out) around its checkpoints: the lock one training holds, the
readying of the folder (broken checkpoints set aside, the resume check, config.toml), the
resume from the latest checkpoint that restores, and each save with what a resume needs.

Process 0 takes the lock and writes the files; every process reads the checkpoints.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

import jax
import numpy as np
from jax.experimental import multihost_utils

from model import config as config_lib
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
from model.config import Config, ConfigError
from model.training.step import Placement, TrainState
from runtime.dir_lock import DirectoryBusy, dir_lock
from runtime.outputs import writing

# Held (runtime.dir_lock) by the training writing the run dir; deleted when it ends.
LOCK_FILE = "lock"


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


@contextlib.contextmanager
def run_dir_lock(out: str, is_main: bool, log: Callable[[str], None]) -> Iterator[None]:
    """The run dir's lock (runtime.dir_lock), held by process 0 for the whole run: a second
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


def open_run_dir(
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


def resume(
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


def save(checkpointer: Checkpointer, step: int, state: TrainState, meta: dict[str, Any]) -> None:
    """An asynchronous save of `state` at `step`: a full disk shows at the next save or at
    close (`close`)."""
    with writing(checkpointer.directory):
        checkpointer.save(step, state.params, state.ema_params, state.opt_state, meta)


def close(checkpointer: Checkpointer) -> None:
    """Closes `checkpointer`, its last writes finishing here: a full disk shows."""
    with writing(checkpointer.directory):
        checkpointer.close()


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
