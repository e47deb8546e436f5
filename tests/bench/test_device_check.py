"""`make device-check ARGS=--dry-run`: every step of the device check on CPU at toy sizes,
and the JSON the accelerator run writes, key for key."""

from __future__ import annotations

import datetime
import json
import os
import pathlib
import subprocess
import sys

import pytest

from bench import device_check, oracle

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_the_report_is_named_after_the_device_and_dated_inside(tmp_path):
    """The file says what it holds (`nvidia-h200.json`: a later run on the same kind replaces
    it, the history is in git and CHANGELOG.md); the day it ran is a key inside."""
    today = datetime.datetime.now(datetime.UTC).date().isoformat()
    report = device_check.Report(tmp_path)
    report.name_after("NVIDIA H200")
    report.write()
    assert [path.name for path in tmp_path.iterdir()] == ["nvidia-h200.json"]
    assert json.loads((tmp_path / "nvidia-h200.json").read_text())["date"] == today


@pytest.mark.slow
def test_the_dry_run_runs_every_step_and_writes_the_json(tmp_path):
    run = subprocess.run(
        [sys.executable, "-m", "bench.device_check", "--dry-run", "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    [path] = tmp_path.glob("*.json")
    assert path.name == "dry-run-cpu.json"
    report = json.loads(path.read_text())
    assert report["errors"] == {} and report["dry_run"] is True
    assert report["device"]["platform"] == "cpu" and report["jax"]["jax"]
    assert set(report["budget"]["seconds"]) >= {"device", "train_tiny", "inference", "model"}
    for size in ("tiny", "small"):
        step = report["train"][size]
        assert step["examples_per_s"] > 0 and step["step_ms"] > 0 and step["dtype"] == "float32"
    has_reference = "commit" in report["reference"]
    assert ("vs_reference" in report["train"]["tiny"]) == has_reference
    if has_reference:
        assert report["train"]["tiny"]["same_loss"]
    inference = report["inference"]
    assert inference["batched_boards_per_s"] > 0
    assert ("batched_vs_reference" in inference) == has_reference
    for key, target in (("model", "av"), ("model_bc", "bc")):
        model = report[key]
        assert model["target"] == target and model["steps"] >= 20
        solved = model["puzzles"]
        assert set(solved) == {"file", f"tiny-{target}", "greedy", "random"}
        assert all(solved[a]["total"] == 10 for a in ("greedy", "random", f"tiny-{target}"))
    assert set(report["profile"]) == {"tiny_32", "tiny_32_cudnn_attention"}
    for profiled in report["profile"].values():
        assert profiled["step_ms"] > 0 and profiled["cost"]["xla_flops"] > 0
        assert 0 < profiled["trace"]["busy_ms"] and profiled["trace"]["top"]
    assert (tmp_path / "profiles" / "profile-tiny-32.hlo.txt.gz").exists()
    tests = report["tests"]
    assert tests["passed"] >= 1 and tests["failures"] == [] and not tests["timed_out"]
    assert "greedy" in run.stdout and "wrote " in run.stdout


def test_an_unwritable_output_is_refused_before_any_work(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    run = subprocess.run(
        [sys.executable, "-m", "bench.device_check", "--dry-run", "--out", str(blocked)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )
    assert run.returncode == 1
    assert run.stderr.startswith("device check: ") and "Traceback" not in run.stderr
    assert "[device-check] device" not in run.stdout


def test_the_reference_loads_without_the_packages_of_its_data_loaders(tmp_path):
    """The device image has neither Beam nor Grain: inert modules stand in for them, and the
    reference's update step still runs."""
    try:
        oracle.load()
    except oracle.OracleUnavailable as e:
        pytest.skip(str(e))
    script = """
import importlib.abc, importlib.util, sys
real = importlib.util.find_spec
hidden = ("grain", "apache_beam")
importlib.util.find_spec = lambda n, *a: None if n.split(".")[0] in hidden else real(n, *a)
class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in hidden:
            raise ModuleNotFoundError(name)
sys.meta_path.insert(0, Refuse())
from bench import device_check, oracle
from bench.train_speed import reference_trainer
from model import config as config_lib
ref = oracle.load()
config = config_lib.from_dict({"model": {"size": "tiny"}, "train": {"batch_size": 8}})
params, opt_state, step = reference_trainer(ref, config)
print(sorted(ref.placeholders), len(params))
"""
    run = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip().startswith("['apache_beam', 'grain']")


def test_without_an_accelerator_it_says_so_and_writes_nothing(tmp_path):
    out = tmp_path / "device"
    run = subprocess.run(
        [sys.executable, "-m", "bench.device_check", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},  # a machine without one, wherever it runs
    )
    assert run.returncode == 2, run.stdout[-2000:] + run.stderr[-2000:]
    assert run.stderr.strip().splitlines() == [
        "device check: no accelerator here (JAX sees only the CPU): the device check measures "
        "a GPU or TPU; `make device-check ARGS=--dry-run` runs every step on CPU at toy sizes"
    ]
    assert "[device-check]" not in run.stdout
    assert not out.exists()
