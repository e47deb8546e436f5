"""Converting the Lichess evaluations import's lines to rows, in this process or in worker
processes (import_lichess_evals.py beside it): the results come back in input order whatever
the number of workers, so the output does not depend on it."""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from pipeline.lichess_evals.lines import BadLine, Converted, convert_line
from runtime.workers import SPAWN, worker_start

# A task is ~0.3 s of a worker's time: long enough that sending it costs little, short enough
# that the lines read ahead (workers * _BATCHES_PER_WORKER batches) take little memory.
_BATCH_LINES = 2000
_BATCHES_PER_WORKER = 2  # one being converted, one waiting, so no worker idles

# A failure as BadLine's arguments: a BadLine does not unpickle (its `args` are the message).
_Failure = tuple[str, str, str | None, str | None]
_Batch = list[tuple[int, bytes]]  # (line number, text)


class WorkerDied(RuntimeError):
    """A worker process ended while converting (killed, out of memory, ...)."""


def _convert(text: bytes) -> Converted | BadLine:
    try:
        return convert_line(text)
    except BadLine as e:
        return e


def _convert_batch(texts: list[bytes]) -> list[Converted | _Failure]:
    """A worker's task: the lines' conversions, in order."""
    results: list[Converted | _Failure] = []
    for text in texts:
        try:
            results.append(convert_line(text))
        except BadLine as e:
            results.append((e.reason, e.detail, e.fen, e.limit))
    return results


def converted_lines(
    lines: Iterator[tuple[int, bytes]], workers: int
) -> Iterator[tuple[int, bytes, Converted | BadLine]]:
    """`lines` (number, text) with their conversions, in input order, by `workers` processes
    (in this one if 1). Close it to stop the workers: they are not left running."""
    if workers == 1:
        for number, text in lines:
            yield number, text, _convert(text)
        return
    batches: Iterator[_Batch] = iter(lambda: list(itertools.islice(lines, _BATCH_LINES)), [])
    pool = ProcessPoolExecutor(workers, mp_context=SPAWN, initializer=worker_start)
    in_flight: deque[tuple[_Batch, Future[list[Converted | _Failure]]]] = deque()
    try:
        while True:
            # Topped up before the oldest batch is waited for, so the workers never run dry.
            for batch in itertools.islice(batches, workers * _BATCHES_PER_WORKER - len(in_flight)):
                in_flight.append((batch, pool.submit(_convert_batch, [t for _, t in batch])))
            if not in_flight:
                return
            batch, future = in_flight.popleft()
            for (number, text), result in zip(batch, future.result(), strict=True):
                yield number, text, result if isinstance(result, Converted) else BadLine(*result)
    except BrokenProcessPool as e:
        raise WorkerDied(
            "a worker process died while converting lines (killed? out of memory?); the "
            "completed parts are kept: rerun to resume"
        ) from e
    finally:
        pool.shutdown(cancel_futures=True)
