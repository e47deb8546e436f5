"""A training stopped by the clock: for a machine lent for a fixed time (jobs/gpu_window.py).

`train(..., clock=WallClock.starting_now(seconds, save_every_s))` checkpoints at the first
step after each `save_every_s` seconds (so a run killed at any moment leaves a checkpoint at
most that old) and stops, with a checkpoint, at the first step past `seconds`, as
`--stop-after` does at a step. `on_save(step, state)`, if given, is called after every
checkpoint (to export the parameters, say). One process only: the processes of a multi-host
run would read their clocks at different steps and wait for each other's checkpoints forever.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class WallClock:
    stop_at: float  # time.monotonic() past which the training stops
    save_every_s: float | None = None  # checkpoint this often, besides checkpoint_every
    on_save: Callable[[int, Any], None] | None = None  # (step, the TrainState) after a save
    last_save: float = field(default_factory=time.monotonic)

    @classmethod
    def starting_now(
        cls,
        seconds: float,
        save_every_s: float | None = None,
        on_save: Callable[[int, Any], None] | None = None,
    ) -> WallClock:
        return cls(time.monotonic() + seconds, save_every_s, on_save)

    def stop_due(self) -> bool:
        return time.monotonic() >= self.stop_at

    def save_due(self) -> bool:
        return (
            self.save_every_s is not None and time.monotonic() - self.last_save >= self.save_every_s
        )

    def saved(self, step: int, state: Any) -> None:
        if self.on_save is not None:
            self.on_save(step, state)
        # After the hook: its own time does not eat into the next interval.
        self.last_save = time.monotonic()
