"""The resume journal of an annotate run: `<split>.meta/journal/`, its parts and their reuse.

While a run annotates, each worker's `JournalWriter` appends the rows it made to the journal as
Parquet parts, beside `run.json` (the run's settings, see `output`). A rerun with the
same settings reads the parts (`ReadJournal`), joins their rows to the current boards by FEN
(`UseJournal`) and sends only the boards without a row to the engine. The journal is deleted
once the run's outputs are written (`delete_journal`).
"""

from __future__ import annotations

import sys
import threading
import time
import uuid
import weakref

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from core.schema import (
    BOARD_SCHEMA,
    JOURNAL_PART_PATTERN,
    JOURNAL_PART_SUFFIX,
    JOURNAL_RUN_FILE,
    SCHEMA_VERSION,
    SchemaError,
    check_schema,
    journal_part_name,
    journal_path,
)
from pipeline.beam import stats
from pipeline.beam.portable import split, tagged
from pipeline.beam.shards import list_files, write_parquet

ROWS_TAG = "rows"  # ReadJournal's and UseJournal's output of the journal's rows
TODO_TAG = "todo"  # UseJournal's output of the boards the journal lacks
JOURNAL_EVERY = 500  # boards per journal part (--journal-every)
JOURNAL_SECONDS = 60.0  # ... or fewer: a row waits at most this long before it is written


def journal_dir(split_dir: str) -> str:
    """Where an unfinished run in `split_dir` keeps its settings and annotated rows."""
    return journal_path(split_dir)


class JournalWriter:
    """Buffers one worker's annotated rows and writes them to the journal as Parquet parts.

    A part is written once `every` rows are buffered or the oldest buffered row has waited
    `seconds` (checked as rows arrive), and on `flush`. Each part is named by this writer's
    uuid4 and a sequence number, so workers never collide, and is written under a temporary
    name then renamed: a killed run leaves whole parts and at most a `.tmp`.
    """

    def __init__(
        self,
        directory: str,
        every: int = JOURNAL_EVERY,
        seconds: float = JOURNAL_SECONDS,
        clock=time.monotonic,
    ):
        if every < 1:
            raise ValueError(f"journal parts need at least one row, got every={every}")
        self.directory = directory
        self.every = every
        self.seconds = seconds
        self._clock = clock
        self.writer = uuid.uuid4().hex
        self.parts_written = 0
        self._rows: list[dict] = []
        self._oldest = 0.0
        # A stopping run flushes every writer from another thread (flush_open_writers).
        self._lock = threading.RLock()
        _OPEN_WRITERS.add(self)

    @property
    def buffered(self) -> int:
        return len(self._rows)

    def add(self, row: dict) -> str | None:
        """Buffers `row`; returns the part's path when this wrote one."""
        with self._lock:
            if not self._rows:
                self._oldest = self._clock()
            self._rows.append(row)
            if len(self._rows) >= self.every or self._clock() - self._oldest >= self.seconds:
                return self.flush()
            return None

    def flush(self) -> str | None:
        """Writes the buffered rows as one part (nothing when none); returns its path."""
        with self._lock:
            if not self._rows:
                return None
            name = journal_part_name(self.writer, self.parts_written)
            path = FileSystems.join(self.directory, name)
            write_parquet(self._rows, BOARD_SCHEMA, path)
            self._rows = []
            self.parts_written += 1
            return path


_OPEN_WRITERS: weakref.WeakSet[JournalWriter] = weakref.WeakSet()


def flush_open_writers() -> int:
    """Writes the rows that this process's JournalWriters still buffer, as a stopping run's
    last save (in Beam's worker processes, theirs are lost as in a kill); returns how many."""
    rows = 0
    for writer in list(_OPEN_WRITERS):
        with writer._lock:
            buffered = writer.buffered
            writer.flush()
        rows += buffered
    return rows


def list_journal_parts(directory: str) -> list[str]:
    """The complete part files of the journal at `directory` (not a killed write's `.tmp`)."""
    return [
        p for p in list_files(directory, JOURNAL_PART_PATTERN) if p.endswith(JOURNAL_PART_SUFFIX)
    ]


def delete_journal(directory: str) -> None:
    """Deletes a journal, run.json first: a deletion cut short leaves parts that no rerun
    takes for an interrupted run (a journal without run.json is discarded)."""
    run_file = FileSystems.join(directory, JOURNAL_RUN_FILE)
    if FileSystems.exists(run_file):
        FileSystems.delete([run_file])
    leftovers = list_files(directory)
    if leftovers:
        FileSystems.delete(leftovers)
    if FileSystems.exists(directory):  # a local directory (object stores have none)
        FileSystems.delete([directory])


# -- reading an interrupted run's journal in the pipeline ---------------------------------


class ReadJournalPart(beam.DoFn):
    """Journal part path -> (fen, row) on ROWS_TAG for each of its rows, then its stats.

    A part that cannot be read (cut short, not Parquet, another schema) is skipped, counted
    and named in a warning: its boards are simply annotated again.
    """

    def process(self, path: str):
        s = stats.BundleStats()
        yield from self._rows(path, s)
        yield s.emit()

    def _rows(self, path: str, s: stats.BundleStats):
        try:
            with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
                table = pq.read_table(pa.BufferReader(f.read()))
            if check_schema(table.schema, path) != SCHEMA_VERSION:
                raise SchemaError(f"{path}: written by an older version of the schema")
        except Exception as e:  # noqa: BLE001 - any unreadable part is skipped the same way
            s.count("journal_parts_unreadable")
            s.example("journal_unreadable", f"{path}: {e}")
            print(f"WARNING: skipping unreadable journal part {path}: {e}", file=sys.stderr)
            return
        s.count("journal_parts")
        for row in table.to_pylist():
            yield tagged(ROWS_TAG, (row["fen"], row))


class ReadJournal(beam.PTransform):
    """Journal part paths -> {ROWS_TAG: (fen, BOARD_SCHEMA row), STATS_TAG: stats}."""

    def expand(self, paths):
        read = (
            paths
            | "SpreadParts" >> beam.Reshuffle()  # a no-op on Dask, whose Create spreads them
            | "ReadParts" >> beam.ParDo(ReadJournalPart())
        )
        return split(read, (ROWS_TAG, stats.STATS_TAG), "JournalOutputs")


class UseJournal(beam.DoFn):
    """(fen, {"boards": [count], "journal": [rows]}) -> the journal's row for a current board,
    with `count` set to the current count, on ROWS_TAG, or (fen, count) on TODO_TAG for a
    board the journal lacks; then its stats. Journal rows of boards not in this run are
    dropped and counted.
    """

    def process(self, element):
        s = stats.BundleStats()
        yield from self._use(element, s)
        yield s.emit()

    def _use(self, element, s: stats.BundleStats):
        fen, grouped = element
        counts, rows = list(grouped["boards"]), list(grouped["journal"])
        if not counts:
            s.count("journal_rows_unused", len(rows))
            return
        (count,) = counts  # the boards are unique
        if not rows:
            yield tagged(TODO_TAG, (fen, count))
            return
        # Several rows for one board (a bundle retried after its rows were journaled) are the
        # same with a node limit; any of them will do.
        row = dict(rows[0], count=count)
        values = len(row["moves"])
        s.count("resumed")
        s.count("unique_boards")
        s.count("boards", count)
        s.count("action_values", values)
        s.count("resumed_action_values", values)
        if row["engine"] not in s.partial["engines"]:
            s.partial["engines"].append(row["engine"])
        yield tagged(ROWS_TAG, row)
