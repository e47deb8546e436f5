"""Worker processes for the work that fans out over cores (self-play, the Lichess evaluation
import, building the board graphs of a large split): how many cores there are, and how a
worker starts.

Workers are started with "spawn": they inherit nothing from the parent, whose threads
(pyarrow's, a caller's) make "fork" unsafe; a program that runs such a job therefore needs the
usual `if __name__ == "__main__":` guard.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import signal
import threading

SPAWN = multiprocessing.get_context("spawn")


def usable_cores() -> int:
    """The cores this process may run on (its affinity, which containers and `taskset`
    narrow), not every core of the machine."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity on this platform
        return os.cpu_count() or 1


def worker_start() -> None:
    """A worker's first act (a pool's `initializer`, or called by one)."""
    # Ctrl-C reaches the whole process group: the parent stops the pool, the workers must not
    # each die with a traceback of their own.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # A worker holds both ends of its task queue, so it would wait for tasks forever after the
    # parent is killed: the parent's sentinel ends it instead.
    threading.Thread(target=_exit_with_parent, daemon=True).start()


def _exit_with_parent() -> None:
    parent = multiprocessing.parent_process()
    if parent is not None:
        multiprocessing.connection.wait([parent.sentinel])
        os._exit(1)
