"""The device check's steps (bench/device_check.py runs them): what each measures at which
sizes (`Plan`; `DRY_RUN` the toy one on CPU), and the functions that measure it: the device,
the train step and inference beside the reference, a short training run with its puzzles,
the step's profile, and the model tests in a child process."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclasses.dataclass(frozen=True)
class Plan:
    """What each step runs: the device's plan, or the dry run's toy one."""

    train_sizes: tuple[str, ...] = ("9M", "136M")
    optional_train_sizes: tuple[str, ...] = ("270M",)
    # Examples per step on one device: the paper's 4096 split over its many chips does not fit
    # one GPU for the larger shapes (the 136M's float32 activations alone would take ~250 GB
    # at 4096); these leave both sides room.
    train_batches: tuple[tuple[str, int], ...] = (("9M", 2048), ("136M", 512), ("270M", 256))
    train_steps: int = 10
    bench_boards: int = 8_000
    inference_size: str = "9M"
    inference_boards: int = 64
    inference_batch: int = 64
    model_size: str = "9M"
    model_batch: int = 1024
    model_seconds: float = 60.0  # the AV run's training time, from the measured step rate
    model_steps: tuple[int, int] = (300, 4000)  # the AV run's steps: at least, at most
    num_puzzles: int = 1000
    tests: tuple[str, ...] = ("-m", "not slow", "tests/model")
    tests_seconds: float = 120.0
    # (size, batch, variant) of each profiled step (bench/profile_step.py).
    profiles: tuple[tuple[str, int, str | None], ...] = (
        ("9M", 2048, None),
        ("9M", 2048, "cudnn_attention"),
        ("136M", 512, None),
        ("9M", 4096, None),
    )


DRY_RUN = Plan(
    train_sizes=("tiny",),
    optional_train_sizes=("small",),
    train_batches=(("tiny", 32), ("small", 32)),
    train_steps=2,
    bench_boards=300,
    inference_size="tiny",
    inference_boards=4,
    inference_batch=4,
    model_size="tiny",
    model_batch=32,
    model_seconds=5.0,
    model_steps=(20, 40),
    num_puzzles=10,
    tests=("tests/model/test_devices.py",),
    tests_seconds=120.0,
    profiles=(("tiny", 32, None), ("tiny", 32, "cudnn_attention")),
)


def describe_device() -> tuple[dict, dict]:
    import jax
    import jaxlib

    devices = jax.devices()
    device = devices[0]
    info = {
        "name": device.device_kind,
        "platform": device.platform,
        "count": len(devices),
        "processes": jax.process_count(),
    }
    try:
        stats = device.memory_stats() or {}
        if "bytes_limit" in stats:
            info["memory_gib"] = round(stats["bytes_limit"] / 2**30, 1)
    except Exception:  # memory_stats is not implemented on every platform
        pass
    versions = {"jax": jax.__version__, "jaxlib": jaxlib.__version__}
    try:
        from jax.extend import backend

        versions["platform_version"] = backend.get_backend().platform_version
    except Exception:  # the attribute moved between JAX releases; a nicety only
        pass
    return info, versions


def load_reference():
    from bench import oracle

    try:
        ref = oracle.load()
        return ref, None, {"commit": ref.commit, "placeholders": ref.placeholders}
    except oracle.OracleUnavailable as e:
        return None, str(e), {"absent": str(e)}


def train_step(plan: Plan, directory: str, size: str, ref, reason: str | None) -> dict:
    from bench.train_speed import bench_train_step

    batch = dict(plan.train_batches)[size]
    return bench_train_step(directory, size, plan.train_steps, None, ref, reason, batch_size=batch)


def inference(plan: Plan, ref, reason: str | None) -> dict:
    from bench.inference import measure

    result = measure(plan.inference_size, plan.inference_boards, plan.inference_batch, ref, reason)
    per_board_moves = result["mean_legal_moves"]
    theirs = [
        result[f"{name}_action_values_per_s"] / per_board_moves
        for name in ("reference", "reference_batch32")
        if f"{name}_action_values_per_s" in result
    ]
    result = {"size": plan.inference_size, "batch_boards": plan.inference_batch, **result}
    result["batched_boards_per_s"] = result.pop("batched_moves_per_s")
    if theirs:
        result["reference_boards_per_s"] = round(max(theirs), 2)
        result["batched_vs_reference"] = round(result["batched_boards_per_s"] / max(theirs), 2)
    return result


def model_steps(plan: Plan, train: dict) -> int:
    """The AV run's steps: what `model_seconds` buys at the step rate the train bench measured
    for this size (scaled to the run's batch, plus a third for the loader and logging)."""
    low, high = plan.model_steps
    measured = train.get(plan.model_size, {})
    if not measured.get("step_s"):
        return low
    step_s = measured["step_s"] * plan.model_batch / measured["batch_size"] * 4 / 3
    return int(min(high, max(low, plan.model_seconds / step_s)) // 100 * 100) or low


def train_and_solve(
    plan: Plan, data: str, puzzles_path: str, target: str, steps: int, work: Path
) -> dict:
    """Trains the model on `data` for `steps` steps, then plays the puzzles with its EMA
    parameters beside random and greedy."""
    from core.eval_sets import read_puzzles
    from eval.agents.players import GreedyAgent, NeuralAgent, RandomAgent
    from eval.puzzles import evaluate
    from model import config as config_lib
    from model.training.train import train

    config = config_lib.from_dict(
        {
            "model": {"size": plan.model_size},
            "train": {
                "target": target,
                "batch_size": plan.model_batch,
                "num_steps": steps,
                "learning_rate": 5e-4,
                "lr_schedule": "cosine",
                "warmup_steps": min(200, steps // 5),
                "final_lr_ratio": 0.1,
                "log_every": max(1, steps // 10),
                "checkpoint_every": steps,
                "eval_every": 0,
            },
            "data": {"train": data, "test": ""},
        }
    )
    run_dir = work / f"run-{target}"
    lines: list[str] = []
    start = time.monotonic()
    train(config, str(run_dir), log=lines.append)
    seconds = time.monotonic() - start
    records = [json.loads(line) for line in open(run_dir / "metrics.jsonl")]
    rates = [r["examples_per_s"] for r in records if r.get("examples_per_s")]
    puzzles, _ = read_puzzles(puzzles_path, plan.num_puzzles)
    agents = [NeuralAgent.from_checkpoint(str(run_dir), name=f"{plan.model_size}-{target}")]
    agents += [GreedyAgent(), RandomAgent(seed=0)]
    solved = {}
    for agent in agents:
        outcome = evaluate(agent, puzzles, show_progress=False)
        solved[agent.name] = {k: outcome[k] for k in ("solved", "total", "accuracy", "seconds")}
    data_line = next((line for line in lines if line.startswith("data:")), "")
    return {
        "size": plan.model_size,
        "target": target,
        "steps": steps,
        "batch_size": plan.model_batch,
        "examples": steps * plan.model_batch,
        "epochs": records[-1].get("epoch"),
        "data": data_line,
        "final_loss": records[-1]["loss"],
        "final_accuracy": records[-1]["accuracy"],
        "examples_per_s": round(sum(rates) / len(rates), 1) if rates else None,
        "train_seconds": round(seconds, 1),
        "puzzles": {"file": os.path.basename(puzzles_path), **solved},
        "log": lines,
    }


def profile(size: str, batch: int, variant: str | None, out: Path) -> dict:
    from bench.profile_step import profile_train_step

    result = profile_train_step(size, batch, variant=variant, out=str(out / "profiles"))
    result["trace"]["top"] = result["trace"]["top"][:8]  # the rest is in out/profiles
    return result


class TestRun:
    """pytest over `plan.tests` in a child process started now, beside the steps that follow
    (the device's memory is grown on demand in both, not preallocated); `finish` reads its -v
    lines, so that a run cut off still counts."""

    def __init__(self, plan: Plan, out: Path):
        self.plan, self.log = plan, out / "device-tests.log"
        env = {**os.environ, "XLA_PYTHON_CLIENT_PREALLOCATE": "false", "PYTHONUNBUFFERED": "1"}
        command = [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", *plan.tests]
        self.started = time.monotonic()
        with open(self.log, "w") as f:
            self.process = subprocess.Popen(
                command, cwd=ROOT, env=env, stdout=f, stderr=subprocess.STDOUT
            )

    def finish(self, wait_s: float) -> dict:
        timed_out = False
        try:
            self.process.wait(timeout=max(wait_s, 1.0))
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            timed_out = True
        result = parse_test_log(self.plan, self.log, timed_out)
        result["seconds"] = round(time.monotonic() - self.started, 1)
        return result


def parse_test_log(plan: Plan, log: Path, timed_out: bool) -> dict:
    outcomes: dict[str, str] = {}
    for line in log.read_text().splitlines():
        match = re.match(r"^(tests/\S+::\S+) (PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS)", line)
        if match:
            outcomes[match.group(1)] = match.group(2)
    counts: dict[str, int] = {}
    for outcome in outcomes.values():
        counts[outcome.lower()] = counts.get(outcome.lower(), 0) + 1
    return {
        "paths": list(plan.tests),
        **counts,
        "failures": sorted(t for t, o in outcomes.items() if o in ("FAILED", "ERROR")),
        "timed_out": timed_out,
        "summary": next(
            (line.strip("= ") for line in reversed(log.read_text().splitlines()) if " in " in line),
            "",
        ),
    }
