"""ChessBench bag shards -> annotated-board Parquet, as a Beam pipeline.

    python -m pipeline.import_chessbench --kind av --output data/chessbench \\
        --input 'data/chessbench/train/action_value@2148_data.bag'

reads the paper's released records (bag.py and records.py beside it have the format) and
writes the one table of core/schema.py to `<output>/<split>/boards-*.parquet`, with
`failures-*.parquet` and `stats.json` in `<output>/<split>.meta/`, so the trainer takes it like
data this project annotated. Beam options not listed here (`--runner`, `--direct_num_workers`,
...) go to Beam, so the 2,148 action-value shards can be imported on a cluster, Dask included
(`--runner=DaskRunner`; only the transforms of pipeline/portable.py are used).

Records of a board may sit anywhere in the input, so they are grouped by FEN: each chunk of
records groups its own by board and by output shard (a hash of the FEN), and one shuffle
brings each output shard's boards together, where their rows are made and written, sorted by
FEN, so the files are the same on every runner. Then, per board:

- av (FEN, move, win_prob): one row per board; its moves in action-space order, best_move
  the highest win probability (ties: first in action-space order), the state value that
  move's. Moves that are exactly the legal moves make a complete row. Some legal moves
  missing: the row is kept and marked `partial` (the AV loader leaves it out unless asked),
  and counted. A move that is not legal, or the same move with two different values: the
  board goes to the failures output with the reason. A record repeated exactly is counted
  as a duplicate; the board's `count` is how often its most repeated move occurs.
- sv (FEN, win_prob): a row with the state value and no moves (`partial`). Repeated boards
  count; differing values are averaged and counted as conflicts.
- bc (FEN, move): a row with the best move and no state value (`partial`). Repeated boards
  count; differing moves are counted as conflicts and the most frequent wins (ties: first in
  action-space order).

`cp` and `mate` are null (ChessBench keeps only win probabilities); `source` is
"chessbench". A FEN python-chess or the tokenizer refuses goes to the failures output; a
record whose win probability is not a number in [0, 1] (NaN included) is skipped and counted
(`records.bad_values`). Damage costs only the records it touches (salvage.py): the
records before and after it are imported, and the damaged ones are counted, named in one
warning line and in stats.json's `input_errors`. A shard that cannot be read at all (its index
unreadable, or a file of 0 bytes) is named the same way, and the rest is imported; any input
error makes the exit status 1. Nothing is dropped without a count.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import datetime
import functools
import signal
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import apache_beam as beam
import chess
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from core.actions import legal_actions, move_to_index
from core.cli import config_from_args, int_at_least, plain_name
from core.interrupts import stop_on_signals
from core.outputs import OutputError, check_dir
from core.progress import format_duration, print_result
from core.schema import (
    BOARD_SCHEMA,
    BOARDS_PREFIX,
    FAILURE_SCHEMA,
    FAILURES_PREFIX,
    MAX_SHARDS,
    SCHEMA_VERSION,
    SOURCE_CHESSBENCH,
    BoardRow,
    failures_dir,
    shard_name,
    stats_path,
)
from core.tokenizer import tokenize
from pipeline import stats
from pipeline.beam_env import VERBOSE_FLAG, VERBOSE_HELP, keep_line, scratch_tempdir, set_verbose
from pipeline.card import write_card
from pipeline.chessbench.bag import BagFormatError, BagReader, expand_pattern
from pipeline.chessbench.records import KINDS, check_kind, decode_av, decode_bc, decode_sv
from pipeline.chessbench.salvage import decode_range, ranges
from pipeline.portable import (
    DEFAULT_GROUPS,
    GroupInto,
    for_workers,
    runner_args,
    split,
    tagged,
)
from pipeline.shards import WriteShards, clear_outputs, shard_of, write_parquet

# What the paper says made ChessBench: Stockfish 16 at 50 ms per (board, move).
CHESSBENCH_ENGINE = "Stockfish 16 (ChessBench)"
CHESSBENCH_LIMIT = "time=0.05"
FAILURES_TAG = "failures"
CHUNKS_TAG = "chunks"
BATCHES_TAG = "batches"
WRITTEN_TAG = "written"
_DECODERS = {"av": decode_av, "sv": decode_sv, "bc": decode_bc}


@dataclass(frozen=True)
class ChessBenchConfig:
    input: str  # bag shards: `name@N` spec, glob, path, or comma-separated list of them
    kind: str  # av | sv | bc
    output: str  # output root; rows go to <output>/<split>
    split: str = "train"
    num_shards: int = 16
    chunk_records: int = 65_536  # records decoded at once (and the unit of parallelism)
    overwrite: bool = False
    groups: int = DEFAULT_GROUPS  # work units the chunks are spread over

    @property
    def split_dir(self) -> str:
        return FileSystems.join(self.output, self.split)

    def validate(self) -> None:
        check_kind(self.kind)
        if self.num_shards < 1 or self.chunk_records < 1 or self.groups < 1:
            raise ValueError("--num-shards, --chunk-records and --groups must be at least 1")


# -- reading: shard -> chunks of records -> (fen, records of that board in the chunk) ----------


def chunk_ranges(path: str, chunk_records: int) -> Iterable[tuple[str, int, int]]:
    """(path, start, stop) for each chunk of a shard; raises BagFormatError for a bad one.

    A file of 0 bytes is a valid empty bag, but no ChessBench shard is empty: it is what a
    failed download or copy leaves, so it is refused rather than imported as nothing."""
    with BagReader(path) as reader:
        n, size = len(reader), reader.size
    if size == 0:
        raise BagFormatError(f"{path}: empty file (0 bytes), no records")
    for start in range(0, n, chunk_records):
        yield path, start, min(start + chunk_records, n)


class ListChunks(beam.DoFn):
    """Shard path -> its chunks on CHUNKS_TAG, then stats; an unreadable shard is an input
    error, not a crash."""

    def __init__(self, chunk_records: int):
        self.chunk_records = chunk_records

    def process(self, path: str):
        s = stats.BundleStats()
        try:
            chunks = list(chunk_ranges(path, self.chunk_records))
        except (BagFormatError, OSError) as e:
            s.count("unreadable_shards")
            s.input_error(path, f"{type(e).__name__}: {e}")
            print(f"WARNING: skipping {path}: {e}", file=sys.stderr, flush=True)
            chunks = []
        else:
            s.count("shards")
        for chunk in chunks:
            yield tagged(CHUNKS_TAG, chunk)
        yield s.emit()


class DecodeChunk(beam.DoFn):
    """(group, [(path, start, stop)], _) -> (output shard, {fen: values}) on BATCHES_TAG for
    each output shard that has boards in a chunk: av values are [(move, win_prob), ...], sv
    [win_prob, ...], bc [move, ...]; then stats. The shuffle then moves a few batches per
    chunk rather than one element per board (Beam's per-element cost was half the import's
    time)."""

    def __init__(self, kind: str, num_shards: int):
        self.kind = kind
        self.num_shards = num_shards

    def process(self, element):
        _, chunks, _ = element
        for chunk in chunks:
            s = stats.BundleStats()
            for shard, batch in self._decode(chunk, s):
                yield tagged(BATCHES_TAG, (shard, batch))
            yield s.emit()

    def _decode(self, element, s: stats.BundleStats):
        path, start, stop = element
        try:
            with BagReader(path) as reader:
                salvaged = decode_range(reader, _DECODERS[self.kind], start, stop)
        except (BagFormatError, OSError) as e:  # the file, not a record: nothing to salvage
            s.count("unreadable_chunks")
            s.count("records_unread", stop - start)
            s.input_error(path, f"records {start}-{stop - 1}: {e}")
            print(f"WARNING: skipping records {start}-{stop - 1} of {path}: {e}", file=sys.stderr)
            return
        if salvaged.damaged:
            lost = len(salvaged.damaged)
            message = (
                f"{lost:,} of records {start}-{stop - 1} damaged and skipped "
                f"({ranges(salvaged.damaged)}), {stop - start - lost:,} kept; first: "
                f"{salvaged.first_error.removeprefix(f'{path}: ')}"
            )
            s.count("damaged_records", lost)
            s.count("records_unread", lost)
            s.input_error(path, message)
            print(f"WARNING: {path}: {message}", file=sys.stderr, flush=True)
        if salvaged.bad_values:
            s.count("bad_value_records", len(salvaged.bad_values))
            s.example(
                "bad_value_records",
                f"{path}: records {ranges(salvaged.bad_values)}: win probability not in [0, 1]",
            )
        columns = salvaged.columns
        s.count("records", stop - start - len(salvaged.damaged))
        batches: dict[int, dict[str, list]] = {}
        for fen, values in group_by_fen(self.kind, columns):
            batches.setdefault(shard_of(fen, self.num_shards), {})[fen] = values
        yield from batches.items()


def group_by_fen(kind: str, columns: tuple) -> Iterable[tuple[str, list]]:
    """Decoded columns -> (fen, that board's values), boards in order of first appearance."""
    groups: dict[str, list] = {}
    if kind == "av":
        fens, moves, probs = columns
        for fen, move, p in zip(fens, moves, probs.tolist(), strict=True):
            groups.setdefault(fen, []).append((move, p))
    elif kind == "sv":
        fens, probs = columns
        for fen, p in zip(fens, probs.tolist(), strict=True):
            groups.setdefault(fen, []).append(p)
    else:
        fens, moves = columns
        for fen, move in zip(fens, moves, strict=True):
            groups.setdefault(fen, []).append(move)
    return groups.items()


# -- one board's records -> a row ---------------------------------------------------------------


class BoardRejected(ValueError):
    """The records of a board cannot make a row: the message says why."""


def _check_board(fen: str) -> chess.Board:
    try:
        board = chess.Board(fen)
        tokenize(fen)
    except ValueError as e:
        raise BoardRejected(f"unusable FEN: {e}") from None
    return board


def _row(fen: str, count: int, **values) -> BoardRow:
    # Not make_board_row: ChessBench has no engine scores, so `cp` and `mate` are null
    # columns rather than lists of nulls, and a row is partial unless it has every move.
    row = BoardRow(
        fen=fen,
        count=count,
        moves=[],
        win_probs=[],
        cp=None,
        mate=None,
        best_move="",
        state_win_prob=None,
        state_cp=None,
        state_mate=None,
        partial=True,
        source=SOURCE_CHESSBENCH,
        engine=CHESSBENCH_ENGINE,
        limit=CHESSBENCH_LIMIT,
    )
    row.update(values)  # type: ignore[typeddict-item]
    return row


def av_row(fen: str, records: Sequence[tuple[str, float]], tally: stats.BundleStats) -> BoardRow:
    """The row of one board's action-value records (see the module doc for the rules)."""
    board = _check_board(fen)
    values = dict(records)
    count = 1
    if len(values) < len(records):  # rare: some record repeated
        for move, p in records:
            if values[move] != p:
                raise BoardRejected(
                    f"move {move} has two win probabilities, {min(values[move], p)} and "
                    f"{max(values[move], p)}"
                )
        count = max(collections.Counter(move for move, _ in records).values())
        tally.count("duplicate_records", len(records) - len(values))
    legal = legal_actions(board)
    moves = legal
    if len(values) != len(legal) or not all(m in values for m in legal):
        legal_set = set(legal)
        illegal = sorted(m for m in values if m not in legal_set)
        if illegal:
            raise BoardRejected(f"moves not legal on this board: {' '.join(illegal)}")
        moves = [m for m in legal if m in values]
        missing = [m for m in legal if m not in values]
        tally.count("partial_boards")
        tally.example("partial_boards", f"{fen}: no records for {' '.join(missing[:8])}")
    probs = [values[m] for m in moves]
    best = max(range(len(probs)), key=probs.__getitem__)  # ties: first in action-space order
    return _row(
        fen,
        count,
        moves=moves,
        win_probs=probs,
        best_move=moves[best],
        state_win_prob=probs[best],
        partial=len(moves) < len(legal),
    )


def sv_row(fen: str, records: Sequence[float], tally: stats.BundleStats) -> BoardRow:
    _check_board(fen)
    if len(set(records)) > 1:
        tally.count("conflicting_boards")
        tally.example("conflicting_boards", f"{fen}: win probabilities {sorted(set(records))}")
    # Sorted, so that the mean does not depend on the order the shuffle delivered them in.
    return _row(fen, len(records), state_win_prob=sum(sorted(records)) / len(records))


def bc_row(fen: str, records: Sequence[str], tally: stats.BundleStats) -> BoardRow:
    board = _check_board(fen)
    legal = set(legal_actions(board))
    illegal = sorted(set(records) - legal)
    if illegal:
        raise BoardRejected(f"moves not legal on this board: {' '.join(illegal)}")
    votes = collections.Counter(records)
    if len(votes) > 1:
        tally.count("conflicting_boards")
        tally.example("conflicting_boards", f"{fen}: best moves {dict(sorted(votes.items()))}")
    best = min(votes, key=lambda m: (-votes[m], move_to_index(m)))
    return _row(fen, len(records), best_move=best)


_ROW_MAKERS = {"av": av_row, "sv": sv_row, "bc": bc_row}


class MakeShard(beam.DoFn):
    """(output shard, [{fen: values} of each chunk]) -> the shard's Parquet file, written
    here (rows sorted by FEN, as pipeline/shards.py writes them); outputs (path, rows) on
    WRITTEN_TAG, failure rows on FAILURES_TAG, then stats. A shard's boards are held in one
    worker's memory: pick `--num-shards` so that boards / shards fits (about 1.5 KB a
    board)."""

    def __init__(self, kind: str, directory: str, num_shards: int):
        self.kind = kind
        self.directory = directory
        self.num_shards = num_shards

    def process(self, element):
        self._stats = stats.BundleStats()
        yield from self._make(element)
        yield self._stats.emit()

    def _make(self, element):
        index, batches = element
        boards: dict[str, list] = {}
        for batch in batches:
            if batch is None:  # the marker that makes every shard exist
                continue
            for fen, values in batch.items():
                boards.setdefault(fen, []).extend(values)
        rows = []
        for fen in sorted(boards):
            records = boards[fen]
            try:
                row = _ROW_MAKERS[self.kind](fen, records, self._stats)
            except BoardRejected as e:
                self._stats.count("failed_boards")
                self._stats.example("failed_boards", f"{fen}: {e}")
                failure = {
                    "fen": fen,
                    "count": len(records),
                    "error": str(e),
                    "engine": CHESSBENCH_ENGINE,
                    "limit": CHESSBENCH_LIMIT,
                }
                yield tagged(FAILURES_TAG, failure)
                continue
            self._stats.count("boards")
            self._stats.count("action_values", len(row["moves"]))
            rows.append(row)
        path = FileSystems.join(self.directory, shard_name(BOARDS_PREFIX, index, self.num_shards))
        write_parquet(rows, BOARD_SCHEMA, path)
        yield tagged(WRITTEN_TAG, (path, len(rows)))


def summarize(merged: dict, static: dict) -> dict:
    """The stats.json document."""
    c = merged["counts"]
    return {
        **static,
        "shards": {"read": c.get("shards", 0), "unreadable": c.get("unreadable_shards", 0)},
        "records": {
            "read": c.get("records", 0),
            "unread": c.get("records_unread", 0),
            "unreadable_chunks": c.get("unreadable_chunks", 0),
            "damaged": c.get("damaged_records", 0),
            "bad_values": c.get("bad_value_records", 0),
            "duplicates": c.get("duplicate_records", 0),
        },
        "boards": {
            "written": c.get("boards", 0),
            "partial": c.get("partial_boards", 0),
            "conflicting": c.get("conflicting_boards", 0),
            "failed": c.get("failed_boards", 0),
        },
        "action_values": c.get("action_values", 0),
        "input_errors": merged["input_errors"],
        "examples": merged["examples"],
    }


def build(
    root: beam.Pipeline, config: ChessBenchConfig, shards: list[str], static: dict
) -> beam.PCollection:
    """Adds the import to `root`: bag shards -> board shards, failures and (last, once the
    rows written are checked against the rows counted) stats.json, whose document is the
    returned collection's one element."""
    listed = split(
        root
        | "Shards" >> beam.Create(shards)
        | "SpreadShards" >> beam.Reshuffle()
        | "ListChunks" >> beam.ParDo(ListChunks(config.chunk_records)),
        (CHUNKS_TAG, stats.STATS_TAG),
        "ListOutputs",
    )
    n, split_dir = config.num_shards, config.split_dir
    decoded = split(
        listed[CHUNKS_TAG]
        | "SpreadChunks" >> GroupInto(config.groups, lambda chunk: f"{chunk[0]}:{chunk[1]}")
        | "DecodeChunks" >> beam.ParDo(DecodeChunk(config.kind, n)),
        (BATCHES_TAG, stats.STATS_TAG),
        "DecodeOutputs",
    )
    # Every output shard is written, empty or not, so that `-of-NNNNN` tells the truth.
    every_shard = root | "ShardIndices" >> beam.Create([(i, None) for i in range(n)])
    made = split(
        (decoded[BATCHES_TAG], every_shard)
        | "AllBatches" >> beam.Flatten()
        | "GroupByShard" >> beam.GroupByKey()
        | "MakeShards" >> beam.ParDo(MakeShard(config.kind, split_dir, n)),
        (WRITTEN_TAG, FAILURES_TAG, stats.STATS_TAG),
        "ShardOutputs",
    )
    failed = made[FAILURES_TAG] | "WriteFailures" >> WriteShards(
        failures_dir(split_dir), FAILURES_PREFIX, 1, FAILURE_SCHEMA
    )
    # The writers' results join the stats as counts: one merge brings everything to the end.
    written = [
        made[WRITTEN_TAG]
        | "BoardsWritten" >> beam.MapTuple(lambda path, rows: stats.written("boards", rows)),
        failed
        | "FailuresWritten" >> beam.MapTuple(lambda path, rows: stats.written("failures", rows)),
    ]
    merged = stats.merge_all(
        [listed[stats.STATS_TAG], decoded[stats.STATS_TAG], made[stats.STATS_TAG], *written]
    )
    return merged | "WriteStats" >> beam.Map(finish, stats_path(split_dir), static, n)


def finish(merged: dict, path: str, static: dict, num_shards: int) -> dict:
    """Checks that every board counted was written, once, then writes stats.json."""
    document = summarize(merged, static)
    boards = document["boards"]
    expected = {"boards": (boards["written"], num_shards), "failures": (boards["failed"], 1)}
    stats.check_written(merged, expected, path)
    stats.write_json(path, document)
    return document


def run_config(config: ChessBenchConfig, beam_args: Sequence[str] = ()) -> dict:
    """Runs the import to completion; returns the stats document (also in stats.json)."""
    config.validate()
    shards = expand_pattern(config.input)
    options = PipelineOptions(runner_args(beam_args))
    if (options.get_all_options().get("runner") or "DirectRunner") != "DirectRunner":
        # The workers may run in another directory.
        shards = [for_workers(path) for path in shards]
        config = dataclasses.replace(config, output=for_workers(config.output))
    clear_outputs(config.split_dir, config.overwrite)
    static = {
        "schema_version": SCHEMA_VERSION,
        "source": SOURCE_CHESSBENCH,
        "kind": config.kind,
        "input": config.input,
        "num_input_shards": len(shards),
        "out": config.output,
        "split": config.split,
        "num_shards": config.num_shards,
        "runner": options.get_all_options().get("runner") or "DirectRunner",
        "started_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    print(
        f"import_chessbench: {len(shards)} {config.kind} shard(s) -> {config.split_dir}",
        file=sys.stderr,
        flush=True,
    )
    began = time.monotonic()
    with scratch_tempdir():
        root = beam.Pipeline(options=options)
        build(root, config, shards, static)
        root.run().wait_until_finish()
    wall = time.monotonic() - began
    path = stats_path(config.split_dir)
    document = stats.read_json(path)
    document["wall_time_s"] = round(wall, 3)
    document["records_per_s"] = round(document["records"]["read"] / wall, 1) if wall else 0
    stats.write_json(path, document)
    write_card(config.output)
    return document


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pipeline.import_chessbench",
        description="ChessBench .bag/.bagz shards -> annotated-board Parquet. Options not "
        "listed here go to Beam (e.g. --runner, --direct_num_workers).",
    )
    parser.add_argument(
        "--input",
        required=True,
        help="bag shards: 'dir/action_value@2148_data.bag', a glob, a path, or a comma list",
    )
    parser.add_argument("--kind", required=True, choices=KINDS, help="what the records hold")
    parser.add_argument("--output", required=True, help="output root (any Beam filesystem)")
    parser.add_argument(
        "--split", default="train", type=plain_name, help="subdirectory of --output"
    )
    parser.add_argument(
        "--num-shards", type=int_at_least(1, MAX_SHARDS), default=16, help="output Parquet shards"
    )
    parser.add_argument("--chunk-records", type=int, default=65_536, help="records per task")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing split")
    parser.add_argument(VERBOSE_FLAG, action="store_true", help=VERBOSE_HELP)
    parser.add_argument(
        "--groups",
        type=int,
        default=DEFAULT_GROUPS,
        help=f"work units the chunks are spread over (default {DEFAULT_GROUPS})",
    )
    return parser


def parse_args(argv: Sequence[str]) -> tuple[ChessBenchConfig, list[str]]:
    args, beam_args = _parser().parse_known_args(list(argv))
    config = config_from_args(ChessBenchConfig, args)
    return config, beam_args


def _stopped(config: ChessBenchConfig, signum: int) -> str:
    """Ctrl-C or SIGTERM: an import is not resumed; the line to print."""
    return (
        f"import_chessbench: stopped by {signal.Signals(signum).name}; an import is not "
        f"resumed: rerun it with --overwrite to replace what it wrote in {config.split_dir}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    try:
        config, beam_args = parse_args(sys.argv[1:] if argv is None else argv)
        if VERBOSE_FLAG in (sys.argv[1:] if argv is None else argv):
            set_verbose(True)
        check_dir(config.output, "--output")
        with stop_on_signals(functools.partial(_stopped, config), keep_line):
            document = run_config(config, beam_args)
    except (FileNotFoundError, FileExistsError, ValueError, OutputError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    boards, records = document["boards"], document["records"]
    print_result(
        f"import_chessbench: {records['read']:,} records -> {boards['written']:,} boards "
        f"({boards['partial']:,} partial), {boards['failed']:,} failed, "
        f"{records['bad_values']:,} records with a bad value skipped, "
        f"{len(document['input_errors'])} input error(s), in "
        f"{format_duration(document['wall_time_s'])}",
        document,
    )
    return 1 if document["input_errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
