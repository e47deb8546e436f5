"""What a move does, read off the board with no move searched: the static exchange on its
target square, the facts a network is told beside the move (model/networks/board_graph.py packs
them into each move edge's kind).

The static exchange (SEE) is the material balance of the captures on the move's target
square if both sides keep capturing there with their least valuable piece, each side free to
stop when going on would lose: the classic swap algorithm. It looks only at the pieces that
attack that one square (x-rays through the capturing pieces included), never at another
move of the opponent, so it is a fact of the board as the check bit is, not a search. Pins
are not considered. The sign says whether a capture wins material, and whether a move puts
its piece where it is lost (a piece moved en prise gives a negative exchange).

The threat of a move is what it newly attacks with gain: the enemy pieces (the king aside:
that is the check bit) that, once the move is on the board, one of the mover's pieces attacks
which did not attack them before (the moved piece from its target, or a slider whose line the
move opens) and that are worth more than that attacker or have no defender. None, one, or two
and more (a fork or double attack). It looks at the mover's own next captures and at who
defends their targets, as the exchange does; no reply of the opponent is considered.

The flights of a move are the squares the enemy king could step to once the move is on the
board: its neighbours that hold none of its own pieces and that none of the mover's pieces
attacks (with the king taken off the board, as legality asks: a checking slider's line runs on
through it). None, one, or two and more. With the check bit it tells a check that leaves the
king no square, the mate's shape; whether the checking piece can be taken or the check
blocked is not asked, nor any other reply.

What a move leaves hanging is the most valuable of the mover's other pieces (the moved one
aside: that is the exchange; the king aside: that is legality) that stands en prise once the
move is on the board: attacked by a cheaper enemy piece, or attacked and defended by nothing.
A piece already attacked stays hanging unless the move saves it (moves it away, defends it,
blocks the line, takes the attacker), so the fact tells the moves that answer a threat already
on the board from those that ignore it. None, a pawn, a knight or bishop, a rook, a queen. Pins
are not considered, nor any reply.

The king danger a move leaves is the opponent's checks once it is on the board, as a static
king-danger term reads them (Stockfish's classical evaluation counts "safe checks" the same
way): the squares from which an enemy knight, bishop, rook or queen would attack the mover's
king and that such a piece attacks now. A check square is safe for the opponent when none of
the mover's pieces other than the king guards it and, if it is next to the king, a second enemy
piece defends it. None; checks onto guarded squares only; a safe check; a safe check with the
king boxed in (each square next to it holds its own piece, is attacked, or is seen by the
checking piece from its check square: the mate's shape). Pawn checks, discovered checks, blocks
and pins are not considered, and no check is played. The attacks are counted with every piece
where it stands: a square the checking piece covers only from its origin still counts as
attacked (a boxed-in king may then have a square), and a defender behind the checking piece
on its line (a rook behind the queen) does not count.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import chess

from core.material import PIECE_VALUES as MATERIAL

# The standard values in pawns, with the king worth more than everything else: a capture by
# the king into a defended square loses.
PIECE_VALUES = {**MATERIAL, chess.KING: 100}
# The exchange's sign as a class: 0 even (or a castling), 1 the mover loses material, 2 it wins.
EXCHANGE_EVEN, EXCHANGE_LOSES, EXCHANGE_WINS = range(3)
EXCHANGE_CLASSES = 3
# The threat as a class: how many enemy pieces the move newly attacks with gain, capped.
THREAT_NONE, THREAT_ONE, THREAT_MANY = range(3)
THREAT_CLASSES = 3
# The enemy king's flight squares once the move is on the board, as a class, capped.
FLIGHTS_NONE, FLIGHTS_ONE, FLIGHTS_MANY = range(3)
FLIGHT_CLASSES = 3
# The most valuable of the mover's other pieces left en prise by the move, as a class.
HANGING_NONE, HANGING_PAWN, HANGING_MINOR, HANGING_ROOK, HANGING_QUEEN = range(5)
HANGING_CLASSES = 5
# The opponent's checks once the move is on the board, as a class.
DANGER_NONE, DANGER_GUARDED, DANGER_SAFE, DANGER_BOXED = range(4)
DANGER_CLASSES = 4
# The pieces whose checks count: a pawn's check is rarely a danger, the king gives none.
_CHECKERS = (chess.KNIGHT, chess.BISHOP, chess.ROOK, chess.QUEEN)
_HANGING_OF_VALUE = {
    0: HANGING_NONE,
    1: HANGING_PAWN,
    3: HANGING_MINOR,
    5: HANGING_ROOK,
    9: HANGING_QUEEN,
}


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
    value = static_exchange(board, move)
    return EXCHANGE_WINS if value > 0 else EXCHANGE_LOSES if value < 0 else EXCHANGE_EVEN


def exchange_classes(
    board: chess.Board, moves: Sequence[chess.Move], attacked: int | None = None
) -> list[int]:
    """`exchange_class` of each of `moves` (legal on `board`), the same answers found with
    less work: `attacked`, the squares the opponent attacks (the union of its pieces'
    attacks, which a caller building attack edges has at hand), settles most moves without a
    swap, and the swaps left share the board's piece masks.

    A move whose target and origin no piece of the opponent attacks ends its swap at once:
    were the target reachable through the square the mover leaves, the slider behind would
    attack that square. Castling and en passant, which are rare, take `exchange_class`."""
    turn = board.turn
    side = not turn
    if attacked is None:
        attacked = 0
        for square in chess.scan_forward(board.occupied_co[side]):
            attacked |= board.attacks_mask(square)
    mine, theirs = board.occupied_co[turn], board.occupied_co[side]
    ep_square, king = board.ep_square, board.king(turn)
    lineup = None  # per colour: (value, pieces) from the pawns to the king, made when needed
    classes = []
    for move in moves:
        origin, target, promotion = move.from_square, move.to_square, move.promotion
        if mine >> target & 1 or target == ep_square:  # Chess960 castling, en passant
            classes.append(exchange_class(board, move))
        elif not (attacked >> target & 1 or attacked >> origin & 1):
            captures = promotion or theirs >> target & 1
            classes.append(EXCHANGE_WINS if captures else EXCHANGE_EVEN)
        elif origin == king and target - origin in (2, -2):  # castling
            classes.append(exchange_class(board, move))
        else:
            if lineup is None:
                lineup = [
                    [(PIECE_VALUES[p], board.pieces_mask(p, colour)) for p in chess.PIECE_TYPES]
                    for colour in (chess.BLACK, chess.WHITE)
                ]
            gain = PIECE_VALUES[board.piece_type_at(target)] if theirs >> target & 1 else 0
            if promotion:
                gain += PIECE_VALUES[promotion] - PIECE_VALUES[chess.PAWN]
            at_stake = PIECE_VALUES[promotion or board.piece_type_at(origin)]
            occupied = board.occupied & ~chess.BB_SQUARES[origin]
            classes.append(_swap(board, lineup, occupied, target, side, gain, at_stake))
    return classes


def _swap(
    board: chess.Board,
    lineup: list[list[tuple[int, int]]],
    occupied: int,
    target: chess.Square,
    side: chess.Color,
    gain: int,
    at_stake: int,
) -> int:
    """The class of `static_exchange`'s swap after the move (which won `gain` and puts
    `at_stake` on the target): its sign, with the swap cut short where the sign is settled.

    The swap's value after capture d is f[d] = min(g[d], -f[d + 1]) (g[d] its gain, f[d] =
    g[d] at the last), so the sign of f[d] follows from g[d] and the sign of f[d + 1] alone.
    Where the next capture would gain g[d] = at_stake - g[d - 1] < 0, f[d - 1] is > 0 whether
    that capture is made or not (g[d - 1] > at_stake >= 1, and f[d] <= g[d] < 0): the swap
    stops there with every sign above it unchanged. A quiet move onto a square a cheaper
    piece attacks is lost after one capture, a piece taken by a cheaper one won at once."""
    gains = [gain]
    while at_stake >= gains[-1] and (
        attackers := board.attackers_mask(side, target, occupied) & occupied
    ):
        for value, pieces in lineup[side]:  # pawn first, king last
            if found := attackers & pieces:
                gains.append(at_stake - gains[-1])
                occupied &= ~(found & -found)  # its lowest square, as chess.lsb
                at_stake = value
                break
        side = not side
    for depth in range(len(gains) - 1, 0, -1):
        gains[depth - 1] = -max(-gains[depth - 1], gains[depth])
    return EXCHANGE_WINS if gains[0] > 0 else EXCHANGE_LOSES if gains[0] < 0 else EXCHANGE_EVEN


def is_rare_move(board: chess.Board, move: chess.Move, piece: chess.PieceType) -> bool:
    """Whether `move` (legal on `board`, moving a `piece`) is a promotion, a castling or an en
    passant capture: the moves whose facts are found by playing them, not off the bitboards."""
    return bool(
        move.promotion
        or (piece == chess.KING and board.is_castling(move))
        or (piece == chess.PAWN and move.to_square == board.ep_square)
    )


def threat_class(board: chess.Board, move: chess.Move) -> int:
    """THREAT_NONE, THREAT_ONE or THREAT_MANY: the enemy pieces other than the king that
    `move` (legal on `board`) newly attacks with gain, found by playing it. An attacker is
    new if it did not attack that square before the move (the moved piece: from its origin);
    with gain if the attacked piece is worth more than the attacker or nothing of its side
    attacks its square. Castling counts no threat."""
    if board.is_castling(move):
        return THREAT_NONE
    mover, side = board.turn, not board.turn
    after = board.copy(stack=False)
    after.push(move)
    before_mover = board.attacks_mask(move.from_square)
    count = 0
    for square in chess.scan_forward(after.occupied_co[side] & ~after.kings):
        value = PIECE_VALUES[after.piece_type_at(square)]
        for attacker in chess.scan_forward(after.attackers_mask(mover, square)):
            before = before_mover if attacker == move.to_square else board.attacks_mask(attacker)
            if before >> square & 1:
                continue
            if value > PIECE_VALUES[after.piece_type_at(attacker)] or not after.attackers_mask(
                side, square
            ):
                count += 1
                break
    return min(count, THREAT_MANY)


def _slider_attacks(piece: chess.PieceType, square: chess.Square, occupied: int) -> int:
    attacks = 0
    if piece in (chess.BISHOP, chess.QUEEN):
        attacks |= chess.BB_DIAG_ATTACKS[square][chess.BB_DIAG_MASKS[square] & occupied]
    if piece in (chess.ROOK, chess.QUEEN):
        attacks |= chess.BB_RANK_ATTACKS[square][chess.BB_RANK_MASKS[square] & occupied]
        attacks |= chess.BB_FILE_ATTACKS[square][chess.BB_FILE_MASKS[square] & occupied]
    return attacks


def _attacks_from(
    piece: chess.PieceType, colour: chess.Color, square: chess.Square, occupied: int
) -> int:
    """The squares a `colour` `piece` on `square` attacks with the board's occupancy
    `occupied` (the moved piece on its target, before the board has the move)."""
    if piece == chess.PAWN:
        return chess.BB_PAWN_ATTACKS[colour][square]
    if piece == chess.KNIGHT:
        return chess.BB_KNIGHT_ATTACKS[square]
    if piece == chess.KING:
        return chess.BB_KING_ATTACKS[square]
    return _slider_attacks(piece, square, occupied)


def threat_classes(board: chess.Board, moves: Sequence[chess.Move]) -> list[int]:
    """`threat_class` of each of `moves` (legal on `board`), read off the bitboards without
    playing them: the moved piece's attacks from its target on the board with the move made,
    less those from its origin; the lines of the mover's sliders that saw the origin, opened.
    Castling, en passant and promotions, which are rare, take `threat_class`."""
    mover, side = board.turn, not board.turn
    occupied = board.occupied
    targets = board.occupied_co[side] & ~board.kings
    sliders = (board.bishops | board.rooks | board.queens) & board.occupied_co[mover]
    seen_from = {}  # origin -> the mover's sliders that attack it
    before = {}  # origin -> the attacks of the piece standing there
    classes = []
    for move in moves:
        origin, target = move.from_square, move.to_square
        piece = board.piece_type_at(origin)
        if is_rare_move(board, move, piece):
            classes.append(threat_class(board, move))
            continue
        after = occupied & ~chess.BB_SQUARES[origin] | chess.BB_SQUARES[target]
        victims = targets & ~chess.BB_SQUARES[target]
        attacks = _attacks_from(piece, mover, target, after)
        threatened = 0
        value = PIECE_VALUES[piece]
        # Per origin, not per move: a piece's own attacks from where it stands.
        if origin not in before:
            before[origin] = board.attacks_mask(origin)
        for square in chess.scan_forward(attacks & ~before[origin] & victims):
            if _with_gain(board, square, value, after, target, side):
                threatened |= chess.BB_SQUARES[square]
        if origin not in seen_from:
            seen_from[origin] = board.attackers_mask(mover, origin) & sliders
        for slider in chess.scan_forward(seen_from[origin]):
            kind = board.piece_type_at(slider)
            opened = _slider_attacks(kind, slider, after) & ~_slider_attacks(kind, slider, occupied)
            for square in chess.scan_forward(opened & victims & ~threatened):
                if _with_gain(board, square, PIECE_VALUES[kind], after, target, side):
                    threatened |= chess.BB_SQUARES[square]
        classes.append(min(chess.popcount(threatened), THREAT_MANY))
    return classes


def _with_gain(
    board: chess.Board,
    square: chess.Square,
    attacker: int,
    occupied: int,
    target: chess.Square,
    side: chess.Color,
) -> bool:
    """Whether `side`'s piece on `square`, attacked by a piece worth `attacker`, is worth more
    or undefended once a move to `target` leaves the board's occupancy `occupied` (a piece of
    `side` taken on `target` defends nothing)."""
    if PIECE_VALUES[board.piece_type_at(square)] > attacker:
        return True
    return not board.attackers_mask(side, square, occupied) & ~chess.BB_SQUARES[target]


def flight_class(board: chess.Board, move: chess.Move) -> int:
    """FLIGHTS_NONE, FLIGHTS_ONE or FLIGHTS_MANY: the squares the enemy king could step to once
    `move` (legal on `board`) is played (next to it, not holding a piece of its own, attacked
    by none of the mover's pieces with the king taken off the board, as legality asks), found
    by playing it."""
    after = board.copy(stack=False)
    after.push(move)
    return _flights(after, not after.turn)


def _flights(board: chess.Board, mover: chess.Color) -> int:
    king = board.king(not mover)
    if king is None:
        return FLIGHTS_NONE
    occupied = board.occupied & ~chess.BB_SQUARES[king]
    count = 0
    for square in chess.scan_forward(chess.BB_KING_ATTACKS[king] & ~board.occupied_co[not mover]):
        count += not board.attackers_mask(mover, square, occupied)
    return min(count, FLIGHTS_MANY)


def flight_classes(board: chess.Board, moves: Sequence[chess.Move]) -> list[int]:
    """`flight_class` of each of `moves` (legal on `board`), read off the bitboards without
    playing them: each of the king's neighbours asks who of the mover's attacks it with the
    moved piece on its target (a piece captured there attacks nothing). Castling, en passant
    and promotions, which are rare, take `flight_class`."""
    mover = board.turn
    king = board.king(not mover)
    if king is None:
        return [FLIGHTS_NONE] * len(moves)
    occupied = board.occupied & ~chess.BB_SQUARES[king]
    neighbours = chess.BB_KING_ATTACKS[king]
    around = neighbours & ~board.occupied_co[not mover]
    classes = []
    for move in moves:
        origin, target = move.from_square, move.to_square
        piece = board.piece_type_at(origin)
        if is_rare_move(board, move, piece):
            classes.append(flight_class(board, move))
            continue
        after = occupied & ~chess.BB_SQUARES[origin] | chess.BB_SQUARES[target]
        attacks = _attacks_from(piece, mover, target, after)
        # The moved piece's square is one the king may take, if nothing defends it.
        free = (around | neighbours & chess.BB_SQUARES[target]) & ~attacks
        count = 0
        for square in chess.scan_forward(free):
            if not board.attackers_mask(mover, square, after) & ~chess.BB_SQUARES[origin]:
                count += 1
                if count == FLIGHTS_MANY:
                    break
        classes.append(count)
    return classes


def hanging_class(board: chess.Board, move: chess.Move) -> int:
    """HANGING_NONE to HANGING_QUEEN: the most valuable of the mover's pieces other than the
    moved one and the king that stands en prise once `move` (legal on `board`) is played
    (attacked by an enemy piece worth less, or attacked and undefended), found by playing it."""
    mover = board.turn
    after = board.copy(stack=False)
    after.push(move)
    moved = chess.BB_SQUARES[move.to_square]  # castling's rook is judged as any other piece
    worst = 0
    for square in chess.scan_forward(after.occupied_co[mover] & ~after.kings & ~moved):
        value = PIECE_VALUES[after.piece_type_at(square)]
        if value > worst and en_prise(after, square):
            worst = value
    return _HANGING_OF_VALUE[worst]


def en_prise(board: chess.Board, square: chess.Square) -> bool:
    """Whether the piece on `square` is attacked by an enemy piece worth less than it, or
    attacked and defended by nothing, on `board` as it stands (pins not considered)."""
    piece = board.piece_at(square)
    attackers = board.attackers_mask(not piece.color, square)
    if not attackers:
        return False
    value = PIECE_VALUES[piece.piece_type]
    return not board.attackers_mask(piece.color, square) or any(
        PIECE_VALUES[board.piece_type_at(a)] < value for a in chess.scan_forward(attackers)
    )


def hanging_classes(board: chess.Board, moves: Sequence[chess.Move]) -> list[int]:
    """`hanging_class` of each of `moves` (legal on `board`), read off the bitboards without
    playing them. Only the square a move leaves opens lines, so after it the opponent attacks
    only pieces it attacked before and pieces on a line through that square; each of those
    asks who attacks and defends it with the moved piece on its target (a piece captured there
    attacks nothing). Castling, en passant and promotions, which are rare, take
    `hanging_class`."""
    mover, side = board.turn, not board.turn
    mine, theirs = board.occupied_co[mover], board.occupied_co[side]
    occupied = board.occupied
    others = mine & ~board.kings
    attacked = 0  # the mover's pieces the opponent attacks now
    for square in chess.scan_forward(others):
        if board.attackers_mask(side, square):
            attacked |= chess.BB_SQUARES[square]
    values = {
        square: PIECE_VALUES[board.piece_type_at(square)] for square in chess.scan_forward(others)
    }
    classes = []
    for move in moves:
        origin, target = move.from_square, move.to_square
        piece = board.piece_type_at(origin)
        if is_rare_move(board, move, piece):
            classes.append(hanging_class(board, move))
            continue
        lines = (
            chess.BB_DIAG_ATTACKS[origin][0]
            | chess.BB_RANK_ATTACKS[origin][0]
            | chess.BB_FILE_ATTACKS[origin][0]
        )
        candidates = (attacked | lines & others) & ~chess.BB_SQUARES[origin]
        if not candidates:
            classes.append(HANGING_NONE)
            continue
        after = occupied & ~chess.BB_SQUARES[origin] | chess.BB_SQUARES[target]
        enemies = theirs & ~chess.BB_SQUARES[target]
        defenders_mask = mine & ~chess.BB_SQUARES[origin]
        moved_attacks = _attacks_from(piece, mover, target, after)
        worst = 0
        for square in chess.scan_forward(candidates):
            value = values[square]
            if value <= worst:
                continue
            attackers = board.attackers_mask(side, square, after) & enemies
            if not attackers:
                continue
            if (
                not moved_attacks >> square & 1
                and not board.attackers_mask(mover, square, after) & defenders_mask
            ) or any(
                PIECE_VALUES[board.piece_type_at(a)] < value for a in chess.scan_forward(attackers)
            ):
                worst = value
        classes.append(_HANGING_OF_VALUE[worst])
    return classes


def danger_class(board: chess.Board, move: chess.Move) -> int:
    """DANGER_NONE to DANGER_BOXED: the checks the opponent could give the mover's king once
    `move` (legal on `board`) is played, found by playing it. A check square is one from which
    an enemy knight, bishop, rook or queen would attack the king, that holds no enemy piece,
    and that such an enemy piece attacks; it is safe unless one of the mover's pieces other
    than the king guards it or, next to the king, no second enemy piece defends it. The king is
    boxed in when each square next to it holds one of its pieces, or is attacked by the enemy
    (the king taken off the board) or by the checking piece from its check square."""
    mover, side = board.turn, not board.turn
    after = board.copy(stack=False)
    after.push(move)
    king = after.king(mover)
    if king is None:
        return DANGER_NONE
    occupied = after.occupied
    checks = []
    for piece in _CHECKERS:
        check_squares = _attacks_from(piece, mover, king, occupied)
        reach = 0
        for square in chess.scan_forward(after.pieces_mask(piece, side)):
            reach |= after.attacks_mask(square) & check_squares
        checks.append((piece, reach & ~after.occupied_co[side]))
    guards = after.occupied_co[mover] & ~after.kings
    kingless = occupied & ~chess.BB_SQUARES[king]
    free = 0
    for square in chess.scan_forward(chess.BB_KING_ATTACKS[king] & ~after.occupied_co[mover]):
        if not after.attackers_mask(side, square, kingless):
            free |= chess.BB_SQUARES[square]
    return _danger(
        checks,
        lambda square: bool(after.attackers_mask(mover, square) & guards),
        lambda square: chess.popcount(after.attackers_mask(side, square)),
        king,
        free,
        kingless,
        side,
    )


def _danger(
    checks: Sequence[tuple[chess.PieceType, int]],
    guarded: Callable[[chess.Square], bool],
    defenders: Callable[[chess.Square], int],
    king: chess.Square,
    free: int,
    kingless: int,
    side: chess.Color,
) -> int:
    """The king-danger class from each checking piece type's reachable check squares, whether the
    mover guards a square, how many enemy pieces attack it, and the king's free squares."""
    if not any(squares for _, squares in checks):
        return DANGER_NONE
    near = chess.BB_KING_ATTACKS[king]
    safe = {}  # square -> whether a check there is safe, asked once
    danger = DANGER_GUARDED
    for piece, squares in checks:
        for square in chess.scan_forward(squares):
            if square not in safe:
                safe[square] = not guarded(square) and not (
                    near >> square & 1 and defenders(square) < 2
                )
            if not safe[square]:
                continue
            if not free & ~_attacks_from(piece, side, square, kingless):
                return DANGER_BOXED
            danger = DANGER_SAFE
    return danger


def danger_classes(board: chess.Board, moves: Sequence[chess.Move]) -> list[int]:
    """`danger_class` of each of `moves` (legal on `board`), read off the bitboards without
    playing them: the king's lines and the enemy pieces' attacks with the moved piece on its
    target (a piece captured there attacks nothing and guards nothing). Castling, en passant
    and promotions, which are rare, take `danger_class`."""
    mover, side = board.turn, not board.turn
    home = board.king(mover)
    if home is None:
        return [DANGER_NONE] * len(moves)
    mine, theirs = board.occupied_co[mover], board.occupied_co[side]
    occupied = board.occupied
    pieces = [(piece, board.pieces_mask(piece, side)) for piece in _CHECKERS]
    classes = []
    for move in moves:
        origin, target = move.from_square, move.to_square
        piece = board.piece_type_at(origin)
        if is_rare_move(board, move, piece):
            classes.append(danger_class(board, move))
            continue
        gone = ~chess.BB_SQUARES[target]
        enemies = theirs & gone
        after = occupied & ~chess.BB_SQUARES[origin] | chess.BB_SQUARES[target]
        king = target if piece == chess.KING else home
        checks = []
        for checker, where in pieces:
            check_squares = _attacks_from(checker, mover, king, after)
            reach = 0
            for square in chess.scan_forward(where & gone):
                reach |= _attacks_from(checker, side, square, after) & check_squares
            checks.append((checker, reach & ~enemies))
        if not any(squares for _, squares in checks):
            classes.append(DANGER_NONE)
            continue
        guards = mine & ~board.kings & ~chess.BB_SQUARES[origin]
        moved = 0 if piece == chess.KING else _attacks_from(piece, mover, target, after)
        mine_after = mine & ~chess.BB_SQUARES[origin] | chess.BB_SQUARES[target]
        kingless = after & ~chess.BB_SQUARES[king]
        free = 0
        for square in chess.scan_forward(chess.BB_KING_ATTACKS[king] & ~mine_after):
            if not board.attackers_mask(side, square, kingless) & enemies:
                free |= chess.BB_SQUARES[square]
        classes.append(
            _danger(
                checks,
                lambda square, after=after, guards=guards, moved=moved: bool(
                    moved >> square & 1 or board.attackers_mask(mover, square, after) & guards
                ),
                lambda square, after=after, enemies=enemies: chess.popcount(
                    board.attackers_mask(side, square, after) & enemies
                ),
                king,
                free,
                kingless,
                side,
            )
        )
    return classes
