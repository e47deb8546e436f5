"""When a request's answer has nobody left to read it: its client hung up, or its page asked
something newer. A search checks between batches of playouts (the stop event of
eval.agents.mcts.SearchLimit) and gives up, so abandoned work does not hold the cores.
"""

from __future__ import annotations

import select
import socket
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

# Pages remembered for superseding: a page's id is forgotten after this many newer pages.
MAX_PAGES = 1024


class Cancelled(Exception):
    """The request's work was given up: `superseded` (its page asked again; the client may
    still read a 409) or its client is gone (nothing is sent)."""

    def __init__(self, superseded: bool):
        super().__init__("superseded by a newer request of the page" if superseded else "gone")
        self.superseded = superseded


def client_gone(connection: socket.socket) -> bool:
    """Whether the peer closed or reset `connection`: readable with nothing to read. Bytes
    waiting (a pipelined request) mean it is still there."""
    try:
        readable, _, _ = select.select([connection], [], [], 0)
        if not readable:
            return False
        return connection.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except (OSError, ValueError):  # reset, or already closed
        return True


class StopWhen(threading.Event):
    """A stop event that sets itself once `gone()` is true: TreeSearch asks `is_set()` between
    batches, so the check runs there and nowhere else."""

    def __init__(self, gone: Callable[[], bool]):
        super().__init__()
        self._gone = gone
        self.superseded = False

    def is_set(self) -> bool:
        if not super().is_set() and self._gone():
            self.set()
        return super().is_set()

    def check(self) -> None:
        """Raises Cancelled when the answer is no longer wanted."""
        if self.is_set():
            raise Cancelled(self.superseded)


@dataclass
class PageGenerations:
    """The latest request of each page (the page sends a random id): an older one of the same
    page is superseded. Requests without a page id are never superseded."""

    _latest: OrderedDict[str, int] = field(default_factory=OrderedDict)
    _count: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def begin(self, page: str | None) -> Callable[[], bool]:
        """Marks a new request of `page`; returns whether it has been superseded since."""
        if not page:
            return lambda: False
        with self._lock:
            self._count += 1
            mine = self._count
            self._latest[page] = mine
            self._latest.move_to_end(page)
            while len(self._latest) > MAX_PAGES:
                self._latest.popitem(last=False)
        return lambda: self._latest.get(page, mine) != mine


def request_stop(connection: socket.socket, superseded: Callable[[], bool]) -> StopWhen:
    """The stop event of one request: its client gone or its page's newer request."""

    def gone() -> bool:
        if superseded():
            stop.superseded = True
            return True
        return client_gone(connection)

    stop = StopWhen(gone)
    return stop


@dataclass
class Activity:
    """The searches running now and the requests given up since the start (GET
    /api/status): what a person or a test can see of the server's work."""

    running: int = 0
    cancelled: int = 0  # client gone
    superseded: int = 0  # its page asked again
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @contextmanager
    def searching(self) -> Iterator[None]:
        with self._lock:
            self.running += 1
        try:
            yield
        finally:
            with self._lock:
                self.running -= 1

    def gave_up(self, cancelled: Cancelled) -> None:
        with self._lock:
            if cancelled.superseded:
                self.superseded += 1
            else:
                self.cancelled += 1

    def counts(self) -> dict:
        with self._lock:
            return {
                "searches": self.running,
                "cancelled": self.cancelled,
                "superseded": self.superseded,
            }
