"""The game helpers of the web board's API, which need no model: a position's legal moves and
outcome, a pasted FEN or PGN read, the game written as PGN.
"""

from __future__ import annotations

import datetime
import io

import chess
import chess.pgn

from core.game_end import board_outcome
from eval.web.params import ApiError, game_board, status_words, text_param

PGN_EVENT = "searchless-chess web board"
# The tags of a pasted game that its export keeps (the Seven Tag Roster but the result,
# which the game played on decides).
KEPT_TAGS = ("Event", "Site", "Date", "Round", "White", "Black")
MAX_TAG = 200


def position(fen: str | None = None, moves=None) -> dict:
    """The game's state for the page: legal moves with SAN, the moves' SAN, the outcome."""
    board = game_board(fen, moves)
    outcome = board_outcome(board)
    replay = board.root()
    sans = []
    for move in board.move_stack:
        sans.append(replay.san(move))
        replay.push(move)
    legal = [] if outcome else [{"uci": m.uci(), "san": board.san(m)} for m in board.legal_moves]
    return {
        "fen": board.fen(),
        "start_fen": board.root().fen(),
        "turn": "white" if board.turn == chess.WHITE else "black",
        "check": board.is_check(),
        "moves": [m.uci() for m in board.move_stack],
        "sans": sans,
        "legal": legal,
        "over": {"result": outcome.result, "termination": outcome.termination} if outcome else None,
    }


def tag_value(value: str) -> str:
    """A PGN tag's value written safely: one line, its quotes and backslashes escaped (PGN's
    string escapes), so no value can end its tag and start another."""
    flat = " ".join(value.split())[:MAX_TAG]
    return flat.replace("\\", "\\\\").replace('"', '\\"')


def pgn(fen=None, moves=None, **tags) -> str:
    """The game as PGN: a FEN header when it does not start from the standard position, the
    players and tags given (a pasted game's own, else the page's), today's date, and the
    standard Result and Termination ("normal" for an end by the rules, the reason as the
    last comment)."""
    board = game_board(fen, moves)
    game = chess.pgn.Game.from_board(board)
    given = {name: text_param(name.lower(), tags.get(name.lower())) for name in KEPT_TAGS}
    game.headers["Event"] = given["Event"] or PGN_EVENT
    game.headers["Site"] = given["Site"] or "?"
    game.headers["Date"] = given["Date"] or datetime.date.today().strftime("%Y.%m.%d")
    game.headers["Round"] = given["Round"] or "-"
    game.headers["White"] = given["White"] or "?"
    game.headers["Black"] = given["Black"] or "?"
    for name in KEPT_TAGS:
        game.headers[name] = tag_value(game.headers[name])
    outcome = board_outcome(board)
    game.headers["Result"] = outcome.result if outcome else "*"
    if outcome:
        game.headers["Termination"] = "normal"
        game.end().comment = outcome.termination
    return str(game) + "\n"


def pasted_tags(game: chess.pgn.Game) -> dict:
    """The tags of a pasted game its export keeps: those it gave (not "?")."""
    tags = {}
    for name in KEPT_TAGS:
        value = game.headers.get(name, "?")
        if value and value.strip("?.") and value != "-":
            tags[name.lower()] = value[:MAX_TAG]
    return tags


def load(text) -> dict:
    """A pasted FEN or PGN -> its start FEN, UCI moves (the main line) and its tags."""
    if not isinstance(text, str) or not text.strip():
        raise ApiError(400, "paste a FEN or a PGN")
    text = text.strip()
    if "\n" not in text and not text.startswith("["):
        try:
            board = chess.Board(text)
        except ValueError:
            board = None
        if board is not None and board.is_valid():
            return {"fen": board.fen(), "moves": [], "tags": {}}
        if board is not None:
            raise ApiError(400, f"the FEN is not a legal position: {status_words(board)}")
    game = chess.pgn.read_game(io.StringIO(text))
    if game is None:
        raise ApiError(400, "neither a FEN nor a PGN")
    if game.errors:
        raise ApiError(400, f"bad PGN: {game.errors[0]}")
    moves = [m.uci() for m in game.mainline_moves()]
    if not moves and not text.startswith("["):
        raise ApiError(400, f"neither a valid FEN nor a PGN with moves: {text[:80]!r}")
    try:
        start = game.board()
    except ValueError as e:  # a FEN header python-chess cannot read
        raise ApiError(400, f"bad PGN: {e}") from None
    if not start.is_valid():  # as a FEN pasted alone is refused
        raise ApiError(400, f"bad PGN: the FEN is not a legal position: {status_words(start)}")
    return {"fen": start.fen(), "moves": moves, "tags": pasted_tags(game)}
