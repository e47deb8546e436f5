"""PGN text -> games -> the boards the dataset is made of. Pure functions, no I/O.

Three steps, each cheap to run before the next:

1. `split_games(lines)`: a streaming splitter that cuts a PGN text into one text per game and
   sets aside anything between games that is not a game ("garbage") instead of gluing it onto
   a neighbour, so one damaged stretch costs at most the game it sits in.
2. `game_id` + `sample_point`: a stable id per game (Lichess `Site`/`GameId`, else a hash of
   the text) hashed to a point in [0, 1). Sampling keeps a game iff its point is below the rate,
   so the same games are chosen on every runner, in any order, on any number of workers.
3. `parse_game(text)`: python-chess parses the moves; the result is the FEN before each move
   of the mainline, or a `Skip` with a reason (variant, setup, parse_error, illegal_move, ...).
"""

from __future__ import annotations

import hashlib
import io
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import chess
import chess.pgn

# Skip reasons (the keys of `games_skipped` in stats.json).
VARIANT = "variant"
SETUP = "setup"
PARSE_ERROR = "parse_error"
ILLEGAL_MOVE = "illegal_move"
NO_MOVES = "no_moves"
TRUNCATED = "truncated"
SKIP_REASONS = (VARIANT, SETUP, PARSE_ERROR, ILLEGAL_MOVE, NO_MOVES, TRUNCATED)

_TAG = re.compile(r'^\[([A-Za-z0-9_+#=:-]+)\s+"(.*)"\s*\]\s*$')
_TERMINATION = re.compile(r"(?:^|[\s.)])(?:1-0|0-1|1/2-1/2|\*)$")
_STANDARD_VARIANTS = frozenset({"", "standard", "chess", "normal", "chess 960 off"})
_SETUP_VARIANTS = frozenset({"from position", "fromposition"})


@dataclass(frozen=True)
class GameText:
    """One game's PGN text as cut from its source.

    `ordinal` counts games from 0 in the source; `truncated` marks the game that was being read
    when the source ended in damage (a cut zstd stream): its text is incomplete.
    """

    ordinal: int
    text: str
    headers: dict[str, str]
    truncated: bool = False


@dataclass(frozen=True)
class Garbage:
    """Non-PGN text between games, kept only to be counted and quoted in the stats."""

    line_number: int
    text: str


def _outside_comments(line: str, in_comment: bool) -> tuple[str, bool]:
    """The part of a movetext line outside `{...}` and `;` comments, and the state after it."""
    kept: list[str] = []
    position = 0
    while position < len(line):
        if in_comment:
            close = line.find("}", position)
            if close < 0:
                return "".join(kept), True
            position, in_comment = close + 1, False
            continue
        brace, semicolon = line.find("{", position), line.find(";", position)
        if semicolon >= 0 and (brace < 0 or semicolon < brace):
            kept.append(line[position:semicolon])
            return "".join(kept), False
        if brace < 0:
            kept.append(line[position:])
            break
        kept.append(line[position:brace])
        position, in_comment = brace + 1, True
    return "".join(kept), in_comment


def split_games(lines: Iterable[str]) -> Iterator[GameText | Garbage]:
    """Cuts PGN lines into games (and garbage between them), streaming.

    A game is its tag lines followed by movetext. Its movetext ends at a termination marker
    (`1-0`, `0-1`, `1/2-1/2`, `*`) or a blank line outside comments, or where the next game's
    tags begin. Text after that which is not a tag line is garbage, until the next tag line.
    If `lines` raises (a damaged source), the game in progress is yielded with
    `truncated=True` and the error is re-raised.
    """
    ordinal = 0
    line_number = 0
    state = "between"  # between | headers | movetext
    game_lines: list[str] = []
    headers: dict[str, str] = {}
    garbage: list[str] = []
    garbage_start = 0
    headers_closed = False
    in_comment = False

    def finish_game(truncated: bool = False) -> GameText:
        nonlocal ordinal, game_lines, headers
        game = GameText(ordinal, "\n".join(game_lines) + "\n", headers, truncated)
        ordinal += 1
        game_lines, headers = [], {}
        return game

    def finish_garbage() -> Garbage:
        nonlocal garbage
        block = Garbage(garbage_start, "\n".join(garbage))
        garbage = []
        return block

    try:
        for line in lines:
            line_number += 1
            stripped = line.strip()
            # Inside a brace comment a line may start with "[" (e.g. "[%clk ...]"): not a tag.
            is_tag = stripped.startswith("[") and not (state == "movetext" and in_comment)
            if state == "between":
                if is_tag:
                    if garbage:
                        yield finish_garbage()
                    state, headers_closed = "headers", False
                elif stripped:
                    if not garbage:
                        garbage_start = line_number
                    garbage.append(line)
                    continue
                else:
                    continue
            if state == "headers":
                if is_tag and not headers_closed:
                    match = _TAG.match(stripped)
                    if match:
                        headers[match.group(1)] = match.group(2)
                    game_lines.append(line)
                    continue
                if is_tag:  # tags after a blank line: the previous game had no movetext
                    yield finish_game()
                    headers_closed = False
                    match = _TAG.match(stripped)
                    if match:
                        headers[match.group(1)] = match.group(2)
                    game_lines.append(line)
                    continue
                if not stripped:
                    headers_closed = True
                    game_lines.append(line)
                    continue
                state, in_comment = "movetext", False
            # state == "movetext"
            if is_tag:
                yield finish_game()
                state, headers_closed = "headers", False
                match = _TAG.match(stripped)
                if match:
                    headers[match.group(1)] = match.group(2)
                game_lines.append(line)
                continue
            if not stripped and not in_comment:
                yield finish_game()
                state = "between"
                continue
            game_lines.append(line)
            outside, in_comment = _outside_comments(line, in_comment)
            if not in_comment and _TERMINATION.search(outside.rstrip()):
                yield finish_game()
                state = "between"
    except Exception:  # not GeneratorExit: a consumer that stops early is no damage
        if state != "between":
            yield finish_game(truncated=True)
        raise
    if state != "between":
        yield finish_game()
    if garbage:
        yield finish_garbage()


def game_id(game: GameText) -> str:
    """A stable id: Lichess's game id when the headers carry it, else a hash of the text."""
    explicit = game.headers.get("GameId")
    if explicit:
        return explicit
    site = game.headers.get("Site", "")
    if "lichess.org/" in site:
        return site.rstrip("/").rsplit("/", 1)[-1]
    return "sha256:" + hashlib.sha256(game.text.encode()).hexdigest()[:32]


def sample_point(identifier: str, seed: int = 0) -> float:
    """A uniform-looking point in [0, 1) fixed by the game id and the seed (no RNG state)."""
    return hash_point(f"{seed}\x00{identifier}")


def hash_point(text: str) -> float:
    """A uniform-looking point in [0, 1) fixed by `text`: the pipeline's choices that must be
    the same on every run and runner (which games a rate keeps, which boards and moves
    `--random-move` takes)."""
    digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2.0**64


@dataclass(frozen=True)
class Skip:
    """Why a game gave no boards, with a short detail for the stats' examples."""

    reason: str
    detail: str


@dataclass(frozen=True)
class GameBoards:
    """The FEN before each move of a game's mainline, in order, and the moves (UCI)."""

    fens: tuple[str, ...]
    moves: tuple[str, ...] = ()


class _BoardsVisitor(chess.pgn.BaseVisitor):
    """Collects the FEN before each mainline move; ignores side lines; keeps the first error."""

    def begin_game(self) -> None:
        self.fens: list[str] = []
        self.moves: list[str] = []
        self.error: Exception | None = None
        self.chess960 = False

    def visit_board(self, board: chess.Board) -> None:
        self.chess960 = self.chess960 or board.chess960

    def begin_variation(self):
        return chess.pgn.SKIP

    def visit_move(self, board: chess.Board, move: chess.Move) -> None:
        if self.error is not None:
            return
        if not move:
            self.error = chess.IllegalMoveError("null move '--' in the mainline")
            return
        self.fens.append(board.fen())
        self.moves.append(move.uci())

    def handle_error(self, error: Exception) -> None:
        if self.error is None:
            self.error = error

    def result(self) -> _BoardsVisitor:
        return self


def _classify_headers(headers: dict[str, str], allow_setup: bool) -> Skip | None:
    variant = headers.get("Variant", "").strip().lower()
    if variant not in _STANDARD_VARIANTS and variant not in _SETUP_VARIANTS:
        return Skip(VARIANT, headers.get("Variant", ""))
    fen = headers.get("FEN", "").strip()
    # A FEN header holding the usual start is a standard game written verbosely.
    if fen and fen != chess.STARTING_FEN and not allow_setup:
        return Skip(SETUP, fen)
    return None


def parse_game(game: GameText, allow_setup: bool = False) -> GameBoards | Skip:
    """The boards of one game, or why it has none.

    Games of other variants, games from a set-up position (unless `allow_setup`), games whose
    movetext does not parse or holds an illegal move, and games with no move are skipped
    whole: a game is either used completely or not at all.
    """
    if game.truncated:
        return Skip(TRUNCATED, "the source ended inside this game")
    skip = _classify_headers(game.headers, allow_setup)
    if skip is not None:
        return skip
    visitor = chess.pgn.read_game(io.StringIO(game.text), Visitor=_BoardsVisitor)
    if visitor is None:
        return Skip(NO_MOVES, "empty game")
    if visitor.chess960:
        return Skip(VARIANT, "Chess960 castling rights")
    error = visitor.error
    if error is not None:
        reason = (
            ILLEGAL_MOVE
            if isinstance(error, (chess.IllegalMoveError, chess.AmbiguousMoveError))
            else PARSE_ERROR
        )
        return Skip(reason, str(error))
    if not visitor.fens:
        return Skip(NO_MOVES, "no moves")
    return GameBoards(tuple(visitor.fens), tuple(visitor.moves))


def parsed_games(
    lines: Iterable[str], allow_setup: bool = False
) -> Iterator[tuple[GameText, GameBoards]]:
    """The games of a PGN text that `parse_game` can use, each with its boards (garbage and
    skipped games left out, as the annotator leaves them)."""
    for item in split_games(lines):
        if isinstance(item, GameText):
            result = parse_game(item, allow_setup)
            if isinstance(result, GameBoards):
                yield item, result
