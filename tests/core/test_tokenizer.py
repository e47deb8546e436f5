import random

import chess
import numpy as np
import pytest

from core.tokenizer import (
    SEQUENCE_LENGTH,
    VOCAB_SIZE,
    VOCABULARY,
    detokenize,
    fen_from_tokens,
    tokenize,
    tokenize_batch,
)

START_TOKENS = (
    [29, 20, 19, 11, 22, 21, 11, 19, 20]
    + [18] * 8
    + [30] * 32
    + [23] * 8
    + [26, 25, 24, 27, 28, 24, 25, 26, 28, 27, 21, 22, 30, 30, 0, 30, 30, 1, 30, 30]
)


def test_vocabulary_has_31_distinct_characters():
    assert VOCAB_SIZE == 31 == len(set(VOCABULARY))


def test_start_position_matches_design():
    tokens = tokenize(chess.STARTING_FEN)
    assert tokens.dtype == np.int32
    assert tokens.tolist() == START_TOKENS


def test_fields_are_laid_out_and_padded():
    fen = "r3k2r/8/8/3pP3/8/8/8/R3K2R w Kq d6 12 104"
    text = detokenize(tokenize(fen))
    assert len(text) == SEQUENCE_LENGTH
    assert text[0] == "w"
    assert text[1:9] == "r...k..r"
    assert text[25:33] == "...pP..."
    assert text[57:65] == "R...K..R"
    assert text[65:69] == "Kq.."
    assert text[69:71] == "d6"
    assert text[71:74] == "12."
    assert text[74:77] == "104"


def test_black_to_move_no_castling_no_en_passant():
    text = detokenize(tokenize("8/8/8/8/8/8/8/K6k b - - 0 999"))
    assert text[0] == "b"
    assert text[65:] == "......0..999"


def test_batch_equals_one_at_a_time_on_real_game_positions():
    board = chess.Board()
    fens = []
    for uci in ["e2e4", "c7c5", "g1f3", "d7d6", "d2d4", "c5d4", "f3d4", "g8f6", "b1c3", "a7a6"]:
        fens.append(board.fen())
        board.push_uci(uci)
    batch = tokenize_batch(fens)
    assert batch.shape == (len(fens), SEQUENCE_LENGTH)
    for row, fen in zip(batch, fens, strict=True):
        assert row.tolist() == tokenize(fen).tolist()
    assert len({tuple(r) for r in batch.tolist()}) == len(fens)


def test_empty_batch():
    assert tokenize_batch([]).shape == (0, SEQUENCE_LENGTH)


@pytest.mark.parametrize("counters", ["0 1000", "1000 1", "1200 123456789", "0999 1000"])
def test_counters_past_three_digits_are_read_as_999_when_asked(counters):
    late = f"4k3/8/8/8/8/8/4P3/4K3 b - - {counters}"
    clamped = " ".join(str(min(int(c), 999)) for c in counters.split())
    expected = tokenize(f"4k3/8/8/8/8/8/4P3/4K3 b - - {clamped}")
    assert tokenize(late, clamp_counters=True).tolist() == expected.tolist()
    # The vectorised path too, a late board among ordinary ones.
    batch = tokenize_batch([chess.STARTING_FEN, late, chess.STARTING_FEN], clamp_counters=True)
    assert batch[1].tolist() == expected.tolist()
    assert batch[0].tolist() == batch[2].tolist() == tokenize(chess.STARTING_FEN).tolist()
    assert fen_from_tokens(batch[1]).endswith(clamped)
    # Clamping never lets through what the layout cannot hold otherwise.
    with pytest.raises(ValueError, match="fullmove"):
        tokenize_batch([late.replace(counters, "0 -5")], clamp_counters=True)


@pytest.mark.parametrize(
    "fen, reason",
    [
        ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1000", "fullmove"),
        ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 1000 1", "halfmove"),
        ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w HAha - 0 1", "Chess960"),
        ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0", "6 fields"),
        ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP w KQkq - 0 1", "8 ranks"),
        ("rnbqkbnr/ppppppppp/7/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1", "8 ranks"),
        ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNX w KQkq - 0 1", "piece"),
        ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR x KQkq - 0 1", "side to move"),
        ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq e5 0 1", "en-passant"),
        ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - -1 1", "halfmove"),
    ],
)
def test_unencodable_fen_is_a_value_error_naming_it(fen, reason):
    with pytest.raises(ValueError, match=reason) as info:
        tokenize(fen)
    assert fen in str(info.value)
    # The vectorised path names the bad FEN too, even among good ones.
    with pytest.raises(ValueError, match=reason) as info:
        tokenize_batch([chess.STARTING_FEN, fen, chess.STARTING_FEN])
    assert fen in str(info.value)


def test_batch_on_real_games(shared_data):
    import chess.pgn

    path = shared_data / "games" / "lichess_db_standard_rated_2021-10_head999__kdave_pgn-toys.pgn"
    fens = []
    with open(path) as f:
        for _ in range(30):
            game = chess.pgn.read_game(f)
            board = game.board()
            for move in game.mainline_moves():
                fens.append(board.fen())
                board.push(move)
    batch = tokenize_batch(fens)
    for row, fen in zip(batch, fens, strict=True):
        text = detokenize(row)
        board = chess.Board(fen)
        for square in chess.SQUARES:
            piece = board.piece_at(square)
            index = 1 + (7 - chess.square_rank(square)) * 8 + chess.square_file(square)
            assert text[index] == (piece.symbol() if piece else ".")


def reference_characters(fen: str) -> str | None:
    """docs/design.md's layout written the plain way, one character at a time; None where the
    fixed layout cannot hold the FEN."""
    fields = fen.split(" ")
    if len(fields) != 6:
        return None
    board, turn, castling, en_passant, halfmove, fullmove = fields
    ranks = board.split("/")
    squares = ""
    for rank in ranks:
        row = ""
        for char in rank:
            if char in "12345678":
                row += "." * int(char)
            elif char in "pnbrqkPNBRQK":
                row += char
            else:
                return None
        if len(row) != 8:
            return None
        squares += row
    if len(ranks) != 8 or turn not in ("w", "b"):
        return None
    if castling != "-" and (
        not castling or "".join(c for c in "KQkq" if c in castling) != castling
    ):
        return None
    files_ranks = [f + r for f in "abcdefgh" for r in "36"]
    if en_passant != "-" and en_passant not in files_ranks:
        return None
    for clock in (halfmove, fullmove):
        if not (1 <= len(clock) <= 3 and all(c in "0123456789" for c in clock)):
            return None
    return (
        turn
        + squares
        + castling.replace("-", "").ljust(4, ".")
        + en_passant.replace("-", "..")
        + halfmove.ljust(3, ".")
        + fullmove.ljust(3, ".")
    )


def random_fens(count: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    fens = []
    while len(fens) < count:
        board = chess.Board()
        for _ in range(int(rng.integers(1, 80))):
            moves = list(board.legal_moves)
            if not moves:
                break
            board.push(moves[int(rng.integers(len(moves)))])
            fens.append(board.fen())
    return fens[:count]


def test_batch_path_agrees_with_a_plain_reference_on_mutated_fens():
    """Random edits of real FENs (characters replaced, dropped, inserted): the batch path
    accepts exactly what the plain reference accepts, with the same tokens, and names the
    FEN it refuses."""
    fens = random_fens(300, seed=1)
    rng = np.random.default_rng(2)
    alphabet = "pnbrqkPNBRQK0123456789/ -wbKQkqaeh36x"
    accepted = refused = 0
    for _ in range(3000):
        chars = list(fens[int(rng.integers(len(fens)))])
        for _ in range(int(rng.integers(1, 4))):
            at, edit = int(rng.integers(len(chars))), rng.random()
            new = alphabet[int(rng.integers(len(alphabet)))]
            if edit < 0.4:
                chars[at] = new
            elif edit < 0.7:
                del chars[at]
            else:
                chars.insert(at, new)
        fen = "".join(chars)
        expected = reference_characters(fen)
        if expected is None:
            refused += 1
            with pytest.raises(ValueError) as info:
                tokenize_batch([fens[0], fen, fens[1]])
            assert fen in str(info.value)
        else:
            accepted += 1
            tokens = tokenize_batch([fens[0], fen, fens[1]])[1]
            assert detokenize(tokens) == expected, fen
    assert accepted > 100 and refused > 1000  # both sides of the rule were exercised


def test_batch_equals_the_plain_reference_on_many_positions():
    fens = random_fens(2000, seed=3)
    batch = tokenize_batch(fens)
    assert [detokenize(row) for row in batch] == [reference_characters(f) for f in fens]


def test_fen_from_tokens_inverts_tokenize():
    rng = random.Random(11)
    fens = ["r3k2r/8/8/3pP3/8/8/8/R3K2R w Kq d6 12 104", "8/8/8/8/8/8/8/K6k b - - 99 999"]
    for _ in range(10):
        board = chess.Board()
        while not board.is_game_over() and board.ply() < 120:
            fens.append(board.fen())
            board.push(rng.choice(list(board.legal_moves)))
    for fen, tokens in zip(fens, tokenize_batch(fens), strict=True):
        assert fen_from_tokens(tokens) == fen
    with pytest.raises(ValueError):
        fen_from_tokens(np.zeros(SEQUENCE_LENGTH, np.int32))
