"""Writing rows as sharded Parquet through Beam, deterministically.

A row's shard is a hash of its FEN, and a shard's rows are sorted by FEN, so the same rows
make the same files on every runner and every number of workers. Every shard index is written,
empty or not, so `-of-NNNNN` always tells the truth. Each file is written under a temporary
name and renamed into place once complete. A shard is sorted in the memory of one worker:
pick `--num-shards` so that rows / shards fits comfortably (about 1.5 KB per board row).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Iterable

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems

from core.schema import (
    BOARDS_PREFIX,
    FAILURES_PREFIX,
    ROW_GROUP_SIZE,
    STATS_FILE,
    legacy_outputs,
    meta_dir,
    shard_name,
)
from runtime.outputs import writing


def shard_of(fen: str, num_shards: int) -> int:
    digest = hashlib.blake2b(fen.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % num_shards


def write_parquet(rows: list[dict], schema: pa.Schema, path: str) -> None:
    """Writes `rows` (sorted by FEN) to `path` on any Beam filesystem, atomically."""
    rows = sorted(rows, key=lambda r: r["fen"])
    temporary = f"{path}.tmp"
    with writing(path), FileSystems.create(temporary) as handle:
        with pq.ParquetWriter(handle, schema) as writer:
            for start in range(0, len(rows), ROW_GROUP_SIZE):
                chunk = rows[start : start + ROW_GROUP_SIZE]
                writer.write_table(pa.Table.from_pylist(chunk, schema=schema))
            if not rows:
                writer.write_table(schema.empty_table())
    if FileSystems.exists(path):
        FileSystems.delete([path])
    FileSystems.rename([temporary], [path])


class DuplicateRows(RuntimeError):
    """A shard received a FEN twice: the runner delivered some rows twice."""


def check_unique(rows: list[dict], path: str) -> None:
    """Raises DuplicateRows when two of `rows` have the same FEN (every pipeline here makes
    one row per board, so a repeat means the runner repeated work)."""
    fens = {row["fen"] for row in rows}
    if len(fens) != len(rows):
        raise DuplicateRows(
            f"{path}: {len(rows) - len(fens)} of {len(rows)} rows repeat a FEN; the runner "
            "delivered some rows twice, so nothing was written"
        )


class WriteShards(beam.PTransform):
    """Rows (dicts with a `fen`, one per FEN) -> `<directory>/<prefix>-SSSSS-of-NNNNN.parquet`;
    outputs (path, rows written) for each shard, so that a job can count its rows end to end."""

    def __init__(self, directory: str, prefix: str, num_shards: int, schema: pa.Schema):
        super().__init__()
        self.directory = directory
        self.prefix = prefix
        self.num_shards = num_shards
        self.schema = schema

    def expand(self, rows):
        n = self.num_shards
        keyed = rows | "KeyByShard" >> beam.Map(lambda row: (shard_of(row["fen"], n), row))
        every_shard = (
            rows.pipeline
            | "ShardIndices" >> beam.Create(list(range(n)))
            | "KeyIndex" >> beam.Map(lambda i: (i, None))
        )
        return (
            {"rows": keyed, "index": every_shard}
            | "GroupByShard" >> beam.CoGroupByKey()
            | "WriteShard" >> beam.MapTuple(self._write)
        )

    def _write(self, index: int, grouped: dict[str, Iterable]) -> tuple[str, int]:
        path = FileSystems.join(self.directory, shard_name(self.prefix, index, self.num_shards))
        rows = list(grouped["rows"])
        check_unique(rows, path)
        write_parquet(rows, self.schema, path)
        return path, len(rows)


def list_files(directory: str, pattern: str = "*") -> list[str]:
    """Paths in `directory` (any Beam filesystem) matching `pattern`, sorted."""
    match = FileSystems.match([FileSystems.join(directory, pattern)])[0]
    return sorted(m.path for m in match.metadata_list)


def output_files(split_dir: str) -> list[str]:
    """A split's finished outputs: board shards, and in its meta folder the failure shards
    and stats.json (and those of the layout before it, beside the boards)."""
    boards = [
        p for p in list_files(split_dir) if os.path.basename(p).startswith(BOARDS_PREFIX + "-")
    ]
    meta = [
        p
        for p in list_files(meta_dir(split_dir))
        if os.path.basename(p).startswith((FAILURES_PREFIX + "-", STATS_FILE))
    ]
    return boards + meta + legacy_outputs(split_dir)


def clear_outputs(split_dir: str, overwrite: bool) -> None:
    """Readies a split for a job that writes it whole: refuses existing outputs (a
    FileExistsError naming them) unless `overwrite`, in which case they are deleted, so
    that shards of an earlier run with another shard count cannot mix with the new ones."""
    existing = output_files(split_dir)
    if existing and not overwrite:
        raise FileExistsError(
            f"{split_dir} already holds {len(existing)} output files "
            f"(e.g. {existing[0]}); pass --overwrite to replace them"
        )
    for path in existing:
        if os.path.isdir(path):  # an old layout's journal folder
            shutil.rmtree(path)
        else:
            FileSystems.delete([path])
