"""TensorBoard event files of the trainer's scalars (model/training/scalar_events.py), read back
with TensorBoard's own reader."""

from __future__ import annotations

import time

import pytest

from model.training.scalar_events import ScalarEvents

event_accumulator = pytest.importorskip(
    "tensorboard.backend.event_processing.event_accumulator",
    reason="the tensorboard extra is not installed",
)


def scalars(run_dir) -> dict[str, list[tuple[int, float]]]:
    events = event_accumulator.EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()
    return {
        tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]
    }


def test_a_resumed_run_replaces_the_events_of_the_steps_it_redoes(tmp_path):
    first = ScalarEvents(str(tmp_path))
    for step in (2, 4, 6):  # killed after step 6, its last checkpoint at step 4
        first.write({"kind": "train", "step": step, "loss": float(step), "time": 1e9})
    first.close()
    time.sleep(1.1)  # event files are ordered by the second they were opened in
    resumed = ScalarEvents(str(tmp_path), purge_step=5)
    resumed.write({"kind": "train", "step": 6, "loss": 60.0, "ok": True})
    resumed.close()
    # Step 6 once, as the resumed run logged it; no wall-clock time or flag as a scalar.
    assert scalars(tmp_path) == {"train/loss": [(2, 2.0), (4, 4.0), (6, 60.0)]}


def test_events_carry_real_wall_times(tmp_path):
    events = ScalarEvents(str(tmp_path))
    before = time.time()
    events.write({"kind": "train", "step": 1, "loss": 1.0, "time": 1_700_000_000.5})
    events.write({"kind": "eval", "step": 2, "test_loss": 2.0})  # no time: when written
    after = time.time()
    events.close()
    accumulator = event_accumulator.EventAccumulator(str(tmp_path / "tensorboard"))
    accumulator.Reload()
    [train] = accumulator.Scalars("train/loss")
    [evaluation] = accumulator.Scalars("eval/test_loss")
    # The record's own time (what metrics.jsonl holds) where it has one; seconds, as doubles.
    assert train.wall_time == pytest.approx(1_700_000_000.5, abs=1e-6)
    assert before <= evaluation.wall_time <= after
