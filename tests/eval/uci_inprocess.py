"""The UCI engine in the test's own process, on the committed models/cpu (a BC policy) and
models/cpu-av (its value model): its output read a line at a time as a GUI reads it, and its
search's evaluator held when a test needs a search that has nothing yet."""

from __future__ import annotations

import pathlib
import queue
import threading
from collections.abc import Iterator

from eval.uci.choosers import SearchChooser
from eval.uci.factories import NeuralFactory
from eval.uci.options import UciOptions
from eval.uci.server import UciServer

ROOT = pathlib.Path(__file__).resolve().parents[2]


class Lines:
    """The engine's output, a line at a time, as a GUI reads it (the search thread writes
    too)."""

    def __init__(self):
        self.lines: queue.Queue[str] = queue.Queue()
        self._part = ""

    def write(self, text: str) -> None:
        self._part += text
        *done, self._part = self._part.split("\n")
        for line in done:
            self.lines.put(line)

    def flush(self) -> None:
        pass

    def until_bestmove(self, timeout: float = 120.0) -> list[str]:
        got = []
        while not got or not got[-1].startswith("bestmove"):
            got.append(self.lines.get(timeout=timeout))
        return got


class HeldEvaluator:
    """The search's real evaluator, held until `release` (or failing with `error`): the
    search then has nothing when its move is due, however fast the machine."""

    def __init__(self, evaluator, error: Exception | None = None):
        self.evaluator = evaluator
        self.target = evaluator.target
        self.error = error
        self.release = threading.Event()

    def evaluate(self, boards):
        if self.error is not None:
            raise self.error
        self.release.wait(timeout=60)
        return self.evaluator.evaluate(boards)


def engine_in_process(simulations: int) -> Iterator[tuple[UciServer, Lines]]:
    """(the engine, its output) searching with `simulations`, ready; closed afterwards. The
    search's shapes are compiled as its batches come (no warm-up: a test's few positions
    need few of them)."""
    out = Lines()
    factory = NeuralFactory(str(ROOT), warm_up=False)
    defaults = UciOptions(simulations=simulations)
    server = UciServer(factory, out, defaults=defaults, start_dir=str(ROOT))
    server.handle("isready")
    assert out.lines.get(timeout=300) == "readyok"
    assert isinstance(server.chooser(), SearchChooser)
    yield server, out
    server.run([])  # ends a search still running and closes the model
