import chess

from core.game_end import terminal_value


def after(sans: str, fen: str = chess.STARTING_FEN) -> chess.Board:
    board = chess.Board(fen)
    for san in sans.split():
        board.push_san(san)
    return board


def test_terminal_values_are_exact_for_the_side_to_move():
    assert terminal_value(chess.Board()) is None
    assert terminal_value(after("f3 e5 g4 Qh4#")) == 0.0  # White to move is mated
    assert terminal_value(chess.Board("7k/5Q2/6K1/8/8/8/8/8 b - - 0 1")) == 0.5  # stalemate
    assert terminal_value(chess.Board("8/8/4k3/8/8/3NK3/8/8 w - - 0 1")) == 0.5  # K+N v K
    assert terminal_value(chess.Board("8/8/4k3/8/8/3RK3/8/8 w - - 100 80")) == 0.5  # fifty
    assert terminal_value(chess.Board("8/8/4k3/8/8/3RK3/8/8 w - - 99 80")) is None
    # Mate on the hundredth halfmove is still mate.
    assert terminal_value(chess.Board("k7/1Q6/1K6/8/8/8/8/8 b - - 100 90")) == 0.0


def test_repetition_counts_the_games_move_stack():
    twice = after("Nf3 Nf6 Ng1 Ng8 Nf3 Nf6 Ng1")
    assert terminal_value(twice) is None  # the position before ...Ng8 has occurred twice
    twice.push_san("Ng8")
    assert terminal_value(twice) == 0.5
    # The same position without the history is no repetition.
    assert terminal_value(chess.Board(twice.fen())) is None
