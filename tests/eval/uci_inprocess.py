"""The UCI engine in the test's own process, on the committed models/cpu (a BC policy with a
value head of its own): its output read a line at a time as a GUI reads it, and its
search's evaluator held when a test needs a search that has nothing yet; and the output of one
search of an engine set up by a test's own options."""

from __future__ import annotations

import io
import pathlib
import queue
import threading
import time
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


def bestmoves(out: io.StringIO) -> list[str]:
    """The moves of the `bestmove` lines written so far."""
    return [line.split()[1] for line in out.getvalue().splitlines() if line.startswith("bestmove")]


def search_lines(start_dir: pathlib.Path, setup: list[str], nodes: int = 8) -> list[str]:
    """The output of an engine set up with `setup` and `nodes` playouts a move, after
    `go nodes` from the start position, once it has answered (it searches on its own thread)."""
    out = io.StringIO()
    engine = UciServer(NeuralFactory(str(start_dir)), out)
    options = [f"setoption name Simulations value {nodes}", "isready", "position startpos"]
    for line in [*setup, *options]:
        engine.handle(line)
    assert isinstance(engine.chooser(), SearchChooser)
    engine.handle(f"go nodes {nodes}")
    deadline = time.monotonic() + 120
    while not bestmoves(out) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert bestmoves(out), f"no bestmove within 120 s of go nodes {nodes}"
    engine.handle("quit")
    return out.getvalue().splitlines()
