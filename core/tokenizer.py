"""FEN -> 77 integer tokens, the fixed-length board encoding the transformer reads.

Layout (docs/design.md): side to move (1), the 64 squares from a8 to h1 with `.` for empty (64),
castling right-padded with `.` to 4 (`-` -> `....`), en-passant square (2, `-` -> `..`),
halfmove clock right-padded to 3, fullmove number right-padded to 3. A counter the layout
cannot hold (a game past move 999) is a ValueError naming the FEN, so that data never loses
it. A model at play reads such a counter as 999 instead (`model_tokens`, `clamp_counters`): it
has never seen a larger one, and both counters are far past where they could still matter.
Every path from a FEN to a model at play (model/predictor.py and model/graph_predictor.py:
the UCI engine, the web board, the search's evaluators) tokenizes through `model_tokens`.

Characters map to a vocabulary of 31 tokens; a character means one token whatever its role
(`b` is the file b, black to move and a black bishop alike), as in the paper's reference code.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

VOCABULARY = "0123456789abcdefghpnrkqPBNRQKw."
VOCAB_SIZE = len(VOCABULARY)  # 31
SEQUENCE_LENGTH = 77

_CASTLING_WIDTH = 4
_CLOCK_WIDTH = 3
# The largest halfmove clock or fullmove number the layout holds.
MAX_CLOCK = 10**_CLOCK_WIDTH - 1

# Byte -> token; -1 marks a byte outside the vocabulary.
_LUT = np.full(256, -1, dtype=np.int32)
for _token, _char in enumerate(VOCABULARY):
    _LUT[ord(_char)] = _token

# Digits expand to runs of empty squares; rank separators stay so the layout can be checked.
_EXPAND = str.maketrans({str(n): "." * n for n in range(1, 9)})
# 64 squares + 7 separators, with a separator after every 8th square.
_BOARD_WITH_SEPARATORS = 71
_VALID_CASTLING = {"-"} | {
    "".join(c for c, keep in zip("KQkq", mask, strict=True) if keep)
    for mask in np.ndindex(2, 2, 2, 2)
    if any(mask)
}
_VALID_EN_PASSANT = {"-"} | {f + r for f in "abcdefgh" for r in "36"}
_PIECES = frozenset("pnbrqkPNBRQK")

# Fast-path tables. The batch path joins all FENs into one byte string and lays them out with
# array operations: the board's digits expand by np.repeat, and the short fields (castling,
# en passant, clocks) are gathered into fixed widths padded with `.`.
_FIELDS = 6
_SPACE, _DOT, _DASH = ord(" "), ord("."), ord("-")


def _byte_set(chars: str) -> np.ndarray:
    table = np.zeros(256, dtype=bool)
    table[[ord(c) for c in chars]] = True
    return table


_IS_BOARD_FIELD_BYTE = _byte_set("pnbrqkPNBRQK/12345678")
_IS_EXPANDING_DIGIT = _byte_set("12345678")
_IS_TURN_BYTE = _byte_set("wb")
_IS_DIGIT_BYTE = _byte_set("0123456789")
# 64 squares + 7 separators, with a separator after every 8th square.
_SQUARE_COLUMNS = np.setdiff1d(np.arange(_BOARD_WITH_SEPARATORS), np.arange(8, 71, 9))
_SEPARATOR_COLUMNS = np.arange(8, _BOARD_WITH_SEPARATORS, 9)


def _codes(strings, width: int) -> np.ndarray:
    """Fixed-width byte strings (padded with `.`) as integers, for membership tests."""
    padded = b"".join(s.ljust(width, ".").encode("ascii") for s in strings)
    return np.frombuffer(padded, dtype=f"<u{width}")


_CASTLING_CODES = _codes(_VALID_CASTLING, _CASTLING_WIDTH)
_EN_PASSANT_CODES = _codes(_VALID_EN_PASSANT, 2)


def _fixed_width(fen: str, clamp_counters: bool = False) -> str:
    """The 77-character string whose characters are the tokens, or ValueError naming the FEN."""
    fields = fen.split(" ")  # strict: one space between fields, none around them
    if len(fields) != 6:
        raise ValueError(
            f"FEN {fen!r}: expected 6 fields separated by single spaces, got {len(fields)}"
        )
    board, turn, castling, en_passant, halfmove, fullmove = fields
    squares = board.translate(_EXPAND)
    if (
        len(squares) != _BOARD_WITH_SEPARATORS
        or squares.count("/") != 7
        or squares[8::9] != "///////"
    ):
        raise ValueError(f"FEN {fen!r}: board field does not describe 8 ranks of 8 squares")
    squares = squares.replace("/", "")
    if not _PIECES.issuperset(squares.replace(".", "")):
        raise ValueError(f"FEN {fen!r}: board field has a character that is not a piece")
    if turn not in ("w", "b"):
        raise ValueError(f"FEN {fen!r}: side to move must be 'w' or 'b', got {turn!r}")
    if castling not in _VALID_CASTLING:
        raise ValueError(
            f"FEN {fen!r}: castling field {castling!r} is not standard KQkq "
            "(Chess960 castling files cannot be encoded)"
        )
    if en_passant not in _VALID_EN_PASSANT:
        raise ValueError(f"FEN {fen!r}: en-passant field {en_passant!r} is not a square or '-'")
    counters = []
    for name, value in (("halfmove clock", halfmove), ("fullmove number", fullmove)):
        if value.isdigit() and value.isascii() and clamp_counters:
            value = str(min(int(value), MAX_CLOCK))
        if not value.isdigit() or len(value) > _CLOCK_WIDTH or not value.isascii():
            raise ValueError(
                f"FEN {fen!r}: {name} {value!r} must be a number of at most {_CLOCK_WIDTH} digits"
            )
        counters.append(value)
    halfmove, fullmove = counters
    return "".join(
        (
            turn,
            squares,
            castling.replace("-", "").ljust(_CASTLING_WIDTH, "."),
            en_passant.replace("-", ".."),
            halfmove.ljust(_CLOCK_WIDTH, "."),
            fullmove.ljust(_CLOCK_WIDTH, "."),
        )
    )


def tokenize(fen: str, clamp_counters: bool = False) -> np.ndarray:
    """One FEN -> int32 array of shape (77,), through the checked per-FEN path (the batch
    path's fixed cost of a dozen array operations would dominate for one FEN). With
    `clamp_counters`, a counter past MAX_CLOCK is read as MAX_CLOCK instead of refused."""
    text = _fixed_width(fen, clamp_counters)
    return _LUT[np.frombuffer(text.encode("ascii"), dtype=np.uint8)]


def tokenize_batch(fens: Sequence[str], clamp_counters: bool = False) -> np.ndarray:
    """Many FENs -> int32 array of shape (len(fens), 77); `clamp_counters` as in tokenize.

    The fast path lays all FENs out at once with numpy (no Python work per character) and
    validates them as it goes. Anything it rejects is re-checked one FEN at a time, so the
    error names the offending FEN; with `clamp_counters` a batch holding a counter past three
    digits (rare: a game past move 999) is tokenized that way, one FEN at a time.
    """
    n = len(fens)
    if n == 0:
        return np.zeros((0, SEQUENCE_LENGTH), dtype=np.int32)
    try:
        layout = _fast_layout(fens)
    except (TypeError, UnicodeEncodeError):
        layout = None
    if layout is None:
        if clamp_counters:
            return np.stack([tokenize(fen, clamp_counters=True) for fen in fens])
        for fen in fens:
            _fixed_width(fen)  # raises ValueError naming the first bad FEN
        raise AssertionError("fast tokenizer path rejected FENs the checked path accepts")
    return _LUT[layout]


def model_tokens(fens: Sequence[str]) -> np.ndarray:
    """The (len(fens), 77) tokens a model at play reads: counters past MAX_CLOCK read as
    MAX_CLOCK. A few FENs (a move in play) take the checked single path, whose cost is less
    than the batch path's fixed dozen array operations."""
    if len(fens) > 8:
        return tokenize_batch(fens, clamp_counters=True)
    rows = [tokenize(fen, clamp_counters=True) for fen in fens]
    return np.stack(rows) if rows else np.zeros((0, SEQUENCE_LENGTH), dtype=np.int32)


def _gather(raw: np.ndarray, start: np.ndarray, length: np.ndarray, width: int):
    """Each row's field raw[start:start+length], padded with `.` to `width`, or None if a
    field is empty or longer than `width`."""
    if (length < 1).any() or (length > width).any():
        return None
    columns = np.arange(width)
    inside = columns < length[:, None]
    index = np.where(inside, start[:, None] + columns, 0)
    return np.where(inside, raw[index], _DOT).astype(np.uint8), inside


def _fast_layout(fens: Sequence[str]) -> np.ndarray | None:
    """(N, 77) bytes of the token characters, or None if any FEN does not fit the layout."""
    n = len(fens)
    raw = np.frombuffer((" ".join(fens) + " ").encode("ascii"), dtype=np.uint8)
    spaces = np.flatnonzero(raw == _SPACE)
    if spaces.size != _FIELDS * n:
        return None
    ends = spaces.reshape(n, _FIELDS)
    # Each FEN's sixth space must be the one that follows it: exactly six fields each.
    lengths = np.fromiter(map(len, fens), dtype=np.int64, count=n)
    if not (ends[:, -1] == np.cumsum(lengths + 1) - 1).all():
        return None
    starts = np.empty_like(ends)
    starts[:, 0] = ends[:, -1] - lengths
    starts[:, 1:] = ends[:, :-1] + 1
    widths = ends - starts

    # Board: digits 1-8 become that many `.`; every FEN must come to 8 ranks of 8.
    board_index = np.arange(raw.size) - np.repeat(starts[:, 0], lengths + 1)
    in_board = board_index < np.repeat(widths[:, 0], lengths + 1)
    if not _IS_BOARD_FIELD_BYTE[raw[in_board]].all():
        return None
    digit = _IS_EXPANDING_DIGIT[raw]
    repeats = np.where(in_board, np.where(digit, raw - ord("0"), 1), 0)
    per_fen = np.add.reduceat(repeats, starts[:, 0])
    if not (per_fen == _BOARD_WITH_SEPARATORS).all():
        return None
    board = np.repeat(np.where(digit, _DOT, raw), repeats).reshape(n, _BOARD_WITH_SEPARATORS)
    if (board == ord("/")).sum() != 7 * n or not (board[:, _SEPARATOR_COLUMNS] == ord("/")).all():
        return None

    if not (widths[:, 1] == 1).all():
        return None
    turn = raw[starts[:, 1]]
    if not _IS_TURN_BYTE[turn].all():
        return None
    fields = []
    for k, width, codes in ((2, _CASTLING_WIDTH, _CASTLING_CODES), (3, 2, _EN_PASSANT_CODES)):
        gathered = _gather(raw, starts[:, k], widths[:, k], width)
        if gathered is None:
            return None
        field = np.ascontiguousarray(gathered[0])
        if not np.isin(field.view(f"<u{width}")[:, 0], codes).all():
            return None
        fields.append(np.where(field == _DASH, _DOT, field))
    for k in (4, 5):
        gathered = _gather(raw, starts[:, k], widths[:, k], _CLOCK_WIDTH)
        if gathered is None:
            return None
        clock, inside = gathered
        if not (_IS_DIGIT_BYTE[clock] | ~inside).all():
            return None
        fields.append(clock)
    return np.concatenate([turn[:, None], board[:, _SQUARE_COLUMNS], *fields], axis=1)


def detokenize(tokens: np.ndarray) -> str:
    """The fixed-width string a token vector stands for (for debugging and tests)."""
    tokens = np.asarray(tokens)
    if tokens.shape != (SEQUENCE_LENGTH,):
        raise ValueError(f"expected {SEQUENCE_LENGTH} tokens, got shape {tokens.shape}")
    return "".join(VOCABULARY[t] for t in tokens)


def fen_from_tokens(tokens: np.ndarray) -> str:
    """The FEN a token vector stands for: the inverse of tokenize (ValueError for a shape
    other than (77,) or tokens no FEN makes)."""
    text = detokenize(tokens)
    turn, squares = text[0], text[1:65]
    castling, en_passant = text[65:69], text[69:71]
    halfmove, fullmove = text[71:74], text[74:77]
    ranks = []
    for rank in range(8):
        row, empty = "", 0
        for char in squares[8 * rank : 8 * rank + 8]:
            if char == ".":
                empty += 1
                continue
            row += (str(empty) if empty else "") + char
            empty = 0
        ranks.append(row + (str(empty) if empty else ""))
    fen = " ".join(
        (
            "/".join(ranks),
            turn,
            castling.replace(".", "") or "-",
            "-" if en_passant == ".." else en_passant,
            halfmove.replace(".", ""),
            fullmove.replace(".", ""),
        )
    )
    _fixed_width(fen)  # refuses what tokenize would refuse
    return fen
