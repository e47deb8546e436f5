"""The Beam pipeline: PGN games -> deduplicated boards -> Stockfish action values -> Parquet.

    python -m pipeline.annotate INPUT... --out DIR --split train --limit nodes=2000 \\
        [--sample-rate R] [--max-games N] [--num-shards K] [beam options]

Stages (each a Beam transform; the same code runs on the DirectRunner, Dataflow, Flink, Spark):

1. ReadGames: each input file streamed line by line (`.pgn.zst` decompressed on the fly),
   cut into games, garbage between games counted; games sampled by a hash of their id
   (`--sample-rate`, `--seed`), so the sample is the same on every runner.
2. ParseGames: python-chess parses each game; variants, set-up positions (unless
   `--allow-setup`), parse errors, illegal moves and empty games are skipped and counted.
   `--max-games N` then keeps the N valid games with the smallest sampling hash.
3. The FEN before each move, counted per distinct full FEN (`count` column).
4. AnnotateBoards: one Stockfish per worker (started in `setup`, closed in `teardown`), one
   search per legal move restricted to that move; engine failures restart the engine and retry,
   boards that still fail go to the failures output.
5. Sharded Parquet (`core/schema.py`) and `stats.json` beside the shards.

Resume: AnnotateBoards also appends its rows to `<split>/_journal/` as it goes (`JournalWriter`).
A rerun with the same settings (`_journal/run.json`) joins the journal's rows to the boards by
FEN (`ReadJournal`, `UseJournal`) and sends only the boards without a row to the engine; the
journal is deleted once the outputs are written.

With no `--runner`, `--runner=DirectRunner` is added (Beam's default would first try to download
its Prism runner). `--direct_num_workers=N --direct_running_mode=multi_processing` runs N
engines at once. `run(argv)` is the programmatic entry point and returns the stats document.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import socket
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.windowed_value import WindowedValue

from core.engine_path import find_engine
from core.progress import format_duration, print_result
from core.schema import (
    BOARD_SCHEMA,
    BOARDS_PREFIX,
    FAILURE_SCHEMA,
    FAILURES_PREFIX,
    JOURNAL_DIR,
    JOURNAL_PART_PATTERN,
    JOURNAL_PART_SUFFIX,
    JOURNAL_RUN_FILE,
    SCHEMA_VERSION,
    STATS_FILE,
    SchemaError,
    check_schema,
    journal_part_name,
)
from pipeline import pgn, stats
from pipeline.action_values import BoardAnnotator, NoLegalMoves, Outcome
from pipeline.engine import Limit, UciEngine
from pipeline.shards import WriteShards, clear_outputs, list_files, write_parquet
from pipeline.sources import InputError, expand_inputs, read_lines

FAILURES_TAG = "failures"
TODO_TAG = "todo"
DEFAULT_LIMIT = "nodes=2000"
JOURNAL_EVERY = 500  # boards per journal part (--journal-every)
JOURNAL_SECONDS = 60.0  # ... or fewer: a row waits at most this long before it is written


@dataclass(frozen=True)
class EngineConfig:
    """How each worker runs its engine. `path` None: found on the worker (find_engine)."""

    path: str | None = None
    threads: int = 1
    hash_mb: int = 16
    timeout: float | None = None  # watchdog seconds; None: the limit's default
    retries: int = 2


@dataclass(frozen=True)
class AnnotateConfig:
    """One run: the command line's options (see `_parser` for each one's meaning)."""

    inputs: tuple[str, ...]
    out: str
    split: str = "train"
    limit: Limit = Limit.parse(DEFAULT_LIMIT)
    engine: EngineConfig = EngineConfig()
    sample_rate: float = 1.0
    seed: int = 0
    max_games: int | None = None
    allow_setup: bool = False
    num_shards: int = 1
    overwrite: bool = False
    fail_on_input_error: bool = False
    progress_seconds: float = 30.0
    journal_every: int = JOURNAL_EVERY  # 0: no journal

    @property
    def split_dir(self) -> str:
        return FileSystems.join(self.out, self.split)

    @property
    def journal_dir(self) -> str:
        return journal_dir(self.split_dir)


def journal_dir(split_dir: str) -> str:
    """Where an unfinished run in `split_dir` keeps its settings and annotated rows."""
    return FileSystems.join(split_dir, JOURNAL_DIR)


# -- stage 1: read and sample ----------------------------------------------------------------


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


# -- stage 2: parse ------------------------------------------------------------------------------


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


def _threshold(smallest: list) -> tuple | None:
    return smallest[-1] if smallest else None


# -- stage 4: annotate ------------------------------------------------------------------------


def _in_global_window(value) -> WindowedValue:
    return WindowedValue(value, GlobalWindow().max_timestamp(), [GlobalWindow()])


class JournalWriter:
    """Buffers one worker's annotated rows and writes them to the journal as Parquet parts.

    A part is written once `every` rows are buffered or the oldest buffered row has waited
    `seconds` (checked as rows arrive), and on `flush`. Each part is named by this writer's
    uuid4 and a sequence number, so workers never collide, and is written under a temporary
    name then renamed: a killed run leaves whole parts and at most a `.tmp`.
    """

    def __init__(
        self,
        directory: str,
        every: int = JOURNAL_EVERY,
        seconds: float = JOURNAL_SECONDS,
        clock=time.monotonic,
    ):
        if every < 1:
            raise ValueError(f"journal parts need at least one row, got every={every}")
        self.directory = directory
        self.every = every
        self.seconds = seconds
        self._clock = clock
        self.writer = uuid.uuid4().hex
        self.parts_written = 0
        self._rows: list[dict] = []
        self._oldest = 0.0

    @property
    def buffered(self) -> int:
        return len(self._rows)

    def add(self, row: dict) -> str | None:
        """Buffers `row`; returns the part's path when this wrote one."""
        if not self._rows:
            self._oldest = self._clock()
        self._rows.append(row)
        if len(self._rows) >= self.every or self._clock() - self._oldest >= self.seconds:
            return self.flush()
        return None

    def flush(self) -> str | None:
        """Writes the buffered rows as one part (nothing when none); returns its path."""
        if not self._rows:
            return None
        name = journal_part_name(self.writer, self.parts_written)
        path = FileSystems.join(self.directory, name)
        write_parquet(self._rows, BOARD_SCHEMA, path)
        self._rows = []
        self.parts_written += 1
        return path


class AnnotateBoards(beam.DoFn):
    """(fen, count) -> a BOARD_SCHEMA row, or a FAILURE_SCHEMA row on the failures tag.

    One engine process per DoFn instance, i.e. per worker thread: started in `setup`,
    closed in `teardown`. With a node limit one board waits queued in the engine behind the
    one being searched, so the engine never idles between boards; the last ones of a bundle
    are emitted from `finish_bundle`. Boards with no legal move are dropped and counted.
    With a `journal` directory every annotated row is also written there (`JournalWriter`,
    a part every `journal_every` rows or JOURNAL_SECONDS, and at the end of each bundle);
    failed boards are not, so a resumed run tries them again.
    """

    def __init__(
        self,
        engine: EngineConfig,
        limit: Limit,
        progress_seconds: float,
        workers: int,
        journal: str | None = None,
        journal_every: int = JOURNAL_EVERY,
    ):
        self.engine_config = engine
        self.limit = limit
        self.progress_seconds = progress_seconds
        self.workers = workers
        self.journal = journal
        self.journal_every = journal_every

    def setup(self):
        cfg = self.engine_config
        path = find_engine(cfg.path)
        self._annotator = BoardAnnotator(
            lambda: UciEngine(path, cfg.threads, cfg.hash_mb, cfg.timeout),
            self.limit,
            retries=cfg.retries,
        )
        # Start now: an engine that cannot run fails the job here, with its own error.
        self._engine_name = self._annotator.start().name
        self._lookahead = 1 if self.limit.kind == "nodes" else 0
        self._worker = f"{socket.gethostname()}:{os.getpid()}"
        self._done = 0
        self._values = 0
        self._started = None
        self._last_progress = time.monotonic()
        self._journal = None
        if self.journal is not None and self.journal_every > 0:
            self._journal = JournalWriter(self.journal, self.journal_every)

    def start_bundle(self):
        self._stats = stats.BundleStats()
        self._restarts_seen = self._annotator.restarts
        self._nodes_seen = self._annotator.nodes

    def process(self, element, total_boards=0, resumed_boards=0):
        fen, count = element
        s = self._stats
        s.count("unique_boards")
        s.count("boards", count)
        began = time.time()
        if self._started is None:
            self._started = began
        try:
            self._annotator.submit(fen, count)
        except NoLegalMoves:
            s.count("no_legal_moves")
            s.example("no_legal_moves", fen)
            return
        except ValueError as e:  # a FEN the engine must not be given
            yield self._output(Outcome(fen, count, None, str(e)))
            return
        while self._annotator.in_flight > self._lookahead:
            yield self._output(self._annotator.collect())
        self._note_busy(began)
        self._report(total_boards, resumed_boards)

    def finish_bundle(self):
        began = time.time()
        while self._annotator.in_flight:
            # Boards come from a global-window batch, so their results go back there too.
            output = self._output(self._annotator.collect())
            if isinstance(output, beam.pvalue.TaggedOutput):
                yield beam.pvalue.TaggedOutput(output.tag, _in_global_window(output.value))
            else:
                yield _in_global_window(output)
        if self._journal is not None:
            self._journal.flush()
        self._note_busy(began)
        yield self._stats.emit()

    def _output(self, outcome: Outcome):
        """Counts a finished board and returns what to emit for it."""
        s, annotator = self._stats, self._annotator
        s.count("engine_restarts", annotator.restarts - self._restarts_seen)
        s.count("nodes", annotator.nodes - self._nodes_seen)
        self._restarts_seen, self._nodes_seen = annotator.restarts, annotator.nodes
        row = outcome.row
        values = len(row["moves"]) if row is not None else 0
        self._done += 1
        self._values += values
        record = self._worker_record()
        record["boards"] += 1
        record["action_values"] += values
        if row is not None:
            if self._journal is not None:
                self._journal.add(row)
            s.count("annotated")
            s.count("action_values", values)
            if row["engine"] not in s.partial["engines"]:
                s.partial["engines"].append(row["engine"])
            return row
        s.count("failed")
        s.example("failed", f"{outcome.fen}: {outcome.error}")
        failure = {
            "fen": outcome.fen,
            "count": outcome.count,
            "error": outcome.error,
            "engine": self._engine_name,
            "limit": str(self.limit),
        }
        return beam.pvalue.TaggedOutput(FAILURES_TAG, failure)

    def _worker_record(self) -> dict:
        now = time.time()
        record = self._stats.partial["workers"].setdefault(
            self._worker,
            {
                "worker": self._worker,
                "engine_pids": [],
                "first_board_at": self._started,
                "last_board_at": now,
                "boards": 0,
                "action_values": 0,
                "busy_s": 0.0,
            },
        )
        record["engine_pids"] = sorted(
            set(record["engine_pids"]) | set(self._annotator.engine_pids)
        )
        record["last_board_at"] = now
        return record

    def _note_busy(self, began: float) -> None:
        if self._stats.partial["workers"].get(self._worker) is not None:
            self._stats.partial["workers"][self._worker]["busy_s"] += time.time() - began

    def _report(self, total_boards: int, resumed_boards: int = 0) -> None:
        now = time.monotonic()
        if now - self._last_progress < self.progress_seconds:
            return
        self._last_progress = now
        elapsed = max(time.time() - self._started, 1e-9)
        rate = self._done / elapsed
        line = (
            f"annotate [{self._worker}]: {self._done:,} boards, {self._values:,} action values,"
            f" {rate:.1f} boards/s, {self._values / elapsed:.0f} values/s"
        )
        if total_boards and self.workers and rate > 0:
            share = total_boards / self.workers
            line += f"; ~{min(100.0, 100 * self._done / share):.0f}% of this worker's share"
            line += (
                f" of {total_boards:,} boards, ETA {format_duration((share - self._done) / rate)}"
            )
        if resumed_boards:
            line += f"; {resumed_boards:,} more resumed from the journal"
        print(line, file=sys.stderr, flush=True)

    def teardown(self):
        journal = getattr(self, "_journal", None)
        if journal is not None and journal.buffered:
            try:  # rows of a bundle that failed half-way: worth keeping for the rerun
                journal.flush()
            except Exception as e:  # noqa: BLE001 - teardown must still close the engine
                print(f"WARNING: journal not written at teardown: {e}", file=sys.stderr)
        annotator = getattr(self, "_annotator", None)
        if annotator is not None:
            annotator.close()


# -- resume: an interrupted run's journal -----------------------------------------------------


class ReadJournalPart(beam.DoFn):
    """Journal part path -> (fen, row) for each of its rows (main output), stats on the side.

    A part that cannot be read (cut short, not Parquet, another schema) is skipped, counted
    and named in a warning: its boards are simply annotated again.
    """

    def start_bundle(self):
        self._stats = stats.BundleStats()

    def process(self, path: str):
        try:
            with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
                table = pq.read_table(pa.BufferReader(f.read()))
            if check_schema(table.schema, path) != SCHEMA_VERSION:
                raise SchemaError(f"{path}: written by an older version of the schema")
        except Exception as e:  # noqa: BLE001 - any unreadable part is skipped the same way
            self._stats.count("journal_parts_unreadable")
            self._stats.example("journal_unreadable", f"{path}: {e}")
            print(f"WARNING: skipping unreadable journal part {path}: {e}", file=sys.stderr)
            return
        self._stats.count("journal_parts")
        for row in table.to_pylist():
            yield row["fen"], row

    def finish_bundle(self):
        yield self._stats.emit()


class ReadJournal(beam.PTransform):
    """Journal part paths -> (fen, BOARD_SCHEMA row); outputs `rows` and stats.STATS_TAG."""

    def expand(self, paths):
        return (
            paths
            | "SpreadParts" >> beam.Reshuffle()
            | "ReadParts"
            >> beam.ParDo(ReadJournalPart()).with_outputs(stats.STATS_TAG, main="rows")
        )


class UseJournal(beam.DoFn):
    """(fen, {"boards": [count], "journal": [rows]}) -> the journal's row for a current board,
    with `count` set to the current count (main output), or (fen, count) on TODO_TAG for a
    board the journal lacks. Journal rows of boards not in this run are dropped and counted.
    """

    def start_bundle(self):
        self._stats = stats.BundleStats()

    def process(self, element):
        fen, grouped = element
        counts, rows = list(grouped["boards"]), list(grouped["journal"])
        s = self._stats
        if not counts:
            s.count("journal_rows_unused", len(rows))
            return
        (count,) = counts  # the boards are unique
        if not rows:
            yield beam.pvalue.TaggedOutput(TODO_TAG, (fen, count))
            return
        # Several rows for one board (a bundle retried after its rows were journaled) are the
        # same with a node limit; any of them will do.
        row = dict(rows[0], count=count)
        values = len(row["moves"])
        s.count("resumed")
        s.count("unique_boards")
        s.count("boards", count)
        s.count("action_values", values)
        s.count("resumed_action_values", values)
        if row["engine"] not in s.partial["engines"]:
            s.partial["engines"].append(row["engine"])
        yield row

    def finish_bundle(self):
        yield self._stats.emit()


# -- the pipeline ---------------------------------------------------------------------------


def build(
    root: beam.Pipeline,
    config: AnnotateConfig,
    inputs: list[str],
    static: dict | None = None,
    journal_parts: Sequence[str] = (),
) -> None:
    """Adds the whole job to `root`: inputs -> shards, failures and stats.json.

    `inputs` are concrete paths (see `expand_inputs`); `static` is copied into stats.json
    (its `expected_workers`, if any, scales the progress lines' ETA). Annotated rows are
    journaled to `config.journal_dir` unless `config.journal_every` is 0. `journal_parts`
    (`list_journal_parts`) are an interrupted run's parts: their boards are reused, not
    searched. `run_config` checks the journal's run.json first and deletes it afterwards.
    """
    static = dict(static or {})
    files = (
        root
        | "Inputs" >> beam.Create(inputs)
        # Spread files over workers (Create would hand all of them to one).
        | "SpreadFiles" >> beam.Reshuffle()
    )
    read = files | "ReadGames" >> beam.ParDo(
        ReadGames(config.sample_rate, config.seed, config.fail_on_input_error)
    ).with_outputs(stats.STATS_TAG, main="games")
    parsed = (
        read.games
        # A dump is one huge file read by one worker: spread its games before parsing.
        | "SpreadGames" >> beam.Reshuffle()
        | "ParseGames"
        >> beam.ParDo(ParseGames(config.allow_setup)).with_outputs(stats.STATS_TAG, main="games")
    )
    threshold = None
    if config.max_games:
        threshold = beam.pvalue.AsSingleton(
            parsed.games
            | "GameKeys" >> beam.Map(lambda element: element[0])
            | "SmallestKeys" >> beam.combiners.Top.Smallest(config.max_games)
            | "Threshold" >> beam.Map(_threshold)
        )
    kept = parsed.games | "KeepGames" >> beam.ParDo(KeepGames(), threshold=threshold).with_outputs(
        stats.STATS_TAG, main="fens"
    )
    unique = kept.fens | "CountBoards" >> beam.combiners.Count.PerElement()
    all_stats = [read.stats, parsed.stats, kept.stats]
    todo, side_inputs = unique, []
    if journal_parts:
        journal = (
            root
            | "JournalParts" >> beam.Create(sorted(journal_parts))
            | "ReadJournal" >> ReadJournal()
        )
        joined = (
            {"boards": unique, "journal": journal.rows}
            | "JoinJournal" >> beam.CoGroupByKey()
            | "UseJournal"
            >> beam.ParDo(UseJournal()).with_outputs(stats.STATS_TAG, TODO_TAG, main="rows")
        )
        todo = joined[TODO_TAG]
        all_stats += [journal.stats, joined.stats]
        resumed = joined.rows | "CountResumed" >> beam.combiners.Count.Globally()
        side_inputs = [beam.pvalue.AsSingleton(resumed)]
    total = beam.pvalue.AsSingleton(todo | "CountUnique" >> beam.combiners.Count.Globally())
    annotated = todo | "AnnotateBoards" >> beam.ParDo(
        AnnotateBoards(
            config.engine,
            config.limit,
            config.progress_seconds,
            static.get("expected_workers", 0),
            config.journal_dir if config.journal_every > 0 else None,
            config.journal_every,
        ),
        total,
        *side_inputs,
    ).with_outputs(stats.STATS_TAG, FAILURES_TAG, main="rows")
    rows = annotated.rows
    if journal_parts:
        rows = (annotated.rows, joined.rows) | "AllRows" >> beam.Flatten()

    split_dir = config.split_dir
    _ = rows | "WriteBoards" >> WriteShards(
        split_dir, BOARDS_PREFIX, config.num_shards, BOARD_SCHEMA
    )
    _ = annotated[FAILURES_TAG] | "WriteFailures" >> WriteShards(
        split_dir, FAILURES_PREFIX, 1, FAILURE_SCHEMA
    )
    stats_path = FileSystems.join(split_dir, STATS_FILE)
    _ = (
        (*all_stats, annotated.stats)
        | "AllStats" >> beam.Flatten()
        | "MergeStats" >> beam.CombineGlobally(stats.MergeStats())
        | "WriteStats"
        >> beam.Map(lambda merged: stats.write_json(stats_path, stats.summarize(merged, static)))
    )


# -- command line ------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pipeline.annotate",
        description="Lichess PGN -> deduplicated boards -> Stockfish action values -> Parquet. "
        "Options not listed here go to Beam (e.g. --runner, --direct_num_workers).",
    )
    parser.add_argument(
        "inputs",
        nargs="+",
        help="PGN inputs: paths, globs, dirs or URLs "
        "(.pgn, .pgn.zst, .pgn.gz; local, gs://, s3://, http(s)://)",
    )
    parser.add_argument("--out", required=True, help="output root (any Beam filesystem)")
    parser.add_argument("--split", default="train", help="subdirectory of --out (default train)")
    parser.add_argument(
        "--limit",
        default=DEFAULT_LIMIT,
        type=Limit.parse,
        help="per-move search: nodes=N (reproducible) or time=SECONDS "
        f"(the paper: time=0.05); default {DEFAULT_LIMIT}",
    )
    parser.add_argument(
        "--engine",
        default=None,
        help="UCI engine path on the workers (default: $STOCKFISH, PATH, /usr/games/stockfish)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="engine threads per worker (1 keeps nodes= runs reproducible)",
    )
    parser.add_argument("--hash", type=int, default=16, dest="hash_mb", help="engine hash, MB")
    parser.add_argument(
        "--engine-timeout",
        type=float,
        default=None,
        help="seconds an engine may stay silent mid-search before it is "
        "killed and restarted (default: from the limit)",
    )
    parser.add_argument(
        "--retries",
        type=int,
        default=2,
        help="engine restarts per board before it goes to the failures output",
    )
    parser.add_argument(
        "--sample-rate",
        type=float,
        default=1.0,
        help="fraction of games kept, decided by a hash of the game id",
    )
    parser.add_argument("--seed", type=int, default=0, help="changes which games a rate keeps")
    parser.add_argument(
        "--max-games",
        type=int,
        default=None,
        help="keep at most N valid games: those with the smallest sample hash",
    )
    parser.add_argument(
        "--allow-setup",
        action="store_true",
        help="also use games that start from a set-up position (FEN header)",
    )
    parser.add_argument("--num-shards", type=int, default=1, help="board shards to write")
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace shards and stats already in <out>/<split>, and delete an interrupted "
        "run's journal there instead of resuming it",
    )
    parser.add_argument(
        "--journal-every",
        type=int,
        default=JOURNAL_EVERY,
        help="annotated boards per journal part in <out>/<split>/_journal (a part is also "
        f"written every {JOURNAL_SECONDS:g} s); a rerun after a crash resumes from the journal. "
        f"0: no journal (default {JOURNAL_EVERY})",
    )
    parser.add_argument(
        "--fail-on-input-error",
        action="store_true",
        help="stop the job on a corrupt or truncated input instead of "
        "counting it and keeping the games read before the damage",
    )
    parser.add_argument(
        "--progress-seconds",
        type=float,
        default=30.0,
        help="seconds between progress lines from each annotation worker",
    )
    return parser


def parse_args(argv: Sequence[str]) -> tuple[AnnotateConfig, list[str]]:
    """Command-line words -> (config, Beam's own options)."""
    args, beam_args = _parser().parse_known_args(list(argv))
    if not 0 < args.sample_rate <= 1:
        raise SystemExit(f"--sample-rate must be in (0, 1], got {args.sample_rate}")
    if args.num_shards < 1:
        raise SystemExit(f"--num-shards must be >= 1, got {args.num_shards}")
    if args.max_games is not None and args.max_games < 1:
        raise SystemExit(f"--max-games must be >= 1, got {args.max_games}")
    if args.journal_every < 0:
        raise SystemExit(f"--journal-every must be >= 0, got {args.journal_every}")
    config = AnnotateConfig(
        inputs=tuple(args.inputs),
        out=args.out,
        split=args.split,
        limit=args.limit,
        engine=EngineConfig(
            args.engine, args.threads, args.hash_mb, args.engine_timeout, args.retries
        ),
        sample_rate=args.sample_rate,
        seed=args.seed,
        max_games=args.max_games,
        allow_setup=args.allow_setup,
        num_shards=args.num_shards,
        overwrite=args.overwrite,
        fail_on_input_error=args.fail_on_input_error,
        progress_seconds=args.progress_seconds,
        journal_every=args.journal_every,
    )
    if not any(a == "--runner" or a.startswith("--runner=") for a in beam_args):
        beam_args.append("--runner=DirectRunner")
    if not any(a.startswith("--default_sdk_harness_log_level") for a in beam_args):
        # Worker processes log every gRPC channel at INFO; progress lines are what matter.
        beam_args.append("--default_sdk_harness_log_level=WARNING")
    return config, beam_args


class JournalMismatch(ValueError):
    """The split holds an interrupted run's journal made with other settings."""


def run_identity(config: AnnotateConfig, inputs: list[str], engine: str | None = None) -> dict:
    """Everything that decides a run's rows: a journal is reused only when this matches.

    `engine` is the engine's UCI name with its version (None where the launcher cannot run
    the workers' engine, on a cluster), so a journal is never finished by another engine."""
    return {
        "schema_version": SCHEMA_VERSION,
        "engine": engine,
        "limit": str(config.limit),
        "engine_threads": config.engine.threads,
        "engine_hash_mb": config.engine.hash_mb,
        "sample_rate": config.sample_rate,
        "seed": config.seed,
        "max_games": config.max_games,
        "allow_setup": config.allow_setup,
        "inputs": list(inputs),
    }


def list_journal_parts(directory: str) -> list[str]:
    """The complete part files of the journal at `directory` (not a killed write's `.tmp`)."""
    return [
        p for p in list_files(directory, JOURNAL_PART_PATTERN) if p.endswith(JOURNAL_PART_SUFFIX)
    ]


def delete_journal(directory: str) -> None:
    """Deletes a journal, run.json first: a deletion cut short leaves parts that no rerun
    takes for an interrupted run (a journal without run.json is discarded)."""
    run_file = FileSystems.join(directory, JOURNAL_RUN_FILE)
    if FileSystems.exists(run_file):
        FileSystems.delete([run_file])
    leftovers = list_files(directory)
    if leftovers:
        FileSystems.delete(leftovers)
    if FileSystems.exists(directory):  # a local directory (object stores have none)
        FileSystems.delete([directory])


# run_identity's keys as the command line spells them, for error messages.
_IDENTITY_FLAGS = {
    "engine": "--engine (its name)",
    "limit": "--limit",
    "engine_threads": "--threads",
    "engine_hash_mb": "--hash",
    "sample_rate": "--sample-rate",
    "seed": "--seed",
    "max_games": "--max-games",
    "allow_setup": "--allow-setup",
}


def _short(value) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _differences(old: dict, new: dict) -> list[str]:
    """One phrase per setting that differs between the journal's run and this one."""
    phrases = []
    for key in sorted(set(old) | set(new)):
        was, now = old.get(key, "(absent)"), new.get(key, "(absent)")
        if was == now:
            continue
        name = _IDENTITY_FLAGS.get(key, key)
        if isinstance(was, list) and isinstance(now, list):
            gone, added = [x for x in was if x not in now], [x for x in now if x not in was]
            detail = f"{len(was)} in the journal's run, {len(now)} now"
            if gone:
                detail += f"; not given now: {_short(gone)}"
            if added:
                detail += f"; new: {_short(added)}"
            phrases.append(f"{name} ({detail})")
        else:
            phrases.append(f"{name} ({_short(was)} in the journal's run, {_short(now)} now)")
    return phrases


def _prepare_output(config: AnnotateConfig, identity: dict) -> list[str] | None:
    """Readies the split directory; returns the journal parts to resume from, or None for a
    fresh run.

    An interrupted run's journal (its run.json) with the same settings is resumed and its
    partial outputs deleted; with other settings it is an error naming them. A completed
    run's outputs are refused. `--overwrite` deletes outputs and journal alike. A journal
    without run.json (a start or a cleanup cut short) cannot be checked and is discarded.
    A fresh run (unless `journal_every` is 0) starts by writing run.json.
    """
    split_dir, journal = config.split_dir, config.journal_dir
    journaled = list_files(journal)
    run_file = FileSystems.join(journal, JOURNAL_RUN_FILE)
    resume = None
    if not config.overwrite and FileSystems.exists(run_file):
        try:
            recorded = stats.read_json(run_file)["run"]
        except Exception as e:  # noqa: BLE001 - missing, cut short or not ours: same advice
            raise JournalMismatch(
                f"{run_file} is not a readable run description ({type(e).__name__}: {e}); "
                "pass --overwrite to delete the journal and start over"
            ) from None
        differences = _differences(recorded, json.loads(json.dumps(identity)))
        if differences:
            raise JournalMismatch(
                f"{split_dir} holds an interrupted run made with other settings: "
                f"{'; '.join(differences)}. Rerun with its settings to resume it, or pass "
                "--overwrite to delete its journal and start over"
            )
        resume = list_journal_parts(journal)
    # An interrupted run's partial outputs are replaced as it resumes; a finished run's only
    # with --overwrite.
    clear_outputs(split_dir, overwrite=config.overwrite or resume is not None)
    if resume is None:
        if journaled:
            if not config.overwrite:
                print(f"WARNING: discarding {journal}: no {JOURNAL_RUN_FILE}", file=sys.stderr)
            delete_journal(journal)
        if config.journal_every > 0:
            created = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
            stats.write_json(run_file, {"run": identity, "created_at": created})
    return resume


def uci_name(path: str) -> str:
    """The engine's UCI `id name` (e.g. "Stockfish 15.1"): one start and quit."""
    engine = UciEngine(path)
    try:
        return engine.name
    finally:
        engine.close()


def _expected_workers(options: PipelineOptions) -> int:
    opts = options.get_all_options(drop_default=True)
    for key in ("direct_num_workers", "num_workers", "max_num_workers"):
        if opts.get(key):
            return int(opts[key])
    return 1 if opts.get("runner", "DirectRunner") == "DirectRunner" else 0


def run_config(config: AnnotateConfig, beam_args: Sequence[str]) -> dict:
    """Runs the job to completion and returns its stats document (also in stats.json)."""
    inputs = expand_inputs(list(config.inputs))
    options = PipelineOptions(list(beam_args))
    runner = options.get_all_options().get("runner") or "DirectRunner"
    local = runner in ("DirectRunner", "direct", "DirectRunner()")
    engine_path, engine_name = config.engine.path, None
    if local:  # the workers are this machine: check the engine before starting anything
        engine_path = find_engine(engine_path)
        engine_name = uci_name(engine_path)
    resume = _prepare_output(config, run_identity(config, inputs, engine_name))
    static = {
        "schema_version": SCHEMA_VERSION,
        "inputs": inputs,
        "out": config.out,
        "split": config.split,
        "limit": str(config.limit),
        "engine": {**asdict(config.engine), "path": engine_path, "name": engine_name},
        "reproducible": config.limit.deterministic and config.engine.threads == 1,
        "sampling": {
            "rate": config.sample_rate,
            "seed": config.seed,
            "max_games": config.max_games,
            "allow_setup": config.allow_setup,
        },
        "num_shards": config.num_shards,
        "runner": runner,
        "expected_workers": _expected_workers(options),
        "started_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    if local:
        config = dataclasses.replace(
            config, engine=dataclasses.replace(config.engine, path=engine_path)
        )
    print(
        f"annotate: {len(inputs)} input(s) -> {config.split_dir} ({config.limit}, {runner}, "
        f"{static['expected_workers'] or '?'} worker(s))",
        file=sys.stderr,
        flush=True,
    )
    if resume is not None:
        print(
            f"annotate: resuming the interrupted run in {config.split_dir}: boards in its "
            f"{len(resume)} journal part(s) are reused, the others annotated",
            file=sys.stderr,
            flush=True,
        )
    began = time.monotonic()
    root = beam.Pipeline(options=options)
    build(root, config, inputs, static, resume or ())
    result = root.run()
    result.wait_until_finish()
    wall = time.monotonic() - began
    stats_path = FileSystems.join(config.split_dir, STATS_FILE)
    document = stats.read_json(stats_path)
    document["wall_time_s"] = round(wall, 3)
    searched = document["action_values"] - document["resumed"]["action_values"]
    document["action_values_per_s"] = round(searched / wall, 2) if wall else 0
    stats.write_json(stats_path, document)
    delete_journal(config.journal_dir)  # the outputs are complete: nothing left to resume
    return document


def run(argv: Sequence[str]) -> dict:
    """The programmatic entry point: same words as the command line; returns the stats."""
    config, beam_args = parse_args(argv)
    return run_config(config, beam_args)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        document = run(sys.argv[1:] if argv is None else argv)
    except (FileNotFoundError, FileExistsError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    boards, games = document["boards"], document["games"]
    print_result(
        f"annotate: {games['used']:,} games used ({games['skipped_total']:,} skipped), "
        f"{boards['unique']:,} unique boards, {boards['annotated']:,} annotated, "
        f"{document['resumed']['boards']:,} resumed, {boards['failed']:,} failed, "
        f"{document['action_values']:,} action values "
        f"in {format_duration(document['wall_time_s'])}",
        document,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
