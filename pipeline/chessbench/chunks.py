"""Reading ChessBench bag shards (import_chessbench.py beside it): shard -> chunks of records
-> (output shard, {fen: that board's values}), damage and unreadable shards counted."""

from __future__ import annotations

import sys
from collections.abc import Iterable

import apache_beam as beam

from pipeline.beam import stats
from pipeline.beam.portable import tagged
from pipeline.beam.shards import shard_of
from pipeline.chessbench.bag import BagFormatError, BagReader
from pipeline.chessbench.records import decode_av, decode_bc, decode_sv
from pipeline.chessbench.salvage import decode_range, ranges

CHUNKS_TAG = "chunks"
BATCHES_TAG = "batches"
_DECODERS = {"av": decode_av, "sv": decode_sv, "bc": decode_bc}


def chunk_ranges(path: str, chunk_records: int) -> Iterable[tuple[str, int, int]]:
    """(path, start, stop) for each chunk of a shard; raises BagFormatError for a bad one.

    A file of 0 bytes is a valid empty bag, but no ChessBench shard is empty: it is what a
    failed download or copy leaves, so it is refused rather than imported as nothing."""
    with BagReader(path) as reader:
        n, size = len(reader), reader.size
    if size == 0:
        raise BagFormatError(f"{path}: empty file (0 bytes), no records")
    for start in range(0, n, chunk_records):
        yield path, start, min(start + chunk_records, n)


class ListChunks(beam.DoFn):
    """Shard path -> its chunks on CHUNKS_TAG, then stats; an unreadable shard is an input
    error, not a crash."""

    def __init__(self, chunk_records: int):
        self.chunk_records = chunk_records

    def process(self, path: str):
        s = stats.BundleStats()
        try:
            chunks = list(chunk_ranges(path, self.chunk_records))
        except (BagFormatError, OSError) as e:
            s.count("unreadable_shards")
            s.input_error(path, f"{type(e).__name__}: {e}")
            print(f"WARNING: skipping {path}: {e}", file=sys.stderr, flush=True)
            chunks = []
        else:
            s.count("shards")
        for chunk in chunks:
            yield tagged(CHUNKS_TAG, chunk)
        yield s.emit()


class DecodeChunk(beam.DoFn):
    """(group, [(path, start, stop)], _) -> (output shard, {fen: values}) on BATCHES_TAG for
    each output shard that has boards in a chunk: av values are [(move, win_prob), ...], sv
    [win_prob, ...], bc [move, ...]; then stats. The shuffle then moves a few batches per
    chunk rather than one element per board (Beam's per-element cost was half the import's
    time)."""

    def __init__(self, kind: str, num_shards: int):
        self.kind = kind
        self.num_shards = num_shards

    def process(self, element):
        _, chunks, _ = element
        for chunk in chunks:
            s = stats.BundleStats()
            for shard, batch in self._decode(chunk, s):
                yield tagged(BATCHES_TAG, (shard, batch))
            yield s.emit()

    def _decode(self, element, s: stats.BundleStats):
        path, start, stop = element
        try:
            with BagReader(path) as reader:
                salvaged = decode_range(reader, _DECODERS[self.kind], start, stop)
        except (BagFormatError, OSError) as e:  # the file, not a record: nothing to salvage
            s.count("unreadable_chunks")
            s.count("records_unread", stop - start)
            s.input_error(path, f"records {start}-{stop - 1}: {e}")
            print(f"WARNING: skipping records {start}-{stop - 1} of {path}: {e}", file=sys.stderr)
            return
        if salvaged.damaged:
            lost = len(salvaged.damaged)
            message = (
                f"{lost:,} of records {start}-{stop - 1} damaged and skipped "
                f"({ranges(salvaged.damaged)}), {stop - start - lost:,} kept; first: "
                f"{salvaged.first_error.removeprefix(f'{path}: ')}"
            )
            s.count("damaged_records", lost)
            s.count("records_unread", lost)
            s.input_error(path, message)
            print(f"WARNING: {path}: {message}", file=sys.stderr, flush=True)
        if salvaged.bad_values:
            s.count("bad_value_records", len(salvaged.bad_values))
            s.example(
                "bad_value_records",
                f"{path}: records {ranges(salvaged.bad_values)}: win probability not in [0, 1]",
            )
        columns = salvaged.columns
        s.count("records", stop - start - len(salvaged.damaged))
        batches: dict[int, dict[str, list]] = {}
        for fen, values in group_by_fen(self.kind, columns):
            batches.setdefault(shard_of(fen, self.num_shards), {})[fen] = values
        yield from batches.items()


def group_by_fen(kind: str, columns: tuple) -> Iterable[tuple[str, list]]:
    """Decoded columns -> (fen, that board's values), boards in order of first appearance."""
    groups: dict[str, list] = {}
    if kind == "av":
        fens, moves, probs = columns
        for fen, move, p in zip(fens, moves, probs.tolist(), strict=True):
            groups.setdefault(fen, []).append((move, p))
    elif kind == "sv":
        fens, probs = columns
        for fen, p in zip(fens, probs.tolist(), strict=True):
            groups.setdefault(fen, []).append(p)
    else:
        fens, moves = columns
        for fen, move in zip(fens, moves, strict=True):
            groups.setdefault(fen, []).append(move)
    return groups.items()
