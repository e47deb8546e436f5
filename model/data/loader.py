"""Annotated Parquet -> shuffled, tokenized AV / SV / BC training batches.

`load_boards` reads the shards once (schema-checked; an unknown schema is a SchemaError),
tokenizes every board with the vectorised tokenizer and flattens the (board, move) pairs into
parallel arrays, so that afterwards a batch is pure numpy fancy indexing.

The three targets are views of the one table:

- AV: items are (board, move) pairs; target = bin of the move's win probability. Boards
  marked `partial` (only some moves valued, e.g. the Lichess evaluation database's principal
  variations) are left out unless `av_partial` is set: trained on them alone, a model sees
  only good moves and learns that every move is good.
- SV: items are boards with a state value; target = bin of the board's state win probability.
- BC: items are boards with a best move; target = the best move's action index.

Order: each epoch is a seeded permutation of all items across all shards (`uniform`) or n
draws with replacement with probability proportional to the board's `count` (`weighted`,
the natural distribution of the games). Epoch e's order depends only on (seed, e), so the
loader's whole state is one integer, `position` = examples handed out so far; a loader built
with the same data, seed and position yields exactly the batches an uninterrupted one would.

Memory: every host holds the whole table as arrays (~12 bytes per action value plus 77 per
board and the FEN strings), fine up to a few hundred million action values; the paper's 15B
would need each host to load only its share of the shards.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from core import bins
from core.actions import indices_to_moves, moves_to_indices
from core.move_check import possible_moves
from core.schema import board_files, read_board_file
from core.targets import Target, target_kind
from core.tokenizer import tokenize_batch
from model.data.batch import Batch
from model.data.loader_settings import LoaderSettings
from model.data.prefetch import PrefetchedBatches

# The columns the loaders read (model.data.stream counts some of them alone).
BOARD_COLUMNS = ["fen", "count", "moves", "win_probs", "best_move", "state_win_prob", "partial"]


class DataError(ValueError):
    """A board row the loader cannot use; the message names the file and row."""


@dataclass(frozen=True)
class BoardData:
    """The annotated boards as flat arrays. Pair p belongs to board `pair_board[p]`; the
    pairs of board i are `pair_offsets[i]:pair_offsets[i+1]`, in action-space order."""

    files: tuple[str, ...]
    fens: np.ndarray  # (N,) object
    states: np.ndarray  # (N, 77) uint8 tokens
    counts: np.ndarray  # (N,) int64
    state_win_probs: np.ndarray  # (N,) float32, NaN where the board has no state value
    best_actions: np.ndarray  # (N,) int32, -1 where the board has no best move
    partial: np.ndarray  # (N,) bool: the board's moves are only some of its legal moves
    pair_offsets: np.ndarray  # (N + 1,) int64
    pair_board: np.ndarray  # (P,) int32
    pair_actions: np.ndarray  # (P,) int32
    pair_win_probs: np.ndarray  # (P,) float32

    @property
    def num_boards(self) -> int:
        return len(self.fens)

    @property
    def num_pairs(self) -> int:
        return len(self.pair_actions)

    def legal_moves(self, board: int) -> np.ndarray:
        """UCI moves of one board, in action-space order."""
        start, stop = self.pair_offsets[board], self.pair_offsets[board + 1]
        return indices_to_moves(self.pair_actions[start:stop])

    def move_win_probs(self, board: int) -> np.ndarray:
        start, stop = self.pair_offsets[board], self.pair_offsets[board + 1]
        return self.pair_win_probs[start:stop]


@dataclass(frozen=True)
class BoardArrays:
    """One table of board rows (a file, or a row group of one) as arrays; `offsets` (n + 1,)
    delimit each board's pairs in `actions` and `win_probs`."""

    file: str
    fens: np.ndarray  # (n,) object
    states: np.ndarray  # (n, 77) uint8
    counts: np.ndarray  # (n,) int64
    state_win_probs: np.ndarray  # (n,) float32, NaN where none
    best_actions: np.ndarray  # (n,) int32, -1 where none
    partial: np.ndarray  # (n,) bool
    offsets: np.ndarray  # (n + 1,) int64
    actions: np.ndarray  # (p,) int32
    win_probs: np.ndarray  # (p,) float32


def load_boards(path: str) -> BoardData:
    """Reads every board shard at `path` (directory, file or glob) into BoardData."""
    return board_data(
        [table_arrays(read_board_file(file, BOARD_COLUMNS), file) for file in board_files(path)]
    )


def board_data(parts: Sequence[BoardArrays]) -> BoardData:
    """The parts' boards one after the other, as one BoardData."""
    lengths = np.concatenate([np.diff(p.offsets) for p in parts])
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return BoardData(
        files=tuple(p.file for p in parts),
        fens=np.concatenate([p.fens for p in parts]),
        states=np.concatenate([p.states for p in parts]),
        counts=np.concatenate([p.counts for p in parts]),
        state_win_probs=np.concatenate([p.state_win_probs for p in parts]),
        best_actions=np.concatenate([p.best_actions for p in parts]),
        partial=np.concatenate([p.partial for p in parts]),
        pair_offsets=offsets,
        pair_board=np.repeat(np.arange(len(lengths), dtype=np.int32), lengths),
        pair_actions=np.concatenate([p.actions for p in parts]),
        pair_win_probs=np.concatenate([p.win_probs for p in parts]),
    )


def table_arrays(table: pa.Table, file: str, first_row: int = 0) -> BoardArrays:
    """Board rows (the BOARD_COLUMNS of `file`, starting at its row `first_row`) tokenized
    and checked: a row the loader cannot use is a DataError naming `file` and its row. That
    includes a valued move or best move that cannot be played on the row's board
    (core.move_check: all but king safety, checked with array operations): the run is
    refused rather than the row skipped, as for any other bad row, since a shard holding one
    is damaged and skipping would shift every position the loaders count in rows."""
    fens_list = table["fen"].to_pylist()

    def fail(row: int, problem: str) -> DataError:
        return DataError(f"{file}: row {first_row + row} (FEN {fens_list[row]!r}): {problem}")

    moves_col = table["moves"].combine_chunks()
    probs_col = table["win_probs"].combine_chunks()
    move_lengths = pc.list_value_length(moves_col).to_numpy(zero_copy_only=False)
    prob_lengths = pc.list_value_length(probs_col).to_numpy(zero_copy_only=False)
    mismatch = np.flatnonzero(move_lengths != prob_lengths)
    if mismatch.size:
        row = int(mismatch[0])
        raise fail(row, f"{move_lengths[row]} moves but {prob_lengths[row]} win_probs")
    offsets = np.zeros(len(fens_list) + 1, np.int64)
    np.cumsum(move_lengths, out=offsets[1:])
    pair_row = np.repeat(np.arange(len(fens_list)), move_lengths)

    try:
        states = tokenize_batch(fens_list).astype(np.uint8)
    except ValueError as e:
        raise DataError(f"{file}: {e}") from None
    flat_moves = pc.list_flatten(moves_col).to_numpy(zero_copy_only=False)
    try:
        actions = moves_to_indices(flat_moves)
    except KeyError:
        bad = next(i for i, m in enumerate(flat_moves) if not _is_action(m))
        raise fail(int(pair_row[bad]), f"move {flat_moves[bad]!r} is not an action") from None
    # A move of another board (a shifted column, a bad join) would train as this board's.
    illegal = np.flatnonzero(~possible_moves(states, pair_row, actions))
    if illegal.size:
        bad = int(illegal[0])
        raise fail(int(pair_row[bad]), f"move {flat_moves[bad]!r} is not legal on this board")
    win_probs = pc.list_flatten(probs_col).to_numpy(zero_copy_only=False).astype(np.float32)
    bad_prob = np.flatnonzero(~((win_probs >= 0) & (win_probs <= 1)))
    if bad_prob.size:
        p = int(bad_prob[0])
        raise fail(int(pair_row[p]), f"win probability {win_probs[p]} is outside [0, 1]")
    state_probs = table["state_win_prob"].to_numpy(zero_copy_only=False).astype(np.float32)
    has_state = table["state_win_prob"].is_valid().to_numpy(zero_copy_only=False)
    bad_state = np.flatnonzero(has_state & ~((state_probs >= 0) & (state_probs <= 1)))
    if bad_state.size:
        row = int(bad_state[0])
        raise fail(row, f"state_win_prob {state_probs[row]} is outside [0, 1]")
    counts = table["count"].to_numpy().astype(np.int64)
    if (counts < 0).any():
        raise fail(int(np.flatnonzero(counts < 0)[0]), "negative count")
    best = np.asarray(table["best_move"].to_pylist(), dtype=object)
    has_best = np.array([bool(m) for m in best], dtype=bool)
    best_actions = np.full(len(best), -1, np.int32)
    try:
        best_actions[has_best] = moves_to_indices(best[has_best].astype(str))
    except KeyError:
        row = next(i for i in np.flatnonzero(has_best) if not _is_action(best[i]))
        raise fail(int(row), f"best_move {best[row]!r} is not an action") from None
    best_rows = np.flatnonzero(has_best)
    illegal = np.flatnonzero(~possible_moves(states, best_rows, best_actions[best_rows]))
    if illegal.size:
        row = int(best_rows[illegal[0]])
        raise fail(row, f"best_move {best[row]!r} is not legal on this board")
    return BoardArrays(
        file=file,
        fens=np.asarray(fens_list, dtype=object),
        states=states,
        counts=counts,
        state_win_probs=state_probs,
        best_actions=best_actions,
        partial=table["partial"].to_numpy(zero_copy_only=False).astype(bool),
        offsets=offsets,
        actions=actions,
        win_probs=win_probs,
    )


def _is_action(move) -> bool:
    try:
        moves_to_indices([move])
        return True
    except KeyError:
        return False


@dataclass(frozen=True)
class ItemView:
    """One target's items: board index, action (AV only), hard target, value (AV/SV)."""

    target: Target
    board: np.ndarray  # (n,) int32
    action: np.ndarray | None  # (n,) int32 for AV
    label: np.ndarray  # (n,) int32: value bin or action index
    value: np.ndarray | None  # (n,) float32 win probability, for HL-Gauss targets
    weight: np.ndarray  # (n,) float64 sampling weight (`count` of the board)

    def __len__(self) -> int:
        return len(self.board)


def make_view(data: BoardData, target: str, num_bins: int, av_partial: bool = False) -> ItemView:
    """The items of one target (see the module doc); `av_partial` keeps partial boards in AV."""
    kind = target_kind(target)
    action = None
    if kind.per_move_examples:  # a value per (board, move)
        pairs = slice(None) if av_partial else ~data.partial[data.pair_board]
        board = data.pair_board[pairs]
        action = data.pair_actions[pairs]
        value = data.pair_win_probs[pairs]
    elif kind.value_head:  # a value per board
        board = np.flatnonzero(~np.isnan(data.state_win_probs)).astype(np.int32)
        value = data.state_win_probs[board]
    else:  # a best move per board
        board = np.flatnonzero(data.best_actions >= 0).astype(np.int32)
        value = None
    label = bins.to_bins(value, num_bins) if kind.value_head else data.best_actions[board]
    return ItemView(
        kind.name,
        board,
        action if kind.takes_action else None,
        label,
        value,
        data.counts[board].astype(np.float64),
    )


def describe_missing(data: BoardData, target: str, av_partial: bool = False) -> str:
    """Why a target has no items in `data`: what the boards hold instead."""
    kind = target_kind(target)
    partial = int(data.partial.sum())
    if kind.per_move_examples and partial and not av_partial:
        return (
            f"{partial} of {data.num_boards} boards are partial (only some moves valued) and "
            f"{kind.name.upper()} leaves them out; set train.av_partial = true to train on them"
        )
    if kind.per_move_examples:
        return f"the {data.num_boards} boards have no moves"
    if kind.value_head:
        return f"none of the {data.num_boards} boards has a state value"
    return f"none of the {data.num_boards} boards has a best move"


def check_batch_size(
    batch_size: int, examples: int, boards: int, target: str, where: str, at_most: bool = False
) -> None:
    """DataError when one batch would hold more examples than `where` has (`at_most`: an
    upper bound, from Parquet footers): each example repeated within every step, and at
    scale an allocation no device holds. The loaders' one rule, checked before compiling."""
    if batch_size > examples:
        bound = "at most " if at_most else ""
        raise DataError(
            f"train.batch_size {batch_size:,} is larger than {where}: {boards:,} boards, "
            f"{bound}{examples:,} {target} examples; use a batch of at most {examples:,}"
        )


def epoch_order(view: ItemView, epoch: int, seed: int, sampler: str) -> np.ndarray:
    """Item indices of one epoch: a function of (seed, epoch) only."""
    n = len(view)
    rng = np.random.default_rng([seed, epoch])
    if sampler == "uniform":
        return rng.permutation(n)
    if sampler == "weighted":
        total = view.weight.sum()
        if not total > 0:
            raise DataError("sampler 'weighted' needs some board with count > 0")
        return rng.choice(n, size=n, replace=True, p=view.weight / total)
    raise ValueError(f"unknown sampler {sampler!r}")


class Batches(PrefetchedBatches):
    """Batches of a view from a given position: deterministic, resumable, prefetched.

    Iterating yields Batch records (model/data/batch.py) of numpy arrays: `states` (b, 77) uint8,
    `actions` (b,) int32 for AV, and `targets` (b,) int32 (bin or action) or, with hl_gauss,
    (b, K) float32 soft targets. b = batch_size / process_count: with several processes
    (hosts), process p takes rows p*b:(p+1)*b of every global batch. `position` counts global
    examples handed out.
    """

    def __init__(self, data: BoardData, settings: LoaderSettings, position: int = 0):
        self.data = data
        self.settings = settings
        self.view = self._make_view(data, settings)
        if len(self.view) == 0:
            raise DataError(
                f"no {settings.target} examples in {list(data.files)}: "
                + describe_missing(data, settings.target, settings.av_partial)
            )
        self.batch_size = settings.batch_size
        self._orders: dict[int, np.ndarray] = {}
        super().__init__(position, settings.prefetch)

    def _make_view(self, data: BoardData, settings: LoaderSettings) -> ItemView:
        return make_view(data, settings.target, settings.num_bins, settings.av_partial)

    @property
    def epoch(self) -> float:
        return self._position / len(self.view)

    def check_batch_size(self, where: str) -> None:
        """DataError when a batch is larger than the view (`check_batch_size`)."""
        check_batch_size(
            self.batch_size, len(self.view), self.data.num_boards, self.view.target, where
        )

    def _order(self, epoch: int) -> np.ndarray:
        if epoch not in self._orders:
            # Keep at most the current and next epoch: a batch spans at most two.
            for old in [e for e in self._orders if e < epoch - 1]:
                del self._orders[old]
            s = self.settings
            self._orders[epoch] = epoch_order(self.view, epoch, s.seed, s.sampler)
        return self._orders[epoch]

    def indices(self, position: int) -> np.ndarray:
        """Item indices of the global batch starting at `position`."""
        n = len(self.view)
        cursor = np.arange(position, position + self.batch_size, dtype=np.int64)
        epochs, offsets = np.divmod(cursor, n)
        if epochs[0] == epochs[-1]:
            return self._order(int(epochs[0]))[offsets]
        out = np.empty(self.batch_size, np.int64)
        for e in np.unique(epochs):
            mask = epochs == e
            out[mask] = self._order(int(e))[offsets[mask]]
        return out

    def make_batch(self, position: int) -> Batch:
        items = self.indices(position)[self.settings.local_rows]
        view, s = self.view, self.settings
        if s.hl_gauss:
            targets = bins.hl_gauss_targets(view.value[items], s.num_bins, s.hl_gauss_sigma_ratio)
        else:
            targets = view.label[items]
        actions = None if view.action is None else view.action[items]
        return Batch(self.data.states[view.board[items]], targets, actions)

    def _generate(self, position: int) -> Iterator[tuple[Batch, int]]:
        while True:
            yield self.make_batch(position), position + self.batch_size
            position += self.batch_size


def fingerprint(data: BoardData) -> dict:
    """What a resumed run checks to know it reads the same data."""
    return {"boards": data.num_boards, "pairs": data.num_pairs, "files": len(data.files)}
