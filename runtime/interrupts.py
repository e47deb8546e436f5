"""Ctrl-C and SIGTERM for long-running commands: save what can be saved, one line, exit 128+N.

Commands with a safe point of their own between steps (training, evaluation, downloads)
catch the KeyboardInterrupt there and end with `interrupted`; Beam jobs cannot.

A KeyboardInterrupt is no way to stop a Beam job: Beam catches it inside the DoFn that was
running, logs it as a failed bundle with its traceback and raises something else, and the
threads and processes it started go on printing their own tracebacks as they lose their
runner. So within `stop_on_signals` a SIGINT or SIGTERM wakes one thread of its own (through
`signal.set_wakeup_fd`, whichever thread the kernel delivered it to), which calls the
command's `on_stop` (save what can be saved; it returns the line to print), kills the
process's descendants (Beam's worker processes, engines), prints the line and ends the
process with 128 + the signal number (130 for SIGINT, 143 for SIGTERM), without unwinding
through Beam. What the command left on disk is then what a SIGKILL would have left plus what
`on_stop` saved: commands that resume after a kill resume after this too.

SIGINT stays blocked in the calling thread meanwhile, so the threads it starts and the
processes they start inherit it blocked: an engine run by this process does not die of a
terminal's Ctrl-C before it is stopped. Beam's multi-processing workers are started through
`/bin/sh`, which unblocks it, so they do get a terminal's Ctrl-C and start printing their
tracebacks; to keep those off the terminal, the block's stderr (file descriptor 2, which
child processes inherit) is a pipe that the same thread relays to the real stderr, falling
silent at the signal. The relay can also drop lines (`keep_line`), which is how Beam's
worker processes' start-up chatter is kept off the terminal (pipeline/beam/environment.py).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import threading
from collections.abc import Callable, Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM)
RELAY_GRACE_S = 0.25  # how late a signal's wakeup byte may come after its children's output


def exit_code(signum: int) -> int:
    """128 + the signal's number, as shells report a process the signal ended."""
    return 128 + signum


EXIT_INTERRUPTED = exit_code(signal.SIGINT)


def interrupted(message: str) -> int:
    """For commands that stop at a safe point of their own (a KeyboardInterrupt caught
    between steps): prints `message` (what was kept, how to go on) on stderr; returns
    EXIT_INTERRUPTED."""
    print(message, file=sys.stderr, flush=True)
    return EXIT_INTERRUPTED


@contextlib.contextmanager
def sigint_exits(message: str) -> Iterator[None]:
    """Within the block, Ctrl-C prints `message` and ends the process with EXIT_INTERRUPTED at
    once. For blocks with nothing to save whose KeyboardInterrupt would not come out clean:
    importing JAX, a Ctrl-C that lands while a C extension initialises becomes an ImportError
    (with a 40-line traceback), and one inside a garbage-collector callback is printed as
    "Exception ignored" and then lost. In the main thread only; elsewhere it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(_signum: int, _frame: object) -> None:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        _write_all(sys.stderr.fileno(), f"{message}\n".encode())
        os._exit(EXIT_INTERRUPTED)

    previous = signal.signal(signal.SIGINT, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


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


class StopRequests:
    """Within the block, SIGTERM and SIGINT ask a loop with a safe point of its own (training)
    to stop there: `signal` is the first one received, None before. A second SIGINT interrupts
    at once (KeyboardInterrupt, or whatever SIGINT's handler was). A signal ignored when the
    block starts (SIGINT under nohup) stays ignored. In the main thread only; elsewhere the
    block changes nothing."""

    def __init__(self) -> None:
        self.received: list[int] = []
        self._previous: dict[int, object] = {}

    @property
    def signal(self) -> int | None:
        return self.received[0] if self.received else None

    def _request(self, number: int, _frame: object) -> None:
        self.received.append(number)
        if number == signal.SIGINT:  # a second Ctrl-C interrupts at once
            signal.signal(signal.SIGINT, self._previous[signal.SIGINT])

    def __enter__(self) -> StopRequests:
        if threading.current_thread() is threading.main_thread():
            for number in SIGNALS:
                if signal.getsignal(number) != signal.SIG_IGN:
                    self._previous[number] = signal.signal(number, self._request)
        return self

    def __exit__(self, *exc: object) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)


def descendants(pid: int) -> list[int]:
    """The processes below `pid` (children first), from /proc; empty where there is none."""
    parents: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:  # the process ended while we looked
            continue
        # The command name may hold spaces and parentheses: the fields follow its last ")".
        ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
        parents.setdefault(ppid, []).append(int(entry))
    found, frontier = [], [pid]
    while frontier:
        children = [c for p in frontier for c in parents.get(p, [])]
        found += children
        frontier = children
    return found


def _kill_descendants() -> None:
    for pid in descendants(os.getpid()):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data) :]


class _Watch:
    """One thread that relays fd 2 (made a pipe) to the real stderr and watches the wakeup
    pipe of `signal.set_wakeup_fd`; at a signal it calls `stop` and relays nothing more.

    Output is relayed only after checking that no signal came first, or within RELAY_GRACE_S
    after it was read: a child's reaction to a terminal's Ctrl-C is written after the kernel
    took the same Ctrl-C for this process, though not always after this process ran its handler.
    """

    def __init__(
        self, stop: Callable[[int], None], keep_line: Callable[[bytes], bool] | None = None
    ) -> None:
        self._stop = stop
        self._keep_line = keep_line
        self._pending = b""  # the start of a line not yet complete, when filtering lines
        sys.stderr.flush()
        self.real_stderr = os.dup(2)
        self._output, write = os.pipe()
        os.dup2(write, 2)
        os.close(write)
        self._wake, self.wake_write = os.pipe()
        os.set_blocking(self.wake_write, False)
        # A daemon, so that a child still holding the pipe after the block cannot keep this
        # process alive; until it lets go, its last words are still relayed.
        self._thread = threading.Thread(target=self._run, name="stop-on-signals", daemon=True)
        self._thread.start()

    def _check_wakeup(self) -> None:
        """Reads a waiting wakeup byte, if any: a signal's calls `stop` (which does not
        return); the end of the pipe (the block was left) leaves only relaying to do."""
        if self._wake < 0 or not select.select([self._wake], [], [], 0)[0]:
            return
        data = os.read(self._wake, 1)
        if not data:
            os.close(self._wake)
            self._wake = -1
        elif data[0] in SIGNALS:
            self._stop(data[0])

    def _await_a_late_signal(self) -> None:
        """Holds a chunk back for RELAY_GRACE_S while the block runs. The kernel may hand a
        terminal's Ctrl-C to another thread of this process, whose C-level handler writes
        the wakeup byte only once that thread runs: on two busy cores a child's traceback can
        reach this thread first."""
        if self._wake >= 0:
            select.select([self._wake], [], [], RELAY_GRACE_S)
        self._check_wakeup()

    def _run(self) -> None:
        while True:
            select.select([self._output] + ([self._wake] if self._wake >= 0 else []), [], [])
            self._check_wakeup()
            if not select.select([self._output], [], [], 0)[0]:
                continue
            chunk = os.read(self._output, 1 << 16)
            if not chunk:
                break
            self._await_a_late_signal()  # output that came after a signal is its doing
            _write_all(self.real_stderr, self._filtered(chunk))
        if self._pending and self._keep_line(self._pending):  # a last line without "\n"
            _write_all(self.real_stderr, self._pending)
        os.close(self._output)

    def _filtered(self, chunk: bytes) -> bytes:
        """`chunk` without the lines `keep_line` refuses; a line is held until it is whole."""
        if self._keep_line is None:
            return chunk
        lines = (self._pending + chunk).split(b"\n")
        self._pending = lines.pop()
        return b"".join(line + b"\n" for line in lines if self._keep_line(line))

    def close(self) -> None:
        """Gives fd 2 back to the real stderr once what was written to it is relayed."""
        os.close(self.wake_write)
        sys.stderr.flush()
        os.dup2(self.real_stderr, 2)
        self._thread.join(timeout=1.0)
        if not self._thread.is_alive():
            os.close(self.real_stderr)


@contextlib.contextmanager
def stop_on_signals(
    on_stop: Callable[[int], str], keep_line: Callable[[bytes], bool] | None = None
) -> Iterator[None]:
    """Within the block, SIGINT/SIGTERM end the process as the module doc describes.

    `on_stop(signum)` runs once, in a thread of its own while the command's threads go on;
    it returns the line to print on stderr. `keep_line(line)`, if given, decides which lines
    written to stderr (by this process or its children) reach it. Outside the main thread
    this does nothing (the signals are the main thread's to handle).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    once = threading.Lock()

    def stop(signum: int) -> None:
        if not once.acquire(blocking=False):
            return  # already stopping
        try:
            line = on_stop(signum)
        except Exception as e:  # noqa: BLE001 - the stop must happen even if saving failed
            line = f"stopped by signal {signum}; saving what was done failed: {e}"
        _kill_descendants()
        _write_all(watch.real_stderr, f"{line}\n".encode())
        os._exit(exit_code(signum))

    watch = _Watch(stop, keep_line)
    # The Python-level handlers make the C-level one write the wakeup byte; if the main
    # thread gets to run them first, they stop the same way.
    previous = {s: signal.signal(s, lambda signum, frame: stop(signum)) for s in SIGNALS}
    previous_wakeup = signal.set_wakeup_fd(watch.wake_write, warn_on_full_buffer=False)
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.set_wakeup_fd(previous_wakeup)
        # The handlers first: a signal still pending goes to them, as it would outside.
        for s, handler in previous.items():
            signal.signal(s, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        watch.close()
