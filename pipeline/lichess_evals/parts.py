"""The Lichess evaluations import's parts (import_lichess_evals.py beside it): each a range of
input lines written as its own boards and failures Parquet files plus a manifest, which makes it
complete, so that an interrupted import resumes after its last complete part."""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from core.schema import (
    BOARD_SCHEMA,
    BOARDS_PREFIX,
    FAILURE_SCHEMA,
    FAILURES_PREFIX,
    ROW_GROUP_SIZE,
)
from pipeline.lichess_evals.lines import ENGINE, BadLine, Converted

MAX_EXAMPLES = 5  # example errors kept per reason in stats.json
FAILED_TEXT_CHARS = 200  # of a line with no FEN to show in the failures output
PART_MANIFEST = "part-{:05d}.json"
PART_FILE = "{}-part-{:05d}.parquet"


class ColumnBuffer:
    """Rows collected by column and written as row groups of ROW_GROUP_SIZE to `path`
    (opened on the first write, so an empty part costs nothing until it is closed)."""

    def __init__(self, path: str, schema: pa.Schema):
        self.path = path
        self.schema = schema
        self.columns: dict[str, list] = {name: [] for name in schema.names}
        self.rows = 0
        self._writer: pq.ParquetWriter | None = None

    def append(self, row: dict[str, Any]) -> None:
        for name, values in self.columns.items():
            values.append(row[name])
        self.rows += 1
        if len(self.columns["fen"]) >= ROW_GROUP_SIZE:
            self._flush()

    def _flush(self) -> None:
        if self._writer is None:
            self._writer = pq.ParquetWriter(self.path, self.schema)
        table = pa.Table.from_pydict(self.columns, schema=self.schema)
        self._writer.write_table(table, row_group_size=ROW_GROUP_SIZE)
        for values in self.columns.values():
            values.clear()

    def close(self) -> None:
        if self.columns["fen"] or self._writer is None:
            self._flush()
        self._writer.close()


def part_path(directory: str, prefix: str, index: int) -> str:
    return os.path.join(directory, PART_FILE.format(prefix, index))


def write_json(path: str, document: dict[str, Any]) -> None:
    """Writes `path` whole or not at all (a temporary file renamed into place)."""
    temporary = f"{path}.tmp"
    with open(temporary, "w") as handle:
        json.dump(document, handle, indent=2)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


class Part:
    """One part being written: the boards of its lines, their failures and their counts."""

    def __init__(self, directory: str, index: int, first_line: int, input_name: str):
        self.directory = directory
        self.index = index
        self.first_line = first_line
        self.input_name = input_name
        self.started = time.monotonic()
        self.boards = ColumnBuffer(self._file(BOARDS_PREFIX) + ".tmp", BOARD_SCHEMA)
        self.failures = ColumnBuffer(self._file(FAILURES_PREFIX) + ".tmp", FAILURE_SCHEMA)
        self.counts: Counter[str] = Counter()
        self.examples: dict[str, list[str]] = {}

    def _file(self, prefix: str) -> str:
        return part_path(self.directory, prefix, self.index)

    def add_board(self, converted: Converted) -> None:
        row = converted.row
        self.boards.append(row)
        self.counts["boards"] += 1
        self.counts["partial_boards"] += row["partial"]
        self.counts["action_values"] += len(row["moves"])
        self.counts["duplicate_pv_moves"] += converted.duplicate_pv_moves
        self.counts["best_pv_not_first"] += converted.best_pv_not_first

    def add_failure(self, error: BadLine, line_number: int, text: bytes) -> None:
        message = f"{self.input_name}:{line_number}: {error}"
        fen = error.fen
        if fen is None:
            fen = text[:FAILED_TEXT_CHARS].decode("utf-8", errors="replace")
        self.failures.append(
            {"fen": fen, "count": 1, "error": message, "engine": ENGINE, "limit": error.limit}
        )
        self.counts[f"failed.{error.reason}"] += 1
        examples = self.examples.setdefault(error.reason, [])
        if len(examples) < MAX_EXAMPLES:
            examples.append(message[:300])

    def commit(self, last_line: int) -> dict[str, Any]:
        """Closes the part's files, renames them into place and writes its manifest, which
        makes the part complete; returns the manifest."""
        for buffer, prefix in ((self.boards, BOARDS_PREFIX), (self.failures, FAILURES_PREFIX)):
            buffer.close()
            os.replace(buffer.path, self._file(prefix))
        manifest = {
            "index": self.index,
            "first_line": self.first_line,
            "last_line": last_line,
            "counts": dict(sorted(self.counts.items())),
            "examples": self.examples,
            "elapsed_s": round(time.monotonic() - self.started, 3),
        }
        write_json(os.path.join(self.directory, PART_MANIFEST.format(self.index)), manifest)
        return manifest
