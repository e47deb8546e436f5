"""Incomplete checkpoint directories (empty, or some items missing): readers fall back to the
last complete step with one warning line each, training resumes from it, and with none
complete the error says so."""

from __future__ import annotations

import os
import pathlib
import shutil

import pytest

from model import config as config_lib
from model.checkpoint import INCOMPLETE, CheckpointNotFoundError, load_params, resolve
from model.predictor import Predictor
from model.train import train

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
    for step, missing in (("12", "no params, ema_params)"), ("9", "meta)")):
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
