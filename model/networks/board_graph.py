"""A board as a graph for the edge backbone (model/networks/gateau.py): 64 square nodes, an edge per
legal move, and an edge per attack.

Orientation: the graph is seen from the side to move. With Black to move every square is
mirrored top to bottom (s -> s ^ 56), so a pawn of the side to move always moves up the
board and one set of weights serves both colours. The node features made from the tokens
(`node_token_positions`, `PIECE_CLASSES`) and the edges made here use the same mirror.

Edges of one board, in this order:

1. **move edges**: the legal moves in action-space order (the order of the annotated
   `moves` column), sender = from-square, receiver = to-square, each carrying its action
   index; the network gives every move edge a value and a logit;
2. **attack edges**: every square each piece of either colour attacks (empty, defended or
   hit), minus the side to move's attacks that are already a move edge: they tell every
   square who controls it, which a move's value depends on (is the destination defended?).

An edge's static features are one integer `kind` = geometry + GEOMETRIES * (promotion +
PROMOTIONS * (edge type + len(EDGE_TYPES) * (check + 2 * (exchange + 3 * (threat + 3 *
(flights + 3 * (hanging + 5 * danger))))))): the
geometry is the
displacement seen from the side to move (8 queen directions x 7 distances, then 8 knight
jumps), promotion 0 none, 1-4 q r b n, type 0 a move, 1 an attack of the side to move, 2 an
attack of the opponent, check 1 for a move that gives check, exchange the sign of the move's
static exchange on its target square (model/networks/move_facts.py: 0 even, 1 the mover loses
material, 2 it wins), threat how many enemy pieces the move newly attacks with gain (0, 1, 2 and
more: model/networks/move_facts.py), flights how many squares the enemy king could step to
once the move is on the board (0, 1, 2 and more), hanging the most valuable of the mover's
other pieces it leaves en prise (0 none, 1 a pawn, 2 a knight or bishop, 3 a rook, 4 a queen),
danger the checks the opponent could give the mover's king once the move is on the board (0
none, 1 onto guarded squares only, 2 a safe check, 3 a safe check with the king boxed in).
These are facts of the board, as a move's legality is: no move is searched to find them
(`checking_moves`, `move_facts.exchange_classes`, `threat_classes`, `flight_classes`,
`hanging_classes`, `danger_classes`); attack edges have none. Padding is -1. A network reads
each only if its config asks for it (`model.move_checks`, `model.move_exchanges`,
`model.move_threats`, `model.move_flights`, `model.move_hanging`, `model.move_king_danger`),
so the models trained before one was there see the kinds they were trained on.

The edge table (`EDGE_FROM`, `EDGE_TO`, `EDGE_PROMOTION`, `EDGE_GEOMETRY`, and back,
`edge_action`) relates the 1,968 actions of core.actions to (sender, receiver, promotion,
geometry) for each side to move; castling is the king's two-square move, as in the action
space.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import chess
import numpy as np

from core.actions import ACTIONS, NUM_ACTIONS
from model.networks.move_facts import (
    DANGER_CLASSES,
    EXCHANGE_CLASSES,
    FLIGHT_CLASSES,
    HANGING_CLASSES,
    THREAT_CLASSES,
    danger_classes,
    exchange_classes,
    flight_classes,
    hanging_classes,
    is_rare_move,
    threat_classes,
)
from runtime.workers import SPAWN, worker_start

NUM_SQUARES = 64
MIRROR = 56  # XOR with a square index flips its rank (a1 <-> a8)
PROMOTION_PIECES = "qrbn"
PROMOTIONS = 1 + len(PROMOTION_PIECES)  # none, q, r, b, n
EDGE_TYPES = ("move", "attack_mine", "attack_theirs")
MOVE, ATTACK_MINE, ATTACK_THEIRS = range(len(EDGE_TYPES))
PAD_KIND = -1

_QUEEN_DIRECTIONS = ((0, 1), (1, 1), (1, 0), (1, -1), (0, -1), (-1, -1), (-1, 0), (-1, 1))
_KNIGHT_JUMPS = ((1, 2), (2, 1), (2, -1), (1, -2), (-1, -2), (-2, -1), (-2, 1), (-1, 2))
GEOMETRIES = len(_QUEEN_DIRECTIONS) * 7 + len(_KNIGHT_JUMPS)  # 64
_STATIC_KINDS = GEOMETRIES * PROMOTIONS * len(EDGE_TYPES)
# * 2: the check bit; * EXCHANGE_CLASSES: the static exchange's sign; * THREAT_CLASSES;
# * FLIGHT_CLASSES; * HANGING_CLASSES; * DANGER_CLASSES. Past int16's range: kinds are int32.
NUM_EDGE_KINDS = (
    _STATIC_KINDS
    * 2
    * EXCHANGE_CLASSES
    * THREAT_CLASSES
    * FLIGHT_CLASSES
    * HANGING_CLASSES
    * DANGER_CLASSES
)


def geometry(sender: int, receiver: int) -> int:
    """The displacement class of a queen-line or knight-jump pair of squares (already in
    the side to move's orientation): direction * 7 + distance - 1, or 56 + knight jump."""
    file_step = chess.square_file(receiver) - chess.square_file(sender)
    rank_step = chess.square_rank(receiver) - chess.square_rank(sender)
    if (file_step, rank_step) in _KNIGHT_JUMPS:
        return 7 * len(_QUEEN_DIRECTIONS) + _KNIGHT_JUMPS.index((file_step, rank_step))
    distance = max(abs(file_step), abs(rank_step))
    if distance == 0 or (file_step and rank_step and abs(file_step) != abs(rank_step)):
        raise ValueError(
            f"{chess.square_name(sender)}{chess.square_name(receiver)} is neither a queen line "
            "nor a knight jump"
        )
    direction = (int(np.sign(file_step)), int(np.sign(rank_step)))
    return _QUEEN_DIRECTIONS.index(direction) * 7 + distance - 1


def _edge_table() -> tuple[np.ndarray, ...]:
    origin = np.zeros(NUM_ACTIONS, np.int8)
    target = np.zeros(NUM_ACTIONS, np.int8)
    promotion = np.zeros(NUM_ACTIONS, np.int8)
    for index, uci in enumerate(ACTIONS):
        move = chess.Move.from_uci(uci)
        origin[index], target[index] = move.from_square, move.to_square
        if move.promotion:
            promotion[index] = 1 + PROMOTION_PIECES.index(chess.piece_symbol(move.promotion))
    # Row 0: White to move (squares as they are); row 1: Black to move (mirrored).
    geometries = np.array(
        [
            [geometry(int(f) ^ m, int(t) ^ m) for f, t in zip(origin, target, strict=True)]
            for m in (0, MIRROR)
        ],
        np.int8,
    )
    back = np.full((2, NUM_SQUARES, NUM_SQUARES, PROMOTIONS), -1, np.int16)
    for turn, m in enumerate((0, MIRROR)):
        back[turn, origin ^ m, target ^ m, promotion] = np.arange(NUM_ACTIONS)
    return origin, target, promotion, geometries, back


# Per action: from- and to-square (a1=0), promotion (0 none, 1-4 q r b n), geometry seen by
# the side to move ([0] White, [1] Black), and back: (turn, sender, receiver, promotion) ->
# action, -1 where no action is.
EDGE_FROM, EDGE_TO, EDGE_PROMOTION, EDGE_GEOMETRY, _ACTION_OF_EDGE = _edge_table()


def edge_kind(
    geometry_class,
    promotion,
    edge_type,
    check=0,
    exchange=0,
    threat=0,
    flights=0,
    hanging=0,
    danger=0,
):
    """The packed static feature of an edge (numpy or JAX integers alike)."""
    hanging = hanging + HANGING_CLASSES * danger
    facts = check + 2 * (
        exchange
        + EXCHANGE_CLASSES * (threat + THREAT_CLASSES * (flights + FLIGHT_CLASSES * hanging))
    )
    return geometry_class + GEOMETRIES * (
        promotion + PROMOTIONS * (edge_type + len(EDGE_TYPES) * facts)
    )


def unpack_kind(kind):
    """(geometry, promotion, edge type) of packed kinds; padding (-1) gives garbage: mask it."""
    return (
        kind % GEOMETRIES,
        (kind // GEOMETRIES) % PROMOTIONS,
        (kind // (GEOMETRIES * PROMOTIONS)) % len(EDGE_TYPES),
    )


def kind_gives_check(kind):
    """1 where a packed kind is a move that gives check, else 0 (padding: mask it)."""
    return (kind // _STATIC_KINDS) % 2


def kind_exchange(kind):
    """The exchange class (model/networks/move_facts.py) of a packed kind's move, 0 for an attack
    edge (padding: mask it)."""
    return (kind // (2 * _STATIC_KINDS)) % EXCHANGE_CLASSES


def kind_threat(kind):
    """The threat class (model/networks/move_facts.py) of a packed kind's move, 0 for an attack
    edge (padding: mask it)."""
    return (kind // (2 * EXCHANGE_CLASSES * _STATIC_KINDS)) % THREAT_CLASSES


def kind_flights(kind):
    """The enemy king's flight class (model/networks/move_facts.py) after a packed kind's
    move, 0 for an attack edge (padding: mask it)."""
    return (kind // (2 * EXCHANGE_CLASSES * THREAT_CLASSES * _STATIC_KINDS)) % FLIGHT_CLASSES


def kind_hanging(kind):
    """The class of what a packed kind's move leaves hanging (model/networks/move_facts.py), 0
    for an attack edge (padding: mask it)."""
    step = 2 * EXCHANGE_CLASSES * THREAT_CLASSES * FLIGHT_CLASSES * _STATIC_KINDS
    return (kind // step) % HANGING_CLASSES


def kind_danger(kind):
    """The king-danger class (the opponent's checks) a packed kind's move leaves its own king in
    (model/networks/move_facts.py), 0 for an attack edge (padding: mask it)."""
    step = 2 * EXCHANGE_CLASSES * THREAT_CLASSES * FLIGHT_CLASSES * HANGING_CLASSES
    return (kind // (step * _STATIC_KINDS)) % DANGER_CLASSES


def move_edge(action: int, black_to_move: bool) -> tuple[int, int, int]:
    """(sender, receiver, kind) of an action's move edge on a board with that side to move."""
    m = MIRROR if black_to_move else 0
    turn = int(black_to_move)
    return (
        int(EDGE_FROM[action]) ^ m,
        int(EDGE_TO[action]) ^ m,
        int(edge_kind(int(EDGE_GEOMETRY[turn, action]), int(EDGE_PROMOTION[action]), MOVE)),
    )


def edge_action(black_to_move: bool, sender: int, receiver: int, promotion: int) -> int:
    """The action a move edge stands for (inverse of move_edge), -1 if none."""
    return int(_ACTION_OF_EDGE[int(black_to_move), sender, receiver, promotion])


# --- node inputs from the 77 tokens ---------------------------------------------------------

# Token ids (core.tokenizer.VOCABULARY "0123456789abcdefghpnrkqPBNRQKw.") of the pieces, in
# the class order 1-6 White P N B R Q K, 7-12 Black p n b r q k; 0 is an empty square. On a
# square the token `b` (id 11, shared with the file letter) is a black bishop.
_PIECE_TOKENS = {"P": 23, "N": 25, "B": 24, "R": 26, "Q": 27, "K": 28}
_PIECE_TOKENS |= {"p": 18, "n": 19, "b": 11, "r": 20, "q": 22, "k": 21}
PIECE_CLASSES = np.zeros(31, np.int32)
for _i, _symbol in enumerate("PNBRQKpnbrqk"):
    PIECE_CLASSES[_PIECE_TOKENS[_symbol]] = _i + 1
# Class of a piece seen from the other side (colours swapped), for Black to move.
SWAP_COLOURS = np.array([0, *range(7, 13), *range(1, 7)], np.int32)
BLACK_TO_MOVE_TOKEN = 11  # 'b' in the first position


def node_token_positions() -> np.ndarray:
    """(2, 64): for White / Black to move, the token position (1..64) of node i's square.

    Tokens list the squares from a8 to h1 (rank 8 first); node i is square i for White and
    square i ^ 56 for Black."""
    table = np.zeros((2, NUM_SQUARES), np.int32)
    for node in range(NUM_SQUARES):
        for turn, m in enumerate((0, MIRROR)):
            square = node ^ m
            table[turn, node] = 1 + (7 - square // 8) * 8 + square % 8
    return table


# --- graphs of boards -----------------------------------------------------------------------


@dataclass(frozen=True)
class Graphs:
    """The edges of many boards, flat: board i's edges are offsets[i]:offsets[i+1], move
    edges first (as many as the board has legal moves, `num_moves[i]`)."""

    offsets: np.ndarray  # (N + 1,) int64
    num_moves: np.ndarray  # (N,) int32
    senders: np.ndarray  # (total,) uint8, node index (oriented square)
    receivers: np.ndarray  # (total,) uint8
    kinds: np.ndarray  # (total,) int32, packed static features
    actions: np.ndarray  # (total,) int16, action of a move edge, -1 for an attack edge

    @property
    def num_boards(self) -> int:
        return len(self.num_moves)

    def edge_counts(self) -> np.ndarray:
        return np.diff(self.offsets)


# Python lists for the per-board loop (numpy scalar indexing is ~10x slower there).
_GEOMETRY_OF = [
    [
        geometry(s, r)
        if (s != r)
        and (
            chess.square_file(s) == chess.square_file(r)
            or chess.square_rank(s) == chess.square_rank(r)
            or abs(chess.square_file(s) - chess.square_file(r))
            == abs(chess.square_rank(s) - chess.square_rank(r))
            or chess.square_distance(s, r) == 2
            and abs(chess.square_file(s) - chess.square_file(r))
            + abs(chess.square_rank(s) - chess.square_rank(r))
            == 3
        )
        else -1
        for r in range(NUM_SQUARES)
    ]
    for s in range(NUM_SQUARES)
]
_MOVE_EDGES = [
    [move_edge(action, bool(turn)) for action in range(NUM_ACTIONS)] for turn in range(2)
]


# (from, to, promotion) -> action, for the moves of the board as they are (no mirror).
_ACTION_BY_MOVE = _ACTION_OF_EDGE[0].tolist()
_PROMOTION_INDEX = {None: 0} | {
    chess.Piece.from_symbol(p).piece_type: 1 + i for i, p in enumerate(PROMOTION_PIECES)
}


_CHECK_BIT = int(edge_kind(0, 0, 0, 1))
_EXCHANGE_STEP = int(edge_kind(0, 0, 0, 0, 1))
_THREAT_STEP = int(edge_kind(0, 0, 0, 0, 0, 1))
_FLIGHTS_STEP = int(edge_kind(0, 0, 0, 0, 0, 0, 1))
_HANGING_STEP = int(edge_kind(0, 0, 0, 0, 0, 0, 0, 1))
_DANGER_STEP = int(edge_kind(0, 0, 0, 0, 0, 0, 0, 0, 1))


def checking_moves(board: chess.Board, moves: Sequence[chess.Move]) -> list[bool]:
    """Whether each of `moves` (legal on `board`, a valid position) gives check: what
    `board.gives_check` says, read off the board's bitboards without playing the moves
    (promotions, castling and en passant, which are rare, do play them).

    A move checks directly if its piece attacks the king from the move's target, or by
    discovery if it leaves the line between the king and one of the mover's sliders where it
    stood alone. The lines from the king are those of the board as it is: the square a
    slider leaves could only open its own line to the king if the king were already in check
    from it, which it cannot be with the mover to move."""
    king = board.king(not board.turn)
    if king is None:
        return [board.gives_check(move) for move in moves]
    occupied = board.occupied
    diagonal = chess.BB_DIAG_ATTACKS[king][chess.BB_DIAG_MASKS[king] & occupied]
    straight = chess.BB_RANK_ATTACKS[king][chess.BB_RANK_MASKS[king] & occupied]
    straight |= chess.BB_FILE_ATTACKS[king][chess.BB_FILE_MASKS[king] & occupied]
    attacks_king_from = {
        chess.PAWN: chess.BB_PAWN_ATTACKS[not board.turn][king],
        chess.KNIGHT: chess.BB_KNIGHT_ATTACKS[king],
        chess.BISHOP: diagonal,
        chess.ROOK: straight,
        chess.QUEEN: diagonal | straight,
        chess.KING: 0,
    }
    mine = board.occupied_co[board.turn]
    snipers = (
        (chess.BB_RANK_ATTACKS[king][0] | chess.BB_FILE_ATTACKS[king][0])
        & (board.rooks | board.queens)
        | chess.BB_DIAG_ATTACKS[king][0] & (board.bishops | board.queens)
    ) & mine
    uncovers = {}  # square of a lone blocker of the mover's -> the line it must leave
    for sniper in chess.scan_reversed(snipers):
        blockers = chess.between(king, sniper) & occupied
        if blockers & mine and blockers & (blockers - 1) == 0:
            uncovers[blockers.bit_length() - 1] = chess.BB_RAYS[king][sniper]
    checks = []
    for move in moves:
        origin, target = move.from_square, move.to_square
        piece = board.piece_type_at(origin)
        if is_rare_move(board, move, piece):
            checks.append(board.gives_check(move))
            continue
        check = attacks_king_from[piece] >> target & 1
        if not check and origin in uncovers:
            check = not uncovers[origin] >> target & 1
        checks.append(bool(check))
    return checks


def board_edges(board: chess.Board) -> tuple[list[int], list[int], list[int], list[int], int]:
    """(senders, receivers, kinds, actions, number of move edges) of one board."""
    turn = board.turn
    black = turn == chess.BLACK
    m = MIRROR if black else 0
    table = _MOVE_EDGES[black]
    attacks_mask = board.attacks_mask
    # The opponent's attacks first: their union settles most moves' exchange without a swap.
    theirs_s, theirs_r, theirs_k = [], [], []
    attacked = 0
    base = GEOMETRIES * PROMOTIONS * ATTACK_THEIRS
    for origin in chess.scan_forward(board.occupied_co[not turn]):
        sender = origin ^ m
        geometries = _GEOMETRY_OF[sender]
        mask = attacks_mask(origin)
        attacked |= mask
        targets = [target ^ m for target in chess.scan_forward(mask)]
        theirs_s += [sender] * len(targets)
        theirs_r += targets
        theirs_k += [base + geometries[receiver] for receiver in targets]
    legal = list(board.legal_moves)
    exchanges = exchange_classes(board, legal, attacked)
    checks = checking_moves(board, legal)
    threats = threat_classes(board, legal)
    flights = flight_classes(board, legal)
    hangings = hanging_classes(board, legal)
    dangers = danger_classes(board, legal)
    facts = {}
    moved = {}  # origin -> the move targets from it, as a bitboard
    for move, check, exchange, threat, flight, hanging, danger in zip(
        legal, checks, exchanges, threats, flights, hangings, dangers, strict=True
    ):
        origin, target = move.from_square, move.to_square
        moved[origin] = moved.get(origin, 0) | 1 << target
        action = _ACTION_BY_MOVE[origin][target][_PROMOTION_INDEX[move.promotion]]
        facts[action] = (
            (_CHECK_BIT if check else 0)
            + _EXCHANGE_STEP * exchange
            + _THREAT_STEP * threat
            + _FLIGHTS_STEP * flight
            + _HANGING_STEP * hanging
            + _DANGER_STEP * danger
        )
    actions = sorted(facts)
    senders, receivers, kinds = [], [], []
    for action in actions:
        sender, receiver, kind = table[action]
        senders.append(sender)
        receivers.append(receiver)
        kinds.append(kind + facts[action])
    # The mover's attacks that are not already a move edge.
    base = GEOMETRIES * PROMOTIONS * ATTACK_MINE
    for origin in chess.scan_forward(board.occupied_co[turn]):
        sender = origin ^ m
        geometries = _GEOMETRY_OF[sender]
        mask = attacks_mask(origin) & ~moved.get(origin, 0)
        targets = [target ^ m for target in chess.scan_forward(mask)]
        senders += [sender] * len(targets)
        receivers += targets
        kinds += [base + geometries[receiver] for receiver in targets]
    edge_actions = actions + [-1] * (len(senders) - len(actions) + len(theirs_s))
    return senders + theirs_s, receivers + theirs_r, kinds + theirs_k, edge_actions, len(actions)


def encode_boards(boards: Iterable[chess.Board], edges: Callable = board_edges) -> Graphs:
    """The graphs of `boards` (python-chess does the move generation); `edges` is one
    board's (senders, receivers, kinds, actions, move count), `board_edges` but in tests."""
    senders, receivers, kinds, actions, counts, moves = [], [], [], [], [], []
    for board in boards:
        s, r, k, a, n = edges(board)
        senders += s
        receivers += r
        kinds += k
        actions += a
        counts.append(len(s))
        moves.append(n)
    offsets = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    return Graphs(
        offsets=offsets,
        num_moves=np.asarray(moves, np.int32),
        senders=np.asarray(senders, np.uint8),
        receivers=np.asarray(receivers, np.uint8),
        kinds=np.asarray(kinds, np.int32),
        actions=np.asarray(actions, np.int16),
    )


def concatenate(parts: Sequence[Graphs]) -> Graphs:
    """The graphs of the boards of `parts`, in order, as one Graphs."""
    offsets = [np.zeros(1, np.int64)]
    for part in parts:
        offsets.append(part.offsets[1:] + offsets[-1][-1])
    return Graphs(
        offsets=np.concatenate(offsets),
        num_moves=np.concatenate([np.zeros(0, np.int32), *(p.num_moves for p in parts)]),
        senders=np.concatenate([np.zeros(0, np.uint8), *(p.senders for p in parts)]),
        receivers=np.concatenate([np.zeros(0, np.uint8), *(p.receivers for p in parts)]),
        kinds=np.concatenate([np.zeros(0, np.int32), *(p.kinds for p in parts)]),
        actions=np.concatenate([np.zeros(0, np.int16), *(p.actions for p in parts)]),
    )


# Boards per task of a pool: ~0.5 s of work, so that the tasks' pickling costs little and the
# progress line moves.
CHUNK_BOARDS = 2_000


def _encode_chunk(fens: Sequence[str]) -> Graphs:
    return encode_boards(chess.Board(fen) for fen in fens)


def encode_fens(
    fens: Sequence[str], workers: int = 1, progress: Callable[[int], None] | None = None
) -> Graphs:
    """The graphs of the boards `fens`, byte for byte the same whatever `workers` is: with
    more than one worker, chunks of CHUNK_BOARDS boards are encoded in that many worker
    processes. `progress(done)` is called with the boards done after each chunk.

    Workers are spawned, not forked: the caller may hold JAX's threads, which a forked child
    would inherit in whatever state they were. A program calling this with workers > 1 on
    more than one chunk needs the usual `if __name__ == "__main__":` guard."""
    chunks = [fens[i : i + CHUNK_BOARDS] for i in range(0, len(fens), CHUNK_BOARDS)]
    parts, done = [], 0
    if workers <= 1 or len(chunks) <= 1:
        results = map(_encode_chunk, chunks)
        pool = None
    else:
        pool = SPAWN.Pool(min(workers, len(chunks)), initializer=worker_start)
        results = pool.imap(_encode_chunk, [list(chunk) for chunk in chunks])
    try:
        for part in results:
            parts.append(part)
            done += part.num_boards
            if progress is not None:
                progress(done)
    finally:
        if pool is not None:
            pool.terminate()
    return concatenate(parts)


def edge_bucket(num_edges: int, step: int = 64) -> int:
    """Padded edge count for a batch whose largest board has `num_edges` edges: a multiple
    of `step`, so that only a few shapes are ever compiled."""
    return max(step, -(-num_edges // step) * step)


def pad_edges(graphs: Graphs, boards: np.ndarray, width: int | None = None) -> dict:
    """The edges of `boards` (indices into graphs) as (B, E) arrays padded to `width`
    (default: edge_bucket of the largest): `senders`, `receivers` (int32, 0 in padding),
    `kinds` (int32, PAD_KIND in padding), and `edge_index` (int64, the flat index of each
    edge into graphs' arrays, -1 in padding)."""
    boards = np.asarray(boards, np.int64)
    counts = graphs.offsets[boards + 1] - graphs.offsets[boards]
    largest = int(counts.max()) if len(counts) else 0
    width = edge_bucket(largest) if width is None else width
    if largest > width:
        raise ValueError(f"a board has {largest} edges, more than the padded width {width}")
    columns = np.arange(width)
    valid = columns < counts[:, None]
    flat = np.where(valid, graphs.offsets[boards][:, None] + columns, -1)
    safe = np.where(valid, flat, 0)
    return {
        "senders": np.where(valid, graphs.senders[safe], 0).astype(np.int32),
        "receivers": np.where(valid, graphs.receivers[safe], 0).astype(np.int32),
        "kinds": np.where(valid, graphs.kinds[safe], PAD_KIND).astype(np.int32),
        "edge_index": flat,
    }
