"""The board graph as first written (model/networks/board_graph.py's `board_edges` before its
per-board shortcuts), kept unchanged as the reference that the identity tests
(tests/model/test_board_graph.py) and the benchmark (bench/graphs.py) hold the fast path to:
every move's static exchange by the full swap algorithm, its threat, the king's flights and what
it leaves hanging found by playing it, every attack edge filtered through a set.
Nothing else uses it."""

from __future__ import annotations

from collections.abc import Sequence

import chess

from model.networks.board_graph import (
    _ACTION_BY_MOVE,
    _CHECK_BIT,
    _DANGER_STEP,
    _EXCHANGE_STEP,
    _FLIGHTS_STEP,
    _GEOMETRY_OF,
    _HANGING_STEP,
    _MOVE_EDGES,
    _PROMOTION_INDEX,
    _THREAT_STEP,
    ATTACK_MINE,
    ATTACK_THEIRS,
    GEOMETRIES,
    MIRROR,
    PROMOTIONS,
    Graphs,
    checking_moves,
    encode_boards,
)
from model.networks.move_facts import (
    danger_class,
    exchange_class,
    flight_class,
    hanging_class,
    threat_class,
)


def reference_board_edges(
    board: chess.Board,
) -> tuple[list[int], list[int], list[int], list[int], int]:
    """(senders, receivers, kinds, actions, number of move edges) of one board."""
    black = board.turn == chess.BLACK
    m = MIRROR if black else 0
    table = _MOVE_EDGES[int(black)]
    legal = list(board.legal_moves)
    actions = sorted(
        (
            _ACTION_BY_MOVE[move.from_square][move.to_square][_PROMOTION_INDEX[move.promotion]],
            (_CHECK_BIT if check else 0)
            + _EXCHANGE_STEP * exchange_class(board, move)
            + _THREAT_STEP * threat_class(board, move)
            + _FLIGHTS_STEP * flight_class(board, move)
            + _HANGING_STEP * hanging_class(board, move)
            + _DANGER_STEP * danger_class(board, move),
        )
        for move, check in zip(legal, checking_moves(board, legal), strict=True)
    )
    senders, receivers, kinds = [], [], []
    for action, facts in actions:
        sender, receiver, kind = table[action]
        senders.append(sender)
        receivers.append(receiver)
        kinds.append(kind + facts)
    actions = [action for action, _ in actions]
    moved = set(zip(senders, receivers, strict=True))
    edge_actions = list(actions)
    for colour, edge_type in ((board.turn, ATTACK_MINE), (not board.turn, ATTACK_THEIRS)):
        base = GEOMETRIES * PROMOTIONS * edge_type
        for origin in chess.scan_forward(board.occupied_co[colour]):
            sender = origin ^ m
            geometries = _GEOMETRY_OF[sender]
            for target in chess.scan_forward(board.attacks_mask(origin)):
                receiver = target ^ m
                if edge_type == ATTACK_MINE and (sender, receiver) in moved:
                    continue
                senders.append(sender)
                receivers.append(receiver)
                kinds.append(base + geometries[receiver])
                edge_actions.append(-1)
    return senders, receivers, kinds, edge_actions, len(actions)


def reference_encode_fens(fens: Sequence[str]) -> Graphs:
    """model/networks/board_graph.py's `encode_fens` as first written: one process,
    `reference_board_edges`."""
    return encode_boards((chess.Board(fen) for fen in fens), edges=reference_board_edges)
