"""What a move does, read off the board with no move searched: the static exchange on its
target square, the facts a network is told beside the move (model/graph.py packs them into
each move edge's kind).

The static exchange (SEE) is the material balance of the captures on the move's target
square if both sides keep capturing there with their least valuable piece, each side free to
stop when going on would lose: the classic swap algorithm. It looks only at the pieces that
attack that one square (x-rays through the capturing pieces included), never at another
move of the opponent, so it is a fact of the board as the check bit is, not a search. Pins
are not considered. The sign says whether a capture wins material, and whether a move puts
its piece where it is lost (a piece moved en prise gives a negative exchange).
"""

from __future__ import annotations

import chess

# Pawn units; the king's value makes a capture by the king into a defended square lose.
PIECE_VALUES = {
    chess.PAWN: 1,
    chess.KNIGHT: 3,
    chess.BISHOP: 3,
    chess.ROOK: 5,
    chess.QUEEN: 9,
    chess.KING: 100,
}
# The exchange's sign as a class: 0 even (or a castling), 1 the mover loses material, 2 it wins.
EXCHANGE_EVEN, EXCHANGE_LOSES, EXCHANGE_WINS = range(3)
EXCHANGE_CLASSES = 3


def static_exchange(board: chess.Board, move: chess.Move) -> int:
    """The material the side to move wins (> 0) or loses (< 0) on `move`'s target square
    by the swap algorithm, in pawn units; `move` is legal on `board`."""
    if board.is_castling(move):
        return 0
    target, origin = move.to_square, move.from_square
    occupied = board.occupied & ~chess.BB_SQUARES[origin]
    if board.is_en_passant(move):
        captured = chess.PAWN
        occupied &= ~chess.BB_SQUARES[target + (-8 if board.turn == chess.WHITE else 8)]
    else:
        captured = board.piece_type_at(target)
    gains = [PIECE_VALUES[captured] if captured else 0]
    mover = move.promotion or board.piece_type_at(origin)
    if move.promotion:
        gains[0] += PIECE_VALUES[move.promotion] - PIECE_VALUES[chess.PAWN]
    at_stake = PIECE_VALUES[mover]  # what the next capture on the square takes
    side = not board.turn
    while True:
        attackers = board.attackers_mask(side, target, occupied) & occupied
        if not attackers:
            break
        piece, square = _least_valuable(board, attackers, side)
        # No pruning: the swap's usual cut-off keeps the sign but not always the amount.
        gains.append(at_stake - gains[-1])
        occupied &= ~chess.BB_SQUARES[square]
        at_stake = PIECE_VALUES[piece]
        side = not side
    for depth in range(len(gains) - 1, 0, -1):
        gains[depth - 1] = -max(-gains[depth - 1], gains[depth])
    return gains[0]


def _least_valuable(
    board: chess.Board, attackers: int, side: chess.Color
) -> tuple[chess.PieceType, chess.Square]:
    for piece in chess.PIECE_TYPES:  # pawn first, king last
        mask = attackers & board.pieces_mask(piece, side)
        if mask:
            return piece, chess.lsb(mask)
    raise AssertionError("attackers without a piece")


def exchange_class(board: chess.Board, move: chess.Move) -> int:
    """EXCHANGE_EVEN, EXCHANGE_LOSES or EXCHANGE_WINS: the sign of `static_exchange`."""
    target, origin = move.to_square, move.from_square
    if not (move.promotion or board.occupied >> target & 1 or target == board.ep_square):
        # A quiet move (castling included): the swap starts from nothing won, so the sign
        # often follows from the opponent's first capture alone.
        side = not board.turn
        attackers = board.attackers_mask(side, target, board.occupied & ~chess.BB_SQUARES[origin])
        if not attackers:
            return EXCHANGE_EVEN  # nothing can take the piece: the swap ends at once
        mover = board.piece_type_at(origin)
        if mover != chess.KING:
            cheapest, _ = _least_valuable(board, attackers, side)
            # Taken by a cheaper piece, the mover is lost whatever follows: the opponent
            # gains the mover and can stop, or go on having already won the difference.
            if PIECE_VALUES[cheapest] < PIECE_VALUES[mover]:
                return EXCHANGE_LOSES
    return _sign(static_exchange(board, move))


def _sign(value: int) -> int:
    return EXCHANGE_WINS if value > 0 else EXCHANGE_LOSES if value < 0 else EXCHANGE_EVEN
