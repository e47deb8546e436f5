"""Streaming AV / SV / BC batches for the transformer: every host reads only its own shards, a
row group at a time, in memory bounded by a budget whatever the size of the data.

`model.data.loader.Batches` holds the whole table on every host (model/data/stream_plan.py's
BYTES_PER_BOARD per board and BYTES_PER_ACTION_VALUE per action value, and Batches' view and
orders on top); the paper's 15.3B action values cannot fit. `StreamBatches` yields the same
Batch records under the same protocol (`position`, `epoch`, `close`, a prefetch thread), from a
list of shard files:

1. Shards to hosts. The sorted file list is permuted with rng(seed); host p owns the files
   `perm[p::process_count]` for the whole run and opens no other. Fewer shards than hosts
   is a DataError.
2. Blocks. A block is one row group of one of the host's shards (its size from the Parquet
   footer). Epoch e visits the host's blocks in the permutation rng(seed, e, p) of their
   list (the host's files in the order above, each file's row groups in order). A block is
   read alone, schema-checked as `read_board_file` checks a file (core.schema.BoardFile),
   converted as `load_boards` converts a file (model.data.loader.table_arrays: the same DataError
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

from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from core import bins
from core.schema import BoardFile
from core.targets import TargetKind, target_kind
from core.tokenizer import SEQUENCE_LENGTH
from model.data.batch import Batch
from model.data.loader import (
    BOARD_COLUMNS,
    DataError,
    board_data,
    check_batch_size,
    make_view,
    table_arrays,
)
from model.data.loader_settings import LoaderSettings
from model.data.prefetch import PrefetchedBatches
from model.data.stream_items import Items, Window, concat_items, mapped_copy, mapped_empty
from model.data.stream_plan import Block, file_blocks, host_files, plan_windows

_CHUNK = 1 << 20  # items a window's order is filled with at a time

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
    model.data.loader.Batches for the transformer backbone: `states` (b, 77) uint8, `actions` (b,)
    int32 for AV, `targets` (b,) int32 or, with hl_gauss, (b, K) float32; b = batch_size /
    process_count. `position` counts global examples; `epoch` is this host's."""

    def __init__(
        self,
        files: Sequence[str],
        settings: LoaderSettings,
        position: int = 0,
        *,
        memory_budget_gb: float,
        shuffle_buffer: int | None = None,
    ):
        if settings.sampler != "uniform":
            raise ValueError(
                f"sampler {settings.sampler!r}: streaming samples only 'uniform' "
                "(weighted sampling needs the whole table)"
            )
        self.kind = target_kind(settings.target)
        if settings.hl_gauss and not self.kind.value_head:
            raise ValueError(f"hl_gauss targets need a value target, not {settings.target!r}")
        self.settings = settings
        s = settings
        self.files = host_files(files, s.seed, s.process_index, s.process_count)
        self._file_blocks = {}
        for file in self.files:
            with BoardFile(file) as reader:  # a SchemaError here names the file
                self._file_blocks[file] = file_blocks(file, reader.metadata)
        self.blocks = [block for f in self.files for block in self._file_blocks[f]]
        batch_bytes = self._batch_bytes(settings.prefetch)
        self.plan = plan_windows(
            self.blocks, self.kind, memory_budget_gb, batch_bytes, shuffle_buffer
        )
        self._items_per_epoch: int | None = None
        super().__init__(position, settings.prefetch)

    @property
    def window_items(self) -> int:
        return self.plan.window_items

    @property
    def local_batch(self) -> int:
        """b: this host's items per batch."""
        return self.settings.local_batch

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
        (model.data.loader.check_batch_size), from the footers alone: its action values for AV, its
        boards otherwise, an upper bound of its items."""
        rows = sum(block.rows for block in self.blocks)
        bound = sum(block.values for block in self.blocks) if self.kind.per_move_examples else rows
        s = self.settings
        if s.process_count > 1:
            where = f"{where} (the shards of host {s.process_index}, for its share)"
        check_batch_size(s.local_batch, bound, rows, s.target, where, at_most=True)

    @property
    def epoch(self) -> float:
        """This host's epochs so far (counts N_p on first use)."""
        return (self._position // self.settings.process_count) / self.items_per_epoch

    def _batch_bytes(self, prefetch: int) -> int:
        """The batches in flight: the queue's, the one being cut and the caller's; with
        HL-Gauss also the float64 arrays the soft targets are computed in."""
        s = self.settings
        per_item = SEQUENCE_LENGTH + 4 + (4 * s.num_bins if s.hl_gauss else 4)
        compute = 3 * 8 * (s.num_bins + 1) if s.hl_gauss else 0
        return s.local_batch * (per_item * (max(prefetch, 0) + 2) + compute)

    def _no_items(self) -> DataError:
        s = self.settings
        hint = ""
        if self.kind.per_move_examples and not s.av_partial:
            hint = " (AV leaves partial boards out; set train.av_partial = true to train on them)"
        return DataError(
            f"no {s.target} examples in the shards of host {s.process_index}: {self.files}{hint}"
        )

    # --- counts and positions ---

    def _count_key(self, block: Block) -> tuple:
        what = (self.kind.name, self.settings.av_partial and self.kind.per_move_examples)
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
                    _BLOCK_ITEMS[key] = count_items(table, self.kind, self.settings.av_partial)

    def epoch_blocks(self, epoch: int) -> list[Block]:
        """The host's blocks in the order epoch `epoch` reads them."""
        s = self.settings
        rng = np.random.default_rng([s.seed, epoch, s.process_index])
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
        s = self.settings
        view = make_view(data, s.target, s.num_bins, s.av_partial)
        used, board = np.unique(view.board, return_inverse=True)
        target = np.asarray(view.value, np.float32) if s.hl_gauss else view.label
        # In maps of their own, like the windows: a window's worth of pieces on the heap,
        # between the decoding's temporaries, would leave it fragmented once freed.
        items = Items(
            mapped_copy(data.states[used]),
            mapped_copy(board.astype(np.int32)),
            None if view.action is None else mapped_copy(view.action),
            mapped_copy(target),
        )
        key = self._count_key(block)
        if _BLOCK_ITEMS.setdefault(key, len(items)) != len(items):
            raise DataError(
                f"{block.file}: row group {block.row_group} counted "
                f"{_BLOCK_ITEMS[key]} items but holds {len(items)}"
            )
        return items

    def _generate(self, position: int) -> Iterator[tuple[Batch, int]]:
        s = self.settings
        if position % s.process_count:
            raise ValueError(f"position {position} is not divisible by {s.process_count} hosts")
        epoch, block, window, at = self.locate(position // s.process_count)
        builder = _WindowBuilder(self, epoch, block, window, checked=position > 0)
        current = builder.assemble()
        while True:
            parts, need = [], s.local_batch
            while need:
                if at == len(current):
                    current = None  # dropped before the next is assembled (module doc, Memory)
                    current, at = builder.assemble(), 0
                    continue
                take = min(need, len(current) - at)
                parts.append(current.take(at, at + take))
                at, need = at + take, need - take
            position += s.batch_size
            yield self._batch(parts), position
            builder.prepare(at / len(current))

    def _batch(self, parts: list[dict[str, np.ndarray]]) -> Batch:
        if len(parts) == 1:
            joined = parts[0]
        else:
            joined = {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}
        s = self.settings
        if s.hl_gauss:
            targets = bins.hl_gauss_targets(joined["target"], s.num_bins, s.hl_gauss_sigma_ratio)
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
        stream, s = self.stream, self.stream.settings
        target_dtype = np.float32 if s.hl_gauss else np.int32
        items = concat_items(self.pieces, stream.kind.takes_action, target_dtype)
        self.pieces = []
        rng = np.random.default_rng([s.seed, self.epoch, s.process_index, self.window])
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
