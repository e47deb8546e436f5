"""ChessBench rows (import_chessbench.py beside it): one board's records -> its row of
core/schema.py, by the rules of the import's module doc, or BoardRejected saying why not."""

from __future__ import annotations

import collections
from collections.abc import Sequence

import chess

from core.actions import legal_actions, move_to_index
from core.schema import SOURCE_CHESSBENCH, BoardRow
from core.tokenizer import tokenize
from pipeline.beam import stats

# What the paper says made ChessBench: Stockfish 16 at 50 ms per (board, move).
CHESSBENCH_ENGINE = "Stockfish 16 (ChessBench)"
CHESSBENCH_LIMIT = "time=0.05"


class BoardRejected(ValueError):
    """The records of a board cannot make a row: the message says why."""


def _check_board(fen: str) -> chess.Board:
    try:
        board = chess.Board(fen)
        tokenize(fen)
    except ValueError as e:
        raise BoardRejected(f"unusable FEN: {e}") from None
    return board


def _row(fen: str, count: int, **values) -> BoardRow:
    # Not make_board_row: ChessBench has no engine scores, so `cp` and `mate` are null
    # columns rather than lists of nulls, and a row is partial unless it has every move.
    row = BoardRow(
        fen=fen,
        count=count,
        moves=[],
        win_probs=[],
        cp=None,
        mate=None,
        best_move="",
        state_win_prob=None,
        state_cp=None,
        state_mate=None,
        partial=True,
        source=SOURCE_CHESSBENCH,
        engine=CHESSBENCH_ENGINE,
        limit=CHESSBENCH_LIMIT,
    )
    row.update(values)  # type: ignore[typeddict-item]
    return row


def av_row(fen: str, records: Sequence[tuple[str, float]], tally: stats.BundleStats) -> BoardRow:
    """The row of one board's action-value records (see the module doc for the rules)."""
    board = _check_board(fen)
    values = dict(records)
    count = 1
    if len(values) < len(records):  # rare: some record repeated
        for move, p in records:
            if values[move] != p:
                raise BoardRejected(
                    f"move {move} has two win probabilities, {min(values[move], p)} and "
                    f"{max(values[move], p)}"
                )
        count = max(collections.Counter(move for move, _ in records).values())
        tally.count("duplicate_records", len(records) - len(values))
    legal = legal_actions(board)
    moves = legal
    if len(values) != len(legal) or not all(m in values for m in legal):
        legal_set = set(legal)
        illegal = sorted(m for m in values if m not in legal_set)
        if illegal:
            raise BoardRejected(f"moves not legal on this board: {' '.join(illegal)}")
        moves = [m for m in legal if m in values]
        missing = [m for m in legal if m not in values]
        tally.count("partial_boards")
        tally.example("partial_boards", f"{fen}: no records for {' '.join(missing[:8])}")
    probs = [values[m] for m in moves]
    best = max(range(len(probs)), key=probs.__getitem__)  # ties: first in action-space order
    return _row(
        fen,
        count,
        moves=moves,
        win_probs=probs,
        best_move=moves[best],
        state_win_prob=probs[best],
        partial=len(moves) < len(legal),
    )


def sv_row(fen: str, records: Sequence[float], tally: stats.BundleStats) -> BoardRow:
    _check_board(fen)
    if len(set(records)) > 1:
        tally.count("conflicting_boards")
        tally.example("conflicting_boards", f"{fen}: win probabilities {sorted(set(records))}")
    # Sorted, so that the mean does not depend on the order the shuffle delivered them in.
    return _row(fen, len(records), state_win_prob=sum(sorted(records)) / len(records))


def bc_row(fen: str, records: Sequence[str], tally: stats.BundleStats) -> BoardRow:
    board = _check_board(fen)
    legal = set(legal_actions(board))
    illegal = sorted(set(records) - legal)
    if illegal:
        raise BoardRejected(f"moves not legal on this board: {' '.join(illegal)}")
    votes = collections.Counter(records)
    if len(votes) > 1:
        tally.count("conflicting_boards")
        tally.example("conflicting_boards", f"{fen}: best moves {dict(sorted(votes.items()))}")
    best = min(votes, key=lambda m: (-votes[m], move_to_index(m)))
    return _row(fen, len(records), best_move=best)


ROW_MAKERS = {"av": av_row, "sv": sv_row, "bc": bc_row}
