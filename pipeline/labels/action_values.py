"""One board -> a schema row: every legal move's value, the state value and the best move;
or, in the cheap `search` mode, what one unrestricted search says.

Two modes (`Mode`), each a different cost per board:
- `action-values` (the default, the paper's AV data): one search per legal move, restricted
  to that move, each under the limit; ~35 searches per board in a typical game position.
- `search` (the paper's SV and BC data came from such searches): one unrestricted search
  under the limit, reporting its `multipv` K best lines. The row holds those K moves' values
  (`partial` True unless they are all the legal moves), the best of them as the state value
  and best move. Its `limit` column says so: `search:nodes=N,multipv=K`, where an
  action-values row has the bare `nodes=N`.

In action-values mode the state value is the best move's value: the maximum over the board's
action values, with the best move's raw cp/mate. This needs no extra search and keeps the three
targets consistent (the BC target is the AV argmax, the SV target is the AV max). The paper ran
a separate unrestricted search for the state value instead; at the same per-move budget its
best move can disagree with the action values, which is why this pipeline does not.

`BoardAnnotator` owns the engine for one worker: an engine that dies, hangs or garbles a
search is restarted and the board retried; a board that still fails raises AnnotationFailed
carrying the last error, for the failures output.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, get_args

import chess

from core.actions import ACTION_TO_INDEX, legal_actions
from core.engine_settings import EngineLimit
from core.schema import SOURCE_ANNOTATE, BoardRow, make_board_row
from core.values import best_score_index
from pipeline.labels.uci_client import (
    EngineError,
    EngineProtocolError,
    MoveSearch,
    RootSearch,
    UciEngine,
)

Mode = Literal["action-values", "search"]
MODES: tuple[Mode, ...] = get_args(Mode)
SEARCH_LABEL = "search"  # the `limit` column's prefix for rows of one root search


class NoLegalMoves(ValueError):
    """The board is mate or stalemate: there is nothing to value."""


class AnnotationFailed(RuntimeError):
    """A board the engine could not annotate after all retries; the message says why."""


def best_index(searches: list[MoveSearch]) -> int:
    """Index of the best move: highest win probability, then shortest mate / highest cp.

    Ties go to the first move in action-space order, so the choice is deterministic.
    """
    return best_score_index([s.score for s in searches])


def board_row(
    fen: str, count: int, searches: list[MoveSearch], engine: str, limit: EngineLimit
) -> BoardRow:
    """The BOARD_SCHEMA row of one annotated board (moves in the order searched)."""
    best = searches[best_index(searches)]
    return make_board_row(
        fen,
        count=count,
        moves=[s.move for s in searches],
        win_probs=[s.score.win_prob for s in searches],
        cp=[s.score.cp for s in searches],
        mate=[s.score.mate for s in searches],
        best_move=best.move,
        state_win_prob=best.score.win_prob,
        state_cp=best.score.cp,
        state_mate=best.score.mate,
        source=SOURCE_ANNOTATE,
        engine=engine,
        limit=str(limit),
    )


def limit_label(limit: EngineLimit, mode: Mode = "action-values", multipv: int = 1) -> str:
    """The `limit` column: `nodes=2000` per move searched, or for one root search
    `search:nodes=20000,multipv=4`, so that nobody takes the two for the same data."""
    if mode == "action-values":
        return str(limit)
    return f"{SEARCH_LABEL}:{limit},multipv={multipv}"


def search_row(
    fen: str, count: int, legal: list[str], search: RootSearch, engine: str, limit: str
) -> BoardRow:
    """The BOARD_SCHEMA row of one root search (`limit` is its `limit_label`).

    The lines' first moves, in action-space order, with their scores; the best line (highest
    `Score.rank_key`, the engine's first among equals) gives the best move and the state
    value, so the BC target is the argmax of the row's values as in every other row.
    EngineProtocolError if a line's move is not one of the board's `legal` moves or two
    lines share a first move.
    """
    lines = search.lines
    moves = [line.move for line in lines]
    illegal = [m for m in moves if m not in legal]
    if illegal or len(set(moves)) != len(moves):
        raise EngineProtocolError(
            f"root search of {fen!r} reported lines {moves}: "
            + (f"{illegal} not legal" if illegal else "a move twice")
        )
    best = best_score_index([line.score for line in lines])
    order = sorted(range(len(lines)), key=lambda i: ACTION_TO_INDEX[moves[i]])
    scores = [lines[i].score for i in order]
    return make_board_row(
        fen,
        count=count,
        moves=[moves[i] for i in order],
        win_probs=[score.win_prob for score in scores],
        cp=[score.cp for score in scores],
        mate=[score.mate for score in scores],
        best_move=lines[best].move,
        state_win_prob=lines[best].score.win_prob,
        state_cp=lines[best].score.cp,
        state_mate=lines[best].score.mate,
        partial=len(lines) < len(legal),
        source=SOURCE_ANNOTATE,
        engine=engine,
        limit=limit,
    )


def board_moves(fen: str) -> list[str]:
    """Legal moves in action-space order; ValueError for a bad FEN, NoLegalMoves if none."""
    board = chess.Board(fen)
    if board.chess960 or board.has_chess960_castling_rights():
        raise ValueError(f"{fen!r}: Chess960 castling rights are outside the action space")
    moves = legal_actions(board)
    if not moves:
        raise NoLegalMoves(f"{fen!r} has no legal move")
    return moves


@dataclass
class _Pending:
    fen: str
    count: int
    moves: list[str]
    errors: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class BoardResult:
    """One board's result: its schema row, or the error that made it fail."""

    fen: str
    count: int
    row: dict | None
    error: str | None


@dataclass
class BoardAnnotator:
    """Annotates boards with one engine process, restarting it when it fails.

    `submit` queues boards and `collect` returns the oldest one's BoardResult, so a caller can keep
    a board queued behind the one being searched (the engine then never waits for Python).
    `annotate` does one board start to finish. `make_engine` starts a fresh engine; `mode` and
    `multipv` choose how a board is valued (the module doc). A board is retried `retries` times
    after engine failures before it fails for good. `restarts` counts engines discarded after a
    failure. Invariant: a running engine holds every pending board, or only the oldest while
    that one is being retried alone after a failure; with no engine, none is held (the next
    engine gets them again, in order).
    """

    make_engine: Callable[[], UciEngine]
    limit: EngineLimit
    retries: int = 2
    mode: Mode = "action-values"
    multipv: int = 1
    restarts: int = 0
    nodes: int = 0
    engine_pids: list[int] = field(default_factory=list)
    _engine: UciEngine | None = None
    _pending: collections.deque = field(default_factory=collections.deque)
    _isolate: bool = False  # the engine holds only the oldest pending board
    row_limit: str = field(init=False, default="")  # the rows' `limit` column (limit_label)

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if self.multipv < 1:
            raise ValueError(f"multipv must be >= 1, got {self.multipv}")
        if self.mode == "action-values" and self.multipv != 1:
            raise ValueError("multipv is for the search mode (action-values values every move)")
        self.row_limit = limit_label(self.limit, self.mode, self.multipv)

    @property
    def engine(self) -> UciEngine:
        if self._engine is None:
            engine = self.make_engine()
            self.engine_pids.append(engine.pid)
            if self.mode == "search":
                engine.set_multipv(self.multipv)
            self._engine = engine
            # After a failure the oldest board is retried alone: a board queued behind it
            # may be what killed the engine, and must not make the oldest one fail.
            for pending in list(self._pending)[:1] if self._isolate else self._pending:
                self._send(pending)
        return self._engine

    def _send(self, pending: _Pending) -> None:
        if self.mode == "search":
            self._engine.submit_root(pending.fen, self.limit)
        else:
            self._engine.submit(pending.fen, pending.moves, self.limit)

    def _row(self, pending: _Pending, engine: UciEngine) -> dict:
        """The oldest board's results from the engine, as its schema row."""
        if self.mode == "search":
            search = engine.collect_root()
            self.nodes += search.nodes
            return search_row(
                pending.fen, pending.count, pending.moves, search, engine.name, self.row_limit
            )
        searches = engine.collect()
        self.nodes += sum(s.nodes for s in searches)
        return board_row(pending.fen, pending.count, searches, engine.name, self.limit)

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    def start(self) -> UciEngine:
        """Starts the engine now (rather than at the first board) and returns it."""
        return self.engine

    def _discard_engine(self) -> None:
        if self._engine is not None:
            self._engine.kill()
            self._engine = None
        self._isolate = True
        self.restarts += 1

    def _end_isolation(self) -> None:
        """After the oldest board is done, hands the boards behind it to the engine."""
        if not self._isolate:
            return
        self._isolate = False
        if self._engine is None:
            return
        try:
            for pending in self._pending:
                self._send(pending)
        except EngineError:
            self._discard_engine()

    def submit(self, fen: str, count: int = 1) -> None:
        """Queues a board; NoLegalMoves/ValueError at once for boards with nothing to search."""
        pending = _Pending(fen, count, board_moves(fen))
        self._pending.append(pending)
        if self._engine is not None and not self._isolate:
            try:
                self._send(pending)
            except EngineError:
                self._discard_engine()  # collect() starts another and retries

    def collect(self) -> BoardResult:
        """The oldest submitted board's outcome, after as many engine restarts as allowed."""
        pending = self._pending[0]
        while True:
            try:
                engine = self.engine
                row = self._row(pending, engine)
            except EngineError as e:
                pending.errors.append(f"{type(e).__name__}: {e}")
                self._discard_engine()
                if len(pending.errors) > self.retries:
                    self._pending.popleft()
                    self._end_isolation()
                    message = f"{len(pending.errors)} attempts failed; last: {pending.errors[-1]}"
                    return BoardResult(pending.fen, pending.count, None, message)
                continue
            self._pending.popleft()
            self._end_isolation()
            return BoardResult(pending.fen, pending.count, row, None)

    def annotate(self, fen: str, count: int = 1) -> dict:
        """The schema row of one board; AnnotationFailed if the engine keeps failing on it."""
        if self._pending:
            raise RuntimeError("annotate() with boards still pending: collect them first")
        self.submit(fen, count)
        outcome = self.collect()
        if outcome.row is None:
            raise AnnotationFailed(outcome.error)
        return outcome.row

    def close(self) -> None:
        if self._engine is not None:
            self._engine.close()
            self._engine = None
