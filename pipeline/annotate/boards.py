"""The engine stage: `AnnotateBoards` turns groups of (fen, count) into board rows with
Stockfish.

`WorkerProgress` keeps one worker's tally across bundles: its record in stats.json's
`workers` and the progress lines it prints.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Iterable
from dataclasses import replace

import apache_beam as beam

from core.engine_path import find_engine
from core.engine_settings import EngineLimit
from pipeline.annotate.journal import JOURNAL_EVERY, JournalWriter
from pipeline.annotate.settings import EngineConfig
from pipeline.beam import stats
from pipeline.beam.portable import tagged
from pipeline.labels import engine_slots
from pipeline.labels.action_values import BoardAnnotator, BoardResult, Mode, NoLegalMoves
from pipeline.labels.uci_client import UciEngine
from runtime.outputs import disk_full
from runtime.progress import format_duration

ROWS_TAG = "rows"
FAILURES_TAG = "failures"


class WorkerProgress:
    """One worker's boards and action values across bundles, for stats and progress lines.

    `workers` (the expected number, 0 when unknown) turns the tally into a share of the
    run's boards and an ETA.
    """

    def __init__(self, progress_seconds: float, workers: int):
        self.worker = f"{socket.gethostname()}:{os.getpid()}"
        self.progress_seconds = progress_seconds
        self.workers = workers
        self.done = 0
        self.values = 0
        self.started: float | None = None
        self._last_progress = time.monotonic()

    def start(self) -> float:
        """The wall-clock time a board's work begins (the first one starts the worker's clock)."""
        began = time.time()
        if self.started is None:
            self.started = began
        return began

    def count(self, partial: dict, values: int, engine_pids: Iterable[int]) -> None:
        """Adds one finished board with `values` action values to this worker's record."""
        self.done += 1
        self.values += values
        now = time.time()
        record = partial["workers"].setdefault(
            self.worker,
            {
                "worker": self.worker,
                "engine_pids": [],
                "first_board_at": self.started,
                "last_board_at": now,
                "boards": 0,
                "action_values": 0,
                "busy_s": 0.0,
            },
        )
        record["engine_pids"] = sorted(set(record["engine_pids"]) | set(engine_pids))
        record["last_board_at"] = now
        record["boards"] += 1
        record["action_values"] += values

    def note_busy(self, partial: dict, began: float) -> None:
        if partial["workers"].get(self.worker) is not None:
            partial["workers"][self.worker]["busy_s"] += time.time() - began

    def report(self, total_boards: int, resumed_boards: int = 0) -> None:
        """Prints a progress line when `progress_seconds` have passed since the last one."""
        now = time.monotonic()
        if now - self._last_progress < self.progress_seconds:
            return
        self._last_progress = now
        elapsed = max(time.time() - self.started, 1e-9)
        rate = self.done / elapsed
        line = (
            f"annotate [{self.worker}]: {self.done:,} boards, {self.values:,} action values,"
            f" {rate:.1f} boards/s, {self.values / elapsed:.0f} values/s"
        )
        if total_boards and self.workers and rate > 0:
            share = total_boards / self.workers
            line += f"; ~{min(100.0, 100 * self.done / share):.0f}% of this worker's share"
            line += (
                f" of {total_boards:,} boards, ETA {format_duration((share - self.done) / rate)}"
            )
        if resumed_boards:
            line += f"; {resumed_boards:,} more resumed from the journal"
        print(line, file=sys.stderr, flush=True)


class AnnotateBoards(beam.DoFn):
    """(group, [(fen, count)], context) -> a BOARD_SCHEMA row on ROWS_TAG or a FAILURE_SCHEMA
    row on FAILURES_TAG for each board, then the group's stats. `context` ({"todo": boards to
    annotate, "resumed": boards from the journal}, or None) only feeds the progress lines.

    `mode` and `multipv` choose how a board is valued (pipeline.labels.action_values: every legal
    move searched alone, or one unrestricted search reporting `multipv` lines).
    One engine process per worker slot: taken in `setup` and given back in `teardown` to
    pipeline/labels/engine_slots.py, so that a runner making a DoFn instance per partition (Dask)
    does not start an engine per partition. With a node limit one board waits queued in the
    engine behind the one being searched, so the engine never idles between the boards of a
    group. Boards with no legal move are dropped and counted. With a `journal` directory
    every annotated row is also written there (`JournalWriter`, a part every `journal_every`
    rows or JOURNAL_SECONDS, and at the end of each bundle); failed boards are not, so a
    resumed run tries them again.
    """

    def __init__(
        self,
        engine: EngineConfig,
        limit: EngineLimit,
        progress_seconds: float,
        workers: int,
        journal: str | None = None,
        journal_every: int = JOURNAL_EVERY,
        mode: Mode = "action-values",
        multipv: int = 1,
    ):
        self.engine_config = engine
        self.limit = limit
        self.mode = mode
        self.multipv = multipv
        self.progress_seconds = progress_seconds
        self.workers = workers
        self.journal = journal
        self.journal_every = journal_every

    def setup(self):
        cfg = self.engine_config
        self._engine_path = path = find_engine(cfg.path)
        self._slot_key = (cfg, path, self.limit, self.mode, self.multipv)
        self._annotator = engine_slots.take(
            self._slot_key,
            lambda: BoardAnnotator(
                lambda: UciEngine(replace(cfg, path=path), cfg.timeout),
                self.limit,
                retries=cfg.retries,
                mode=self.mode,
                multipv=self.multipv,
            ),
        )
        # Start now: an engine that cannot run fails the job here, with its own error.
        self._engine_name = self._annotator.start().name
        self._lookahead = 1 if self.limit.deterministic else 0
        self._progress = WorkerProgress(self.progress_seconds, self.workers)
        self._journal = None
        if self.journal is not None and self.journal_every > 0:
            self._journal = JournalWriter(self.journal, self.journal_every)

    def process(self, element):
        _, boards, context = element
        context = context or {}
        total, resumed = context.get("todo", 0), context.get("resumed", 0)
        self._stats = s = stats.BundleStats()
        self._restarts_seen = self._annotator.restarts
        self._nodes_seen = self._annotator.nodes
        for fen, count in boards:
            s.count("unique_boards")
            s.count("boards", count)
            began = self._progress.start()
            try:
                self._annotator.submit(fen, count)
            except NoLegalMoves:
                s.count("no_legal_moves")
                s.example("no_legal_moves", fen)
                continue
            except ValueError as e:  # a FEN the engine must not be given
                yield self._output(BoardResult(fen, count, None, str(e)))
                continue
            while self._annotator.in_flight > self._lookahead:
                yield self._output(self._annotator.collect())
            self._progress.note_busy(s.partial, began)
            self._progress.report(total, resumed)
        began = time.time()
        while self._annotator.in_flight:
            yield self._output(self._annotator.collect())
        self._progress.note_busy(s.partial, began)
        yield s.emit()

    def finish_bundle(self):
        # Only a side effect: outputs from here are lost on some runners
        # (pipeline/beam/portable.py).
        if self._journal is not None:
            self._journal.flush()

    def _output(self, outcome: BoardResult):
        """Counts a finished board and returns what to emit for it."""
        s, annotator = self._stats, self._annotator
        s.count("engine_restarts", annotator.restarts - self._restarts_seen)
        s.count("nodes", annotator.nodes - self._nodes_seen)
        self._restarts_seen, self._nodes_seen = annotator.restarts, annotator.nodes
        row = outcome.row
        values = len(row["moves"]) if row is not None else 0
        self._progress.count(s.partial, values, annotator.engine_pids)
        if row is not None:
            if self._journal is not None:
                self._journal.add(row)
            s.count("annotated")
            s.count("action_values", values)
            if row["engine"] not in s.partial["engines"]:
                s.partial["engines"].append(row["engine"])
            if self._engine_path not in s.partial["engine_paths"]:
                s.partial["engine_paths"].append(self._engine_path)
            return tagged(ROWS_TAG, row)
        s.count("failed")
        s.example("failed", f"{outcome.fen}: {outcome.error}")
        failure = {
            "fen": outcome.fen,
            "count": outcome.count,
            "error": outcome.error,
            "engine": self._engine_name,
            "limit": annotator.row_limit,
        }
        return tagged(FAILURES_TAG, failure)

    def teardown(self):
        journal = getattr(self, "_journal", None)
        if journal is not None and journal.buffered:
            try:  # rows of a bundle that failed half-way: worth keeping for the rerun
                journal.flush()
            except Exception as e:  # noqa: BLE001 - teardown must still close the engine
                if disk_full(e) is None:  # a full disk is the command's one line
                    print(f"WARNING: journal not written at teardown: {e}", file=sys.stderr)
        annotator = getattr(self, "_annotator", None)
        if annotator is None:
            return
        self._annotator = None
        if annotator.in_flight:  # a bundle that failed half-way: not a clean engine to reuse
            annotator.close()
        else:
            engine_slots.give_back(self._slot_key, annotator)
