"""The UCI `Threads` option: how many CPU threads the model's runtime (XLA) computes with.

XLA sizes its thread pools once, when its CPU backend starts, to the number of CPUs the
starting thread may run on. So the engine starts the backend with its own CPU set narrowed
to `Threads` CPUs, and then gives every thread of the process the full set back: the pools
have `Threads` threads and the operating system still places them on any CPU, which matters
when several engines share a machine. A change after the backend started cannot resize the
pools; the engine says so. Where the OS has no per-thread CPU sets (not Linux), the option is
accepted and ignored.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

_TASKS = "/proc/self/task"


def supported() -> bool:
    return hasattr(os, "sched_setaffinity") and os.path.isdir(_TASKS)


def available_cpus() -> int:
    """The CPUs this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def effective_threads(requested: int) -> int:
    """The threads `Threads requested` gives: 0 means every available CPU, and no more
    threads than CPUs."""
    cpus = available_cpus()
    return cpus if requested <= 0 else min(requested, cpus)


@contextlib.contextmanager
def thread_pools_of(threads: int) -> Iterator[None]:
    """Thread pools made inside the block (e.g. XLA's, at its first computation) get
    `threads` threads (0 = every CPU); afterwards every thread may run on every CPU again."""
    if not supported() or effective_threads(threads) >= available_cpus():
        yield
        return
    full = os.sched_getaffinity(0)
    os.sched_setaffinity(0, set(sorted(full)[: effective_threads(threads)]))
    try:
        yield
    finally:
        for tid in os.listdir(_TASKS):
            with contextlib.suppress(OSError):  # a thread that ended meanwhile
                os.sched_setaffinity(int(tid), full)
