"""The device check: the trainer, inference and a short training run on one accelerator,
measured against the paper's own code on the same device, in one JSON file.

    make device-check                                    # python -m bench.device_check
    python -m bench.device_check --dry-run --out /tmp/c  # every step on CPU at toy sizes

Writes `<out>/<date>-<device>.json` (out: results/device), rewritten after every step, so
that a run cut short keeps what it measured. Its keys:

- `device` (name, platform, count, memory) and `jax` (versions);
- `train`: per shape (9M and 136M; 270M when the budget leaves time), the train step at a
  batch that fits one device (`Plan.train_batches`) in the default dtype (bfloat16 on an
  accelerator): `examples_per_s`,
  `step_ms`, `mfu` (model FLOPs, model/devices.py, over the device's dense bf16 peak) and
  `vs_reference`: the same batches through the reference's `update_parameters` (float32,
  as published) on the same device in turns (bench/train.py);
- `inference`: the 9M's AV move choice on the same boards as the reference's
  ActionValueEngine (bench/inference.py): `batched_boards_per_s` (this project's boards
  `--inference-batch` at a time) and `batched_vs_reference` (over their engine's best
  setting, one board at a time with their batch of 1 or 32 rows);
- `model`: a short run of the paper's 9M transformer (AV) on annotated Parquet (`--data`),
  then its puzzle accuracy on the first `--num-puzzles` puzzles beside `random` and the
  one-ply material `greedy`; `model_bc`: the same run as behavioural cloning at equal steps,
  when the budget leaves time;
- `profile`: where the step's time goes (bench/profile_step.py), per (size, batch, variant):
  XLA's FLOPs and bytes against the device's roofline, and a profiler trace of a few steps
  summed by kernel category (the traces and optimised HLO land in `<out>/profiles`);
- `tests`: `pytest tests/model` on the device (passed, failed, skipped, the failures), run
  beside the model runs;
- `errors`: the exception of each step that failed (the other steps still run);
- `budget`: the seconds each step took, and the steps left out for lack of time.

Where ../shared/reference is absent the `vs_reference` figures say why they are missing
(SEARCHLESS_REFERENCE points elsewhere). Nothing here writes outside `--out` but a temporary
directory.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PUZZLES = ROOT.parent / "shared" / "data" / "puzzles"
PUZZLES_FILE = "lichess_puzzles_10k_fen_moves_rating__jorgenwh_alpha-nonzero.csv"
SAMPLE_PUZZLES = ROOT / "data" / "sample" / "puzzles.csv"


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

# Rough cost of each optional step on an H100/H200 (compilation included), to decide whether
# it fits in what is left of the budget.
OPTIONAL_SECONDS = {"270M": 100.0, "model_bc": 120.0}


class Report:
    """The JSON document, rewritten to its file after every change."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.data: dict = {"errors": {}, "budget": {"seconds": {}, "left_out": []}}
        self.path = directory / "device-check.json"  # until the device is known

    def name_after(self, device_kind: str) -> None:
        slug = re.sub(r"[^a-z0-9]+", "-", device_kind.lower()).strip("-") or "device"
        today = datetime.datetime.now(datetime.UTC).date().isoformat()
        self.path = self.directory / f"{today}-{slug}.json"

    def write(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(json.dumps(self.data, indent=1) + "\n")
        temporary.replace(self.path)


class Steps:
    """Runs named steps against a deadline; a step's exception is recorded, not raised."""

    def __init__(self, report: Report, budget_s: float, only: set[str] | None = None):
        self.report = report
        self.deadline = time.monotonic() + budget_s
        self.only = only

    def selected(self, name: str) -> bool:
        """Whether `--only` leaves step `name` in (`train` selects every `train_<size>`)."""
        if not self.only or name == "device":
            return True
        return any(name == o or name.startswith(o + "_") for o in self.only)

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def run(self, name: str, step: Callable[[], object], needs_s: float = 0.0) -> object:
        if not self.selected(name):
            return None
        if needs_s and self.left() < needs_s:
            self.report.data["budget"]["left_out"].append(
                f"{name}: needs ~{needs_s:.0f}s, {max(self.left(), 0):.0f}s left"
            )
            self.report.write()
            print(f"[device-check] {name}: left out (time)", flush=True)
            return None
        print(f"[device-check] {name} ...", flush=True)
        start = time.monotonic()
        try:
            return step()
        except Exception as e:  # one step's failure must not cost the others' figures
            self.report.data["errors"][name] = "".join(
                traceback.format_exception_only(type(e), e)
            ).strip()
            self.report.data["errors"][name + "_traceback"] = traceback.format_exc()[-3000:]
            print(f"[device-check] {name} failed: {e!r}", flush=True)
            return None
        finally:
            seconds = round(time.monotonic() - start, 1)
            self.report.data["budget"]["seconds"][name] = seconds
            self.report.write()
            print(f"[device-check] {name}: {seconds}s", flush=True)


# --- the steps ---------------------------------------------------------------------------


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
    from bench.train import bench_train_step

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
    from eval.engines import GreedyAgent, NeuralAgent, RandomAgent
    from eval.puzzles import evaluate
    from model import config as config_lib
    from model.train import train

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


# --- the run -----------------------------------------------------------------------------


def check(args: argparse.Namespace) -> Path:
    plan = DRY_RUN if args.dry_run else Plan()
    if args.dry_run:
        os.environ["JAX_PLATFORMS"] = "cpu"  # before JAX is imported, so it never sees a GPU
    else:
        # Memory grown on demand, so that the tests' child process finds some left.
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    out = Path(args.out)
    report = Report(out)
    report.write()  # the output is writable before any work starts
    steps = Steps(report, args.budget_s, set(args.only.split(",")) if args.only else None)
    data = report.data
    data["dry_run"] = args.dry_run
    data["command"] = " ".join(["python -m bench.device_check", *sys.argv[1:]])
    data["only"] = args.only
    info = steps.run("device", describe_device)
    if info:
        data["device"], data["jax"] = info
        first = report.path
        report.name_after(data["device"]["name"] if not args.dry_run else "dry-run-cpu")
        first.unlink()
    ref, reason, data["reference"] = load_reference()

    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        bench_data = work / "bench"
        from bench.train import write_bench_shards

        write_bench_shards(str(bench_data), plan.bench_boards)
        data["train"] = {}
        for size in plan.train_sizes:
            result = steps.run(
                f"train_{size}", lambda s=size: train_step(plan, str(bench_data), s, ref, reason)
            )
            if result:
                data["train"][size] = result
        data["inference"] = steps.run("inference", lambda: inference(plan, ref, reason))
        model_data = args.data or str(bench_data)
        puzzles = args.puzzles
        if not puzzles:
            shared = DEFAULT_PUZZLES / PUZZLES_FILE
            puzzles = str(shared if shared.exists() else SAMPLE_PUZZLES)
        data["profile"] = {}
        for size, batch, variant in plan.profiles:
            key = f"{size}_{batch}" + (f"_{variant}" if variant else "")
            result = steps.run(
                f"profile_{key}",
                lambda s=size, b=batch, v=variant: profile(s, b, v, out),
                needs_s=0 if args.dry_run else 20.0,
            )
            if result:
                data["profile"][key] = result
        # The tests run beside the model runs: their compilations are the device machine's
        # CPUs' work, and their device use slows the runs' steps a little (said in the JSON).
        tests = TestRun(plan, out) if steps.selected("tests") else None
        av_steps = args.model_steps or model_steps(plan, data["train"])
        data["model"] = steps.run(
            "model", lambda: train_and_solve(plan, model_data, puzzles, "av", av_steps, work)
        )
        data["model_bc"] = steps.run(
            "model_bc",
            lambda: train_and_solve(plan, model_data, puzzles, "bc", av_steps, work),
            needs_s=0 if args.dry_run else OPTIONAL_SECONDS["model_bc"],
        )
        if tests:
            left = plan.tests_seconds - (time.monotonic() - tests.started)
            # ...leaving the optional shapes that follow their time.
            later = sum(
                OPTIONAL_SECONDS.get(size, 120.0)
                for size in plan.optional_train_sizes
                if steps.selected(f"train_{size}") and not args.dry_run
            )
            wait = max(10.0, min(left, steps.left() - 10 - later))
            data["tests"] = steps.run("tests", lambda: tests.finish(wait))
            for key in ("model", "model_bc"):
                if data[key]:
                    data[key]["beside_tests"] = True
        for size in plan.optional_train_sizes:
            result = steps.run(
                f"train_{size}",
                lambda s=size: train_step(plan, str(bench_data), s, ref, reason),
                needs_s=0 if args.dry_run else OPTIONAL_SECONDS.get(size, 120.0),
            )
            if result:
                data["train"][size] = result
    report.write()
    print(summary(data), flush=True)
    return report.path


def summary(data: dict) -> str:
    """The figures that matter, a line each."""
    lines = [f"device: {data.get('device')}", f"jax: {data.get('jax')}"]
    for size, r in data.get("train", {}).items():
        lines.append(
            f"train {size}: {r.get('examples_per_s')} ex/s, {r.get('step_ms')} ms/step, "
            f"MFU {r.get('mfu')}, vs reference {r.get('vs_reference')}"
        )
    for key, r in (data.get("profile") or {}).items():
        cost, trace = r["cost"], r["trace"]
        lines.append(
            f"profile {key}: {r['step_ms']} ms/step, device busy {trace['busy_ms']} ms, "
            f"{trace['kernels_per_step']} kernels, {cost.get('bound')}-bound "
            f"(compute {cost.get('compute_ms')} ms, memory {cost.get('memory_ms')} ms), "
            f"{trace['categories_share']}"
        )
    inference = data.get("inference") or {}
    lines.append(
        f"inference {inference.get('size')}: {inference.get('batched_boards_per_s')} boards/s "
        f"batched, vs reference {inference.get('batched_vs_reference')}"
    )
    for key in ("model", "model_bc"):
        model = data.get(key) or {}
        solved = {k: v["accuracy"] for k, v in model.get("puzzles", {}).items() if k != "file"}
        lines.append(f"{key}: {model.get('steps')} steps, loss {model.get('final_loss')}, {solved}")
    tests = data.get("tests") or {}
    lines.append(f"tests: {tests.get('summary')} failures {tests.get('failures')}")
    lines.append(f"errors: {[k for k in data['errors'] if not k.endswith('_traceback')]}")
    lines.append(f"left out: {data['budget']['left_out']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.device_check", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--out", default=str(ROOT / "results" / "device"), help="JSON folder")
    parser.add_argument("--dry-run", action="store_true", help="every step on CPU, toy sizes")
    parser.add_argument("--budget-s", type=float, default=420.0, help="seconds for all steps")
    parser.add_argument("--data", help="annotated train shards for the model step")
    parser.add_argument("--puzzles", help=f"puzzle CSV (default: ../shared's {PUZZLES_FILE})")
    parser.add_argument(
        "--only",
        help="comma list of steps to run (train, profile, inference, model, tests, model_bc)",
    )
    parser.add_argument(
        "--model-steps", type=int, help="steps of the AV and BC runs (default: from the budget)"
    )
    args = parser.parse_args(argv)
    try:
        path = check(args)
    except OSError as e:  # an unwritable --out, said before any work
        print(f"device check: {e}", file=sys.stderr)
        return 1
    print(f"wrote {path}")
    return 1 if json.loads(Path(path).read_text())["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
