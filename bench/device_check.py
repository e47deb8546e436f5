"""The device check: the trainer, inference and a short training run on one accelerator,
measured against the paper's own code on the same device, in one JSON file.

    make device-check                                    # python -m bench.device_check
    python -m bench.device_check --dry-run --out /tmp/c  # every step on CPU at toy sizes

Writes `<out>/<device>.json` (out: results/device; a later run on the same kind of device
replaces it, its history is in git and CHANGELOG.md), rewritten after every step, so that a
run cut short keeps what it measured. Its keys:

- `date`: the day (UTC) the run started;
- `device` (name, platform, count, memory) and `jax` (versions);
- `train`: per shape (9M and 136M; 270M when the budget leaves time), the train step at a
  batch that fits one device (`Plan.train_batches`) in the default dtype (bfloat16 on an
  accelerator): `examples_per_s`,
  `step_ms`, `mfu` (model FLOPs, model/devices.py, over the device's dense bf16 peak) and
  `vs_reference`: the same batches through the reference's `update_parameters` (float32,
  as published) on the same device in turns (bench/train_speed.py);
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
import datetime
import json
import os
import re
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from bench.device_steps import (
    DRY_RUN,
    ROOT,
    Plan,
    TestRun,
    describe_device,
    inference,
    load_reference,
    model_steps,
    profile,
    train_and_solve,
    train_step,
)

DEFAULT_PUZZLES = ROOT.parent / "shared" / "data" / "puzzles"
PUZZLES_FILE = "lichess_puzzles_10k_fen_moves_rating__jorgenwh_alpha-nonzero.csv"
SAMPLE_PUZZLES = ROOT / "data" / "sample" / "puzzles.csv"
# Rough cost of each optional step on an H100/H200 (compilation included), to decide whether
# it fits in what is left of the budget.
OPTIONAL_SECONDS = {"270M": 100.0, "model_bc": 120.0}


class Report:
    """The JSON document, rewritten to its file after every change."""

    def __init__(self, directory: Path):
        self.directory = directory
        today = datetime.datetime.now(datetime.UTC).date().isoformat()
        self.data: dict = {"date": today, "errors": {}, "budget": {"seconds": {}, "left_out": []}}
        self.path = directory / "device-check.json"  # until the device is known

    def name_after(self, device_kind: str) -> None:
        slug = re.sub(r"[^a-z0-9]+", "-", device_kind.lower()).strip("-") or "device"
        self.path = self.directory / f"{slug}.json"

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


# --- the run -----------------------------------------------------------------------------


class NoAccelerator(RuntimeError):
    """The check was asked of a machine whose JAX sees only the CPU; the message says what
    to run instead."""


def require_accelerator() -> None:
    """NoAccelerator unless JAX's default backend is a GPU or TPU: the full check's sizes
    would take the CPU many minutes and its JSON would pass a CPU for the device."""
    import jax

    if jax.default_backend() == "cpu":
        raise NoAccelerator(
            "no accelerator here (JAX sees only the CPU): the device check measures a GPU or "
            "TPU; `make device-check ARGS=--dry-run` runs every step on CPU at toy sizes"
        )


def check(args: argparse.Namespace) -> Path:
    plan = DRY_RUN if args.dry_run else Plan()
    if args.dry_run:
        os.environ["JAX_PLATFORMS"] = "cpu"  # before JAX is imported, so it never sees a GPU
    else:
        # Memory grown on demand, so that the tests' child process finds some left.
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        require_accelerator()  # before anything is written
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
        from bench.train_speed import write_bench_shards

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
    except NoAccelerator as e:
        print(f"device check: {e}", file=sys.stderr)
        return 2
    print(f"wrote {path}")
    return 1 if json.loads(Path(path).read_text())["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
