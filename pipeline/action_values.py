"""One board -> every legal move's value, the state value and the best move (a schema row).

The state value is the best move's value: the maximum over the board's action values, with
the best move's raw cp/mate. This needs no extra search and keeps the three targets
consistent (the BC target is the AV argmax, the SV target is the AV max). The paper ran a
separate unrestricted search for the state value instead; at the same per-move budget its
best move can disagree with the action values, which is why this pipeline does not.

`BoardAnnotator` owns the engine for one worker: an engine that dies, hangs or garbles a
search is restarted and the board retried; a board that still fails raises AnnotationFailed
carrying the last error, for the failures output.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import chess

from model.actions import legal_actions
from pipeline.engine import EngineError, Limit, MoveSearch, UciEngine


class NoLegalMoves(ValueError):
    """The board is mate or stalemate: there is nothing to value."""


class AnnotationFailed(RuntimeError):
    """A board the engine could not annotate after all retries; the message says why."""


def best_index(searches: list[MoveSearch]) -> int:
    """Index of the best move: highest win probability, then shortest mate / highest cp.

    Ties go to the first move in action-space order, so the choice is deterministic.
    """
    return max(range(len(searches)), key=lambda i: (searches[i].score.rank_key(), -i))


def board_row(fen: str, count: int, searches: list[MoveSearch], engine: str, limit: Limit) -> dict:
    """The BOARD_SCHEMA row of one annotated board (moves in the order searched)."""
    best = searches[best_index(searches)]
    return {
        "fen": fen,
        "count": count,
        "moves": [s.move for s in searches],
        "win_probs": [s.score.win_prob for s in searches],
        "cp": [s.score.cp for s in searches],
        "mate": [s.score.mate for s in searches],
        "best_move": best.move,
        "state_win_prob": best.score.win_prob,
        "state_cp": best.score.cp,
        "state_mate": best.score.mate,
        "engine": engine,
        "limit": str(limit),
    }


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
class BoardAnnotator:
    """Annotates boards with one engine process, restarting it when it fails.

    `make_engine` starts a fresh engine; `retries` is how many times a board is retried
    after an engine failure before it is given up. `restarts` counts engines discarded
    after a failure (the next board or retry starts a new one).
    """

    make_engine: Callable[[], UciEngine]
    limit: Limit
    retries: int = 2
    restarts: int = 0
    nodes: int = 0
    engine_pids: list[int] = field(default_factory=list)
    _engine: UciEngine | None = None

    @property
    def engine(self) -> UciEngine:
        if self._engine is None:
            self._engine = self.make_engine()
            self.engine_pids.append(self._engine.pid)
        return self._engine

    def start(self) -> UciEngine:
        """Starts the engine now (rather than at the first board) and returns it."""
        return self.engine

    def annotate(self, fen: str, count: int = 1) -> dict:
        """The schema row of `fen`; NoLegalMoves/ValueError for boards with nothing to search."""
        moves = board_moves(fen)
        errors: list[str] = []
        for _attempt in range(self.retries + 1):
            try:
                engine = self.engine
                searches = engine.search_moves(fen, moves, self.limit)
            except EngineError as e:
                errors.append(f"{type(e).__name__}: {e}")
                if self._engine is not None:
                    self._engine.kill()
                    self._engine = None
                self.restarts += 1
                continue
            self.nodes += sum(s.nodes for s in searches)
            return board_row(fen, count, searches, engine.name, self.limit)
        raise AnnotationFailed(f"{len(errors)} attempts failed; last: {errors[-1]}")

    def close(self) -> None:
        if self._engine is not None:
            self._engine.close()
            self._engine = None
