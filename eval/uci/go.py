"""The UCI `go` command: its parameters, read leniently, and the time a move may take.

A GUI waits for a `bestmove` after every `go`, so a bad parameter is reported and skipped
rather than refusing the command. The searchless policy answers at once whatever the limits;
a search (Simulations > 0) stops by the time budget (with `Move Overhead` kept back).
"""

from __future__ import annotations

from dataclasses import dataclass

import chess

# `go` parameters that take one integer (milliseconds for the clock ones).
_NUMBERS = ("wtime", "btime", "winc", "binc", "movestogo", "movetime", "depth", "nodes", "mate")
_FLAGS = ("infinite", "ponder")
# With no `movestogo`, a clock is spread over this many more moves.
MOVES_TO_GO_DEFAULT = 30
# Never plan on more than this share of the clock left for one move.
MAX_CLOCK_SHARE = 0.5


@dataclass(frozen=True)
class GoParams:
    wtime: int | None = None
    btime: int | None = None
    winc: int | None = None
    binc: int | None = None
    movestogo: int | None = None
    movetime: int | None = None
    depth: int | None = None
    nodes: int | None = None
    mate: int | None = None
    infinite: bool = False
    ponder: bool = False
    searchmoves: tuple[str, ...] = ()


def parse_go(args: list[str]) -> tuple[GoParams, list[str]]:
    """The parameters of `go ARGS` and a message for each token that was skipped."""
    values: dict[str, object] = {}
    errors: list[str] = []
    i = 0
    while i < len(args):
        token = args[i]
        if token in _FLAGS:
            values[token] = True
            i += 1
        elif token in _NUMBERS:
            raw = args[i + 1] if i + 1 < len(args) else None
            try:
                number = int(raw) if raw is not None else None
            except ValueError:
                number = None
            if number is None:
                errors.append(f"go {token} needs an integer, got {raw!r}")
                i += 1 if raw is None or raw in _NUMBERS or raw in _FLAGS else 2
            else:
                values[token] = number
                i += 2
        elif token == "searchmoves":
            moves = []
            i += 1
            while i < len(args) and args[i] not in _NUMBERS and args[i] not in _FLAGS:
                moves.append(args[i])
                i += 1
            values["searchmoves"] = tuple(moves)
        else:
            errors.append(f"go: unknown parameter {token!r}")
            i += 1
    return GoParams(**values), errors


def time_budget(go: GoParams, turn: chess.Color, move_overhead_ms: int) -> float | None:
    """Seconds the mover may spend on this move, `move_overhead_ms` kept back for the
    GUI's and the network's delays; None when no clock limits it (`infinite`, `ponder`,
    or only depth/nodes/mate). Never below 1 ms: a move is always due.

    `movetime` is the time itself. With a clock, the time left is spread over `movestogo`
    (else MOVES_TO_GO_DEFAULT) moves plus most of the increment, and never more than
    MAX_CLOCK_SHARE of what is left.
    """
    if go.infinite or go.ponder:
        return None
    floor = 0.001
    if go.movetime is not None:
        return max(floor, (go.movetime - move_overhead_ms) / 1000)
    clock = go.wtime if turn == chess.WHITE else go.btime
    if clock is None:
        return None
    increment = (go.winc if turn == chess.WHITE else go.binc) or 0
    left = clock - move_overhead_ms
    moves = go.movestogo if go.movestogo and go.movestogo > 0 else MOVES_TO_GO_DEFAULT
    budget = min(left / moves + 0.75 * increment, MAX_CLOCK_SHARE * left)
    return max(floor, budget / 1000)
