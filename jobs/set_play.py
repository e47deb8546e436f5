"""How a trained model plays with no search, set in its run directory without training again.

    python -m jobs.set_play models/gpu --successor-weight 3

`[play] successor_weight` (model/config.py's PlayConfig) is read from a checkpoint's meta by
every reader: the `neural:` agent, the UCI engine, the web board and `make elo`. A model
trained before the section existed, or whose weight was chosen after its training
(bench/successor_weights.py), gets it here: every checkpoint's meta and the run's
config.toml are rewritten with the new section, the parameters untouched. The config is
checked first (a weight needs a BC policy with a value head beside it), so a refused weight
changes nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import replace

from model.checkpoint import (
    READ_ITEMS,
    CheckpointNotFoundError,
    checkpoints_dir,
    complete_steps,
    read_meta,
)
from model.config import Config, ConfigError, PlayConfig, from_dict, to_toml, validate
from runtime.outputs import check_dir

META_FILE = os.path.join("meta", "metadata")  # orbax's JSON item, as Checkpointer saves it


def set_play(run: str, play: PlayConfig) -> list[int]:
    """Writes `play` into every checkpoint of `run` and its config.toml; returns the steps
    rewritten. ConfigError (nothing written) where the model cannot play so;
    CheckpointNotFoundError where `run` holds no checkpoint."""
    directory = checkpoints_dir(run)
    steps = complete_steps(directory, READ_ITEMS)
    if not steps:
        raise CheckpointNotFoundError(f"{run}: no checkpoint with its parameters and meta")
    metas = {step: read_meta(os.path.join(directory, str(step))) for step in steps}
    configs = {
        step: _with_play(from_dict(meta["config"], source=f"{run} step {step}"), play)
        for step, meta in metas.items()
    }
    # Every file is replaced by a rename in its folder: all of them writable, or none touched.
    for step in steps:
        check_dir(os.path.dirname(os.path.join(directory, str(step), META_FILE)), "run")
    check_dir(run, "run")
    for step, meta in metas.items():
        meta = {**meta, "config": configs[step].to_dict()}
        _write_atomically(os.path.join(directory, str(step), META_FILE), json.dumps(meta))
    _write_atomically(os.path.join(run, "config.toml"), to_toml(configs[steps[-1]]))
    return steps


def _with_play(config: Config, play: PlayConfig) -> Config:
    return validate(replace(config, play=play), check_data=False)


def _write_atomically(path: str, text: str) -> None:
    """A reader (or a kill) never sees half a file."""
    with tempfile.NamedTemporaryFile(
        "w", dir=os.path.dirname(path), prefix=".partial-", delete=False
    ) as f:
        f.write(text)
    os.replace(f.name, path)


def _weight(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m jobs.set_play", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("run", help="a run directory (models/gpu, runs/...)")
    parser.add_argument(
        "--successor-weight",
        type=_weight,
        required=True,
        help="log p(move) + W x logit(the value head's win after the move); 0: the policy alone",
    )
    args = parser.parse_args(argv)
    try:
        steps = set_play(args.run, PlayConfig(successor_weight=args.successor_weight))
    except ConfigError as e:
        print(f"config error: {args.run}: {e}", file=sys.stderr)
        return 2
    except (CheckpointNotFoundError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(
        f"{args.run}: [play] successor_weight = {args.successor_weight:g} in "
        f"{len(steps)} checkpoint(s) ({', '.join(map(str, steps))}) and config.toml"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
