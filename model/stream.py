"""Streaming AV / SV / BC batches for the transformer: every host reads only its own shards, a
row group at a time, in memory bounded by a budget whatever the size of the data.

`model.data.Batches` holds the whole table on every host (BYTES_PER_BOARD per board and
BYTES_PER_ACTION_VALUE per action value, and Batches' view and orders on top); the paper's
15.3B action values cannot fit. `StreamBatches` yields the same Batch records under the same
protocol (`position`, `epoch`, `close`, a prefetch thread), from a list of shard files:

1. Shards to hosts. The sorted file list is permuted with rng(seed); host p owns the files
   `perm[p::process_count]` for the whole run and opens no other. Fewer shards than hosts
   is a DataError.
2. Blocks. A block is one row group of one of the host's shards (its size from the Parquet
   footer). Epoch e visits the host's blocks in the permutation rng(seed, e, p) of their
   list (the host's files in the order above, each file's row groups in order). A block is
   read alone, schema-checked as `read_board_file` checks a file (core.schema.BoardFile),
   converted as `load_boards` converts a file (model.data.table_arrays: the same DataError
   naming file and row) and filtered as `make_view` filters: AV takes the (board, move) pairs
   of complete boards (of all boards with av_partial), SV the boards with a state value, BC
   the boards with a best move. Its items keep the tokens of the boards they use, and per
   item a board index, the action (AV) and the target (bin or action; the win probability
   with hl_gauss).
3. Shuffle buffer. Consecutive blocks of an epoch form a window, closed as soon as it holds
   >= window_items items or the epoch has no block left, so a window never spans two epochs
   (a block without items still counts as the window's). Window w of epoch e is emitted in
   the permutation rng(seed, e, p, w) of its items, in block order. A batch may span two
   windows and two epochs. The next window is decoded while the current one is emitted,
   paced to be complete when the current one runs out.
4. Memory. window_items = floor((B - R) / (2 c)) - m, where B = memory_budget_gb * 1e9
   bytes; c = the bytes of an item in a window: 4 (board index) + 4 (target) + 4 (action,
   AV only) + 8 (its place in the window's permutation) + 77 * (boards per item: 1 for SV
   and BC; for AV the host's boards over its action values, from the footers); m = the most
   items one block of the host can add (its action values for AV, its rows otherwise); R =
   the decoding of one block (DECODE_BYTES_PER_BOARD per row + DECODE_BYTES_PER_VALUE per
   action value of the host's largest block) + the batches in flight ((prefetch + 2) *
   their bytes) + BYTES_PER_BLOCK per block of the host (its size and memoised count) +
   ALLOCATOR_BYTES (what the allocators keep once the prefetch thread has decoded blocks).
   Two windows live at once: the one being emitted and the next one's decoded blocks
   (< window_items + m items each); the emitted one is dropped before the next one's blocks
   are joined, which holds them twice for a moment. So the loader stays within B whatever
   the size of the data; the interpreter and the libraries' code and import-time data come
   on top. (Arrow's default allocator, mimalloc, keeps freed pages a while: with row groups
   of 1024 boards a run's peak varies by ~15 MB from run to run, which budgets of GBs do not
   notice; ARROW_DEFAULT_MEMORY_POOL=system in the environment cuts decoding's resident cost
   tenfold.) Footers are not kept (parsed, one takes ~15 KB per row group): a block's file
   is opened anew to read it; only the blocks' sizes stay. `shuffle_buffer` (items) sets
   window_items instead of the budget.
5. Resume. The stream is a pure function of (files, seed, process_index, process_count,
   target, num_bins, hl_gauss, hl_gauss_sigma_ratio, av_partial, window_items): a resumed
   run needs the same memory budget (or shuffle_buffer) besides. Global position P means
   local offset k = P // process_count items. A host's items per epoch N_p are the same
   every epoch (its shards are fixed), so k falls in epoch k // N_p, and the window and the
   offset in it follow from the items of each block, counted from cheap columns alone (AV:
   win_probs lengths and partial; SV: state_win_prob validity; BC: best_move) and memoised
   per block for the process's lifetime (decoding a block memoises its count too). A loader
   built with position=P yields exactly the batches an uninterrupted one yields after P
   examples. N_p is counted only when needed: to start at P > 0, or for `epoch`.
6. Hosts. Host p takes b = batch_size / process_count items per global batch from its own
   stream and yields batches forever, so hosts step together; their epochs end at different
   global steps when their shards hold different numbers of items, and `epoch` is this
   host's.

Only uniform sampling: weighted sampling (by `count`) needs the whole table.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from core import bins
from core.schema import BoardFile, read_metadata
from core.targets import TargetKind, target_kind
from core.tokenizer import SEQUENCE_LENGTH
from model.batch import Batch
from model.data import (
    BOARD_COLUMNS,
    DataError,
    PrefetchedBatches,
    board_data,
    check_batch_size,
    make_view,
    table_arrays,
)

# What load_boards holds, measured with tracemalloc after gc on real boards (19,378 distinct
# positions of random games with all their 601,876 legal moves, bench/train.py's shards):
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
_CHUNK = 1 << 20  # items a window's order is filled with at a time

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
class Items:
    """Examples in compact form: item i is board `board[i]` (tokens `states[board[i]]`),
    with `action[i]` (AV) and `target[i]` (int32 bin or action; float32 win probability for
    HL-Gauss targets)."""

    states: np.ndarray  # (boards, 77) uint8
    board: np.ndarray  # (n,) int32
    action: np.ndarray | None  # (n,) int32
    target: np.ndarray  # (n,)

    def __len__(self) -> int:
        return len(self.board)

    def take(self, index: np.ndarray) -> dict[str, np.ndarray]:
        """The items at `index` as arrays: `states`, `target` and, for AV, `actions`."""
        taken = {"states": self.states[self.board[index]], "target": self.target[index]}
        if self.action is not None:
            taken["actions"] = self.action[index]
        return taken


def mapped_empty(shape: int | tuple[int, ...], dtype) -> np.ndarray:
    """An uninitialised array in an anonymous memory map of its own, unmapped as soon as
    the array is dropped. A window's arrays live in these: from malloc, glibc would serve
    them from its heap once a large block has been freed (it raises its mmap threshold
    then), and windows freed and allocated in turn fragment a heap that never shrinks."""
    count = int(np.prod(shape))
    dtype = np.dtype(dtype)
    buffer = mmap.mmap(-1, max(1, count * dtype.itemsize))
    return np.frombuffer(buffer, dtype, count).reshape(shape)


def _mapped_copy(array: np.ndarray) -> np.ndarray:
    out = mapped_empty(array.shape, array.dtype)
    out[...] = array
    return out


def concat_items(pieces: Sequence[Items], takes_action: bool, target_dtype) -> Items:
    """The pieces' items one after the other, board indices shifted to the joined states;
    written into mapped arrays allocated once (no per-piece temporaries)."""
    n = sum(len(p) for p in pieces)
    boards = sum(len(p.states) for p in pieces)
    states = mapped_empty((boards, SEQUENCE_LENGTH), np.uint8)
    board = mapped_empty(n, np.int32)
    action = mapped_empty(n, np.int32) if takes_action else None
    target = mapped_empty(n, target_dtype)
    at, first_board = 0, 0
    for piece in pieces:
        stop = at + len(piece)
        states[first_board : first_board + len(piece.states)] = piece.states
        board[at:stop] = piece.board
        board[at:stop] += first_board
        if action is not None:
            action[at:stop] = piece.action
        target[at:stop] = piece.target
        at, first_board = stop, first_board + len(piece.states)
    return Items(states, board, action, target)


@dataclass(frozen=True)
class Window:
    """A window's items and the order they are emitted in."""

    epoch: int
    index: int
    items: Items
    order: np.ndarray  # (n,) int64, a permutation

    def __len__(self) -> int:
        return len(self.order)

    def take(self, start: int, stop: int) -> dict[str, np.ndarray]:
        return self.items.take(self.order[start:stop])


@dataclass(frozen=True)
class WindowPlan:
    """How big a window may be under a memory budget (module doc, Memory)."""

    item_bytes: float  # c
    block_items: int  # m
    reserved_bytes: int  # R
    window_items: int


# --- footers: what a host can know without reading rows ----------------------------------


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


# --- counting a block's items from cheap columns ------------------------------------------

# Items per block, by (file, stamp, row group, what is counted), for the process's lifetime:
# counting reads columns of all the host's shards, so a process does it once, and a loader
# rebuilt after close or for a restore finds the counts here.
_BLOCK_ITEMS: dict[tuple, int] = {}


def count_columns(kind: TargetKind) -> list[str]:
    """The columns `count_items` reads."""
    if kind.per_move_examples:
        return ["win_probs", "partial"]
    return ["state_win_prob"] if kind.value_head else ["best_move"]


def count_items(table: pa.Table, kind: TargetKind, av_partial: bool) -> int:
    """How many items `make_view` takes from these rows (`count_columns` of them); rows it
    would refuse are left to the decoding to name."""
    if kind.per_move_examples:
        lengths = pc.list_value_length(table["win_probs"]).to_numpy(zero_copy_only=False)
        if not av_partial:
            lengths = lengths[~table["partial"].to_numpy(zero_copy_only=False).astype(bool)]
        return int(lengths.sum())
    if kind.value_head:
        return len(table) - table["state_win_prob"].null_count
    return int(pc.sum(pc.greater(pc.binary_length(table["best_move"]), 0)).as_py() or 0)


# --- the loader ---------------------------------------------------------------------------


class StreamBatches(PrefetchedBatches):
    """Batches streamed from shard files (module doc); the batches and protocol of
    model.data.Batches for the transformer backbone: `states` (b, 77) uint8, `actions` (b,)
    int32 for AV, `targets` (b,) int32 or, with hl_gauss, (b, K) float32; b = batch_size /
    process_count. `position` counts global examples; `epoch` is this host's."""

    def __init__(
        self,
        files: Sequence[str],
        target: str,
        num_bins: int,
        batch_size: int,
        seed: int,
        sampler: str = "uniform",
        position: int = 0,
        hl_gauss: bool = False,
        hl_gauss_sigma_ratio: float = 0.75,
        av_partial: bool = False,
        prefetch: int = 4,
        process_index: int = 0,
        process_count: int = 1,
        *,
        memory_budget_gb: float,
        shuffle_buffer: int | None = None,
    ):
        if sampler != "uniform":
            raise ValueError(
                f"sampler {sampler!r}: streaming samples only 'uniform' "
                "(weighted sampling needs the whole table)"
            )
        if batch_size % process_count:
            raise ValueError(f"batch size {batch_size} is not divisible by {process_count} hosts")
        if not 0 <= process_index < process_count:
            raise ValueError(f"process_index {process_index} is not in [0, {process_count})")
        self.kind = target_kind(target)
        if hl_gauss and not self.kind.value_head:
            raise ValueError(f"hl_gauss targets need a value target, not {target!r}")
        self.target = target
        self.num_bins = num_bins
        self.batch_size = batch_size
        self.seed = seed
        self.hl_gauss = hl_gauss
        self.sigma_ratio = hl_gauss_sigma_ratio
        self.av_partial = av_partial
        self.process_index = process_index
        self.process_count = process_count
        self.local_batch = batch_size // process_count
        self.files = host_files(files, seed, process_index, process_count)
        self._file_blocks = {}
        for file in self.files:
            with BoardFile(file) as reader:  # a SchemaError here names the file
                self._file_blocks[file] = file_blocks(file, reader.metadata)
        self.blocks = [block for f in self.files for block in self._file_blocks[f]]
        self.plan = plan_windows(
            self.blocks, self.kind, memory_budget_gb, self._batch_bytes(prefetch), shuffle_buffer
        )
        self._items_per_epoch: int | None = None
        super().__init__(position, prefetch)

    @property
    def window_items(self) -> int:
        return self.plan.window_items

    @property
    def items_per_epoch(self) -> int:
        """N_p: this host's items per epoch, counted on first use (module doc, Resume)."""
        if self._items_per_epoch is None:
            total = sum(self._block_items(block) for block in self.blocks)
            if total == 0:
                raise self._no_items()
            self._items_per_epoch = total
        return self._items_per_epoch

    def check_batch_size(self, where: str) -> None:
        """DataError when this host's share of a batch is larger than its shards can hold
        (model.data.check_batch_size), from the footers alone: its action values for AV, its
        boards otherwise, an upper bound of its items."""
        rows = sum(block.rows for block in self.blocks)
        bound = sum(block.values for block in self.blocks) if self.kind.per_move_examples else rows
        if self.process_count > 1:
            where = f"{where} (the shards of host {self.process_index}, for its share)"
        check_batch_size(self.local_batch, bound, rows, self.target, where, at_most=True)

    @property
    def epoch(self) -> float:
        """This host's epochs so far (counts N_p on first use)."""
        return (self._position // self.process_count) / self.items_per_epoch

    def _batch_bytes(self, prefetch: int) -> int:
        """The batches in flight: the queue's, the one being cut and the caller's; with
        HL-Gauss also the float64 arrays the soft targets are computed in."""
        per_item = SEQUENCE_LENGTH + 4 + (4 * self.num_bins if self.hl_gauss else 4)
        compute = 3 * 8 * (self.num_bins + 1) if self.hl_gauss else 0
        return self.local_batch * (per_item * (max(prefetch, 0) + 2) + compute)

    def _no_items(self) -> DataError:
        hint = ""
        if self.kind.per_move_examples and not self.av_partial:
            hint = " (AV leaves partial boards out; set train.av_partial = true to train on them)"
        return DataError(
            f"no {self.target} examples in the shards of host {self.process_index}: "
            f"{self.files}{hint}"
        )

    # --- counts and positions ---

    def _count_key(self, block: Block) -> tuple:
        what = (self.kind.name, self.av_partial and self.kind.per_move_examples)
        return (block.file, block.stamp, block.row_group, what)

    def _block_items(self, block: Block) -> int:
        key = self._count_key(block)
        if key not in _BLOCK_ITEMS:
            self._count_file(block.file)
        return _BLOCK_ITEMS[key]

    def _count_file(self, file: str) -> None:
        """Counts the items of every row group of `file` not counted yet, one group at a
        time (the memory of one group's cheap columns)."""
        columns = count_columns(self.kind)
        with BoardFile(file) as reader:
            for block in self._file_blocks[file]:
                key = self._count_key(block)
                if key not in _BLOCK_ITEMS:
                    table = reader.read_row_group(block.row_group, columns)
                    _BLOCK_ITEMS[key] = count_items(table, self.kind, self.av_partial)

    def epoch_blocks(self, epoch: int) -> list[Block]:
        """The host's blocks in the order epoch `epoch` reads them."""
        rng = np.random.default_rng([self.seed, epoch, self.process_index])
        return [self.blocks[i] for i in rng.permutation(len(self.blocks))]

    def locate(self, local: int) -> tuple[int, int, int, int]:
        """(epoch, first block of the window in the epoch's order, window, offset in the
        window) of the host's item `local`, from the blocks' counts."""
        if local == 0:
            return 0, 0, 0, 0
        epoch, offset = divmod(local, self.items_per_epoch)
        order = self.epoch_blocks(epoch)
        window = start = before = items = 0
        for j, block in enumerate(order):
            items += self._block_items(block)
            if items >= self.window_items or j == len(order) - 1:  # as _WindowBuilder closes
                if offset < before + items:
                    return epoch, start, window, offset - before
                before, items, window, start = before + items, 0, window + 1, j + 1
        raise AssertionError("an offset below the epoch's items lies in one of its windows")

    # --- decoding and emitting ---

    def decode(self, block: Block) -> Items:
        """A block's items (module doc, Blocks); DataError naming the file and row of a row
        the loader cannot use."""
        with BoardFile(block.file) as reader:
            table = reader.read_row_group(block.row_group, BOARD_COLUMNS)
        data = board_data([table_arrays(table, block.file, block.first_row)])
        del table
        view = make_view(data, self.target, self.num_bins, self.av_partial)
        used, board = np.unique(view.board, return_inverse=True)
        target = np.asarray(view.value, np.float32) if self.hl_gauss else view.label
        # In maps of their own, like the windows: a window's worth of pieces on the heap,
        # between the decoding's temporaries, would leave it fragmented once freed.
        items = Items(
            _mapped_copy(data.states[used]),
            _mapped_copy(board.astype(np.int32)),
            None if view.action is None else _mapped_copy(view.action),
            _mapped_copy(target),
        )
        key = self._count_key(block)
        if _BLOCK_ITEMS.setdefault(key, len(items)) != len(items):
            raise DataError(
                f"{block.file}: row group {block.row_group} counted "
                f"{_BLOCK_ITEMS[key]} items but holds {len(items)}"
            )
        return items

    def _generate(self, position: int) -> Iterator[tuple[Batch, int]]:
        if position % self.process_count:
            raise ValueError(f"position {position} is not divisible by {self.process_count} hosts")
        epoch, block, window, at = self.locate(position // self.process_count)
        builder = _WindowBuilder(self, epoch, block, window, checked=position > 0)
        current = builder.assemble()
        while True:
            parts, need = [], self.local_batch
            while need:
                if at == len(current):
                    current = None  # dropped before the next is assembled (module doc, Memory)
                    current, at = builder.assemble(), 0
                    continue
                take = min(need, len(current) - at)
                parts.append(current.take(at, at + take))
                at, need = at + take, need - take
            position += self.batch_size
            yield self._batch(parts), position
            builder.prepare(at / len(current))

    def _batch(self, parts: list[dict[str, np.ndarray]]) -> Batch:
        if len(parts) == 1:
            joined = parts[0]
        else:
            joined = {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}
        if self.hl_gauss:
            targets = bins.hl_gauss_targets(joined["target"], self.num_bins, self.sigma_ratio)
        else:
            targets = joined["target"]
        return Batch(joined["states"], targets, joined.get("actions"))


class _WindowBuilder:
    """Decodes a host's blocks epoch after epoch, window after window (module doc, Shuffle
    buffer), from a window's first block on. `checked`: the host is known to have items
    (else an epoch without any is a DataError when it ends)."""

    def __init__(self, stream: StreamBatches, epoch: int, block: int, window: int, checked: bool):
        self.stream = stream
        self.epoch, self.window, self.next = epoch, window, block
        self.order = stream.epoch_blocks(epoch)
        self.pieces: list[Items] = []
        self.items = 0
        self.epoch_items = None if checked else 0

    @property
    def closed(self) -> bool:
        return self.items >= self.stream.window_items or self.next == len(self.order)

    def prepare(self, share: float) -> None:
        """Decodes blocks until the window holds `share` of window_items, or is closed."""
        while not self.closed and self.items < share * self.stream.window_items:
            self._step()

    def _step(self) -> None:
        piece = self.stream.decode(self.order[self.next])
        self.next += 1
        if len(piece):
            self.pieces.append(piece)
            self.items += len(piece)

    def assemble(self) -> Window:
        """The window, complete and permuted; the builder moves on to the next."""
        while not self.closed:
            self._step()
        stream = self.stream
        target_dtype = np.float32 if stream.hl_gauss else np.int32
        items = concat_items(self.pieces, stream.kind.takes_action, target_dtype)
        self.pieces = []
        rng = np.random.default_rng([stream.seed, self.epoch, stream.process_index, self.window])
        order = mapped_empty(len(items), np.int64)
        for start in range(0, len(order), _CHUNK):  # no temporary of the window's size
            order[start : start + _CHUNK] = np.arange(start, min(start + _CHUNK, len(order)))
        rng.shuffle(order)  # as rng.permutation(n) would, in place
        window = Window(self.epoch, self.window, items, order)
        self._advance()
        return window

    def _advance(self) -> None:
        if self.epoch_items is not None:
            self.epoch_items += self.items
        self.items = 0
        self.window += 1
        if self.next == len(self.order):  # the epoch's last window
            if self.epoch_items == 0:
                raise self.stream._no_items()
            self.epoch, self.window, self.next = self.epoch + 1, 0, 0
            self.order = self.stream.epoch_blocks(self.epoch)
            self.epoch_items = None
