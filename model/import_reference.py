"""Import a checkpoint of the paper's released models into a run directory of this project.

    python -m model.import_reference checkpoints/9M --out runs/paper-9m --target av
    python -m model.import_reference CHECKPOINT_DIR --out RUN_DIR --target av|sv|bc \\
        [--step N] [--num-heads 8]

The released layout (google-deepmind/searchless_chess, `checkpoints/download.sh`):
`CHECKPOINT_DIR/<step>/params` and `CHECKPOINT_DIR/<step>/params_ema`, each an orbax PyTree
checkpoint of the Haiku parameters of their transformer. Their module names are Haiku's
automatic ones (`embed`, `embed_1`, `layer_norm_k`, `multi_head_dot_product_attention_i/
linear_j`, `linear_k`), numbered in the order the network creates them; this module renames
them to this project's (`embed`, `positional_embeddings`, `block_i/query`, ...), infers the
shape (layers, width, MLP width, output size) from the arrays and writes a normal run
directory: `config.toml` and `checkpoints/<step>/` with `params` (from `params`),
`ema_params` (from `params_ema`) and `meta`. Every tool that takes a run directory then
works on it unchanged. The head count is not in the arrays: `--num-heads` (8, as every
released model).

A checkpoint that cannot be imported (no such step, a head that does not fit the target,
parameters of another architecture) is one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp

from core.actions import NUM_ACTIONS
from core.targets import TARGETS, target_kind
from model.checkpoint import Checkpointer, checkpoints_dir, failure_reason, quiet_orbax
from model.config import (
    CUSTOM_SIZE,
    EMBEDDING_VOCAB_SIZE,
    MAX_SEQUENCE_LENGTH,
    MODEL_SIZES,
    Config,
    ConfigError,
    DataConfig,
    ModelConfig,
    TrainConfig,
    to_toml,
    validate,
)
from runtime.outputs import OutputError, check_dir

SOURCE_ITEMS = {"params": "params", "ema_params": "params_ema"}  # ours: theirs
DEFAULT_NUM_HEADS = 8  # every released model (their engines/constants.py)
_ATTENTION = "multi_head_dot_product_attention"
_ATTENTION_ORDER = ("query", "key", "value", "output")  # their linear, linear_1, _2, _3
_MLP_ORDER = ("gate", "up", "down")  # their top-level linears, three per block


class ReferenceImportError(ValueError):
    """A checkpoint that cannot become a run of this project; the message says why."""


@dataclass(frozen=True)
class ReleasedShape:
    """What the arrays of a released checkpoint say about its network."""

    num_layers: int
    embedding_dim: int
    widening_factor: int
    output_size: int


# --- the source: steps and arrays -----------------------------------------------------


def released_steps(directory: str) -> list[int]:
    """Steps of `directory` in the released layout: numeric subdirectories with `params`."""
    if not os.path.isdir(directory):
        return []
    return sorted(
        int(name)
        for name in os.listdir(directory)
        if re.fullmatch(r"\d+", name) and os.path.isdir(os.path.join(directory, name, "params"))
    )


def resolve_step(directory: str, step: int | None) -> int:
    steps = released_steps(directory)
    if not steps:
        raise ReferenceImportError(
            f"{directory}: no checkpoint in the released layout (<step>/params and "
            "<step>/params_ema) there"
        )
    if step is None:
        return steps[-1]
    if step not in steps:
        raise ReferenceImportError(f"{directory}: no step {step}; steps there: {steps}")
    return step


def read_tree(path: str) -> dict[str, dict[str, np.ndarray]]:
    """An orbax PyTree checkpoint of Haiku parameters as float32 numpy arrays, whatever
    devices or shardings it was written from."""
    if not os.path.isdir(path):
        raise ReferenceImportError(f"{path} is missing (a released step has params and params_ema)")
    checkpointer = ocp.PyTreeCheckpointer()
    try:
        with quiet_orbax():  # the failure is reported in one line below
            metadata = checkpointer.metadata(path)
            tree = getattr(metadata, "item_metadata", metadata)
            tree = getattr(tree, "tree", tree)
            restore_args = jax.tree_util.tree_map(
                lambda _: ocp.RestoreArgs(restore_type=np.ndarray), dict(tree)
            )
            restored = checkpointer.restore(path, restore_args=restore_args)
    except Exception as e:  # orbax raises many kinds; the user needs the path and the gist
        raise ReferenceImportError(
            f"{path}: not a readable orbax checkpoint ({failure_reason(e)})"
        ) from None
    finally:
        checkpointer.close()
    if not isinstance(restored, dict) or not all(isinstance(v, dict) for v in restored.values()):
        raise ReferenceImportError(f"{path}: not a tree of Haiku parameters (module -> arrays)")
    return {
        module: {name: np.asarray(value, np.float32) for name, value in leaves.items()}
        for module, leaves in restored.items()
    }


# --- their names and shapes -> ours ---------------------------------------------------


def _numbered(base: str, index: int) -> str:
    """Haiku's automatic module names: base, base_1, base_2, ..."""
    return base if index == 0 else f"{base}_{index}"


def _count(tree: dict, base: str) -> int:
    pattern = re.compile(rf"{re.escape(base)}(_\d+)?")
    return sum(1 for name in tree if pattern.fullmatch(name.split("/")[0]))


def _expected_names(num_layers: int) -> set[str]:
    names = {"embed", "embed_1", _numbered("layer_norm", 2 * num_layers)}
    names.add(_numbered("linear", 3 * num_layers))
    for i in range(num_layers):
        names |= {_numbered("layer_norm", 2 * i), _numbered("layer_norm", 2 * i + 1)}
        names |= {_numbered("linear", 3 * i + j) for j in range(3)}
        names |= {f"{_numbered(_ATTENTION, i)}/{_numbered('linear', j)}" for j in range(4)}
    return names


def infer_shape(tree: dict[str, dict[str, np.ndarray]]) -> ReleasedShape:
    """The network's shape from the arrays; ReferenceImportError for anything a config of
    this project cannot hold (another vocabulary or length, extra or missing modules)."""
    attention_modules = {name.split("/")[0] for name in tree if name.startswith(_ATTENTION)}
    num_layers = len(attention_modules)
    if num_layers == 0 or "embed" not in tree:
        raise ReferenceImportError(
            "not the released transformer: no token embedding or attention layers among "
            f"{sorted(tree)[:8]}"
        )
    expected = _expected_names(num_layers)
    if set(tree) != expected:
        extra, missing = sorted(set(tree) - expected), sorted(expected - set(tree))
        raise ReferenceImportError(
            f"not the released architecture for {num_layers} layers: "
            f"unexpected modules {extra[:6]}, missing {missing[:6]} (qk layer norm, no final "
            "layer norm or sinusoidal positions have no config here)"
        )
    vocab, width = tree["embed"]["embeddings"].shape
    positions = tree["embed_1"]["embeddings"].shape
    hidden = tree["linear"]["w"].shape[1]
    head = tree[_numbered("linear", 3 * num_layers)]
    output_size = head["w"].shape[1] if head["w"].ndim == 2 else -1
    if vocab != EMBEDDING_VOCAB_SIZE:
        raise ReferenceImportError(
            f"token embedding has {vocab} rows; this project's action space needs "
            f"{EMBEDDING_VOCAB_SIZE}"
        )
    if positions != (MAX_SEQUENCE_LENGTH, width):
        raise ReferenceImportError(
            f"positional embedding has shape {positions}; this project needs "
            f"({MAX_SEQUENCE_LENGTH}, {width}) (learned positions, max_sequence_length 79)"
        )
    if hidden % width:
        raise ReferenceImportError(f"MLP width {hidden} is not a multiple of the width {width}")
    shape = ReleasedShape(num_layers, width, hidden // width, output_size)
    _check_leaf_shapes(tree, shape)
    return shape


def _check_leaf_shapes(tree, shape: ReleasedShape) -> None:
    d, h = shape.embedding_dim, shape.embedding_dim * shape.widening_factor
    expected: dict[tuple[str, str], tuple[int, ...]] = {}
    for i in range(shape.num_layers):
        for j in range(4):
            expected[(f"{_numbered(_ATTENTION, i)}/{_numbered('linear', j)}", "w")] = (d, d)
        for j, dims in enumerate(((d, h), (d, h), (h, d))):
            expected[(_numbered("linear", 3 * i + j), "w")] = dims
    for k in range(2 * shape.num_layers + 1):
        for leaf in ("scale", "offset"):
            expected[(_numbered("layer_norm", k), leaf)] = (d,)
    head = _numbered("linear", 3 * shape.num_layers)
    expected[(head, "w")] = (d, shape.output_size)
    expected[(head, "b")] = (shape.output_size,)
    for (module, leaf), dims in expected.items():
        actual = tree[module].get(leaf)
        if actual is None or actual.shape != dims:
            got = None if actual is None else actual.shape
            raise ReferenceImportError(
                f"parameter {module}/{leaf} has shape {got}, expected {dims} for a network of "
                f"{shape.num_layers} layers, width {d}"
            )


def to_project(tree: dict[str, dict[str, np.ndarray]], num_layers: int) -> dict[str, dict]:
    """Their parameter tree renamed to this project's (model/networks/transformer.py). Pure."""
    ours: dict[str, dict[str, np.ndarray]] = {
        "embed": {"embeddings": tree["embed"]["embeddings"]},
        "~": {"positional_embeddings": tree["embed_1"]["embeddings"]},
    }
    for i in range(num_layers):
        block = f"block_{i}"
        ours[f"{block}/attention_norm"] = dict(tree[_numbered("layer_norm", 2 * i)])
        ours[f"{block}/mlp_norm"] = dict(tree[_numbered("layer_norm", 2 * i + 1)])
        for j, name in enumerate(_ATTENTION_ORDER):
            source = f"{_numbered(_ATTENTION, i)}/{_numbered('linear', j)}"
            ours[f"{block}/{name}"] = {"w": tree[source]["w"]}
        for j, name in enumerate(_MLP_ORDER):
            ours[f"{block}/{name}"] = {"w": tree[_numbered("linear", 3 * i + j)]["w"]}
    ours["final_norm"] = dict(tree[_numbered("layer_norm", 2 * num_layers)])
    head = tree[_numbered("linear", 3 * num_layers)]
    ours["head"] = {"w": head["w"], "b": head["b"]}
    return ours


def project_config(shape: ReleasedShape, target: str, num_heads: int) -> Config:
    """The config of this project that holds `shape` for `target`."""
    if target not in TARGETS:
        raise ReferenceImportError(f"--target {target!r} is not one of {list(TARGETS)}")
    kind = target_kind(target)
    if not kind.value_head and shape.output_size != NUM_ACTIONS:
        raise ReferenceImportError(
            f"--target bc needs a head over the {NUM_ACTIONS} actions; this checkpoint's head "
            f"has {shape.output_size} outputs (value bins: use --target av or sv)"
        )
    if kind.value_head and shape.output_size == NUM_ACTIONS:
        raise ReferenceImportError(
            f"--target {target} needs a head over value bins; this checkpoint's head has "
            f"{NUM_ACTIONS} outputs, the action space of a behavioural-cloning model "
            "(use --target bc)"
        )
    fields = {
        "num_layers": shape.num_layers,
        "embedding_dim": shape.embedding_dim,
        "num_heads": num_heads,
        "widening_factor": shape.widening_factor,
    }
    size = next(
        (name for name, preset in MODEL_SIZES.items() if {**fields, **preset} == fields),
        CUSTOM_SIZE,
    )
    train = TrainConfig(target=target)
    if kind.value_head:
        train = TrainConfig(target=target, num_bins=shape.output_size)
    config = Config(model=ModelConfig(size=size, **fields), train=train, data=DataConfig(test=""))
    try:
        return validate(config, check_data=False)
    except ConfigError as e:
        raise ReferenceImportError(f"no config of this project holds this network: {e}") from None


# --- the run directory ----------------------------------------------------------------


def import_checkpoint(
    directory: str,
    out: str,
    target: str,
    step: int | None = None,
    num_heads: int = DEFAULT_NUM_HEADS,
) -> dict[str, Any]:
    """Reads the released checkpoint, writes the run dir; returns a summary (JSON-able)."""
    directory = os.path.abspath(directory)
    step = resolve_step(directory, step)
    trees = {
        ours: read_tree(os.path.join(directory, str(step), theirs))
        for ours, theirs in SOURCE_ITEMS.items()
    }
    shape = infer_shape(trees["params"])
    if infer_shape(trees["ema_params"]) != shape:
        raise ReferenceImportError(f"{directory}/{step}: params and params_ema differ in shape")
    config = project_config(shape, target, num_heads)
    if os.path.isdir(checkpoints_dir(out)) and os.listdir(checkpoints_dir(out)):
        raise ReferenceImportError(f"{out} already holds checkpoints; give a new --out")
    params = {name: to_project(tree, shape.num_layers) for name, tree in trees.items()}
    source = {"checkpoint": directory, "step": step, "layout": "searchless_chess released"}
    meta = {
        "step": step,
        "data_position": 0,
        "data_fingerprint": None,
        "config": config.to_dict(),
        "imported_from": source,
    }
    os.makedirs(out, exist_ok=True)
    checkpointer = Checkpointer(checkpoints_dir(out), keep=1)
    try:
        checkpointer.save(step, params["params"], params["ema_params"], None, meta)
    finally:
        checkpointer.close()
    with open(os.path.join(out, "config.toml"), "w") as f:
        f.write(to_toml(config))
    return {
        "run_dir": os.path.abspath(out),
        "step": step,
        "target": target,
        "model": config.to_dict()["model"],
        "output_size": shape.output_size,
        "parameters": int(sum(a.size for m in params["params"].values() for a in m.values())),
        "source": source,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m model.import_reference",
        description="Import a released searchless_chess checkpoint as a run directory.",
    )
    parser.add_argument("checkpoint", help="directory holding <step>/params and params_ema")
    parser.add_argument("--out", required=True, help="run directory to write")
    parser.add_argument("--target", required=True, choices=TARGETS, help="what the model predicts")
    parser.add_argument("--step", type=int, default=None, help="step to import (default: latest)")
    parser.add_argument("--num-heads", type=int, default=DEFAULT_NUM_HEADS)
    args = parser.parse_args(argv)
    try:
        check_dir(args.out)
    except OutputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        summary = import_checkpoint(
            args.checkpoint, args.out, args.target, step=args.step, num_heads=args.num_heads
        )
    except ReferenceImportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
