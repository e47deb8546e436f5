"""The iteration protocol the training-data loaders share (model/data/loader.py, model/data/stream.py):
a resumable position and batches made on a thread ahead of the caller."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator

from model.data.batch import Batch


class PrefetchedBatches:
    """The iteration protocol the loaders share. `position` counts the global examples
    handed out (what a checkpoint stores). A subclass says what comes from a position on
    (`_generate`); iterating runs it on a thread `prefetch` batches ahead (a bounded queue;
    an exception there is re-raised here), or in the caller's thread when prefetch <= 0.
    `close()` stops the thread; iterating again restarts from `position`."""

    def __init__(self, position: int, prefetch: int):
        self.prefetch = prefetch
        self._position = position
        self._queue: queue.Queue | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._inline: Iterator[tuple[Batch, int]] | None = None

    def _generate(self, position: int) -> Iterator[tuple[Batch, int]]:
        """The batches from global position `position` on, each with the position after it."""
        raise NotImplementedError

    @property
    def position(self) -> int:
        """Global examples handed out so far (what a checkpoint stores)."""
        return self._position

    def _put(self, item) -> None:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def _produce(self, start: int) -> None:
        try:
            for item in self._generate(start):
                if self._stop.is_set():
                    return
                self._put(item)
        except BaseException as e:  # handed to the consumer, which re-raises it
            self._put((e, None))

    def __iter__(self) -> Iterator[Batch]:
        return self

    def __next__(self) -> Batch:
        if self.prefetch <= 0:
            if self._inline is None:
                self._inline = self._generate(self._position)
            try:
                batch, end = next(self._inline)
            except BaseException:
                self._inline = None  # a generator that raised is finished: start again
                raise
            self._position = end
            return batch
        if self._thread is None:
            self._queue = queue.Queue(maxsize=self.prefetch)
            self._stop.clear()
            self._thread = threading.Thread(
                target=self._produce, args=(self._position,), daemon=True, name="batches"
            )
            self._thread.start()
        batch, end = self._queue.get()
        if end is None:
            raise batch
        self._position = end
        return batch

    def close(self) -> None:
        """Stops the prefetch thread; iteration may restart later from `position`."""
        self._inline = None
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            self._queue = None

    def __enter__(self) -> PrefetchedBatches:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
