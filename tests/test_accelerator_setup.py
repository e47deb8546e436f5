"""`make setup ACCEL=...`: JAX for an accelerator from the project's own files, pinned with
the CPU install (constraints.txt), and a clear refusal of an unknown accelerator."""

from __future__ import annotations

import pathlib
import re
import subprocess
import tomllib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def pins() -> dict[str, str]:
    lines = (ROOT / "constraints.txt").read_text().splitlines()
    return dict(line.split("==") for line in lines if "==" in line)


def extras() -> dict[str, list[str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return project["optional-dependencies"]


@pytest.mark.parametrize("accel", ["cuda12", "cuda13"])
def test_cuda_extras_bring_the_plugin_of_the_pinned_jax(accel):
    [requirement] = extras()[accel]
    assert requirement.startswith(f"jax[{accel}]")
    jax_range = next(d for d in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "dependencies"] if d.startswith("jax>="))  # fmt: skip
    assert requirement.removeprefix(f"jax[{accel}]") == jax_range.removeprefix("jax")
    pinned = pins()
    assert pinned[f"jax-{accel}-plugin"] == pinned[f"jax-{accel}-pjrt"] == pinned["jax"]
    # ... and the CUDA libraries the plugin pulls in are pinned too (no resolution drift).
    assert any(re.match(r"nvidia-cudnn-cu1\d", name) for name in pinned)


def test_tpu_extra_is_pinned():
    assert extras()["tpu"] == ["jax[tpu]>=0.11,<0.12"]
    assert "libtpu" in pins()


def make_plan(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["make", "-n", "setup", *args], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("accel, extra", [("cuda", "cuda13"), ("cuda12", "cuda12"), ("tpu", "tpu")])
def test_make_setup_installs_the_accelerator_extra(accel, extra):
    plan = make_plan(f"ACCEL={accel}")
    assert plan.returncode == 0, plan.stderr
    assert f"-c constraints.txt -e '.[dev,{extra}]'" in plan.stdout
    assert "-m model.devices" in plan.stdout  # says what JAX sees once installed


def test_make_setup_on_cpu_adds_no_accelerator():
    plan = make_plan()
    assert plan.returncode == 0, plan.stderr
    assert "[dev," not in plan.stdout


def test_an_unknown_accelerator_is_refused_in_one_line():
    plan = make_plan("ACCEL=rocm")
    assert plan.returncode != 0
    assert "ACCEL=rocm is not one of: cpu cuda cuda12 cuda13 tpu" in plan.stderr
    assert "Traceback" not in plan.stderr
