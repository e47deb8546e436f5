"""`python -m eval.web`'s start: missing models and a taken port are one line and a non-zero
exit before anything loads; the models offered are the checkout's models/ and the named run."""

from __future__ import annotations

import os
import pathlib
import socket
import subprocess
import sys

import pytest

from eval.web.__main__ import parse_args
from eval.web.models import ModelError, ModelStore

ROOT = pathlib.Path(__file__).resolve().parents[3]


def run_web(*args: str, cwd=ROOT) -> subprocess.CompletedProcess:
    # This checkout's package, from whatever directory the command starts in.
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return subprocess.run(
        [sys.executable, "-m", "eval.web", *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=120,
    )


def one_error_line(result: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_defaults_are_loopback_port_8000_and_the_cpu_model():
    args = parse_args([])
    assert (args.host, args.port, args.model, args.value) == ("127.0.0.1", 8000, None, None)


def test_a_missing_model_is_one_line_and_exit_2(tmp_path):
    result = run_web("--model", "runs/nowhere", "--port", "0", cwd=tmp_path)
    assert result.returncode == 2
    line = one_error_line(result)
    assert line.startswith("python -m eval.web: error: no model: 'runs/nowhere' not found")
    assert str(tmp_path / "runs" / "nowhere") in line


def test_a_missing_value_model_is_one_line_and_exit_2():
    result = run_web("--value", "runs/no-value", "--port", "0")
    assert result.returncode == 2
    assert "no value model: 'runs/no-value' not found" in one_error_line(result)


def test_a_port_in_use_is_one_line_and_exit_1():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_web("--port", str(port))
    assert result.returncode == 1
    line = one_error_line(result)
    assert line.startswith(f"python -m eval.web: error: cannot listen on 127.0.0.1:{port}: ")
    assert "loading" not in result.stdout  # told before the models load


def test_a_bad_port_is_refused():
    result = run_web("--port", "70000")
    assert result.returncode == 2 and "--port must be 0..65535" in result.stderr


def _run_dir(path: pathlib.Path, target: str) -> pathlib.Path:
    (path / "checkpoints").mkdir(parents=True)
    (path / "config.toml").write_text(f'[train]\ntarget = "{target}"\n')
    return path


def test_the_named_run_is_offered_beside_the_shipped_models(tmp_path):
    if not (ROOT / "models" / "cpu" / "checkpoints").is_dir():
        pytest.skip("models/cpu is not in this checkout")
    run = _run_dir(tmp_path / "my-sv", "sv")
    store = ModelStore.create(str(run), None, str(tmp_path))
    assert store.default_model == "my-sv"
    assert store.default_value is None  # no value model unless one is named
    assert store.models["my-sv"].kind == "win"
    assert {"cpu", "cpu-av"} <= set(store.models)
    store = ModelStore.create(None, "none", str(tmp_path))
    assert (store.default_model, store.default_value) == ("cpu", None)


def test_an_unknown_name_is_a_404_naming_the_models(tmp_path):
    store = ModelStore.create(str(_run_dir(tmp_path / "only", "bc")), "none", str(tmp_path))
    with pytest.raises(ModelError) as error:
        store.info("other")
    assert error.value.status == 404
    assert "unknown model 'other'" in str(error.value) and "only" in str(error.value)
