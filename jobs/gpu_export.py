"""A training's EMA parameters as a compact run directory, and that directory in parts that
the accelerator window's file limits let back (jobs/gpu_window.py).

The compact run is a normal run directory (`config.toml`, `checkpoints/<step>/` with
`ema_params` and `meta`: no optimiser state, and no raw `params` beside the EMA, which is all
a reader reads unless asked for `ema=false`), so `Predictor.from_checkpoint`, `neural:RUN` and
`searchless-uci --checkpoint RUN` load it as they load any run: the EMA parameters in bfloat16
(a quarter of a float32 run's two copies; a reader restores them into its float32 tree).
Orbax nests its files five folders deep and the window brings back at most 8 files, two
folders down, 16 MiB each: so the directory travels as one tar cut into `model.tar.NN` parts
of at most `PART_BYTES` (`cat model.tar.* | tar -x` puts it back).

    python -m jobs.gpu_export FILES models/gpu   # the parts in FILES, checked, as a run dir

checks each part against the sha256 that `window.json` beside them names, then unpacks them
into the run directory (replaced).
"""

from __future__ import annotations

import glob
import hashlib
import io
import json
import os
import shutil
import sys
import tarfile
import tempfile
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from model.checkpoint import Checkpointer
from model.config import Config, to_toml

PART_BYTES = 15 * 2**20  # under the 16 MiB a file that comes back may hold
PART_PREFIX = "model.tar."


def compact_params(params: Any) -> Any:
    """The parameters on the host in bfloat16 (floating leaves only)."""

    def cast(x):
        x = np.asarray(jax.device_get(x))
        return x.astype(jnp.bfloat16) if np.issubdtype(x.dtype, np.floating) else x

    return jax.tree_util.tree_map(cast, params)


def write_compact_run(
    directory: str, config: Config, step: int, ema_params: Any, meta: dict[str, Any]
) -> int:
    """Writes the compact run directory (replacing one there); returns its size in bytes."""
    if os.path.exists(directory):
        shutil.rmtree(directory)
    os.makedirs(directory)
    with open(os.path.join(directory, "config.toml"), "w") as f:
        f.write(to_toml(config))
    compact = compact_params(ema_params)
    checkpointer = Checkpointer(os.path.join(directory, "checkpoints"), keep=1)
    try:
        meta = {**meta, "step": step, "config": config.to_dict(), "params_dtype": "bfloat16"}
        checkpointer.save(step, None, compact, None, meta)
    finally:
        checkpointer.close()
    return directory_bytes(directory)


def directory_bytes(directory: str) -> int:
    return sum(
        os.path.getsize(os.path.join(where, name))
        for where, _, names in os.walk(directory)
        for name in names
    )


def write_parts(directory: str, out: str, prefix: str = PART_PREFIX) -> list[dict[str, Any]]:
    """`directory` as a tar (its contents at the top) in parts `<out>/<prefix>NN`, each
    written under a temporary name and renamed, old parts beyond the new ones removed;
    returns each part's name, bytes and sha256."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name in sorted(os.listdir(directory)):
            tar.add(os.path.join(directory, name), arcname=name)
    data = buffer.getvalue()
    parts = []
    for index, start in enumerate(range(0, max(len(data), 1), PART_BYTES)):
        chunk = data[start : start + PART_BYTES]
        name = f"{prefix}{index:02d}"
        with tempfile.NamedTemporaryFile(dir=out, prefix="partial-", delete=False) as f:
            f.write(chunk)
        os.replace(f.name, os.path.join(out, name))
        parts.append(
            {"name": name, "bytes": len(chunk), "sha256": hashlib.sha256(chunk).hexdigest()}
        )
    names = {p["name"] for p in parts}
    for stale in glob.glob(os.path.join(out, prefix + "*")):
        if os.path.basename(stale) not in names:
            os.remove(stale)
    return parts


def unpack_parts(where: str, directory: str, prefix: str = PART_PREFIX) -> None:
    """The compact run directory back from the parts in `where` (as `cat | tar -x` does)."""
    names = sorted(glob.glob(os.path.join(where, prefix + "*")))
    if not names:
        raise FileNotFoundError(f"no {prefix}NN parts in {where!r}")
    data = b"".join(open(name, "rb").read() for name in names)
    os.makedirs(directory, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(directory, filter="data")


def check_parts(where: str) -> list[str]:
    """What is wrong with the parts in `where` against its window.json ([] if nothing)."""
    with open(os.path.join(where, "window.json")) as f:
        parts = json.load(f)["model"]["parts"]
    problems = []
    for part in parts:
        path = os.path.join(where, part["name"])
        if not os.path.exists(path):
            problems.append(f"{part['name']} is missing")
        elif hashlib.sha256(open(path, "rb").read()).hexdigest() != part["sha256"]:
            problems.append(f"{part['name']} does not match its sha256")
    return problems


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m jobs.gpu_export FILES RUN_DIR", file=sys.stderr)
        return 2
    where, directory = args
    try:
        problems = check_parts(where)
        if problems:
            print(f"error: {'; '.join(problems)}", file=sys.stderr)
            return 1
        if os.path.isdir(directory) and os.listdir(directory):
            if not os.path.exists(os.path.join(directory, "config.toml")):
                print(f"error: {directory} is not empty and no run: not replaced", file=sys.stderr)
                return 1
            shutil.rmtree(directory)
        unpack_parts(where, directory)
    except (OSError, KeyError, ValueError, tarfile.TarError) as e:
        print(f"error: {where}: {e}", file=sys.stderr)
        return 1
    print(f"{directory}: {directory_bytes(directory) / 1e6:.1f} MB from {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
