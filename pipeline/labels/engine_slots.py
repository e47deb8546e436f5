"""One engine per worker slot, kept across a runner's DoFn instances.

Beam's DaskRunner runs a DoFn's whole life (setup, process, teardown) once per partition, so
an engine started in `setup` and closed in `teardown` is started again for every partition a
worker runs: five partitions, five Stockfish starts on a worker slot that holds one engine at a
time. So `teardown` gives its annotator back here, idle, and the next `setup` in the process
with the same settings takes it: a slot (a thread that runs DoFns) keeps one engine for the
whole job, on every runner. Idle annotators of other settings are closed when one is given
back (a process runs one job's settings at a time), and all of them when the process exits or
`close_idle` is called (the DirectRunner's in-process runs, at the end of a job).
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Callable, Hashable
from typing import Any

_lock = threading.Lock()
_idle: list[tuple[Hashable, Any]] = []  # (settings, annotator), most recently returned last


def take(key: Hashable, make: Callable[[], Any]) -> Any:
    """An idle annotator made with settings `key`, or a new one from `make()`."""
    with _lock:
        for i in range(len(_idle) - 1, -1, -1):
            if _idle[i][0] == key:
                return _idle.pop(i)[1]
    return make()


def give_back(key: Hashable, annotator: Any) -> None:
    """Keeps `annotator` (idle: nothing in flight) for the next `take` of `key`; closes the
    idle ones of other settings."""
    with _lock:
        others = [a for k, a in _idle if k != key]
        _idle[:] = [(k, a) for k, a in _idle if k == key]
        _idle.append((key, annotator))
    for other in others:
        other.close()


def close_idle() -> None:
    """Closes every idle annotator (their engines end)."""
    with _lock:
        idle = [a for _, a in _idle]
        _idle.clear()
    for annotator in idle:
        annotator.close()


atexit.register(close_idle)
