"""TensorBoard event files of a run's scalars, when the `tensorboard` package is installed.

    pip install -e '.[tensorboard]'; tensorboard --logdir runs/

Only numbers that describe the learning are written (loss, accuracies, Kendall's tau,
learning rate, examples/s, epoch), each as `<kind>/<name>` against the step. The wall-clock
time of a record is not a scalar but each event's own time (TensorBoard's Relative and Wall
axes): the record's `time` where it has one, else the time it is written. metrics.jsonl is
not touched here, so its bytes (and exact resume) do not depend on the clock through this
module. The events are written with TensorBoard's own writer and protos, without TensorFlow.
"""

from __future__ import annotations

import os
import time
from typing import Any

try:
    from tensorboard.compat.proto.event_pb2 import Event, SessionLog
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter
except ImportError:  # the optional extra is not installed: metrics.jsonl only
    EventFileWriter = None

EVENTS_DIR = "tensorboard"  # in the run directory
NOT_SCALARS = frozenset({"step", "time"})  # the x axis, and a wall-clock timestamp


def available() -> bool:
    return EventFileWriter is not None


class ScalarEvents:
    """Appends a run's metrics records to `<run_dir>/tensorboard/events.out.tfevents.*`."""

    def __init__(self, run_dir: str, purge_step: int = 0):
        """`purge_step` > 0 (a resumed run): TensorBoard drops the events of earlier files
        at that step and after, the steps this run redoes, as metrics.jsonl is cut back."""
        if EventFileWriter is None:
            raise RuntimeError("the tensorboard package is not installed")
        self.directory = os.path.join(run_dir, EVENTS_DIR)
        os.makedirs(self.directory, exist_ok=True)
        self._writer = EventFileWriter(self.directory)
        if purge_step > 0:
            # A restart marker: TensorBoard's reader purges the events of steps >= this one
            # that were written before it (its purge_orphaned_data, on by default).
            start = SessionLog(status=SessionLog.START)
            self._writer.add_event(Event(wall_time=time.time(), step=purge_step, session_log=start))
            self._writer.flush()

    def write(self, record: dict[str, Any]) -> None:
        """One metrics.jsonl record (with `kind` and `step`): its numeric fields as scalars."""
        values = [
            Summary.Value(tag=f"{record['kind']}/{key}", simple_value=float(value))
            for key, value in record.items()
            if key not in NOT_SCALARS
            and isinstance(value, int | float)
            and not isinstance(value, bool)
        ]
        if values:
            wall_time = float(record.get("time") or time.time())
            event = Event(
                wall_time=wall_time, step=int(record["step"]), summary=Summary(value=values)
            )
            self._writer.add_event(event)
            self._writer.flush()

    def close(self) -> None:
        self._writer.close()
