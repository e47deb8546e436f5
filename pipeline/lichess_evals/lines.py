"""One line of the Lichess evaluation database -> one annotated-board row (pure functions).

One line -> one board row:
- The deepest evaluation is used (highest `depth`; ties: more `knodes`, then the first).
  Shallower evaluations are discarded unchecked beyond their depth and knodes.
- The FEN has no clocks: the eval DB drops them (its positions are keyed on what matters to
  the engine), but our FENs, and so the tokenizer, need all six fields. Missing clocks become
  DEFAULT_HALFMOVE (0) and DEFAULT_FULLMOVE (1), what python-chess and Lichess assume for a
  bare position. The FEN is then written as python-chess writes it (`board.fen()`).
- `count` is 1: the database holds each position once; duplicates are not looked for (that
  would need every FEN in memory).
- `moves` are the distinct first moves of the evaluation's PVs, normalised by python-chess
  (`e1h1` castling becomes `e1g1`), in action-space order (core/actions.py); a repeated first
  move keeps its first PV's score and is counted (`duplicate_pv_moves`). `cp`/`mate` are
  Lichess's white-view scores turned to the side to move's view, `win_probs` come from
  `core.values.win_probability`, exactly as in the annotation pipeline.
- `best_move` and `state_*` come from the PV with the highest win probability, the first one
  among equals. Lichess lists PVs best first, so that is the first PV unless a later one is
  strictly better, which is counted (`best_pv_not_first`): `best_move` must be an argmax of
  `win_probs`, or the policy (BC) and value (AV) targets of one board would disagree.
- `partial` is False only when the PV first moves are all the legal moves.
- `engine` is ENGINE, `limit` `depth=D,knodes=K` of the evaluation used.

A line that cannot become such a row goes to the failures output (FAILURE_SCHEMA) with an
error `FILE:LINE: reason: detail`, and is counted by reason in stats.json, so that
boards + failures == lines. Reasons: not_json, bad_record (JSON of another shape), bad_fen
(python-chess rejects it), invalid_position (parsed, but not a legal chess position),
no_legal_moves (checkmate or stalemate: nothing to learn, and `moves` may not be empty),
no_pvs, illegal_move (a PV's first move is unparsable or illegal), no_score (a PV with
neither cp nor mate), bad_score (both, not an integer, out of int32, or `mate` 0 on a board
that has moves: mate 0 means the side to move is already mated).
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from typing import Any

import chess

from core.actions import ACTION_TO_INDEX
from core.schema import SOURCE_LICHESS_EVALS, BoardRow, make_board_row
from core.values import win_probability

DEFAULT_HALFMOVE = 0
DEFAULT_FULLMOVE = 1
ENGINE = "lichess cloud eval (Stockfish, various versions)"
_INT32 = 2**31

# Failure reasons (stats.json lists every one, with its count, zero or not).
REASONS = (
    "not_json",
    "bad_record",
    "bad_fen",
    "invalid_position",
    "no_legal_moves",
    "no_pvs",
    "illegal_move",
    "no_score",
    "bad_score",
)


class BadLine(ValueError):
    """A line that makes no board row: `reason` (one of REASONS) and what was wrong.

    `fen` and `limit` are the line's as far as they could be read, for the failure row.
    """

    def __init__(self, reason: str, detail: str, fen: str | None = None, limit: str | None = None):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail
        self.fen = fen
        self.limit = limit


@dataclass(frozen=True)
class Converted:
    """A board row (the columns of BOARD_SCHEMA) and the stats notes it earned."""

    row: BoardRow
    duplicate_pv_moves: int = 0
    best_pv_not_first: bool = False


def _is_int(value: Any) -> bool:
    return type(value) is int  # not bool, not float: Lichess writes integers


def deepest_evaluation(evals: Any, fen: str | None = None) -> dict[str, Any]:
    """The evaluation with the highest depth; ties go to more knodes, then to the first."""
    if not isinstance(evals, list) or not evals:
        raise BadLine("bad_record", "`evals` is not a non-empty list", fen)
    best, best_key = None, None
    for i, evaluation in enumerate(evals):
        if not isinstance(evaluation, dict):
            raise BadLine("bad_record", f"evals[{i}] is not an object", fen)
        depth, knodes = evaluation.get("depth"), evaluation.get("knodes")
        if not (_is_int(depth) and _is_int(knodes)):
            raise BadLine("bad_record", f"evals[{i}] lacks integer depth and knodes", fen)
        if best_key is None or (depth, knodes) > best_key:
            best, best_key = evaluation, (depth, knodes)
    return best


def complete_fen(fen: str) -> str:
    """`fen` with DEFAULT_HALFMOVE and DEFAULT_FULLMOVE appended if it has only 4 fields."""
    fields = fen.split()
    if len(fields) == 4:
        return f"{' '.join(fields)} {DEFAULT_HALFMOVE} {DEFAULT_FULLMOVE}"
    return fen


def canonical_fen(board: chess.Board, placement: str) -> str:
    """`board.fen()`, reusing the FEN's piece placement when python-chess accepted it as is.

    python-chess only accepts a placement in its canonical form (no two digits in a row, eight
    squares a rank), except for crazyhouse's `~`; writing it anew would cost a fifth of a
    line's time, so the parsed text is reused. Castling and en passant are written by python-chess
    (cleaned rights; the square only when a legal en passant exists).
    """
    if "~" in placement:
        placement = board.board_fen()
    turn = "w" if board.turn == chess.WHITE else "b"
    ep = chess.square_name(board.ep_square) if board.has_legal_en_passant() else "-"
    return (
        f"{placement} {turn} {board.castling_xfen()} {ep} "
        f"{board.halfmove_clock} {board.fullmove_number}"
    )


def _score(pv: dict[str, Any], index: int, sign: int, fen: str, limit: str) -> tuple:
    """(cp, mate) of a PV from the side to move's view (white's view times `sign`)."""
    cp, mate = pv.get("cp"), pv.get("mate")
    if cp is None and mate is None:
        raise BadLine("no_score", f"pvs[{index}] has neither cp nor mate", fen, limit)
    if cp is not None and mate is not None:
        raise BadLine("bad_score", f"pvs[{index}] has both cp and mate", fen, limit)
    value = cp if cp is not None else mate
    # Symmetric bounds: the score is negated for black, and -(-2**31) is no int32.
    if not _is_int(value) or not -_INT32 < value < _INT32:
        raise BadLine("bad_score", f"pvs[{index}] score {value!r} is not an int32", fen, limit)
    if mate == 0:
        # Mate 0 says the side to move is mated now, yet this PV has a legal first move.
        raise BadLine("bad_score", f"pvs[{index}] has mate 0 on a board with moves", fen, limit)
    return (cp * sign, None) if cp is not None else (None, mate * sign)


def convert_record(record: Any) -> Converted:
    """One decoded JSON line -> its board row; BadLine says why there is none."""
    if not isinstance(record, dict):
        raise BadLine("bad_record", f"a JSON {type(record).__name__}, not an object")
    fen = record.get("fen")
    if not isinstance(fen, str):
        raise BadLine("bad_record", "no string `fen`")
    evaluation = deepest_evaluation(record.get("evals"), fen)
    limit = f"depth={evaluation['depth']},knodes={evaluation['knodes']}"
    try:
        board = chess.Board(complete_fen(fen))
    except ValueError as e:
        raise BadLine("bad_fen", str(e), fen, limit) from None
    status = board.status()
    if status:
        flags = "|".join(flag.name for flag in chess.Status if flag and flag in status)
        raise BadLine("invalid_position", f"python-chess finds {flags}", fen, limit)
    pvs = evaluation.get("pvs")
    if not isinstance(pvs, list):
        raise BadLine("bad_record", "the deepest evaluation has no `pvs` list", fen, limit)
    if not pvs:
        if not any(board.generate_legal_moves()):
            raise BadLine("no_legal_moves", "checkmate or stalemate", fen, limit)
        raise BadLine("no_pvs", "the deepest evaluation has no PVs", fen, limit)

    sign = 1 if board.turn == chess.WHITE else -1
    values: dict[str, tuple] = {}  # uci -> (cp, mate, win_prob), PV order
    duplicates = 0
    best_uci, best_p, best_index = None, -1.0, -1
    for i, pv in enumerate(pvs):
        if not isinstance(pv, dict):
            raise BadLine("bad_record", f"pvs[{i}] is not an object", fen, limit)
        line = pv.get("line")
        first = line.split(" ", 1)[0] if isinstance(line, str) else ""
        try:
            move = board.parse_uci(first)
        except ValueError as e:
            if not any(board.generate_legal_moves()):
                raise BadLine("no_legal_moves", "checkmate or stalemate", fen, limit) from None
            raise BadLine(
                "illegal_move", f"pvs[{i}] starts with {first!r}: {e}", fen, limit
            ) from None
        cp, mate = _score(pv, i, sign, fen, limit)
        uci = board.uci(move)
        if uci in values:
            duplicates += 1
            continue
        p = win_probability(cp=cp) if cp is not None else win_probability(mate=mate)
        values[uci] = (cp, mate, p)
        if p > best_p:  # strictly better: the first PV wins ties
            best_uci, best_p, best_index = uci, p, i

    moves = sorted(values, key=ACTION_TO_INDEX.__getitem__)
    # The PV moves are distinct and legal: the board has more legal moves iff a generator
    # yields one more, which spares generating all of them.
    partial = next(itertools.islice(board.generate_legal_moves(), len(moves), None), None)
    best_cp, best_mate, _ = values[best_uci]
    row = make_board_row(
        canonical_fen(board, fen.split(None, 1)[0]),
        count=1,
        moves=moves,
        win_probs=[values[m][2] for m in moves],
        cp=[values[m][0] for m in moves],
        mate=[values[m][1] for m in moves],
        best_move=best_uci,
        state_win_prob=best_p,
        state_cp=best_cp,
        state_mate=best_mate,
        partial=partial is not None,
        source=SOURCE_LICHESS_EVALS,
        engine=ENGINE,
        limit=limit,
    )
    return Converted(row, duplicates, best_index != 0)


def convert_line(text: str | bytes) -> Converted:
    """One input line (JSON text) -> its board row; BadLine says why there is none."""
    try:
        record = json.loads(text)
    except ValueError as e:  # JSONDecodeError, or bytes that are not UTF-8
        raise BadLine("not_json", str(e)) from None
    return convert_record(record)
