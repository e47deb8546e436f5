"""Decoding a range of bag records that may hold damage: every record that can be read is
kept, and the damaged ones are named.

A bag's index holds each record's end as an absolute offset, so damage resynchronises by
itself: a damaged record (bad bytes, a bad zstd frame, a bad index entry) costs that record
and, for an index entry, the record after it, never the records beyond. The range is decoded
whole first (the fast path); only if that fails is it split in halves, down to single records,
so that a few damaged records cost a few dozen extra decodes, not one per record.

Win probabilities must be numbers in [0, 1]: a record with another value (NaN, infinity, or
a value from damaged bytes that still parse) is not damage to the file but a bad value, and is
skipped and counted separately.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from core.values import is_win_probability
from pipeline.chessbench.bag import BagFormatError, BagReader

Decoder = Callable[..., tuple]
MAX_RANGES_NAMED = 5  # damaged record ranges a message names before "…"


@dataclass
class Salvaged:
    """Decoded columns of the readable records, in order, and what could not be used."""

    columns: tuple
    damaged: list[int] = field(default_factory=list)  # record indices, ascending
    first_error: str = ""
    bad_values: list[int] = field(default_factory=list)  # records with a win prob not in [0, 1]

    @property
    def records(self) -> int:
        return len(self.columns[0])


def _concat(parts: list[tuple]) -> tuple:
    columns = []
    for values in zip(*parts, strict=True):
        if isinstance(values[0], np.ndarray):
            columns.append(np.concatenate(values))
        else:
            columns.append([v for column in values for v in column])
    return tuple(columns)


def decode_range(reader: BagReader, decode: Decoder, start: int, stop: int) -> Salvaged:
    """Records start..stop-1 of `reader` through `decode` (a `records` decoder), skipping
    damaged records rather than failing on them; see the module doc."""
    parts: list[tuple] = []
    damaged: list[int] = []
    errors: list[str] = []

    def visit(a: int, b: int) -> None:
        try:
            data, offsets = reader.read_range(a, b)
            parts.append(decode(data, offsets, source=reader.path, first_index=a))
        except BagFormatError as e:
            if b - a == 1:
                damaged.append(a)
                errors.append(str(e))
                return
            middle = (a + b) // 2
            visit(a, middle)
            visit(middle, b)

    if stop > start:
        visit(start, stop)
    empty = decode(b"", np.zeros(1, dtype=np.int64))
    columns = _concat([empty, *parts])
    salvaged = Salvaged(columns, damaged, errors[0] if errors else "")
    return _drop_bad_values(salvaged, start)


def _drop_bad_values(salvaged: Salvaged, start: int) -> Salvaged:
    """Removes records whose win probability (the last column, when it is a float array) is
    not a number in [0, 1]; their indices go to `bad_values`."""
    probs = salvaged.columns[-1]
    if not isinstance(probs, np.ndarray):
        return salvaged
    good = is_win_probability(probs)
    if good.all():
        return salvaged
    keep = np.flatnonzero(good)
    # Indices in the file: the decoded records are those of the range minus the damaged ones.
    damaged = set(salvaged.damaged)
    stop = start + len(probs) + len(damaged)
    readable = [i for i in range(start, stop) if i not in damaged]
    salvaged.bad_values = [readable[k] for k in np.flatnonzero(~good).tolist()]
    salvaged.columns = tuple(
        column[keep] if isinstance(column, np.ndarray) else [column[k] for k in keep.tolist()]
        for column in salvaged.columns
    )
    return salvaged


def ranges(indices: list[int]) -> str:
    """Ascending indices as `a-b, c, …` (at most MAX_RANGES_NAMED ranges)."""
    spans: list[list[int]] = []
    for i in indices:
        if spans and i == spans[-1][1] + 1:
            spans[-1][1] = i
        else:
            spans.append([i, i])
    text = [f"{a}-{b}" if b > a else f"{a}" for a, b in spans[:MAX_RANGES_NAMED]]
    return ", ".join(text) + (", …" if len(spans) > MAX_RANGES_NAMED else "")
