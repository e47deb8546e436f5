"""The training loop: exact resume, checkpoints, every target, and learning on real boards."""

from __future__ import annotations

import json
import math
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import time

import chess
import jax
import numpy as np
import pytest
from scipy.stats import spearmanr

from eval.plot import main as plot_main
from model import config as config_lib
from model.checkpoint import CheckpointNotFoundError, load_params
from model.data.loader import load_boards, make_view
from model.predictor import Predictor
from model.training import scalar_events
from model.training.train import train

ROOT = pathlib.Path(__file__).resolve().parents[2]
TINY_MODEL = {"num_layers": 1, "embedding_dim": 32, "num_heads": 2}


def tiny(data: pathlib.Path, **train) -> config_lib.Config:
    settings = {
        "batch_size": 32,
        "num_steps": 8,
        "learning_rate": 1e-3,
        "log_every": 2,
        "checkpoint_every": 3,
        "keep_checkpoints": 2,
        "prefetch": 2,
        "eval_boards": 10,
        "eval_batches": 2,
        **train,
    }
    return config_lib.from_dict(
        {
            "model": TINY_MODEL,
            "train": settings,
            "data": {"train": str(data / "train"), "test": ""},
        }
    )


def assert_trees_equal(a, b):
    # Bitwise on purpose: exact resume is a promise. A resumed run executes the same compiled
    # steps on the same batches as a straight one, on the same machine, so a difference in
    # any bit is a resume bug, not rounding.
    leaves_a, leaves_b = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    assert len(leaves_a) == len(leaves_b)
    for x, y in zip(leaves_a, leaves_b, strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def metrics_log(run: pathlib.Path) -> list[dict]:
    """metrics.jsonl without what depends on the clock."""
    records = [json.loads(line) for line in open(run / "metrics.jsonl")]
    return [{k: v for k, v in r.items() if k not in ("time", "examples_per_s")} for r in records]


def test_a_stopped_run_resumes_to_the_uninterrupted_result(synthetic_data, tmp_path):
    # Weighted sampling, HL-Gauss targets and a warm-up + cosine schedule all have to
    # continue exactly too. The stop at step 5 falls inside a log window (log_every 2) and
    # on an evaluation step (eval_every 5), which the stop leaves to the resumed run.
    config = tiny(
        synthetic_data,
        sampler="weighted",
        hl_gauss=True,
        lr_schedule="cosine",
        warmup_steps=3,
        eval_every=5,
    ).replace(data={"test": str(synthetic_data / "test")})
    logs: list[str] = []
    first = train(config, str(tmp_path / "a"), stop_after=5, log=logs.append)
    assert first.stopped_early and first.step == 5 and first.data_position == 5 * 32
    resumed = train(config, str(tmp_path / "a"), log=logs.append)
    assert "resumed from step 5 (data position 160)" in "\n".join(logs)
    assert resumed.step == 8 and resumed.data_position == 8 * 32
    straight = train(config, str(tmp_path / "b"), log=logs.append)
    assert_trees_equal(resumed.state, straight.state)  # bitwise: params, EMA, optimiser
    # The log too: every record, each averaging the same steps, the evaluation at 5 included.
    assert metrics_log(tmp_path / "a") == metrics_log(tmp_path / "b")
    assert [(r["kind"], r["step"]) for r in metrics_log(tmp_path / "b")] == [
        ("train", 2), ("train", 4), ("eval", 5), ("train", 6), ("train", 8), ("eval", 8)
    ]  # fmt: skip
    # The last two checkpoints are kept; the loader position travels with them.
    assert sorted(os.listdir(tmp_path / "a" / "checkpoints")) == ["6", "8"]
    params, saved, meta = load_params(str(tmp_path / "a"), use_ema=False)
    assert meta["data_position"] == 8 * 32 and saved == config
    assert_trees_equal(params, straight.state.params)
    assert config_lib.load(tmp_path / "a" / "config.toml") == config


def test_resuming_with_a_different_model_is_refused(synthetic_data, tmp_path):
    config = tiny(synthetic_data, num_steps=2)
    train(config, str(tmp_path), log=lambda _: None)
    other = config.replace(model={"embedding_dim": 64})
    with pytest.raises(config_lib.ConfigError, match="different model"):
        train(other, str(tmp_path), log=lambda _: None)


@pytest.mark.parametrize("target", ["sv", "bc"])
def test_state_value_and_behavioural_cloning_train_and_predict(synthetic_data, tmp_path, target):
    config = tiny(synthetic_data, target=target, num_steps=4, eval_every=0)
    config = config.replace(data={"test": str(synthetic_data / "test")})
    result = train(config, str(tmp_path), log=lambda _: None)
    assert result.last_eval is not None and math.isfinite(result.last_eval["test_loss"])
    assert 0 <= result.last_eval["action_accuracy"] <= 1
    predictor = Predictor.from_checkpoint(str(tmp_path / "checkpoints" / "4"))
    assert predictor.config.target == target and predictor.step == 4
    [(moves, scores)] = predictor.move_values([chess.Board()])
    assert len(moves) == 20 and scores.shape == (20,)
    assert Predictor.from_checkpoint(str(tmp_path), step=3).step == 3
    with pytest.raises(CheckpointNotFoundError, match="no checkpoint of step 2"):
        Predictor.from_checkpoint(str(tmp_path), step=2)


def tensorboard_scalars(run: pathlib.Path) -> dict[str, list[tuple[int, float]]]:
    """The run's scalars as TensorBoard reads them, without the clock-dependent rate."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run / "tensorboard"))
    events.Reload()
    return {
        tag: [(e.step, e.value) for e in events.Scalars(tag)]
        for tag in events.Tags()["scalars"]
        if not tag.endswith("examples_per_s")
    }


def train_command(data: pathlib.Path, out: pathlib.Path, steps: int) -> list[str]:
    sets = [f"model.{k}={v}" for k, v in TINY_MODEL.items()]
    sets += ["checkpoint_every=10", "log_every=4", "learning_rate=1e-3", "keep_checkpoints=3"]
    sets += ["eval_every=10", "eval_boards=10", "eval_batches=2"]
    command = [sys.executable, "-m", "model.training.train", "--config", "model/configs/small.toml"]
    command += ["--data", str(data / "train"), "--test-data", str(data / "test")]
    command += ["--out", str(out)]
    command += ["--steps", str(steps), "--batch-size", "32"]
    for item in sets:
        command += ["--set", item]
    return command


def finished_steps(out: pathlib.Path) -> list[int]:
    directory = out / "checkpoints"
    return (
        sorted(int(n) for n in os.listdir(directory) if n.isdigit()) if directory.exists() else []
    )


@pytest.mark.slow
def test_a_killed_process_resumes_where_its_checkpoint_left_off(synthetic_data, tmp_path):
    """SIGKILL the CLI once it has a checkpoint, rerun it, compare with one clean run, all
    data-parallel over two (host-platform) devices.

    Steps of the tiny model take milliseconds, saving a checkpoint a few hundred: 60 steps
    with a checkpoint every 10 make sure the kill lands mid-run."""
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}

    out, straight = tmp_path / "killed", tmp_path / "straight"
    steps = 60
    command = train_command(synthetic_data, out, steps=steps)
    with open(tmp_path / "killed.log", "w") as log:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=log)
        deadline = time.monotonic() + 240
        while not finished_steps(out) and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        process.send_signal(signal.SIGKILL)
        process.wait()
    killed_at = finished_steps(out)
    assert killed_at and killed_at[-1] < steps, "the run must be killed mid-way"
    outputs = []
    for again in (command, train_command(synthetic_data, straight, steps=steps)):
        run = subprocess.run(again, cwd=ROOT, env=env, capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        assert "2 cpu device(s) on 1 process(es)" in run.stdout
        outputs.append(run.stdout)
    assert f"resumed from step {killed_at[-1]} (data position {killed_at[-1] * 32})" in outputs[0]
    resumed_params, _, meta = load_params(str(out), use_ema=False)
    straight_params, _, _ = load_params(str(straight), use_ema=False)
    assert meta["step"] == steps and meta["data_position"] == steps * 32
    assert_trees_equal(resumed_params, straight_params)
    # The log is cut back to the checkpoint and redone: as if never killed.
    assert metrics_log(out) == metrics_log(straight)
    assert len(metrics_log(straight)) == steps // 4 + steps // 10
    # TensorBoard's view too: the resumed run's restart marker drops the redone steps' events.
    if scalar_events.available():
        assert tensorboard_scalars(out) == tensorboard_scalars(straight)


@pytest.mark.slow
def test_ctrl_c_saves_a_checkpoint_says_so_in_one_line_and_exits_130(synthetic_data, tmp_path):
    out = tmp_path / "run"
    command = train_command(synthetic_data, out, steps=100_000)  # still running when stopped
    process = subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 240
    while not finished_steps(out) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=240)
    assert process.returncode == 130, stderr[-2000:]
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    [line] = [line for line in stdout.splitlines() if line.startswith("stopped")]
    stopped = int(re.fullmatch(r"stopped by SIGINT at step (\d+); run the same command again "
                               r"to resume", line).group(1))  # fmt: skip
    assert finished_steps(out)[-1] == stopped  # saved where it stopped
    resume = [*command, "--stop-after", str(stopped + 3)]
    run = subprocess.run(resume, cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    assert f"resumed from step {stopped} (data position {stopped * 32})" in run.stdout
    assert finished_steps(out)[-1] == stopped + 3


# Runs `python ARGS...` pinned to one core (set in the child itself: a preexec_fn would fork
# this multithreaded, JAX-loaded process).
ON_ONE_CORE = [
    sys.executable,
    "-c",
    "import os, sys; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])",
]


@pytest.mark.slow
def test_two_cpu_devices_on_one_core_do_not_deadlock(synthetic_data, tmp_path):
    """The demo's model data-parallel over two host-platform devices sharing one core.

    XLA's CPU runtime deadlocked here in an all-reduce (the rendezvous aborts the process
    after 40 s) while the loop dispatched steps ahead of their completion; it now waits for
    each step on CPU with several devices (model.training.step.Placement.wait_each_step)."""
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    command = [*ON_ONE_CORE, "-m", "model.training.train", "--config", "model/configs/demo.toml"]
    command += ["--data", str(synthetic_data / "train"), "--test-data", "", "--out", str(tmp_path)]
    # One log line at the end: the loop then has nothing else to wait for between steps.
    command += ["--steps", "300", "--set", "checkpoint_every=300", "--set", "log_every=300"]
    run = subprocess.run(
        command,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "2 cpu device(s)" in run.stdout and "step 300/300" in run.stdout


@pytest.mark.slow
def test_small_model_learns_real_action_values(annotated_data, tmp_path):
    """The small config on real Stockfish annotations, 300 steps of 64: the test loss ends
    below log K and below the loss of predicting the training labels' histogram, and the
    predicted values rank the labels. Measured here: test loss 4.57 (log K = 4.85, histogram
    4.69), Spearman 0.26; training is deterministic on CPU."""
    config = config_lib.load(
        ROOT / "model" / "configs" / "small.toml",
        [
            f"data.train='{annotated_data / 'train'}'",
            f"data.test='{annotated_data / 'test'}'",
            "num_steps=300",
            "batch_size=64",
            "learning_rate=1e-3",
            "eval_every=0",
            "eval_boards=50",
            "checkpoint_every=300",
        ],
    )
    result = train(config, str(tmp_path), log=print)
    test_loss = result.last_eval["test_loss"]
    train_data, test = load_boards(config.data.train), load_boards(config.data.test)
    # Add-one smoothing: a bin no training label fell in still gets some probability.
    histogram = np.bincount(make_view(train_data, "av", config.num_bins).label, minlength=128) + 1
    histogram = histogram / histogram.sum()
    histogram_loss = -np.log(histogram[make_view(test, "av", config.num_bins).label]).mean()
    assert test_loss < math.log(config.num_bins) - 0.2
    assert test_loss < histogram_loss - 0.05

    predictor = Predictor.from_checkpoint(str(tmp_path))
    boards = range(test.num_boards)
    predicted = predictor.action_values(
        list(test.fens), [list(test.legal_moves(i)) for i in boards]
    )
    labels = np.concatenate([test.move_win_probs(i) for i in boards])
    correlation = spearmanr(np.concatenate(predicted), labels).statistic
    print(f"test loss {test_loss:.3f}, histogram {histogram_loss:.3f}, Spearman {correlation:.3f}")
    assert correlation > 0.15


@pytest.mark.slow
def test_metrics_reach_tensorboard_and_the_learning_curves(synthetic_data, tmp_path):
    event_accumulator = pytest.importorskip(
        "tensorboard.backend.event_processing.event_accumulator",
        reason="the tensorboard extra is not installed",
    )
    config = tiny(synthetic_data, num_steps=6, log_every=2, eval_every=3)
    config = config.replace(data={"test": str(synthetic_data / "test")})
    train(config, str(tmp_path), log=lambda _: None)
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]

    events = event_accumulator.EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()  # TensorBoard's own reader
    tags = set(events.Tags()["scalars"])
    assert {"train/loss", "train/accuracy", "eval/test_loss", "eval/kendall_tau"} <= tags
    assert not any(tag.endswith("/time") or tag.endswith("/step") for tag in tags)
    for kind, key in (("train", "loss"), ("eval", "action_accuracy")):
        logged = [(r["step"], r[key]) for r in records if r["kind"] == kind]
        read = [(e.step, e.value) for e in events.Scalars(f"{kind}/{key}")]
        assert [s for s, _ in read] == [s for s, _ in logged] and len(logged) >= 2
        np.testing.assert_allclose([v for _, v in read], [v for _, v in logged], rtol=1e-6)

    png = tmp_path / "curves.png"
    assert plot_main([str(tmp_path), "--out", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (tmp_path / "bad.jsonl").write_text('{"kind": "train", "step": 1}\nnot json\n')
    assert plot_main([str(tmp_path / "bad.jsonl"), "--out", str(png)]) == 1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_processes_train_as_one_process_with_two_devices(synthetic_data, tmp_path):
    """Several hosts as one: two processes on 127.0.0.1, launched with the documented
    variables (JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES, JAX_PROCESS_ID), each with one
    CPU device, end on the parameters of one process with two devices: the same data order
    (process p reads rows p*b/2:(p+1)*b/2 of each global batch), losses and evaluations."""
    base = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"} | {"JAX_PLATFORMS": "cpu"}
    steps = 20
    two, one = tmp_path / "two", tmp_path / "one"
    address = f"127.0.0.1:{free_port()}"
    hosts = []
    for process_id in range(2):
        env = base | {
            "JAX_COORDINATOR_ADDRESS": address,
            "JAX_NUM_PROCESSES": "2",
            "JAX_PROCESS_ID": str(process_id),
        }
        log = open(tmp_path / f"host{process_id}.log", "w")  # noqa: SIM115 - closed below
        command = train_command(synthetic_data, two, steps=steps)
        hosts.append((subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=log), log))
    single = subprocess.run(
        train_command(synthetic_data, one, steps=steps),
        cwd=ROOT,
        env=base | {"XLA_FLAGS": "--xla_force_host_platform_device_count=2"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    for process, log in hosts:
        process.wait(timeout=600)
        log.close()
    logs = [(tmp_path / f"host{i}.log").read_text() for i in range(2)]
    assert [p.returncode for p, _ in hosts] == [0, 0], logs[0][-2000:] + logs[1][-2000:]
    assert single.returncode == 0, single.stderr[-2000:]
    assert "2 cpu device(s) on 2 process(es)" in logs[0]
    assert "2 cpu device(s) on 1 process(es)" in single.stdout
    for use_ema in (False, True):
        ours, _, meta = load_params(str(two), use_ema=use_ema)
        theirs, _, their_meta = load_params(str(one), use_ema=use_ema)
        assert meta["step"] == their_meta["step"] == steps
        assert meta["data_position"] == their_meta["data_position"] == steps * 32
        for a, b in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs),
                        strict=True):  # fmt: skip
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=0, atol=1e-6)
    # Only process 0 writes the log; it holds the same losses and evaluations.
    records, single_records = metrics_log(two), metrics_log(one)
    assert [r["step"] for r in records] == [r["step"] for r in single_records]
    for record, expected in zip(records, single_records, strict=True):
        for key, value in expected.items():
            if isinstance(value, float):
                assert record[key] == pytest.approx(value, rel=1e-5, abs=1e-6), key
