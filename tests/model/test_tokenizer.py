import chess
import numpy as np
import pytest

from model.tokenizer import (
    SEQUENCE_LENGTH,
    VOCAB_SIZE,
    VOCABULARY,
    detokenize,
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
