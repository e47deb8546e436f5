"""Orbax checkpoints of a training run: where they live and what each one holds.

Layout: `<run>/checkpoints/<step>/` with four items:

- `params`, `ema_params`: the Haiku parameter trees (float32);
- `opt_state`: the optax state;
- `meta`: JSON with `step`, `data_position` (examples the loader has handed out),
  `data_fingerprint` and `config` (the resolved config as nested dicts).

Only the last `keep` checkpoints are kept. A checkpoint is written to a temporary directory
and renamed when complete, so a run killed mid-save leaves the previous one usable.
"""

from __future__ import annotations

import os
import re
from typing import Any

import jax
import orbax.checkpoint as ocp

from model.config import Config, from_dict
from model.network import param_shapes

CHECKPOINTS = "checkpoints"
ITEMS = ("params", "ema_params", "opt_state", "meta")


class CheckpointNotFoundError(FileNotFoundError):
    pass


def checkpoints_dir(run_dir: str) -> str:
    return os.path.join(os.path.abspath(run_dir), CHECKPOINTS)


def _steps_in(directory: str) -> list[int]:
    if not os.path.isdir(directory):
        return []
    return sorted(int(n) for n in os.listdir(directory) if re.fullmatch(r"\d+", n))


def resolve(path: str, step: int | None = None) -> tuple[str, int]:
    """(checkpoints directory, step) for a run dir, a checkpoints dir or one step's dir.

    A run or checkpoints dir means its latest step unless `step` is given; a step's dir
    means that step. CheckpointNotFoundError names the path when nothing is there.
    """
    path = os.path.abspath(path)
    base = os.path.basename(path)
    if re.fullmatch(r"\d+", base) and os.path.isdir(path) and step is None:
        return os.path.dirname(path), int(base)
    directory = path if os.path.basename(path) == CHECKPOINTS else checkpoints_dir(path)
    steps = _steps_in(directory)
    if not steps:
        raise CheckpointNotFoundError(f"no checkpoints under {path!r}")
    if step is None:
        return directory, steps[-1]
    if step not in steps:
        raise CheckpointNotFoundError(f"no checkpoint of step {step} under {path!r}: {steps}")
    return directory, step


class Checkpointer:
    """Saves and restores the checkpoints in `directory` (a run's `<run>/checkpoints`)."""

    def __init__(self, directory: str, keep: int = 3, read_only: bool = False):
        self.directory = os.path.abspath(directory)
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

    def latest_step(self) -> int | None:
        return self.manager.latest_step()

    def save(self, step: int, params, ema_params, opt_state, meta: dict[str, Any]) -> None:
        """Starts an asynchronous save; `wait()` or the next save completes it."""
        self.manager.save(
            step,
            args=ocp.args.Composite(
                params=ocp.args.StandardSave(params),
                ema_params=ocp.args.StandardSave(ema_params),
                opt_state=ocp.args.StandardSave(opt_state),
                meta=ocp.args.JsonSave(meta),
            ),
            force=True,
        )

    def meta(self, step: int) -> dict[str, Any]:
        restored = self.manager.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))
        return restored["meta"]

    def restore(self, step: int, abstract: dict[str, Any]) -> dict[str, Any]:
        """Restores the items named in `abstract` (trees of jax.ShapeDtypeStruct with
        shardings) plus `meta`."""
        args = {name: ocp.args.StandardRestore(tree) for name, tree in abstract.items()}
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


def load_params(
    path: str, use_ema: bool = True, step: int | None = None
) -> tuple[Any, Config, dict[str, Any]]:
    """(params, config, meta) of one checkpoint, placed on the first local device."""
    directory, step = resolve(path, step)
    checkpointer = Checkpointer(directory, read_only=True)
    try:
        meta = checkpointer.meta(step)
        config = from_dict(meta["config"], source=f"{directory}/{step}")
        item = "ema_params" if use_ema else "params"
        device = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
        restored = checkpointer.restore(step, {item: abstract_like(param_shapes(config), device)})
    finally:
        checkpointer.close()
    return restored[item], config, meta
