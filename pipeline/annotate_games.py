"""The DoFns from input files to boards: read and sample games, parse them, keep `--max-games`.

Each emits `(tag, value)` pairs (pipeline/portable.py): its data on GAMES_TAG or FENS_TAG and,
at the end of each element, what it counted and skipped on stats.STATS_TAG. Games travel in
batches of GAME_BATCH, so that counting costs a few records per batch, not per game.
"""

from __future__ import annotations

import sys

import apache_beam as beam

from pipeline import pgn, stats
from pipeline.portable import tagged
from pipeline.sources import InputError, read_lines

GAMES_TAG = "games"
FENS_TAG = "fens"


GAME_BATCH = 64  # games per element between reading and keeping (a few stats per batch)


class ReadGames(beam.DoFn):
    """Input path -> batches of up to GAME_BATCH (sort key, GameText) sampled games on
    GAMES_TAG, then the file's stats.

    The sort key (sampling point, game id, path, ordinal) orders games for `--max-games`.
    A damaged input keeps every complete game before the damage; the game cut short is
    counted as skipped ("truncated") and the file is listed in stats' input_errors.
    """

    def __init__(self, sample_rate: float, seed: int, fail_on_input_error: bool):
        self.sample_rate = sample_rate
        self.seed = seed
        self.fail_on_input_error = fail_on_input_error

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

    def _games(self, path: str, s: stats.BundleStats):
        try:
            for item in pgn.split_games(read_lines(path)):
                if isinstance(item, pgn.Garbage):
                    s.count("garbage_blocks")
                    s.example("garbage", f"{path} line {item.line_number}: {item.text[:80]!r}")
                    continue
                s.count("games_read")
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
            print(f"WARNING: {e}", file=sys.stderr, flush=True)
            if self.fail_on_input_error:
                raise


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
    threshold (of all games when it is None), on FENS_TAG, then stats."""

    def process(self, element):
        games, threshold = element
        s = stats.BundleStats()
        for key, fens in games:
            if threshold is not None and key > threshold:
                s.count("games_over_max")
                continue
            s.count("games_used")
            for fen in fens:
                yield tagged(FENS_TAG, fen)
        yield s.emit()


def max_games_threshold(smallest: list) -> tuple | None:
    """The largest of the `--max-games` smallest keys (None when no game was valid)."""
    return smallest[-1] if smallest else None
