"""What a streaming host knows before it reads a row (model/data/stream.py's module doc: Shards
to hosts, Memory): its shards, their row groups as blocks and their sizes from the Parquet
footers, and how many items a shuffle window may hold under the memory budget; and, from the
footers alone, what the in-memory loader would hold (`estimate_in_memory_bytes`, with its
BYTES_PER_* costs; `should_stream`) and a streamed run's `stream_fingerprint`."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow.parquet as pq

from core.schema import read_metadata
from core.targets import TargetKind
from core.tokenizer import SEQUENCE_LENGTH
from model.data.loader import DataError

# What load_boards holds, measured with tracemalloc after gc on real boards (19,378 distinct
# positions of random games with all their 601,876 legal moves, bench/train_speed.py's shards):
# 12.08 MB = 250 bytes per board (77 tokens, the FEN string, count, state value, best move,
# partial, offsets) + 12 per action value (board index, action, win probability).
BYTES_PER_BOARD = 250
BYTES_PER_ACTION_VALUE = 12
# What Batches adds for AV: its view (board, action, label, value: 4 bytes each; weight: 8)
# and the orders of the current and the next epoch (8 each).
BATCHES_BYTES_PER_ACTION_VALUE = 40
# The resident memory decoding one block costs (Arrow table, FEN and move strings, int32
# tokens, BoardData, view), measured as the peak resident memory of decoding blocks one at a
# time, on the prefetch thread, of those boards: ~1 KB per action value for row groups of
# 1024 boards (~31K values), ~1 MB per 1000 for row groups of 256. Most of it is not live
# data but pages Arrow's allocator (mimalloc) keeps after a free (with
# ARROW_DEFAULT_MEMORY_POOL=system the same blocks cost a tenth); the constants cover it.
DECODE_BYTES_PER_BOARD = 1024
DECODE_BYTES_PER_VALUE = 1024
# A block's bookkeeping: its Block (~240 bytes) and its memoised count (~130), rounded up.
BYTES_PER_BLOCK = 512
# What the allocators keep besides once the prefetch thread has run (its malloc arena, the
# batches freed on the caller's thread): measured 3-5 MB after a warm-up.
ALLOCATOR_BYTES = 6_000_000

_WIN_PROBS_LEAF = "win_probs."  # the footer's path of win_probs' values: win_probs.list.*


@dataclass(frozen=True)
class Block:
    """One row group of a shard: the unit a host reads."""

    file: str
    stamp: tuple[int, int]  # the file's (mtime_ns, size): a memoised count is of this file
    row_group: int
    first_row: int  # the file's row the group starts at, for error messages
    rows: int
    values: int  # action values (win_probs entries), from the footer


@dataclass(frozen=True)
class WindowPlan:
    """How big a window may be under a memory budget (module doc, Memory)."""

    item_bytes: float  # c
    block_items: int  # m
    reserved_bytes: int  # R
    window_items: int


def host_files(
    files: Sequence[str], seed: int, process_index: int, process_count: int
) -> list[str]:
    """The shards host `process_index` reads (module doc, Shards to hosts)."""
    ordered = sorted(set(files))
    if len(ordered) < process_count:
        raise DataError(
            f"{len(ordered)} shards for {process_count} hosts: streaming gives every host "
            "shards of its own, so it needs at least one shard per host"
        )
    perm = np.random.default_rng(seed).permutation(len(ordered))
    return [ordered[i] for i in perm[process_index::process_count]]


def _row_group_values(row_group: pq.RowGroupMetaData) -> int:
    """The action values of a row group from its footer: the win_probs leaf's statistics
    count the values alone; the column chunk's num_values also counts an empty list as one."""
    for i in range(row_group.num_columns):
        chunk = row_group.column(i)
        if chunk.path_in_schema.startswith(_WIN_PROBS_LEAF):
            stats = chunk.statistics
            return stats.num_values if stats is not None else chunk.num_values
    return 0


def file_blocks(file: str, metadata: pq.FileMetaData) -> list[Block]:
    """A file's row groups as blocks, from its footer."""
    stat = os.stat(file)
    stamp = (stat.st_mtime_ns, stat.st_size)
    blocks, first_row = [], 0
    for i in range(metadata.num_row_groups):
        group = metadata.row_group(i)
        blocks.append(Block(file, stamp, i, first_row, group.num_rows, _row_group_values(group)))
        first_row += group.num_rows
    return blocks


def _footer_totals(files: Sequence[str]) -> tuple[int, int]:
    """(boards, action values) of `files`, from their footers."""
    boards = values = 0
    for file in files:
        metadata = read_metadata(file)
        boards += metadata.num_rows
        groups = range(metadata.num_row_groups)
        values += sum(_row_group_values(metadata.row_group(i)) for i in groups)
    return boards, values


def estimate_in_memory_bytes(files: Sequence[str]) -> int:
    """The bytes `load_boards` would hold for `files` (BYTES_PER_BOARD per board,
    BYTES_PER_ACTION_VALUE per action value), from the Parquet footers alone."""
    boards, values = _footer_totals(files)
    return boards * BYTES_PER_BOARD + values * BYTES_PER_ACTION_VALUE


def should_stream(files: Sequence[str], memory_budget_gb: float) -> bool:
    """Whether the in-memory loader would not fit in the budget: `load_boards`' arrays
    (as estimate_in_memory_bytes) plus what Batches adds for AV, the target that needs the
    most (BATCHES_BYTES_PER_ACTION_VALUE per action value); from the footers alone."""
    boards, values = _footer_totals(files)
    per_value = BYTES_PER_ACTION_VALUE + BATCHES_BYTES_PER_ACTION_VALUE
    return boards * BYTES_PER_BOARD + values * per_value > memory_budget_gb * 1e9


def stream_fingerprint(files: Sequence[str]) -> dict:
    """What a resumed streaming run checks to know it reads the same data: the boards (from
    the footers) and the number of files."""
    return {"boards": sum(read_metadata(f).num_rows for f in files), "files": len(files)}


def plan_windows(
    blocks: Sequence[Block],
    kind: TargetKind,
    memory_budget_gb: float,
    batch_bytes: int,
    shuffle_buffer: int | None = None,
) -> WindowPlan:
    """window_items for a host's blocks under the budget (module doc, Memory), or
    `shuffle_buffer` when given. ValueError when the budget cannot hold one block."""
    rows = sum(b.rows for b in blocks)
    values = sum(b.values for b in blocks)
    if kind.per_move_examples:
        boards_per_item = min(1.0, rows / values) if values else 1.0
        block_items = max((b.values for b in blocks), default=0)
    else:
        boards_per_item = 1.0
        block_items = max((b.rows for b in blocks), default=0)
    item_bytes = 4 + 4 + (4 if kind.takes_action else 0) + 8 + SEQUENCE_LENGTH * boards_per_item
    decode = max(
        (DECODE_BYTES_PER_BOARD * b.rows + DECODE_BYTES_PER_VALUE * b.values for b in blocks),
        default=0,
    )
    reserved = decode + batch_bytes + BYTES_PER_BLOCK * len(blocks) + ALLOCATOR_BYTES
    if shuffle_buffer is not None:
        return WindowPlan(item_bytes, block_items, reserved, max(1, int(shuffle_buffer)))
    budget = memory_budget_gb * 1e9
    window_items = int((budget - reserved) // (2 * item_bytes)) - block_items
    if window_items < 1:
        least = reserved + 2 * item_bytes * (block_items + 1)
        raise ValueError(
            f"memory budget {memory_budget_gb} GB cannot hold this host's largest block and "
            f"a window besides: give at least {least / 1e9:.3f} GB"
        )
    return WindowPlan(item_bytes, block_items, reserved, window_items)
