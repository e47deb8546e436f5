"""Incomplete checkpoint directories (empty, or some items missing): readers fall back to the
last complete step with one warning line each, training resumes from it, and with none
complete the error says so."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import jax
import numpy as np
import pyarrow.parquet as pq
import pytest

from model import config as config_lib
from model.checkpoint import (
    INCOMPLETE,
    CheckpointNotFoundError,
    DamagedCheckpointError,
    load_params,
    resolve,
)
from model.predictor import Predictor
from model.training.train import train

ROOT = pathlib.Path(__file__).resolve().parents[2]
TINY_MODEL = {"num_layers": 1, "embedding_dim": 32, "num_heads": 2}


def tiny(data: pathlib.Path) -> config_lib.Config:
    return config_lib.from_dict(
        {
            "model": TINY_MODEL,
            "train": {
                "batch_size": 32,
                "num_steps": 12,
                "log_every": 3,
                "checkpoint_every": 3,
                "keep_checkpoints": 5,
            },
            "data": {"train": str(data / "train"), "test": ""},
        }
    )


@pytest.fixture(scope="module")
def run_of_6_steps(synthetic_data, tmp_path_factory) -> pathlib.Path:
    """A run (of 12 steps) stopped with complete checkpoints at steps 3 and 6."""
    out = tmp_path_factory.mktemp("run")
    train(tiny(synthetic_data), str(out), stop_after=6, log=lambda _: None)
    return out


def break_steps(run: pathlib.Path) -> None:
    """Step 9 empty, step 12 half-written (its meta copied, the parameter trees missing)."""
    checkpoints = run / "checkpoints"
    (checkpoints / "9").mkdir()
    shutil.copytree(checkpoints / "6" / "meta", checkpoints / "12" / "meta")


def test_readers_fall_back_to_the_last_complete_step(run_of_6_steps, tmp_path, capfd):
    run = tmp_path / "run"
    shutil.copytree(run_of_6_steps, run)
    break_steps(run)
    capfd.readouterr()
    params, _, meta = load_params(str(run))
    assert meta["step"] == 6
    warnings = capfd.readouterr().err.strip().splitlines()
    assert len(warnings) == 2
    for step, missing in (("12", "no ema_params)"), ("9", "meta)")):
        [line] = [w for w in warnings if f"{run / 'checkpoints' / step} is an incomplete" in w]
        assert line.startswith("warning: ") and missing in line and "using step 6" in line
    assert Predictor.from_checkpoint(str(run)).step == 6  # what eval/ and the UCI engine use
    # Asked for by name, an incomplete step is an error naming it, not a fallback.
    with pytest.raises(CheckpointNotFoundError, match=r"12 is an incomplete checkpoint"):
        resolve(str(run), step=12)
    with pytest.raises(CheckpointNotFoundError, match=r"9 is an incomplete checkpoint"):
        resolve(str(run / "checkpoints" / "9"))


def test_a_step_without_optimiser_state_is_complete_for_readers(run_of_6_steps, tmp_path):
    # An imported model (model.import_reference) is saved without opt_state: every reader
    # must take it, as the latest step.
    run = tmp_path / "run"
    shutil.copytree(run_of_6_steps, run)
    shutil.copytree(run / "checkpoints" / "6", run / "checkpoints" / "7")
    shutil.rmtree(run / "checkpoints" / "7" / "opt_state")
    assert load_params(str(run))[2]["step"] == 6  # the meta was copied from step 6
    assert resolve(str(run)) == (str(run / "checkpoints"), 7)


def test_a_step_of_ema_parameters_alone_is_read_with_the_ema_only(run_of_6_steps, tmp_path, capfd):
    # An export (jobs/gpu_export.py) holds the EMA parameters alone: the readers' default
    # reads it as the latest step.
    run = tmp_path / "run"
    shutil.copytree(run_of_6_steps, run)
    shutil.copytree(run / "checkpoints" / "6", run / "checkpoints" / "7")
    for item in ("params", "opt_state"):
        shutil.rmtree(run / "checkpoints" / "7" / item)
    ema, _, _ = load_params(str(run))
    expected, _, _ = load_params(str(run / "checkpoints" / "6"))
    leaves = zip(jax.tree_util.tree_leaves(ema), jax.tree_util.tree_leaves(expected), strict=True)
    for a, b in leaves:
        np.testing.assert_array_equal(a, b)  # the same files: bitwise
    assert resolve(str(run)) == (str(run / "checkpoints"), 7)
    # In a training run, such a step is one whose raw parameters were lost: ema=false takes
    # the step before, with one warning; with no step holding them, one line says why.
    capfd.readouterr()
    load_params(str(run), use_ema=False)
    [warning] = capfd.readouterr().err.strip().splitlines()
    assert "7 is an incomplete checkpoint (no params)" in warning and "using step 6" in warning
    for step in ("3", "6"):
        shutil.rmtree(run / "checkpoints" / step)
    with pytest.raises(CheckpointNotFoundError, match=r"holds only its EMA parameters"):
        load_params(str(run), use_ema=False)
    with pytest.raises(CheckpointNotFoundError, match=r"holds only its EMA parameters"):
        load_params(str(run / "checkpoints" / "7"), use_ema=False)


def test_no_complete_step_is_one_clear_error(tmp_path):
    (tmp_path / "checkpoints" / "500").mkdir(parents=True)
    with pytest.raises(CheckpointNotFoundError, match=r"no complete checkpoint under .*\[500\]"):
        load_params(str(tmp_path))


def test_training_resumes_from_the_last_complete_step(synthetic_data, run_of_6_steps, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(run_of_6_steps, run)
    break_steps(run)
    logs: list[str] = []
    result = train(tiny(synthetic_data), str(run), log=logs.append)
    text = "\n".join(logs)
    assert "resumed from step 6 (data position 192)" in text
    assert result.step == 12 and result.data_position == 12 * 32
    for step in ("9", "12"):  # moved aside, out of the way of the saves at 9 and 12
        assert f"{run / 'checkpoints' / step} is an incomplete checkpoint" in text
        assert (run / INCOMPLETE / step).is_dir()
    assert sorted(int(n) for n in os.listdir(run / "checkpoints")) == [3, 6, 9, 12]
    assert load_params(str(run))[2]["step"] == 12


def damage_steps(run: pathlib.Path) -> None:
    """Every item present but the bytes cut short: step 6's array data truncated (its meta
    reads, its parameters do not), and a step 9 whose every file is cut in half (its meta
    does not read either)."""
    checkpoints = run / "checkpoints"
    shutil.copytree(checkpoints / "6", checkpoints / "9")
    for path in (checkpoints / "6").rglob("*"):
        if path.is_file() and path.parent.name == "d" and "ocdbt" in str(path):
            os.truncate(path, 100)
    for path in (checkpoints / "9").rglob("*"):
        if path.is_file():
            os.truncate(path, path.stat().st_size // 2)


def test_readers_fall_back_past_damaged_steps_with_one_line_each(run_of_6_steps, tmp_path, capfd):
    run = tmp_path / "run"
    shutil.copytree(run_of_6_steps, run)
    damage_steps(run)
    capfd.readouterr()
    assert load_params(str(run))[2]["step"] == 3
    assert Predictor.from_checkpoint(str(run)).step == 3  # what eval/ and the UCI engine use
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Event loop" not in err
    warnings = err.strip().splitlines()
    assert len(warnings) == 4  # steps 9 and 6, once per load
    for step in ("9", "6"):
        named = [
            w for w in warnings if f"{run / 'checkpoints' / step} is a damaged checkpoint" in w
        ]
        assert len(named) == 2 and all(w.endswith("skipped, using step 3") for w in named)
        assert all(w.startswith("warning: ") and len(w) < 600 for w in named)
    # Asked for by number, a damaged step is one error naming it, not a fallback.
    with pytest.raises(DamagedCheckpointError, match=r"checkpoints/6 is a damaged checkpoint"):
        load_params(str(run), step=6)
    assert "Traceback" not in capfd.readouterr().err


def test_training_resumes_from_the_last_step_that_restores(
    synthetic_data, run_of_6_steps, tmp_path
):
    run = tmp_path / "run"
    shutil.copytree(run_of_6_steps, run)
    damage_steps(run)
    logs: list[str] = []
    result = train(tiny(synthetic_data), str(run), log=logs.append)
    text = "\n".join(logs)
    assert "resumed from step 3 (data position 96)" in text
    for step in ("9", "6"):  # moved aside, out of the way of the saves at 6 and 9
        [line] = [line for line in logs if f"checkpoints/{step} is a damaged checkpoint" in line]
        assert line.startswith("warning: ") and f"moved it to {run / INCOMPLETE / step}" in line
    assert result.step == 12 and result.data_position == 12 * 32
    assert sorted(int(n) for n in os.listdir(run / "checkpoints")) == [3, 6, 9, 12]
    assert load_params(str(run))[2]["step"] == 12


def test_no_step_that_restores_is_one_error_and_nothing_is_moved(run_of_6_steps, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(run_of_6_steps, run)
    for path in (run / "checkpoints").rglob("*"):
        if path.is_file():
            os.truncate(path, path.stat().st_size // 2)
    with pytest.raises(DamagedCheckpointError, match=r"no checkpoint under .* restores"):
        load_params(str(run))
    assert sorted(os.listdir(run / "checkpoints")) == ["3", "6"]


def test_a_data_error_on_resume_is_one_line_without_orbax_tracebacks(
    synthetic_data, run_of_6_steps, tmp_path
):
    # The checkpointer is opened before the data are read: left open, orbax's threads print
    # tracebacks at exit after the one-line error.
    run = tmp_path / "run"
    shutil.copytree(run_of_6_steps, run)
    table = pq.read_table(next((synthetic_data / "train").glob("*.parquet")))
    metadata = {**table.schema.metadata, b"searchless_chess.schema_version": b"99"}
    bad = tmp_path / "bad.parquet"
    pq.write_table(table.replace_schema_metadata(metadata), bad)
    done = subprocess.run(
        [sys.executable, "-m", "model.training.train", "--config", str(run / "config.toml")]
        + ["--data", str(bad), "--out", str(run)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"data error: {bad}: schema version 99 is not one this code reads ([1, 2]); "
        "upgrade searchless-chess"
    )
