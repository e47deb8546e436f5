"""The UCI `position` command: `startpos|fen FEN [moves m1 m2 ...]` into a board."""

from __future__ import annotations

import chess

from eval.uci.options import UciError


def parse_position(args: list[str]) -> chess.Board:
    """`startpos|fen FEN [moves m1 m2 ...]` -> the board with every move on its stack."""
    if "moves" in args:
        split = args.index("moves")
        head, moves = args[:split], args[split + 1 :]
    else:
        head, moves = args, []
    if head == ["startpos"]:
        board = chess.Board()
    elif len(head) > 1 and head[0] == "fen":
        fen = " ".join(head[1:])
        try:
            board = chess.Board(fen)
        except ValueError as e:
            raise UciError(f"invalid FEN {fen!r}: {e}") from None
        if not board.is_valid():
            raise UciError(f"invalid FEN {fen!r}: {board.status()!r}")
    else:
        raise UciError(f"position needs startpos or fen FEN, got {' '.join(head)!r}")
    for uci in moves:
        try:
            move = board.parse_uci(uci)
        except ValueError:
            move = None
        # parse_uci lets the null move 0000 through; playing it can leave a king in check.
        if not move:
            raise UciError(f"illegal move {uci!r} in position {board.fen()!r}")
        board.push(move)
    return board
