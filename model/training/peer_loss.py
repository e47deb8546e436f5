"""A multi-process training whose peer dies: one line naming the lost process, not an abort.

When a process of a multi-process run dies (killed, crashed, preempted), the others block in
the step's collectives until JAX's coordination service misses its heartbeats (100 s) and
aborts them (exit 134) with a C++ stack trace beside Orbax's failed barrier, some hundred lines.
JAX's client takes a callback for that moment, but jaxlib cannot hand it its argument (it
terminates the process itself), so the processes watch each other instead: each bumps a
counter in the coordination service's key-value store every `BEAT_SECONDS`, and a process whose
peer's counter has not moved for `SEARCHLESS_PEER_TIMEOUT` seconds (default 20, well inside
JAX's 100) prints one line naming it, with the checkpoint the same command resumes from, and
ends with `EXIT_PEER_LOST` at once: the collectives it is blocked in can never complete. When
the store itself stops answering, the lost process is the coordinator (process 0). The
checkpoint being written at that moment is incomplete and is set aside by the resume
(model/training/run_dir.py), which continues from the last whole one.

A process that finishes normally says so (`finished`) before it stops beating, so the others
do not take its exit for a loss.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable

from model.config import ConfigError

EXIT_PEER_LOST = 3
TIMEOUT_ENV = "SEARCHLESS_PEER_TIMEOUT"
DEFAULT_TIMEOUT_SECONDS = 20.0
BEAT_SECONDS = 1.0
_PREFIX = "searchless_chess/peer"


def peer_timeout() -> float:
    """Seconds a silent peer is waited for (`SEARCHLESS_PEER_TIMEOUT`); ConfigError if bad."""
    text = os.environ.get(TIMEOUT_ENV, "")
    try:
        value = float(text) if text else DEFAULT_TIMEOUT_SECONDS
    except ValueError:
        raise ConfigError(f"{TIMEOUT_ENV}={text!r} is not a number of seconds") from None
    if not value >= 2 * BEAT_SECONDS:
        raise ConfigError(f"{TIMEOUT_ENV} must be >= {2 * BEAT_SECONDS:g} seconds, got {text}")
    return value


def peer_lost_line(lost: list[int], process: int, count: int, silent: float, resume: str) -> str:
    """The one line for lost peers, seen from process `process` of `count`."""
    if lost == [0] and process != 0:
        what = f"training process 0 of {count} (the coordinator) stopped answering"
    else:
        names = ", ".join(str(p) for p in lost)
        plural = "es" if len(lost) > 1 else ""
        what = f"training process{plural} {names} of {count} stopped answering"
    return (
        f"error: {what} for {silent:.0f} s (killed or crashed); process {process} stops too: "
        f"{resume}"
    )


class PeerWatch:
    """Beats for this process and watches the others' beats (module docstring). `client` is
    JAX's distributed runtime client; `on_lost(line)` is called once, from the watch thread,
    when a peer is lost (by default: print the line and end the process)."""

    def __init__(
        self,
        client,
        process: int,
        count: int,
        resume: Callable[[], str],
        timeout: float,
        on_lost: Callable[[str], None] | None = None,
    ):
        self.client, self.process, self.count = client, process, count
        self.resume, self.timeout = resume, timeout
        self.on_lost = on_lost or _print_and_exit
        self._beats = 0
        self._stop = threading.Event()
        self._found = threading.Event()
        now = time.monotonic()
        self._seen = {p: ("", now) for p in range(count) if p != process}  # value, when it moved
        self._store_ok = now  # the last time the key-value store answered
        self._thread = threading.Thread(target=self._run, name="peer-watch", daemon=True)

    def start(self) -> PeerWatch:
        self._thread.start()
        return self

    def finished(self) -> None:
        """This process ended normally: the others are told, and the watch stops."""
        self._stop.set()
        try:
            self.client.key_value_set(f"{_PREFIX}/finished/{self.process}", "1", True)
        except Exception:  # the others are finishing too; nothing to tell
            pass

    def explains(self, error: BaseException) -> bool:
        """Whether a lost peer explains `error`, an exception this process met while the watch
        ran. A collective whose peer died can fail at once (Gloo: "Connection reset by peer"),
        before the peer's beat is overdue; waiting out the timeout lets the watch say the one
        line (by default ending the process there) instead of the collective's traceback."""
        if self._stop.is_set() and not self._found.is_set():
            return False  # finished normally: nothing is being watched
        return self._found.wait(self.timeout + 3 * BEAT_SECONDS)

    def _run(self) -> None:
        while not self._stop.wait(BEAT_SECONDS):
            self._exchange()
            lost, silent = self._lost()
            if lost and not self._stop.is_set():
                self._stop.set()
                self._found.set()
                line = peer_lost_line(lost, self.process, self.count, silent, self.resume())
                self.on_lost(line)

    def _exchange(self) -> None:
        """Bumps this process's counter and reads the others'; a failure leaves the store's
        last answer where it was."""
        try:
            self._beats += 1
            self.client.key_value_set(f"{_PREFIX}/beat/{self.process}", str(self._beats), True)
            now = time.monotonic()
            for p, (value, _) in list(self._seen.items()):
                if self._try_get(f"{_PREFIX}/finished/{p}"):
                    del self._seen[p]  # it ended normally
                    continue
                current = self._try_get(f"{_PREFIX}/beat/{p}")
                if current != value:
                    self._seen[p] = (current, now)
            self._store_ok = time.monotonic()
        except Exception:  # the store (process 0's coordination service) is unreachable
            pass

    def _try_get(self, key: str) -> str:
        try:
            return self.client.key_value_try_get(key)
        except Exception as e:  # NOT_FOUND: not written yet
            if "NOT_FOUND" in str(e) or "not found" in str(e).lower():
                return ""
            raise

    def _lost(self) -> tuple[list[int], float]:
        now = time.monotonic()
        if now - self._store_ok > self.timeout:
            return [0], now - self._store_ok
        silent = {p: now - moved for p, (_, moved) in self._seen.items()}
        lost = sorted(p for p, s in silent.items() if s > self.timeout)
        return lost, max((silent[p] for p in lost), default=0.0)


def _print_and_exit(line: str) -> None:
    try:
        print(line, file=sys.stderr, flush=True)
    finally:
        os._exit(EXIT_PEER_LOST)


def watch_peers(resume: Callable[[], str]) -> PeerWatch | None:
    """A started PeerWatch when this is one process of several (after
    jax.distributed.initialize), else None."""
    import jax
    from jax._src import distributed

    client = distributed.global_state.client
    if jax.process_count() < 2 or client is None:
        return None
    return PeerWatch(
        client, jax.process_index(), jax.process_count(), resume, peer_timeout()
    ).start()
