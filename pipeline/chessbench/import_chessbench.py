"""ChessBench bag shards -> annotated-board Parquet, as a Beam pipeline.

    python -m pipeline.chessbench.import_chessbench --kind av --output data/chessbench \\
        --input 'data/chessbench/train/action_value@2148_data.bag'

reads the paper's released records (bag.py and records.py beside it have the format; chunks.py
reads them, rows.py makes each board's row by the rules below) and writes the one table of
core/schema.py to `<output>/<split>/boards-*.parquet`, with `failures-*.parquet` and
`stats.json` in `<output>/<split>.meta/`, so the trainer takes it like data this project
annotated. Beam options not listed here (`--runner`, `--direct_num_workers`, ...) go to Beam,
so the 2,148 action-value shards can be imported on a cluster, Dask included
(`--runner=DaskRunner`; only the transforms of pipeline/beam/portable.py are used).

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
import dataclasses
import datetime
import functools
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from core.schema import (
    BOARD_SCHEMA,
    BOARDS_PREFIX,
    FAILURE_SCHEMA,
    FAILURES_PREFIX,
    MAX_SHARDS,
    SCHEMA_VERSION,
    SOURCE_CHESSBENCH,
    failures_dir,
    shard_name,
    stats_path,
)
from pipeline.beam import stats
from pipeline.beam.environment import (
    VERBOSE_FLAG,
    VERBOSE_HELP,
    keep_line,
    scratch_tempdir,
    set_verbose,
)
from pipeline.beam.portable import (
    DEFAULT_GROUPS,
    GroupInto,
    for_workers,
    runner_args,
    split,
    tagged,
)
from pipeline.beam.shards import WriteShards, clear_outputs, write_parquet
from pipeline.card import write_card
from pipeline.chessbench.bag import expand_pattern
from pipeline.chessbench.chunks import BATCHES_TAG, CHUNKS_TAG, DecodeChunk, ListChunks
from pipeline.chessbench.records import KINDS, check_kind
from pipeline.chessbench.rows import CHESSBENCH_ENGINE, CHESSBENCH_LIMIT, ROW_MAKERS, BoardRejected
from runtime.cli import config_from_args, int_at_least, plain_name
from runtime.interrupts import stop_on_signals
from runtime.outputs import OutputError, check_dir
from runtime.progress import format_duration, print_result

FAILURES_TAG = "failures"
WRITTEN_TAG = "written"


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


class MakeShard(beam.DoFn):
    """(output shard, [{fen: values} of each chunk]) -> the shard's Parquet file, written
    here (rows sorted by FEN, as pipeline/beam/shards.py writes them); outputs (path, rows) on
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
                row = ROW_MAKERS[self.kind](fen, records, self._stats)
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
        prog="python -m pipeline.chessbench.import_chessbench",
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
