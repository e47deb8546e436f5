"""The DoFns from input files to boards: read and sample games, parse them, keep `--max-games`.

Each counts what it skips in a `stats.BundleStats` emitted on stats.STATS_TAG.
"""

from __future__ import annotations

import sys

import apache_beam as beam

from pipeline import pgn, stats
from pipeline.sources import InputError, read_lines


class ReadGames(beam.DoFn):
    """Input path -> (sort key, GameText) for each sampled game.

    The sort key (sampling point, game id, path, ordinal) orders games for `--max-games`.
    A damaged input keeps every complete game before the damage; the game cut short is
    counted as skipped ("truncated") and the file is listed in stats' input_errors.
    """

    def __init__(self, sample_rate: float, seed: int, fail_on_input_error: bool):
        self.sample_rate = sample_rate
        self.seed = seed
        self.fail_on_input_error = fail_on_input_error

    def start_bundle(self):
        self._stats = stats.BundleStats()

    def process(self, path: str):
        s = self._stats
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

    def finish_bundle(self):
        yield self._stats.emit()


class ParseGames(beam.DoFn):
    """(key, GameText) -> (key, FENs before each move), or a counted skip with an example."""

    def __init__(self, allow_setup: bool):
        self.allow_setup = allow_setup

    def start_bundle(self):
        self._stats = stats.BundleStats()

    def process(self, element):
        key, game = element
        result = pgn.parse_game(game, self.allow_setup)
        if isinstance(result, pgn.Skip):
            self._stats.count(f"skipped.{result.reason}")
            _, identifier, path, ordinal = key
            self._stats.example(
                result.reason, f"{path} game #{ordinal} ({identifier}): {result.detail}"
            )
            return
        yield key, result.fens

    def finish_bundle(self):
        yield self._stats.emit()


class KeepGames(beam.DoFn):
    """Keeps games whose key is <= the `--max-games` threshold (all when there is none)."""

    def start_bundle(self):
        self._stats = stats.BundleStats()

    def process(self, element, threshold=None):
        key, fens = element
        if threshold is not None and key > threshold:
            self._stats.count("games_over_max")
            return
        self._stats.count("games_used")
        yield from fens

    def finish_bundle(self):
        yield self._stats.emit()


def max_games_threshold(smallest: list) -> tuple | None:
    """The largest of the `--max-games` smallest keys (None when no game was valid)."""
    return smallest[-1] if smallest else None
