"""The board view of the training data, for the gateau backbone: one example is one board
with all its moves, as a graph (model/networks/board_graph.py) with a target per move edge."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core import bins
from core.actions import NUM_ACTIONS, indices_to_moves
from runtime.progress import Progress
from core.targets import target_kind
from runtime.workers import usable_cores
from model.networks import board_graph
from model.data.batch import Batch
from model.data.loader import Batches, BoardData, DataError, ItemView, make_view
from model.data.loader_settings import LoaderSettings


@dataclass(frozen=True)
class BoardGraphs:
    """The boards of a BoardData as graphs (model/networks/board_graph.py) with a target per move edge."""

    graphs: board_graph.Graphs
    edge_win_probs: np.ndarray  # (edges,) float32, NaN where no value (attacks, unvalued moves)
    best_edges: np.ndarray  # (N,) int32: the best move's edge within its board, -1 if none

    def valued_moves(self) -> np.ndarray:
        """(N,) number of move edges with a value on each board."""
        has = np.concatenate([[0], np.cumsum(~np.isnan(self.edge_win_probs))])
        return has[self.graphs.offsets[1:]] - has[self.graphs.offsets[:-1]]


# A split this large is encoded on every usable core with a progress line: below it, starting
# the worker processes (~1-2 s) would cost about as much as it saves.
PARALLEL_BOARDS = 20_000


def _encode(fens: np.ndarray) -> board_graph.Graphs:
    if len(fens) <= PARALLEL_BOARDS:
        return board_graph.encode_fens(fens)
    workers = usable_cores()
    meter = Progress(f"board graphs ({workers} workers)", len(fens), "boards")
    graphs = board_graph.encode_fens(fens, workers=workers, progress=meter.update)
    meter.done()
    return graphs


def board_graphs(data: BoardData) -> BoardGraphs:
    """Builds every board's graph (python-chess generates the moves and attacks) and puts
    each annotated move's value on its edge. A valued move or best move that is not legal on
    its board is a DataError naming the board."""
    graphs = _encode(data.fens)
    move_edges = np.flatnonzero(graphs.actions >= 0)
    edge_board = np.repeat(np.arange(data.num_boards), graphs.edge_counts())
    # Board-major and, within a board, in action order: move edge keys are sorted, and so
    # are the pairs'.
    keys = edge_board[move_edges] * NUM_ACTIONS + graphs.actions[move_edges]

    def find(boards: np.ndarray, actions: np.ndarray) -> np.ndarray:
        wanted = boards.astype(np.int64) * NUM_ACTIONS + actions
        at = np.minimum(np.searchsorted(keys, wanted), max(len(keys) - 1, 0))
        missing = np.flatnonzero(keys[at] != wanted) if len(keys) else np.arange(len(wanted))
        if missing.size:
            i = missing[0]
            board = int(boards[i])
            raise DataError(
                f"board {data.fens[board]!r} (in {list(data.files)}): move "
                f"{str(indices_to_moves([actions[i]])[0])!r} is not one of its legal moves"
            )
        return move_edges[at]

    values = np.full(len(graphs.actions), np.nan, np.float32)
    values[find(data.pair_board, data.pair_actions)] = data.pair_win_probs
    best = np.full(data.num_boards, -1, np.int32)
    has_best = np.flatnonzero(data.best_actions >= 0)
    edges = find(has_best, data.best_actions[has_best])
    best[has_best] = edges - graphs.offsets[has_best]
    return BoardGraphs(graphs, values, best)


def make_board_view(
    data: BoardData, boards: BoardGraphs, target: str, num_bins: int, av_partial: bool = False
) -> ItemView:
    """The items of one target when an example is a whole board: AV takes the boards with
    a valued move (complete boards only unless `av_partial`; their values are per edge, in
    BoardGraphs), SV the boards with a state value, BC those with a best move (label = the
    best move's edge)."""
    kind = target_kind(target)
    if kind.per_move_examples:  # boards with valued move edges
        keep = boards.valued_moves() > 0
        if not av_partial:
            keep &= ~data.partial
        board = np.flatnonzero(keep).astype(np.int32)
        label = np.zeros(len(board), np.int32)
        return ItemView(kind.name, board, None, label, None, data.counts[board].astype(float))
    if kind.per_edge_output:  # a best move edge per board
        board = np.flatnonzero(boards.best_edges >= 0).astype(np.int32)
        label = boards.best_edges[board]
        return ItemView(kind.name, board, None, label, None, data.counts[board].astype(float))
    return make_view(data, target, num_bins)  # a value per board: already one item per board


def soft_policy_targets(
    best: np.ndarray, values: np.ndarray, complete: np.ndarray, share: float, temperature: float
) -> np.ndarray:
    """(b, E) float32 policy targets: the best move's one-hot (`best`, (b,) edge), of which
    `share` is replaced, on the `complete` boards with two or more valued moves, by the
    softmax of the moves' win probabilities (`values`, (b, E), NaN where none) over
    `temperature`. Each row sums to 1 and is 0 off the move edges."""
    rows = np.arange(len(best))
    one_hot = np.zeros(values.shape, np.float32)
    one_hot[rows, best] = 1.0
    valued = ~np.isnan(values)
    soft = complete & (valued.sum(axis=1) >= 2)
    if not soft.any():
        return one_hot
    scaled = np.where(valued, values, -np.inf)[soft] / temperature
    scaled -= scaled.max(axis=1, keepdims=True)
    weights = np.exp(scaled)
    soft_part = share * weights / weights.sum(axis=1, keepdims=True)
    one_hot[soft] = (1.0 - share) * one_hot[soft] + soft_part
    return one_hot


class BoardBatches(Batches):
    """Batches of whole boards as padded graphs, for the gateau backbone.

    Yields `states` (b, 77) uint8, `senders`, `receivers`, `kinds` (b, E) int32 and
    targets, E being the largest edge count of the view's boards rounded up to a multiple
    of EDGE_STEP: one shape for the whole run (one compilation), the same on every host.
    Targets: AV `targets` (b, E) int32 bins (or (b, E, K) HL-Gauss) with
    `target_mask` (b, E) bool = the valued move edges; SV `targets` (b,) bins (or (b, K));
    BC `targets` (b,) the best move's edge, or with soft targets (b, E) float32 a distribution
    over the edges (soft_policy_targets). `position` counts boards.
    """

    EDGE_STEP = 32

    def __init__(
        self,
        data: BoardData,
        settings: LoaderSettings,
        position: int = 0,
        boards: BoardGraphs | None = None,
    ):
        self.boards = board_graphs(data) if boards is None else boards
        super().__init__(data, settings, position)

    def _make_view(self, data: BoardData, settings: LoaderSettings) -> ItemView:
        s = settings
        view = make_board_view(data, self.boards, s.target, s.num_bins, s.av_partial)
        if s.board_values and len(view) and np.isnan(data.state_win_probs[view.board]).all():
            # The value head would learn nothing (its loss counts valued boards only) and
            # the search would still read it.
            raise DataError(
                f"model.policy_value: none of the {len(view):,} training boards has a board "
                "value (a pack made with --policy-only nulls them; pack with --policy-value)"
            )
        counts = self.boards.graphs.edge_counts()[view.board]
        self.width = board_graph.edge_bucket(int(counts.max()) if len(counts) else 0, self.EDGE_STEP)
        return view

    def make_batch(self, position: int) -> Batch:
        items = self.indices(position)[self.settings.local_rows]
        board = self.view.board[items]
        edges = board_graph.pad_edges(self.boards.graphs, board, self.width)
        edge_index = edges.pop("edge_index")
        view, s = self.view, self.settings
        kind = target_kind(view.target)
        mask = None
        if kind.masked_loss:  # a value per move edge, the loss on the valued ones
            values = np.where(edge_index >= 0, self.boards.edge_win_probs[edge_index], np.nan)
            mask = ~np.isnan(values)
            values = np.where(mask, values, 0.0)
            if s.hl_gauss:
                targets = bins.hl_gauss_targets(values, s.num_bins, s.hl_gauss_sigma_ratio)
            else:
                targets = bins.to_bins(values, s.num_bins)
        elif kind.value_head and s.hl_gauss:
            targets = bins.hl_gauss_targets(view.value[items], s.num_bins, s.hl_gauss_sigma_ratio)
        elif s.soft_targets:  # BC against the best move mixed with all the moves' values
            values = np.where(edge_index >= 0, self.boards.edge_win_probs[edge_index], np.nan)
            complete = ~self.data.partial[board]
            targets = soft_policy_targets(
                view.label[items], values, complete, s.soft_targets, s.soft_temperature
            )
        else:
            targets = view.label[items]
        value_targets = None
        if s.board_values:
            value = self.data.state_win_probs[board]
            has = ~np.isnan(value)
            value_targets = np.where(has, bins.to_bins(np.where(has, value, 0.0), s.num_bins), -1)
            value_targets = value_targets.astype(np.int32)
        return Batch(
            self.data.states[board], targets, target_mask=mask, value_targets=value_targets, **edges
        )
