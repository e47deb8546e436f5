"""Orbax checkpoints of a training run: where they live and what each one holds.

Layout: `<run>/checkpoints/<step>/` with four items:

- `params`, `ema_params`: the Haiku parameter trees (float32; an export holds
  `ema_params` alone, in bfloat16);
- `opt_state`: the optax state;
- `meta`: JSON with `step`, `data_position` (examples the loader has handed out),
  `data_fingerprint` and `config` (the resolved config as nested dicts).

Only the last `keep` checkpoints are kept. A checkpoint is written to a temporary directory
and renamed when complete, so a run killed mid-save leaves the previous one usable.

A step directory can still be incomplete (made by hand, copied half-way, a full disk): one
lacking an item its reader needs (the trainer all four; evaluation `ema_params` and `meta`,
and `params` too when it asks for the raw parameters), or with an item directory empty.
Readers skip it for the last complete step with one warning line naming it; training also
moves it aside (to `<run>/incomplete-checkpoints/`) so that it does not stand in the way of
that step's next save. With no complete step the error says so.

A complete step can still be damaged (files truncated or corrupt: a full disk, a bad copy):
its restore fails. Readers then fall back to the latest earlier step that restores, with one
warning line naming the damaged step (`load_params`); training moves it aside like an incomplete
one and resumes from the step before. Orbax's failure comes as one DamagedCheckpointError line,
never its traceback.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
from collections.abc import Iterator
from typing import Any

import jax
import orbax.checkpoint as ocp

from model.config import Config, from_dict
from model.networks.network import param_shapes

CHECKPOINTS = "checkpoints"
INCOMPLETE = "incomplete-checkpoints"  # beside CHECKPOINTS, where training moves broken steps
ITEMS = ("params", "ema_params", "opt_state", "meta")  # what training writes and resumes from
# What evaluation reads: an imported model's checkpoint has no optimiser state (save's
# opt_state=None) and is complete for every reader but the trainer; an exported one
# (jobs/gpu_export.py, save's params=None) holds its EMA parameters alone, half the bytes,
# and only a reader asking for the raw parameters (ema=false) is refused it.
READ_ITEMS = ("ema_params", "meta")
MODEL_ITEMS = ("params", *READ_ITEMS)  # every file a model's parameters may come from


class CheckpointNotFoundError(FileNotFoundError):
    pass


class DamagedCheckpointError(CheckpointNotFoundError):
    """A step with every item present whose files do not restore; the message names it."""


def checkpoints_dir(run_dir: str) -> str:
    return os.path.join(os.path.abspath(run_dir), CHECKPOINTS)


def _steps_in(directory: str) -> list[int]:
    if not os.path.isdir(directory):
        return []
    return sorted(int(n) for n in os.listdir(directory) if re.fullmatch(r"\d+", n))


def _warn(message: str) -> None:
    # stderr: the UCI engine's stdout belongs to the protocol.
    print(message, file=sys.stderr, flush=True)


def missing_items(step_dir: str, items: tuple[str, ...] = ITEMS) -> list[str]:
    """The `items` a step's directory lacks (absent or empty); [] for a complete checkpoint."""
    missing = []
    for item in items:
        path = os.path.join(step_dir, item)
        if not os.path.isdir(path) or not os.listdir(path):
            missing.append(item)
    return missing


def _incomplete(step_dir: str, missing: list[str]) -> str:
    return f"{step_dir} is an incomplete checkpoint (no {', '.join(missing)})"


def latest_complete_step(
    directory: str, items: tuple[str, ...] = ITEMS
) -> tuple[int | None, list[tuple[str, list[str]]]]:
    """(the latest step holding all `items` or None, the later incomplete steps' directories
    with the items each lacks) in a checkpoints directory."""
    skipped: list[tuple[str, list[str]]] = []
    for step in reversed(_steps_in(directory)):
        step_dir = os.path.join(directory, str(step))
        missing = missing_items(step_dir, items)
        if not missing:
            return step, skipped
        skipped.append((step_dir, missing))
    return None, skipped


def complete_steps(directory: str, items: tuple[str, ...] = ITEMS) -> list[int]:
    """The steps of a checkpoints directory holding all `items`, earliest first."""
    return [
        s for s in _steps_in(directory) if not missing_items(os.path.join(directory, str(s)), items)
    ]


def earlier_complete_steps(directory: str, step: int, items: tuple[str, ...] = ITEMS) -> list[int]:
    """The steps before `step` holding all `items`, latest first: where to fall back to."""
    return [s for s in reversed(complete_steps(directory, items)) if s < step]


def failure_reason(error: BaseException) -> str:
    """Why a restore failed, in a few words: the first line of the innermost error (orbax's
    outer ones wrap it with a page of TensorStore spec)."""
    while True:
        inner = error.__cause__ or (None if error.__suppress_context__ else error.__context__)
        if inner is None:
            break
        error = inner
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return text if len(text) <= 200 else text[:197] + "..."


# Orbax logs a failed restore's traceback itself from its threads (then raises it): the error
# that comes out is the one line the caller prints.
_ORBAX_LOGGERS = ("absl", "orbax", "jax._src.distributed")


@contextlib.contextmanager
def quiet_orbax() -> Iterator[None]:
    """Orbax's own log lines (its failed restores' tracebacks, from its threads) held back
    while a restore runs whose failure the caller reports itself; after a failure, the
    "Event loop is closed" errors of its abandoned reads too (see `_ignore_closed_loops`)."""
    loggers = [logging.getLogger(name) for name in _ORBAX_LOGGERS]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    try:
        yield
    except BaseException:
        _ignore_closed_loops()
        raise
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def _is_closed_loop(kind: type[BaseException] | None, value: object) -> bool:
    return kind is RuntimeError and str(value) == "Event loop is closed"


def _ignore_closed_loops() -> None:
    """When a restore fails, TensorStore's reads still in flight finish later, on its own
    threads, and call back into the event loop orbax has closed meanwhile: Python prints
    each such RuntimeError as a traceback (through sys.excepthook, or as unraisable), after
    the one line that said what went wrong. Those, and only those, are dropped."""
    if getattr(sys.excepthook, "drops_closed_loops", False):
        return
    excepthook, unraisablehook = sys.excepthook, sys.unraisablehook

    def quiet_excepthook(kind, value, traceback):
        if not _is_closed_loop(kind, value):
            excepthook(kind, value, traceback)

    def quiet_unraisablehook(unraisable):
        if not _is_closed_loop(unraisable.exc_type, unraisable.exc_value):
            unraisablehook(unraisable)

    quiet_excepthook.drops_closed_loops = True
    sys.excepthook, sys.unraisablehook = quiet_excepthook, quiet_unraisablehook


@contextlib.contextmanager
def restoring(step_dir: str) -> Iterator[None]:
    """Turns any failure to restore `step_dir` (orbax raises bare Exceptions, ValueErrors,
    JSON errors...) into one DamagedCheckpointError naming it."""
    try:
        with quiet_orbax():
            yield
    except (KeyboardInterrupt, SystemExit, MemoryError):
        raise
    except Exception as e:
        raise DamagedCheckpointError(
            f"{step_dir} is a damaged checkpoint ({failure_reason(e)})"
        ) from None


def resolve(
    path: str, step: int | None = None, items: tuple[str, ...] = READ_ITEMS
) -> tuple[str, int]:
    """(checkpoints directory, step) for a run dir, a checkpoints dir or one step's dir.

    A run or checkpoints dir means its latest step holding `items` (incomplete later ones are
    skipped with a warning) unless `step` is given; a step's dir means that step.
    CheckpointNotFoundError names the path when no complete checkpoint is there.
    """
    path = os.path.abspath(path)
    base = os.path.basename(path)
    if re.fullmatch(r"\d+", base) and os.path.isdir(path) and step is None:
        if missing := missing_items(path, items):
            raise CheckpointNotFoundError(_incomplete(path, missing))
        return os.path.dirname(path), int(base)
    directory = path if os.path.basename(path) == CHECKPOINTS else checkpoints_dir(path)
    steps = _steps_in(directory)
    if not steps:
        raise CheckpointNotFoundError(f"no checkpoints under {path!r}")
    if step is not None:
        if step not in steps:
            raise CheckpointNotFoundError(f"no checkpoint of step {step} under {path!r}: {steps}")
        step_dir = os.path.join(directory, str(step))
        if missing := missing_items(step_dir, items):
            raise CheckpointNotFoundError(_incomplete(step_dir, missing))
        return directory, step
    latest, skipped = latest_complete_step(directory, items)
    if latest is None:
        raise CheckpointNotFoundError(
            f"no complete checkpoint under {path!r} (steps {steps} are all incomplete)"
        )
    for step_dir, missing in skipped:
        _warn(f"warning: {_incomplete(step_dir, missing)}: skipped, using step {latest}")
    return directory, latest


def incomplete_text(step_dir: str, missing: list[str]) -> str:
    """What is wrong with an incomplete step (for set_aside)."""
    return _incomplete(step_dir, missing)


def set_aside(step_dir: str, problem: str) -> str:
    """Moves an incomplete or damaged step's directory out of the checkpoints directory
    (kept, not deleted: it may hold something its owner wants) so that it does not stand in
    the way of that step's next save; returns the line that says so (`problem` says what is
    wrong with it)."""
    run_dir = os.path.dirname(os.path.dirname(step_dir))
    target_dir = os.path.join(run_dir, INCOMPLETE)
    os.makedirs(target_dir, exist_ok=True)
    step = os.path.basename(step_dir)
    target, suffix = os.path.join(target_dir, step), 1
    while os.path.exists(target):
        target, suffix = os.path.join(target_dir, f"{step}.{suffix}"), suffix + 1
    os.rename(step_dir, target)
    return f"warning: {problem}; moved it to {target}"


class Checkpointer:
    """Saves and restores the checkpoints in `directory` (a run's `<run>/checkpoints`)."""

    def __init__(self, directory: str, keep: int = 3, read_only: bool = False):
        self.directory = os.path.abspath(directory)
        self.keep = keep
        self.manager = ocp.CheckpointManager(
            self.directory,
            # read_only: no directory created and nothing pruned (orbax's own read_only
            # option only adds warnings).
            options=ocp.CheckpointManagerOptions(
                max_to_keep=None if read_only else keep,
                create=not read_only,
                # A save killed half-way leaves a temporary directory that would block
                # the same step's save after the resume.
                cleanup_tmp_directories=not read_only,
            ),
            item_names=ITEMS,
        )

    def save(self, step: int, params, ema_params, opt_state, meta: dict[str, Any]) -> None:
        """Starts an asynchronous save; `wait()` or the next save completes it. `opt_state`
        None: a checkpoint to evaluate, not to resume (an imported model's); `params` None
        as well: the EMA parameters alone (an export's)."""
        items = {
            "ema_params": ocp.args.StandardSave(ema_params),
            "meta": ocp.args.JsonSave(meta),
        }
        if params is not None:
            items["params"] = ocp.args.StandardSave(params)
        if opt_state is not None:
            items["opt_state"] = ocp.args.StandardSave(opt_state)
        self.manager.save(step, args=ocp.args.Composite(**items), force=True)

    def step_dir(self, step: int) -> str:
        return os.path.join(self.directory, str(step))

    def meta(self, step: int) -> dict[str, Any]:
        """The step's meta; DamagedCheckpointError if it does not restore."""
        with restoring(self.step_dir(step)):
            restored = self.manager.restore(
                step, args=ocp.args.Composite(meta=ocp.args.JsonRestore())
            )
        return restored["meta"]

    def restore(self, step: int, abstract: dict[str, Any]) -> dict[str, Any]:
        """Restores the items named in `abstract` (trees of jax.ShapeDtypeStruct with
        shardings) plus `meta`; DamagedCheckpointError if they do not restore."""
        args = {name: ocp.args.StandardRestore(tree) for name, tree in abstract.items()}
        with restoring(self.step_dir(step)):
            restored = self.manager.restore(
                step, args=ocp.args.Composite(meta=ocp.args.JsonRestore(), **args)
            )
        return {name: restored[name] for name in (*abstract, "meta")}

    def wait(self) -> None:
        self.manager.wait_until_finished()

    def close(self) -> None:
        self.manager.wait_until_finished()
        self.manager.close()


def abstract_like(tree, sharding: jax.sharding.Sharding):
    """ShapeDtypeStructs of `tree`'s leaves placed with `sharding` (a restore target)."""
    return jax.tree_util.tree_map(
        lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding), tree
    )


def _restore_step(step_dir: str, items: dict[str, Any]) -> dict[str, Any]:
    # One step's directory alone: a manager would scan (and warn about) the other steps.
    with restoring(step_dir), ocp.Checkpointer(ocp.CompositeCheckpointHandler()) as checkpointer:
        return checkpointer.restore(step_dir, args=ocp.args.Composite(**items))


def read_meta(step_dir: str) -> dict[str, Any]:
    """One step's meta; DamagedCheckpointError if it does not restore."""
    return _restore_step(step_dir, {"meta": ocp.args.JsonRestore()})["meta"]


def _load_step(step_dir: str, use_ema: bool) -> tuple[Any, Config, dict[str, Any]]:
    meta = read_meta(step_dir)
    config = from_dict(meta["config"], source=step_dir)
    item = "ema_params" if use_ema else "params"
    device = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
    target = ocp.args.StandardRestore(abstract_like(param_shapes(config), device))
    return _restore_step(step_dir, {item: target})[item], config, meta


def load_params(
    path: str, use_ema: bool = True, step: int | None = None
) -> tuple[Any, Config, dict[str, Any]]:
    """(params, config, meta) of one checkpoint, placed on the first local device.

    `path` as for `resolve`: the latest complete step unless `step` or a step's dir is given.
    A latest step that does not restore is skipped for the latest earlier one that does, with
    one warning line naming it; a step asked for by number or directory is that step or a
    DamagedCheckpointError. The raw parameters (`use_ema` False) come from the latest step that
    has them; an export, which holds its EMA parameters alone, is one CheckpointNotFoundError.
    """
    items = READ_ITEMS if use_ema else MODEL_ITEMS
    try:
        directory, latest = resolve(path, step, items)
    except CheckpointNotFoundError:
        if use_ema:
            raise
        resolve(path, step)  # no EMA parameters either: that error says what is missing
        raise CheckpointNotFoundError(
            f"{path} holds only its EMA parameters (an export): read it with the EMA "
            "(ema=true, no --no-ema)"
        ) from None
    chosen = step is not None or os.path.basename(os.path.abspath(path)) == str(latest)
    candidates = [latest] if chosen else [latest, *earlier_complete_steps(directory, latest, items)]
    damaged: list[DamagedCheckpointError] = []
    for candidate in candidates:
        try:
            loaded = _load_step(os.path.join(directory, str(candidate)), use_ema)
        except DamagedCheckpointError as e:
            if chosen:
                raise
            damaged.append(e)
            continue
        for error in damaged:
            _warn(f"warning: {error}: skipped, using step {candidate}")
        return loaded
    raise DamagedCheckpointError(
        f"no checkpoint under {path!r} restores: {'; '.join(str(e) for e in damaged)}"
    )
