"""Splitting, sampling and parsing games (pipeline.pgn), on PGN the tests write and real files."""

from __future__ import annotations

import io

import chess
import chess.pgn
import pytest

from pipeline import pgn


def _split(text: str):
    return list(pgn.split_games(text.split("\n")))


def _games(text: str) -> list[pgn.GameText]:
    return [item for item in _split(text) if isinstance(item, pgn.GameText)]


def test_games_are_cut_apart_and_garbage_between_them_is_set_aside(pgn_samples):
    s = pgn_samples
    items = _split(s.garbage + s.scholars_mate + s.garbage + s.italian + s.garbage + s.petrov)
    kinds = [type(item).__name__ for item in items]
    assert kinds == ["Garbage", "GameText", "Garbage", "GameText", "Garbage", "GameText"]
    games = [item for item in items if isinstance(item, pgn.GameText)]
    assert [g.ordinal for g in games] == [0, 1, 2]
    assert [g.headers["Site"][-8:] for g in games] == ["scholar1", "italian1", "petrov01"]
    assert all(isinstance(pgn.parse_game(g), pgn.GameBoards) for g in games)


def test_garbage_glued_right_after_a_result_does_not_spoil_the_game(pgn_samples):
    text = pgn_samples.italian.rstrip("\n") + "\nGARBAGE LINE\n" + pgn_samples.petrov
    games = _games(text)
    assert len(games) == 2
    assert all(isinstance(pgn.parse_game(g), pgn.GameBoards) for g in games)


def test_a_game_without_result_ends_where_the_next_tags_begin():
    text = '[Site "x"]\n\n1. e4 e5\n[Site "y"]\n\n1. d4 d5 *\n'
    games = _games(text)
    assert [len(pgn.parse_game(g).fens) for g in games] == [2, 2]


def test_multi_line_comments_with_tag_like_lines_stay_inside_the_game():
    text = '[Site "x"]\n\n1. e4 { a comment\n[%clk 0:01:00] still comment\n} e5 2. Nf3 1-0\n'
    (game,) = _games(text)
    assert len(pgn.parse_game(game).fens) == 3


def test_each_board_comes_with_the_move_played_from_it(pgn_samples):
    (game,) = _games(pgn_samples.scholars_mate)
    result = pgn.parse_game(game)
    assert result.moves == ("e2e4", "e7e5", "f1c4", "b8c6", "d1h5", "g8f6", "h5f7")
    board = chess.Board()
    for fen, move in zip(result.fens, result.moves, strict=True):
        assert board.fen() == fen
        board.push_uci(move)
    assert board.is_checkmate()


def test_parsed_games_are_the_usable_games_with_their_boards(pgn_samples):
    text = pgn_samples.garbage + pgn_samples.italian + pgn_samples.illegal + pgn_samples.petrov
    parsed = list(pgn.parsed_games(text.split("\n")))
    assert [len(boards.fens) for _, boards in parsed] == [8, 6]
    assert [game.headers["Site"] for game, _ in parsed] == [
        "https://lichess.org/italian1",
        "https://lichess.org/petrov01",
    ]


def test_a_game_with_only_headers_is_counted_as_having_no_moves(pgn_samples):
    text = '[Event "x"]\n[Site "https://lichess.org/empty001"]\n\n' + pgn_samples.italian
    games = _games(text)
    assert len(games) == 2
    assert pgn.parse_game(games[0]) == pgn.Skip(pgn.NO_MOVES, "no moves")


def test_a_source_failing_mid_game_yields_that_game_marked_truncated(pgn_samples):
    def lines():
        yield from pgn_samples.italian.split("\n")
        yield '[Site "cut"]'
        yield "1. e4 e5 2. Nf"
        raise OSError("stream cut")

    items = []
    with pytest.raises(OSError, match="stream cut"):
        for item in pgn.split_games(lines()):
            items.append(item)
    assert [g.truncated for g in items] == [False, True]
    assert pgn.parse_game(items[1]).reason == pgn.TRUNCATED


@pytest.mark.parametrize(
    ("name", "reason"),
    [("illegal", pgn.ILLEGAL_MOVE), ("chess960", pgn.VARIANT), ("setup", pgn.SETUP)],
)
def test_games_that_cannot_be_used_are_skipped_with_their_reason(pgn_samples, name, reason):
    (game,) = _games(getattr(pgn_samples, name))
    result = pgn.parse_game(game)
    assert isinstance(result, pgn.Skip) and result.reason == reason


def test_unparseable_movetext_is_a_parse_error(pgn_samples):
    (game,) = _games(pgn_samples.game("badtoken", "1. e4 e5 2. Zz9 Nc6"))
    assert pgn.parse_game(game).reason in (pgn.PARSE_ERROR, pgn.ILLEGAL_MOVE)
    (game,) = _games('[Site "x"]\n[FEN "not a fen"]\n\n1. e4 *\n')
    assert pgn.parse_game(game, allow_setup=True).reason == pgn.PARSE_ERROR


def test_other_variants_are_skipped_by_their_header(pgn_samples):
    text = pgn_samples.game("zh000001", "1. e4 e5", "1-0", '[Variant "Crazyhouse"]\n')
    (game,) = _games(text)
    assert pgn.parse_game(game) == pgn.Skip(pgn.VARIANT, "Crazyhouse")


def test_set_up_positions_are_used_when_allowed(pgn_samples):
    (game,) = _games(pgn_samples.setup)
    result = pgn.parse_game(game, allow_setup=True)
    assert result.fens == ("6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1",)


def test_boards_are_the_positions_before_each_move(pgn_samples):
    (game,) = _games(pgn_samples.scholars_mate)
    fens = pgn.parse_game(game).fens
    board = chess.Board()
    expected = []
    for san in ["e4", "e5", "Bc4", "Nc6", "Qh5", "Nf6", "Qxf7#"]:
        expected.append(board.fen())
        board.push_san(san)
    assert fens == tuple(expected)  # the final (mated) position is not a board


def test_side_lines_are_ignored():
    (game,) = _games('[Site "x"]\n\n1. e4 (1. d4 d5) e5 (1... c5 2. Nf3) 2. Nf3 *\n')
    assert len(pgn.parse_game(game).fens) == 3


def test_game_ids_come_from_lichess_headers_else_from_the_text():
    def text_game(headers: str) -> pgn.GameText:
        return _games(headers + "\n1. e4 *\n")[0]

    assert pgn.game_id(text_game('[Site "https://lichess.org/AbCd1234"]\n')) == "AbCd1234"
    assert pgn.game_id(text_game('[GameId "Zz99"]\n[Site "https://lichess.org/x"]\n')) == "Zz99"
    anonymous = text_game('[Site "?"]\n')
    assert pgn.game_id(anonymous).startswith("sha256:")
    assert pgn.game_id(anonymous) == pgn.game_id(text_game('[Site "?"]\n'))


def test_sampling_points_are_fixed_by_id_and_seed_and_spread_evenly():
    ids = [f"game{i:06d}" for i in range(20_000)]
    points = [pgn.sample_point(i) for i in ids]
    assert points == [pgn.sample_point(i) for i in ids]
    assert points != [pgn.sample_point(i, seed=1) for i in ids]
    kept = sum(p < 0.1 for p in points) / len(points)
    assert 0.09 < kept < 0.11
    assert all(0 <= p < 1 for p in points)


def test_real_games_split_exactly_as_python_chess_reads_them(shared_data):
    path = shared_data / "games" / "lichess_db_standard_rated_2021-10_head999__kdave_pgn-toys.pgn"
    text = path.read_text()
    ours = _games(text)
    handle, theirs = io.StringIO(text), []
    while (game := chess.pgn.read_game(handle)) is not None:
        theirs.append(game)
    assert len(ours) == len(theirs) == 999
    for mine, reference in zip(ours[:200], theirs[:200], strict=True):
        result = pgn.parse_game(mine)
        board, expected = reference.board(), []
        for move in reference.mainline_moves():
            expected.append(board.fen())
            board.push(move)
        assert (result.fens if isinstance(result, pgn.GameBoards) else ()) == tuple(expected)
