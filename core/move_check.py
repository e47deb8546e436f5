"""Which (board, action) pairs can be moves on their boards, checked for many at once from
the boards' tokens (core.tokenizer) with array operations.

A loader checks every annotated move this way as it reads a file: python-chess would take
tens of microseconds a board, this a few array passes a file. The check is the pseudo-legal
one: the side to move's piece stands on the from-square, it moves the way that piece moves
(sliders through empty squares; pawns push to empty squares, two from their start rank,
capture diagonally or en passant, and promote exactly on the last rank; castling needs its
right and empty squares between king and rook), and it does not land on its own piece. What
it leaves out is king safety (a move into check, out of a pin, castling through an attacked
square): that needs the attacks of every piece, per board.
"""

from __future__ import annotations

import chess
import numpy as np

from core.actions import ACTIONS
from core.tokenizer import VOCABULARY

_TOKEN = {c: i for i, c in enumerate(VOCABULARY)}
_BOARD_START = 1  # tokens 1..64: a8, b8, ..., h1
_CASTLING_START = 65  # four castling characters, `.`-padded
_EN_PASSANT_START = 69  # file and rank characters, or `..`

# Per action: from and to square (a1 = 0), promotion (0: none).
_FROM = np.array([chess.Move.from_uci(m).from_square for m in ACTIONS], np.int64)
_TO = np.array([chess.Move.from_uci(m).to_square for m in ACTIONS], np.int64)
_PROMOTES = np.array([len(m) == 5 for m in ACTIONS])
# Squares strictly between two squares on a line (0 elsewhere), as bitboards.
_BETWEEN = np.array([[chess.between(a, b) for b in range(64)] for a in range(64)], dtype=np.uint64)
# The board token of each square (a1 = 0 is token 57).
_SQUARE_TOKEN = np.array(
    [_BOARD_START + (7 - chess.square_rank(s)) * 8 + chess.square_file(s) for s in range(64)]
)


# Token -> the piece it stands for as a lowercase letter's code (0: not a piece).
_KIND = np.array([ord(c.lower()) if c in "pnbrqkPNBRQK" else 0 for c in VOCABULARY], np.uint8)


def _in(tokens: np.ndarray, chars: str) -> np.ndarray:
    table = np.zeros(len(VOCABULARY), bool)
    table[[_TOKEN[c] for c in chars]] = True
    return table[tokens]


def possible_moves(states: np.ndarray, boards: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """For each pair i, whether action `actions[i]` is a pseudo-legal move on the board of
    tokens `states[boards[i]]` (see the module's docstring for what that leaves out)."""
    boards = np.asarray(boards, np.int64)
    actions = np.asarray(actions, np.int64)
    if len(actions) == 0:
        return np.zeros(0, bool)
    squares = states[:, _SQUARE_TOKEN]  # (N, 64) tokens by square, a1 = 0
    empty_square = squares == _TOKEN["."]
    # (N,) bitboards, bit i for square i: 8 bytes a board, not 64 words.
    packed = np.packbits(~empty_square, axis=1, bitorder="little")
    occupancy = np.ascontiguousarray(packed).view("<u8")[:, 0]
    white = states[boards, 0] == _TOKEN["w"]
    origin, target = _FROM[actions], _TO[actions]
    piece = squares[boards, origin]
    landing = squares[boards, target]
    own = np.where(white, _in(piece, "PNBRQK"), _in(piece, "pnbrqk"))
    lands_on_own = np.where(white, _in(landing, "PNBRQK"), _in(landing, "pnbrqk"))
    lands_on_enemy = np.where(white, _in(landing, "pnbrqk"), _in(landing, "PNBRQK"))
    files, ranks = target % 8 - origin % 8, target // 8 - origin // 8
    clear = (_BETWEEN[origin, target] & occupancy[boards]) == 0
    straight = (files == 0) | (ranks == 0)
    diagonal = np.abs(files) == np.abs(ranks)
    kind = _KIND[piece]

    forward = np.where(white, 1, -1)
    start_rank = np.where(white, 1, 6)
    last_rank = np.where(white, 7, 0)
    push = (files == 0) & (ranks == forward) & ~lands_on_enemy
    double = (
        (files == 0) & (ranks == 2 * forward) & (origin // 8 == start_rank) & clear
    ) & ~lands_on_enemy
    en_passant = _en_passant_square(states)[boards]
    capture = (np.abs(files) == 1) & (ranks == forward) & (lands_on_enemy | (target == en_passant))
    pawn = (push | double | capture) & (_PROMOTES[actions] == (target // 8 == last_rank))

    king_step = np.maximum(np.abs(files), np.abs(ranks)) == 1
    castle = _castling(states, boards, white, origin, target, occupancy)
    moves = np.select(
        [kind == ord(k) for k in "pnbrqk"],
        [
            pawn,
            ~straight & ~diagonal,  # the action space holds only knight jumps besides lines
            diagonal & clear,
            straight & clear,
            (straight | diagonal) & clear,
            king_step | castle,
        ],
        default=False,
    )
    not_promoting = (kind == ord("p")) | ~_PROMOTES[actions]
    return own & ~lands_on_own & moves & not_promoting


def _en_passant_square(states: np.ndarray) -> np.ndarray:
    """(N,) each board's en-passant square (a1 = 0), or -1."""
    file_token, rank_token = states[:, _EN_PASSANT_START], states[:, _EN_PASSANT_START + 1]
    file_of = np.full(len(VOCABULARY), -1)
    rank_of = np.full(len(VOCABULARY), -1)
    for i, c in enumerate("abcdefgh"):
        file_of[_TOKEN[c]] = i
    for i, c in enumerate("12345678"):
        rank_of[_TOKEN[c]] = i
    files, ranks = file_of[file_token], rank_of[rank_token]
    return np.where((files >= 0) & (ranks >= 0), ranks * 8 + files, -1)


# (king from, king to, castling right, squares that must be empty) of the four castlings.
_CASTLINGS = [
    (chess.E1, chess.G1, "K", chess.BB_F1 | chess.BB_G1),
    (chess.E1, chess.C1, "Q", chess.BB_B1 | chess.BB_C1 | chess.BB_D1),
    (chess.E8, chess.G8, "k", chess.BB_F8 | chess.BB_G8),
    (chess.E8, chess.C8, "q", chess.BB_B8 | chess.BB_C8 | chess.BB_D8),
]


def _castling(states, boards, white, origin, target, occupancy) -> np.ndarray:
    rights = states[boards, _CASTLING_START : _CASTLING_START + 4]
    result = np.zeros(len(boards), bool)
    for king_from, king_to, right, between in _CASTLINGS:
        side = white if right.isupper() else ~white
        has_right = (rights == _TOKEN[right]).any(axis=1)
        empty = (occupancy[boards] & np.uint64(between)) == 0
        result |= (origin == king_from) & (target == king_to) & side & has_right & empty
    return result
