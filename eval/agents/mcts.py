"""Monte Carlo tree search on top of the nets: PUCT (AlphaZero) and search-contempt (Joshi 2025).

    search = TreeSearch(evaluator, SearchConfig(cpuct=1.5, batch=8, contempt=None))
    search.set_position(board)                 # reuses the subtree if `board` continues the game
    info = search.run(SearchLimit(sims=256))   # or deadline=..., stop=threading.Event()
    search.best_move()                         # the most visited root move

**PUCT.** A playout walks from the root choosing at each node the move maximising
`Q(s,a) + cpuct * P(s,a) * sqrt(N(s)) / (1 + N(s,a))`, where N(s) = 1 + sum_b N(s,b) counts
the playout that expanded s, Q(s,a) is the mean value of the playouts through the move (win
probability for the side to move at s) and P the evaluator's prior. A move not yet visited
has Q = the evaluator's value of that move where it gives one (AV, SV), else the value of s
itself. The playout ends at a node not yet in the tree: a finished game is scored exactly by
the rules (core.game_end: mate 0 for the mated side, stalemate, insufficient material,
threefold repetition counted over the game's move stack and the path, fifty moves 0.5), any
other board is evaluated by the network; the value is then backed up the path, flipped at
each ply (1 - v).

**search-contempt** (`contempt=N_scl`). At the root player's nodes (even depths) PUCT as
above. At the opponent's nodes (odd depths) PUCT until the node's moves have N_scl visits
between them; then their visit counts are frozen, and every later playout through the node
samples its move from that frozen distribution (Thompson-style), however the values change.
The opponent is modelled as playing like a short search. Because the rule depends on whose
turn the root is, a tree is reused only for the same root player.

**Batching.** Up to `batch` leaves are gathered before one evaluator call, each playout adding
a virtual loss (an in-flight visit worth 0) along its path so the next descends elsewhere; a
playout that reaches a leaf already waiting in the batch ends the gathering. With batch 1
there is never an in-flight visit: the search is exactly the sequential algorithm.

**Budget.** `sims` counts this run's playouts (a finished game reached counts as one); the
root's own evaluation is free, so sims=0 plays the network's own choice. A reused subtree
keeps its visits, so the root may hold more than `sims`.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import chess
import numpy as np

from core.game_end import terminal_value
from eval.agents.evaluators import LeafEvaluation, LeafEvaluator

DEFAULT_CPUCT = 1.5
DEFAULT_SIMS = 256
# Bytes an expanded node takes, with room to spare: its five per-move arrays, children list
# and moves tuple for ~30 legal moves measured ~2.7 KB (tracemalloc, models/cpu searching a
# middlegame); the move objects themselves are shared (eval/agents/evaluators.py).
NODE_BYTES = 4096


def max_nodes_for(megabytes: int) -> int:
    """The nodes a tree of at most `megabytes` MB holds (UCI's Hash)."""
    return max(1, megabytes * 2**20 // NODE_BYTES)


@dataclass(frozen=True)
class SearchConfig:
    cpuct: float = DEFAULT_CPUCT
    batch: int = 1  # leaves per evaluator call
    contempt: int | None = None  # N_scl; None = plain PUCT
    max_nodes: int | None = None  # evaluated positions the tree may hold; None = no bound

    def __post_init__(self):
        if not 0 < self.cpuct < math.inf:
            raise ValueError(f"cpuct must be finite and > 0, got {self.cpuct}")
        if self.batch < 1:
            raise ValueError(f"batch must be >= 1, got {self.batch}")
        if self.contempt is not None and self.contempt < 1:
            raise ValueError(f"contempt (N_scl) must be >= 1, got {self.contempt}")
        if self.max_nodes is not None and self.max_nodes < 1:
            raise ValueError(f"max_nodes must be >= 1, got {self.max_nodes}")


@dataclass(frozen=True)
class SearchLimit:
    """When a run stops: after `sims` playouts, at `deadline` (time.monotonic()) or when
    `stop` is set, whichever comes first; checked between batches. With `within_deadline`
    a batch is not started when the last one, taking as long again, would end past the
    deadline (a clock to keep, not a time to fill)."""

    sims: int | None = None
    deadline: float | None = None
    stop: threading.Event | None = None
    within_deadline: bool = False

    def __post_init__(self):
        if self.sims is None and self.deadline is None and self.stop is None:
            raise ValueError("a search limit needs sims, a deadline or a stop event")
        if self.sims is not None and self.sims < 0:
            raise ValueError(f"sims must be >= 0, got {self.sims}")


@dataclass(frozen=True)
class SearchInfo:
    """The state of a search, as a UCI `info` line reports it."""

    depth: int  # mean depth of this run's playouts, rounded
    seldepth: int  # deepest playout of this run
    nodes: int  # visits of the root, reused ones included
    playouts: int  # this run's playouts
    seconds: float  # this run's time
    win_prob: float  # the best move's value for the side to move at the root
    pv: tuple[chess.Move, ...]  # the most visited line

    @property
    def nps(self) -> int:
        return round(self.playouts / self.seconds) if self.seconds > 0 else 0


@dataclass(frozen=True)
class MoveStats:
    """One root move after a search (for analysis output and UCI multipv)."""

    move: chess.Move
    visits: int
    q: float  # its mean value for the side to move (the network's value if unvisited)
    prior: float


class Node:
    """A position in the tree. Its moves' statistics live here, in arrays by move index:
    `visits` (finished playouts), `value_sums` (their values for this node's side to move),
    `in_flight` (virtual losses of playouts waiting in a batch)."""

    __slots__ = (
        "children",
        "frozen",
        "in_flight",
        "initial_q",
        "moves",
        "priors",
        "terminal",
        "value",
        "value_sums",
        "visits",
    )

    def __init__(self):
        self.moves: tuple[chess.Move, ...] | None = None  # None until evaluated
        self.terminal = False
        self.value = 0.5  # evaluator's (or the rules') value for the side to move
        self.frozen: np.ndarray | None = None  # search-contempt: visit counts at the freeze

    @property
    def expanded(self) -> bool:
        return self.moves is not None

    def expand(self, evaluation: LeafEvaluation) -> None:
        count = len(evaluation.moves)
        self.value = evaluation.value
        self.priors = np.asarray(evaluation.priors, np.float64)
        self.initial_q = (
            np.asarray(evaluation.move_values, np.float64)
            if evaluation.move_values is not None
            else np.full(count, evaluation.value, np.float64)
        )
        self.visits = np.zeros(count, np.int64)
        self.value_sums = np.zeros(count, np.float64)
        self.in_flight = np.zeros(count, np.int64)
        self.children: list[Node | None] = [None] * count
        # Last: a reader in another thread (an answer at the deadline) sees a node as
        # expanded only once all its arrays are there.
        self.moves = evaluation.moves

    def finish(self, value: float) -> None:
        """Marks a finished game, worth `value` for the side to move."""
        self.terminal = True
        self.value = value

    @property
    def total_visits(self) -> int:
        """Playouts through this node, the one that created it included."""
        if not self.expanded:
            return 1 if self.terminal else 0
        return 1 + int(self.visits.sum())

    def q(self) -> np.ndarray:
        """Each move's current value for the side to move (initial_q where unvisited)."""
        q = self.initial_q.copy()
        seen = self.visits > 0
        q[seen] = self.value_sums[seen] / self.visits[seen]
        return q

    def ranking(self) -> np.ndarray:
        """Move indices, most visited first; ties by value, then prior, then action order."""
        keys = (-np.arange(len(self.moves)), self.priors, self.q(), self.visits)
        return np.lexsort(keys)[::-1]

    def best_index(self) -> int:
        return int(self.ranking()[0])


def puct_index(node: Node, cpuct: float) -> int:
    """The move maximising Q + U, in-flight visits counted as losses (first of equals)."""
    started = node.visits + node.in_flight
    q = node.initial_q.copy()
    seen = started > 0
    q[seen] = node.value_sums[seen] / started[seen]
    u = cpuct * math.sqrt(1 + int(started.sum())) * node.priors / (1 + started)
    return int(np.argmax(q + u))


def contempt_index(node: Node, n_scl: int, rng: np.random.Generator) -> int | None:
    """search-contempt at an opponent's node: None (use PUCT) until its moves have `n_scl`
    finished visits; then the visit counts are frozen once and each call samples a move in
    proportion to them."""
    if node.frozen is None:
        total = int(node.visits.sum())
        if total < n_scl:
            return None
        node.frozen = node.visits.copy()
    cumulative = np.cumsum(node.frozen) / node.frozen.sum()  # ends at exactly 1.0
    return int(np.searchsorted(cumulative, rng.random(), side="right"))


@dataclass
class _Playout:
    path: list[tuple[Node, int]]  # (node, move index) from the root down
    leaf: Node
    board: chess.Board | None  # the leaf's position, for the evaluator (None if finished)


class TreeSearch:
    """One search tree over `evaluator`, kept between positions of a game (see set_position).
    Not thread-safe: run one call at a time (a UCI engine runs `run` in its worker thread and
    sets the limit's stop event from the input thread)."""

    def __init__(
        self,
        evaluator: LeafEvaluator,
        config: SearchConfig | None = None,
        rng: np.random.Generator | None = None,
    ):
        self.evaluator = evaluator
        self.config = config or SearchConfig()
        self.rng = rng if rng is not None else np.random.default_rng(0)
        self.root: Node | None = None
        self.reused = False  # whether the last set_position kept a subtree
        self._board: chess.Board | None = None
        self._last = SearchInfo(0, 0, 0, 0, 0.0, 0.5, ())
        self.nodes = 0  # expanded nodes in the tree (SearchConfig.max_nodes bounds them)
        self._progress = (0, 0, 0, time.monotonic())  # the running run's, for snapshot()

    # --- the position --------------------------------------------------------------------

    def clear(self) -> None:
        """Forgets the tree (a new game)."""
        self.root, self._board, self.reused = None, None, False
        self.nodes = 0

    def set_position(self, board: chess.Board) -> bool:
        """Makes `board` (with its game's move stack) the root. If it continues the position
        searched before (same start, the old moves followed by more) and the tree holds it,
        that subtree becomes the root with its visits; else the tree starts afresh. With
        search-contempt only a position with the same side to move is reused. Returns
        whether a subtree was reused."""
        node = self._descendant(board)
        self._board = board.copy()
        self.root = node if node is not None else Node()
        self.reused = node is not None
        self.nodes = _count_expanded(self.root)
        return self.reused

    @property
    def full(self) -> bool:
        """Whether the tree holds as many nodes as SearchConfig.max_nodes allows."""
        return self.config.max_nodes is not None and self.nodes >= self.config.max_nodes

    def _descendant(self, board: chess.Board) -> Node | None:
        old = self._board
        if old is None or self.root is None:
            return None
        if self.config.contempt is not None and board.turn != old.turn:
            return None
        played = len(old.move_stack)
        if len(board.move_stack) < played or board.move_stack[:played] != old.move_stack:
            return None
        if board.root() != old.root():  # chess.Board equality: same position
            return None
        node = self.root
        for move in board.move_stack[played:]:
            if node is None or not node.expanded or move not in node.moves:
                return None
            node = node.children[node.moves.index(move)]
        return node if node is not None and node.expanded else None

    # --- searching -----------------------------------------------------------------------

    def run(
        self,
        limit: SearchLimit,
        on_info: Callable[[SearchInfo], None] | None = None,
        info_every: float = 1.0,
        info_at_end: bool = True,
    ) -> SearchInfo:
        """Searches from the root until `limit`; calls `on_info` every `info_every` seconds
        (and with the final SearchInfo, unless not `info_at_end`) and returns the final
        SearchInfo. ValueError if the root game is over."""
        if self._board is None or self.root is None:
            raise RuntimeError("set_position before run")
        start = time.monotonic()
        if not self.root.expanded:
            if terminal_value(self._board) is not None or not any(self._board.legal_moves):
                raise ValueError(f"the game is over in {self._board.fen()!r}: nothing to search")
            [evaluation] = self.evaluator.evaluate([self._board.copy(stack=False)])
            self.root.expand(evaluation)
            self.nodes += 1
        playouts, depth_sum, seldepth = 0, 0, 0
        self._progress = (0, 0, 0, start)
        next_info = start + info_every

        def info() -> SearchInfo:
            return self._info(playouts, depth_sum, seldepth, time.monotonic() - start)

        last_batch = 0.0  # seconds the last batch took
        while not self._stopped(limit, playouts, last_batch if limit.within_deadline else 0.0):
            budget = self.config.batch
            if limit.sims is not None:
                budget = min(budget, limit.sims - playouts)
            batch_start = time.monotonic()
            for playout in self._gather(budget):
                playouts += 1
                depth_sum += len(playout.path)
                seldepth = max(seldepth, len(playout.path))
            self._progress = (playouts, depth_sum, seldepth, start)
            last_batch = time.monotonic() - batch_start
            if on_info is not None and time.monotonic() >= next_info:
                on_info(info())
                next_info = time.monotonic() + info_every
        self._last = info()
        if on_info is not None and info_at_end:
            on_info(self._last)
        return self._last

    def _stopped(self, limit: SearchLimit, playouts: int, margin: float) -> bool:
        if self.full:  # no room for another node: what the tree knows is the answer
            return True
        if limit.sims is not None and playouts >= limit.sims:
            return True
        if limit.stop is not None and limit.stop.is_set():
            return True
        return limit.deadline is not None and time.monotonic() + margin >= limit.deadline

    def _gather(self, budget: int) -> list[_Playout]:
        """Up to `budget` playouts: finished games are backed up at once, the other leaves
        evaluated together and then backed up. Returns the playouts completed."""
        done: list[_Playout] = []
        waiting: list[_Playout] = []
        while len(done) + len(waiting) < budget:
            playout = self._descend()
            if playout is None:  # reached a leaf already waiting: evaluate what we have
                break
            if playout.board is None:
                self._backup(playout.path, playout.leaf.value)
                done.append(playout)
            else:
                waiting.append(playout)
        if waiting:
            evaluations = self.evaluator.evaluate([p.board for p in waiting])
            for playout, evaluation in zip(waiting, evaluations, strict=True):
                playout.leaf.expand(evaluation)
                self.nodes += 1
                self._backup(playout.path, evaluation.value)
            done.extend(waiting)
        return done

    def _descend(self) -> _Playout | None:
        """Walks from the root to a leaf, adding a virtual loss along the path. A new leaf
        gets its node (a finished game is scored at once); a leaf waiting for evaluation
        undoes the walk and returns None."""
        board, node = self._board, self.root
        root_turn = board.turn
        path: list[tuple[Node, int]] = []
        try:
            while True:
                if node.terminal:
                    return _Playout(path, node, None)
                if not node.expanded:  # created by an earlier playout of this batch
                    for parent, index in path:
                        parent.in_flight[index] -= 1
                    return None
                index = self._select(node, opponent=board.turn != root_turn)
                node.in_flight[index] += 1
                path.append((node, index))
                board.push(node.moves[index])
                child = node.children[index]
                if child is None:
                    child = node.children[index] = Node()
                    value = terminal_value(board)
                    if value is not None:
                        child.finish(value)
                        return _Playout(path, child, None)
                    return _Playout(path, child, board.copy(stack=False))
                node = child
        finally:
            for _ in path:
                board.pop()

    def _select(self, node: Node, opponent: bool) -> int:
        if opponent and self.config.contempt is not None:
            index = contempt_index(node, self.config.contempt, self.rng)
            if index is not None:
                return index
        return puct_index(node, self.config.cpuct)

    @staticmethod
    def _backup(path: list[tuple[Node, int]], leaf_value: float) -> None:
        value = leaf_value  # for the side to move at the leaf
        for node, index in reversed(path):
            value = 1.0 - value  # for the side to move at `node`
            node.in_flight[index] -= 1
            node.visits[index] += 1
            node.value_sums[index] += value

    # --- results -------------------------------------------------------------------------

    def best_move(self) -> chess.Move:
        """The most visited root move (ties by value, prior, action order); with no visits,
        the evaluator's own best (AV/SV: highest value; BC: highest prior)."""
        if self.root is None or not self.root.expanded:
            raise RuntimeError("no search has run on this position")
        return self.root.moves[self.root.best_index()]

    def root_moves(self) -> list[MoveStats]:
        """Every root move's statistics, most visited first (the best_move order)."""
        root = self.root
        if root is None or not root.expanded:
            raise RuntimeError("no search has run on this position")
        q = root.q()
        return [
            MoveStats(root.moves[i], int(root.visits[i]), float(q[i]), float(root.priors[i]))
            for i in root.ranking()
        ]

    def expected_reply(self, move: chess.Move) -> chess.Move | None:
        """The opponent's reply the tree expects after root move `move`: its most visited
        there, or the evaluator's best where the search has not gone below `move`; None if
        the tree has not evaluated the position after it (or the game ends there)."""
        root = self.root
        if root is None or not root.expanded or move not in root.moves:
            return None
        child = root.children[root.moves.index(move)]
        if child is None or not child.expanded:
            return None
        return child.moves[child.best_index()]

    def principal_variation(self) -> tuple[chess.Move, ...]:
        pv, node = [], self.root
        while node is not None and node.expanded and node.visits.sum() > 0:
            index = node.best_index()
            pv.append(node.moves[index])
            node = node.children[index]
        return tuple(pv)

    def info(self) -> SearchInfo:
        """The last run's info."""
        return self._last

    def snapshot(self) -> SearchInfo:
        """The running (or last) run's info so far; safe to call from another thread while
        `run` goes on (what it reads may lag a batch behind)."""
        playouts, depth_sum, seldepth, start = self._progress
        return self._info(playouts, depth_sum, seldepth, time.monotonic() - start)

    def _info(self, playouts: int, depth_sum: int, seldepth: int, seconds: float) -> SearchInfo:
        root = self.root
        return SearchInfo(
            depth=round(depth_sum / playouts) if playouts else 0,
            seldepth=seldepth,
            nodes=root.total_visits,
            playouts=playouts,
            seconds=seconds,
            win_prob=float(root.q()[root.best_index()]),
            pv=self.principal_variation(),
        )


def _count_expanded(root: Node) -> int:
    count, stack = 0, [root]
    while stack:
        node = stack.pop()
        if node.expanded:
            count += 1
            stack.extend(child for child in node.children if child is not None)
    return count
