"""core.move_check against python-chess: every legal move passes, nothing beyond the
pseudo-legal moves does, on positions from random games and on the special moves' corners."""

from __future__ import annotations

import random

import chess
import numpy as np

from core.actions import NUM_ACTIONS, moves_to_indices
from core.move_check import possible_moves
from core.tokenizer import tokenize_batch

CORNERS = [
    "r3k2r/8/8/3pP3/8/8/8/R3K2R w KQkq d6 0 1",  # en passant, both castlings
    "r3k2r/1P6/8/8/8/8/6p1/R3K2R b KQkq - 0 1",  # promotions by push and capture
    "r3k2r/8/8/8/8/8/8/RN2K1NR w Kq - 0 1",  # castling blocked, or without its right
    "4k3/8/8/8/8/8/4p3/4K3 w - - 0 1",  # a king in check: pseudo-legal moves into check
    "rnbqkbnr/pppp1ppp/8/4p3/4P3/8/PPPP1PPP/RNBQKBNR w KQkq e6 0 2",
]


def random_positions(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    fens = []
    while len(fens) < count:
        board = chess.Board()
        for _ in range(rng.randint(0, 120)):
            moves = list(board.legal_moves)
            if not moves:
                break
            board.push(rng.choice(moves))
        fens.append(board.fen())
    return fens


def test_legal_moves_pass_and_only_pseudo_legal_ones_do():
    fens = CORNERS + random_positions(300, seed=5)
    states = tokenize_batch(fens).astype(np.uint8)
    boards = np.repeat(np.arange(len(fens)), NUM_ACTIONS)
    actions = np.tile(np.arange(NUM_ACTIONS), len(fens))
    passed = possible_moves(states, boards, actions).reshape(len(fens), NUM_ACTIONS)
    for fen, row in zip(fens, passed, strict=True):
        board = chess.Board(fen)
        legal = set(moves_to_indices([m.uci() for m in board.legal_moves]).tolist())
        pseudo = set(moves_to_indices([m.uci() for m in board.pseudo_legal_moves]).tolist())
        # Castling is checked for its right and empty squares, not for attacked squares.
        pseudo |= set(moves_to_indices(["e1g1", "e1c1", "e8g8", "e8c8"]).tolist())
        mine = set(np.flatnonzero(row).tolist())
        assert legal <= mine <= pseudo, fen


def test_no_pairs_is_no_answer():
    states = tokenize_batch([chess.STARTING_FEN]).astype(np.uint8)
    assert possible_moves(states, np.zeros(0, int), np.zeros(0, int)).shape == (0,)
