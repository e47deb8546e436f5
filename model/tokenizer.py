"""FEN -> 77 integer tokens, the fixed-length board encoding the transformer reads.

Layout (DESIGN.md): side to move (1), the 64 squares from a8 to h1 with `.` for empty (64),
castling right-padded with `.` to 4 (`-` -> `....`), en-passant square (2, `-` -> `..`),
halfmove clock right-padded to 3, fullmove number right-padded to 3.

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

# Fast-path tables: fixed-width fields looked up whole, and the byte columns of the
# 84-character raw layout (turn, 71 board characters with separators, 4 + 2 + 3 + 3).
_CASTLING_FIELD = {c: c.replace("-", "").ljust(_CASTLING_WIDTH, ".") for c in _VALID_CASTLING}
_EN_PASSANT_FIELD = {e: e.replace("-", "..") for e in _VALID_EN_PASSANT}
_RAW_WIDTH = 1 + _BOARD_WITH_SEPARATORS + _CASTLING_WIDTH + 2 + 2 * _CLOCK_WIDTH
_SEPARATOR_COLUMNS = np.arange(1 + 8, 1 + _BOARD_WITH_SEPARATORS, 9)
_KEEP_COLUMNS = np.setdiff1d(np.arange(_RAW_WIDTH), _SEPARATOR_COLUMNS)
_BOARD_COLUMNS = np.setdiff1d(np.arange(1, 1 + _BOARD_WITH_SEPARATORS), _SEPARATOR_COLUMNS)


def _byte_set(chars: str) -> np.ndarray:
    table = np.zeros(256, dtype=bool)
    table[[ord(c) for c in chars]] = True
    return table


_IS_BOARD_BYTE = _byte_set("pnbrqkPNBRQK.")
_IS_TURN_BYTE = _byte_set("wb")
_IS_DIGIT_BYTE = _byte_set("0123456789")


def _fixed_width(fen: str) -> str:
    """The 77-character string whose characters are the tokens, or ValueError naming the FEN."""
    fields = fen.split()
    if len(fields) != 6:
        raise ValueError(f"FEN {fen!r}: expected 6 fields, got {len(fields)}")
    board, turn, castling, en_passant, halfmove, fullmove = fields
    squares = board.translate(_EXPAND)
    if len(squares) != _BOARD_WITH_SEPARATORS or squares[8::9] != "///////":
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
    for name, value in (("halfmove clock", halfmove), ("fullmove number", fullmove)):
        if not value.isdigit() or len(value) > _CLOCK_WIDTH or not value.isascii():
            raise ValueError(
                f"FEN {fen!r}: {name} {value!r} must be a number of at most {_CLOCK_WIDTH} digits"
            )
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


def tokenize(fen: str) -> np.ndarray:
    """One FEN -> int32 array of shape (77,)."""
    return tokenize_batch([fen])[0]


def tokenize_batch(fens: Sequence[str]) -> np.ndarray:
    """Many FENs -> int32 array of shape (len(fens), 77).

    The fast path lays every FEN out as a fixed-width string in one pass of string
    formatting, then validates and maps all of them at once with numpy. Anything the fast
    path rejects is re-checked one FEN at a time, so the error names the offending FEN.
    """
    n = len(fens)
    if n == 0:
        return np.zeros((0, SEQUENCE_LENGTH), dtype=np.int32)
    try:
        raw = _fast_layout(fens)
    except (KeyError, ValueError, UnicodeEncodeError):
        raw = None
    if raw is None or not _layout_is_valid(raw):
        for fen in fens:
            _fixed_width(fen)  # raises ValueError naming the first bad FEN
        raise AssertionError("fast tokenizer path rejected FENs the checked path accepts")
    return _LUT[raw[:, _KEEP_COLUMNS]]


def _fast_layout(fens: Sequence[str]) -> np.ndarray | None:
    """(N, 84) bytes: turn, board with separators, castling, en passant, clocks."""
    parts = []
    append = parts.append
    for fen in fens:
        board, turn, castling, en_passant, halfmove, fullmove = fen.split(" ")
        append(
            f"{turn}{board.translate(_EXPAND)}{_CASTLING_FIELD[castling]}"
            f"{_EN_PASSANT_FIELD[en_passant]}{halfmove:.<3}{fullmove:.<3}"
        )
    raw = np.frombuffer("".join(parts).encode("ascii"), dtype=np.uint8)
    if raw.size != len(fens) * _RAW_WIDTH:
        return None
    return raw.reshape(len(fens), _RAW_WIDTH)


def _layout_is_valid(raw: np.ndarray) -> bool:
    if not (raw[:, _SEPARATOR_COLUMNS] == ord("/")).all():
        return False
    if not _IS_BOARD_BYTE[raw[:, _BOARD_COLUMNS]].all():
        return False
    if not _IS_TURN_BYTE[raw[:, 0]].all():
        return False
    for start in (_RAW_WIDTH - 6, _RAW_WIDTH - 3):
        clock = raw[:, start : start + 3]
        digits = _IS_DIGIT_BYTE[clock]
        # A number: a first digit, then digits, then only padding.
        if not (digits[:, 0].all() and (digits[:, 2] <= digits[:, 1]).all()):
            return False
        if not (digits | (clock == ord("."))).all():
            return False
    return True


def detokenize(tokens: np.ndarray) -> str:
    """The fixed-width string a token vector stands for (for debugging and tests)."""
    tokens = np.asarray(tokens)
    if tokens.shape != (SEQUENCE_LENGTH,):
        raise ValueError(f"expected {SEQUENCE_LENGTH} tokens, got shape {tokens.shape}")
    return "".join(VOCABULARY[t] for t in tokens)
