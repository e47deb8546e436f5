"""The DoFns from input files to boards: read and sample games, parse them, keep `--max-games`,
drop the evaluation sets' positions (`--exclude`).

Each emits `(tag, value)` pairs (pipeline/beam/portable.py): its data on GAMES_TAG or FENS_TAG and,
at the end of each element, what it counted and skipped on stats.STATS_TAG. Games travel in
batches of GAME_BATCH, so that counting costs a few records per batch, not per game.
"""

from __future__ import annotations

import logging
import re
import sys

import apache_beam as beam

from core.positions import position_key
from pipeline import pgn, random_move
from pipeline.beam import stats
from pipeline.beam.portable import tagged
from pipeline.sources import read_lines
from runtime.text_files import InputError

GAMES_TAG = "games"
FENS_TAG = "fens"
BOARDS_TAG = "boards"  # (fen, count) of a distinct board


GAME_BATCH = 64  # games per element between reading and keeping (a few stats per batch)


class ReadGames(beam.DoFn):
    """Input path -> batches of up to GAME_BATCH (sort key, GameText) sampled games on
    GAMES_TAG, then the file's stats.

    The sort key (sampling point, game id, path, ordinal) orders games for `--max-games`.
    A damaged input keeps every complete game before the damage; the game cut short is
    counted as skipped ("truncated") and the file is listed in stats' input_errors (with
    `fail_on_input_error` the InputError stops the job instead). An input without a single
    game is named in a warning and counted (`inputs_without_games`).
    """

    def __init__(self, sample_rate: float, seed: int, fail_on_input_error: bool):
        self.sample_rate = sample_rate
        self.seed = seed
        self.fail_on_input_error = fail_on_input_error

    def setup(self):
        if self.fail_on_input_error:
            quiet_input_errors()

    def process(self, path: str):
        s = stats.BundleStats()
        batch = []
        for game in self._games(path, s):
            batch.append(game)
            if len(batch) == GAME_BATCH:
                yield tagged(GAMES_TAG, batch)
                batch = []
        if batch:
            yield tagged(GAMES_TAG, batch)
        yield s.emit()

    def _long_line(self, s: stats.BundleStats):
        """What to do with a line too long to be PGN: an input error like a damaged file's,
        except that the reading goes on after it (the job stops with `fail_on_input_error`)."""

        def report(error: InputError) -> None:
            s.input_error(error.path, str(error))
            if self.fail_on_input_error:
                raise error
            print(f"WARNING: {error}", file=sys.stderr, flush=True)

        return report

    def _games(self, path: str, s: stats.BundleStats):
        games = 0
        try:
            for item in pgn.split_games(read_lines(path, on_long_line=self._long_line(s))):
                if isinstance(item, pgn.Garbage):
                    s.count("garbage_blocks")
                    s.example("garbage", f"{path} line {item.line_number}: {item.text[:80]!r}")
                    continue
                s.count("games_read")
                games += 1
                if item.truncated:
                    s.count(f"skipped.{pgn.TRUNCATED}")
                    s.example(pgn.TRUNCATED, f"{path} game #{item.ordinal}: cut short")
                    continue
                identifier = pgn.game_id(item)
                point = pgn.sample_point(identifier, self.seed)
                if point >= self.sample_rate:
                    s.count("games_not_sampled")
                    continue
                yield (point, identifier, path, item.ordinal), item
        except InputError as e:
            s.input_error(path, str(e))
            if self.fail_on_input_error:
                raise  # the command prints it, as its error
            print(f"WARNING: {e}", file=sys.stderr, flush=True)
            return
        if games == 0:
            s.count("inputs_without_games")
            s.example("no_games", path)
            print(
                f"WARNING: {path}: no game in it (empty, or not PGN)", file=sys.stderr, flush=True
            )


class ParseGames(beam.DoFn):
    """[(key, GameText)] -> [(key, FENs before each move)] on GAMES_TAG; games that cannot be
    used are counted skips with examples."""

    def __init__(self, allow_setup: bool):
        self.allow_setup = allow_setup

    def process(self, games):
        s = stats.BundleStats()
        parsed = []
        for key, game in games:
            result = pgn.parse_game(game, self.allow_setup)
            if isinstance(result, pgn.Skip):
                s.count(f"skipped.{result.reason}")
                _, identifier, path, ordinal = key
                s.example(result.reason, f"{path} game #{ordinal} ({identifier}): {result.detail}")
                continue
            parsed.append((key, result.fens))
        if parsed:
            yield tagged(GAMES_TAG, parsed)
        yield s.emit()


def batch_group_key(batch) -> str:
    """What decides a batch's group when batches are grouped (portable.GroupInto)."""
    return repr(batch[0][0])


class KeepGames(beam.DoFn):
    """([(key, FENs)], threshold) -> the FENs of games whose key is <= the `--max-games`
    threshold (of all games when it is None), on FENS_TAG, then stats.

    With a `random_move_rate`, that share of the FENs is replaced by the board after a random
    move (pipeline/random_move.py), counted as `random_move_boards`; the evaluation sets are
    dropped after this, so a replaced board is checked against them too."""

    def __init__(self, random_move_rate: float = 0.0, seed: int = 0):
        self.random_move_rate = random_move_rate
        self.seed = seed

    def process(self, element):
        games, threshold = element
        s = stats.BundleStats()
        for key, fens in games:
            if threshold is not None and key > threshold:
                s.count("games_over_max")
                continue
            s.count("games_used")
            for fen in fens:
                board = random_move.replace(fen, self.random_move_rate, self.seed)
                if board != fen:
                    s.count("random_move_boards")
                yield tagged(FENS_TAG, board)
        yield s.emit()


def max_games_threshold(smallest: list) -> tuple | None:
    """The largest of the `--max-games` smallest keys (None when no game was valid)."""
    return smallest[-1] if smallest else None


# -- --fail-on-input-error: the InputError that stops the job, in one line ---------------------

# Where Beam reports a DoFn's exception itself (with its traceback) before raising it on.
_BEAM_ERROR_LOGGERS = ("apache_beam.runners.common", "apache_beam.runners.worker.sdk_worker")
# An InputError as Beam passes it on from a worker process: its text, in a RuntimeError.
_INPUT_ERROR_TEXT = re.compile(r"InputError: (.+?)(?: \[while running '[^']*'\])?$", re.M)


class _QuietInputErrors(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not (isinstance(error, InputError) or "InputError: " in record.getMessage())


def quiet_input_errors() -> None:
    """Keeps Beam, in this process, from logging an InputError that stops the job: the
    command reports it (`stopping_input_error`) in one line."""
    for name in _BEAM_ERROR_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _QuietInputErrors) for f in logger.filters):
            logger.addFilter(_QuietInputErrors())


def stopping_input_error(error: BaseException) -> InputError | None:
    """The InputError behind a failed job's exception, as Beam raised it, or None."""
    seen = error
    while seen is not None:
        if isinstance(seen, InputError):
            return seen
        seen = seen.__cause__ or seen.__context__
    match = _INPUT_ERROR_TEXT.search(str(error))
    if match is None:
        return None
    path, _, message = match.group(1).partition(": ")
    return InputError(path, message)


class DropExcluded(beam.DoFn):
    """(fen, count) -> itself on BOARDS_TAG, unless its position (FEN without clocks) is one
    of `keys`: then it is counted (`excluded` boards, `excluded_occurrences` in the games)
    and dropped.

    Only a dropped board emits stats, so counting costs one record per evaluation position
    met, not per board. The keys travel inside the DoFn (pickled with the graph), which suits
    the evaluation sets' tens of thousands of positions; millions would call for a side input
    (and side inputs are what the DaskRunner gets wrong, pipeline/beam/portable.py).
    """

    def __init__(self, keys: frozenset[str]):
        self.keys = keys

    def process(self, element):
        fen, count = element
        if position_key(fen) not in self.keys:
            yield tagged(BOARDS_TAG, element)
            return
        s = stats.BundleStats()
        s.count("excluded")
        s.count("excluded_occurrences", count)
        s.example("excluded", fen)
        yield s.emit()
