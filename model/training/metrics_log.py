"""What training logs: metrics.jsonl (one JSON object per log or evaluation) and TensorBoard
event files of the same numbers (model/training/scalar_events.py), and the train record of each log
step."""

from __future__ import annotations

import json
import os
import time
from typing import Any

import jax
import numpy as np

from model.config import TrainConfig
from model.training import scalar_events
from model.training.scalar_events import ScalarEvents
from runtime.outputs import writing

METRICS_FILE = "metrics.jsonl"


class MetricsLog:
    """metrics.jsonl (and TensorBoard event files when the package is installed), written by
    process 0 only.

    Opened at `resume_step`, it first drops the records of later steps (written by a run that
    was interrupted after its last checkpoint and will be redone), so that a resumed run's log
    equals an uninterrupted one's; a line torn by a kill goes too.
    """

    def __init__(self, run_dir: str, enabled: bool, resume_step: int = 0):
        self.enabled = enabled
        self._evaluated: set[int] = set()
        self._file = self._events = None
        if not enabled:
            return
        path = self.path = os.path.join(run_dir, METRICS_FILE)
        kept = _records_up_to(path, resume_step)
        with writing(path + ".tmp"), open(path + ".tmp", "w") as f:
            f.writelines(json.dumps(record) + "\n" for record in kept)
        os.replace(path + ".tmp", path)
        self._evaluated = {r["step"] for r in kept if r.get("kind") == "eval"}
        self._file = open(path, "a")  # noqa: SIM115 - closed by close()
        if scalar_events.available():
            # Events of the steps a resumed run redoes are dropped, as in metrics.jsonl.
            self._events = ScalarEvents(run_dir, purge_step=resume_step + 1 if resume_step else 0)

    def has_eval(self, step: int) -> bool:
        return step in self._evaluated

    def write(self, record: dict[str, Any]) -> None:
        if not self.enabled:
            return
        with writing(self.path):
            self._file.write(json.dumps(record) + "\n")
            self._file.flush()
        if record.get("kind") == "eval":
            self._evaluated.add(record["step"])
        if self._events is not None:
            self._events.write(record)

    def close(self) -> None:
        if self._file:
            self._file.close()
        if self._events is not None:
            self._events.close()


def _records_up_to(path: str, step: int) -> list[dict[str, Any]]:
    if not os.path.exists(path):
        return []
    kept = []
    with open(path) as f:
        for line in f:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # the last line, cut short by a kill
            if record.get("step", 0) <= step:
                kept.append(record)
    return kept


def train_record(window, step, timer_step, timer_start, t: TrainConfig, lr) -> dict:
    """The record at `step`: the mean of each metric over `window`, the steps since the
    previous multiple of `log_every` (so it depends on the step alone, not on when the run
    was resumed), and the rate of the steps timed since `timer_step` (None when none was:
    the first step after a start is left out, as it includes the compilation)."""
    jax.block_until_ready(window[-1])  # steps run asynchronously: time them to completion
    seconds = time.perf_counter() - timer_start
    means = {k: float(np.mean([float(m[k]) for m in window])) for k in window[0]}
    timed = step - timer_step
    examples_per_s = timed * t.batch_size / max(seconds, 1e-9) if timed else None
    record = {
        "kind": "train",
        "step": step,
        **means,
        "learning_rate": float(lr(step - 1)),
        "examples_per_s": examples_per_s,
        "time": time.time(),
    }
    if "values_per_board" in means and examples_per_s is not None:
        # gateau: an example is a board with many labels
        record["values_per_s"] = examples_per_s * means["values_per_board"]
    return record
