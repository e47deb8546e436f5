"""How a long job's command ends when stopped by a signal: one line, and the exit code a shell
reports for that signal (130 for Ctrl-C, 143 for SIGTERM), never a traceback."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator


def exit_code(number: int) -> int:
    """128 + the signal's number, as shells report a process the signal ended."""
    return 128 + number


EXIT_INTERRUPTED = exit_code(signal.SIGINT)


def interrupted(message: str) -> int:
    """Prints `message` (what was kept, how to go on) on stderr; returns EXIT_INTERRUPTED."""
    print(message, file=sys.stderr, flush=True)
    return EXIT_INTERRUPTED


@contextlib.contextmanager
def sigint_deferred() -> Iterator[None]:
    """Holds Ctrl-C back while the block runs and acts on it (KeyboardInterrupt, or whatever
    SIGINT's handler does) as the block ends. For starting what an interrupt would leak
    half-made: python-chess's engine start leaves a non-daemon thread that keeps the process
    from ever exiting. (Swapping the handler, not masking the signal: a signal masked in the
    main thread is delivered to another thread and still interrupts the main one.)"""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda number, _frame: received.append(number))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if received and callable(previous):
            previous(signal.SIGINT, None)
        elif received and previous == signal.SIG_DFL:
            os.kill(os.getpid(), signal.SIGINT)
