"""The annotate job as a Beam graph: inputs -> games -> unique boards (less the evaluation
positions of `--exclude`) -> action values -> sharded Parquet, the failures output and
stats.json.

The stages' DoFns live in `games` (read, parse, `--max-games`, `--exclude`), `boards` (the
engine) and `journal` (reusing an interrupted run's rows), beside this module.
"""

from __future__ import annotations

from collections.abc import Sequence

import apache_beam as beam

from core.schema import (
    BOARD_SCHEMA,
    BOARDS_PREFIX,
    FAILURE_SCHEMA,
    FAILURES_PREFIX,
    failures_dir,
    stats_path,
)
from pipeline.annotate.boards import FAILURES_TAG, ROWS_TAG, AnnotateBoards
from pipeline.annotate.games import (
    BOARDS_TAG,
    FENS_TAG,
    GAMES_TAG,
    DropExcluded,
    KeepGames,
    ParseGames,
    ReadGames,
    batch_group_key,
    max_games_threshold,
)
from pipeline.annotate.journal import TODO_TAG, ReadJournal, UseJournal
from pipeline.annotate.settings import AnnotateConfig
from pipeline.beam import stats
from pipeline.beam.portable import GroupInto, singleton, split
from pipeline.beam.shards import WriteShards


def build(
    root: beam.Pipeline,
    config: AnnotateConfig,
    inputs: list[str],
    static: dict | None = None,
    journal_parts: Sequence[str] = (),
    excluded: frozenset[str] = frozenset(),
) -> beam.PCollection:
    """Adds the whole job to `root`: inputs -> shards, failures and stats.json; returns the
    collection of the stats document (one element), the job's last step.

    `inputs` are concrete paths (see `expand_inputs`); `static` is copied into stats.json
    (its `expected_workers`, if any, scales the progress lines' ETA). Annotated rows are
    journaled to `config.journal_dir` unless `config.journal_every` is 0. `journal_parts`
    (`list_journal_parts`) are an interrupted run's parts: their boards are reused, not
    searched. `run_config` checks the journal's run.json first and deletes it afterwards.
    Boards whose position (core.positions.position_key) is in `excluded` are dropped before
    the journal and the engine see them.
    Only transforms every runner gets right are used (pipeline/beam/portable.py), and stats.json
    is written only when the rows written are the rows counted (else stats.RowsLost).
    """
    static = dict(static or {})
    unique, all_stats = _unique_boards(root, config, inputs)
    if excluded:
        kept = split(
            unique | "DropExcluded" >> beam.ParDo(DropExcluded(excluded)),
            (BOARDS_TAG, stats.STATS_TAG),
            "ExcludedOutputs",
        )
        unique = kept[BOARDS_TAG]
        all_stats.append(kept[stats.STATS_TAG])
    todo, resumed_rows = unique, None
    if journal_parts:
        joined, journal_stats = _join_journal(root, unique, journal_parts)
        todo, resumed_rows = joined[TODO_TAG], joined[ROWS_TAG]
        all_stats += journal_stats
    context = _progress_context(todo, resumed_rows)
    groups = todo | "GroupBoards" >> GroupInto(config.groups, lambda board: board[0], context)
    annotated = split(
        groups
        | "AnnotateBoards"
        >> beam.ParDo(
            AnnotateBoards(
                config.engine,
                config.limit,
                config.progress_seconds,
                static.get("expected_workers", 0),
                config.journal_dir if config.journal_every > 0 else None,
                config.journal_every,
                config.mode,
                config.multipv,
            )
        ),
        (ROWS_TAG, FAILURES_TAG, stats.STATS_TAG),
        "BoardOutputs",
    )
    rows = annotated[ROWS_TAG]
    if resumed_rows is not None:
        rows = (rows, resumed_rows) | "AllRows" >> beam.Flatten()
    all_stats.append(annotated[stats.STATS_TAG])
    return _write_outputs(config, rows, annotated[FAILURES_TAG], all_stats, static)


def _unique_boards(root: beam.Pipeline, config: AnnotateConfig, inputs: list[str]):
    """Input paths -> (fen, count) of each distinct board of the kept games, and the stages'
    stats collections."""
    files = (
        root
        | "Inputs" >> beam.Create(inputs)
        # Spread files over workers (Create would hand all of them to one).
        | "SpreadFiles" >> beam.Reshuffle()
    )
    read = split(
        files
        | "ReadGames"
        >> beam.ParDo(ReadGames(config.sample_rate, config.seed, config.fail_on_input_error)),
        (GAMES_TAG, stats.STATS_TAG),
        "ReadOutputs",
    )
    parsed = split(
        read[GAMES_TAG]
        # A dump is one huge file read by one worker: spread its games before parsing (on Dask,
        # a no-op: games are parsed where their file is read, see pipeline/beam/portable.py).
        | "SpreadGames" >> beam.Reshuffle()
        | "ParseGames" >> beam.ParDo(ParseGames(config.allow_setup)),
        (GAMES_TAG, stats.STATS_TAG),
        "ParseOutputs",
    )
    batches = parsed[GAMES_TAG]  # [(key, fens)]
    if config.max_games:
        keys = batches | "GameKeys" >> beam.FlatMap(lambda batch: [key for key, _ in batch])
        smallest = singleton(
            keys, "SmallestKeys", beam.combiners.TopCombineFn(config.max_games, reverse=True)
        )
        threshold = smallest | "Threshold" >> beam.Map(max_games_threshold)
        with_threshold = (
            batches
            | "GroupBatches" >> GroupInto(config.groups, batch_group_key, threshold)
            | "WithThreshold"
            >> beam.Map(lambda g: ([game for batch in g[1] for game in batch], g[2]))
        )
    else:
        with_threshold = batches | "NoThreshold" >> beam.Map(lambda batch: (batch, None))
    kept = split(
        with_threshold | "KeepGames" >> beam.ParDo(KeepGames(config.random_move_rate, config.seed)),
        (FENS_TAG, stats.STATS_TAG),
        "KeepOutputs",
    )
    unique = kept[FENS_TAG] | "CountBoards" >> beam.combiners.Count.PerElement()
    return unique, [read[stats.STATS_TAG], parsed[stats.STATS_TAG], kept[stats.STATS_TAG]]


def _join_journal(root: beam.Pipeline, unique, journal_parts: Sequence[str]):
    """(fen, count) boards joined to the journal's rows: UseJournal's outputs (ROWS_TAG rows
    reused, TODO_TAG boards still to annotate) and the stats collections of reading and
    joining."""
    journal = (
        root | "JournalParts" >> beam.Create(sorted(journal_parts)) | "ReadJournal" >> ReadJournal()
    )
    joined = split(
        {"boards": unique, "journal": journal[ROWS_TAG]}
        | "JoinJournal" >> beam.CoGroupByKey()
        | "UseJournal" >> beam.ParDo(UseJournal()),
        (ROWS_TAG, TODO_TAG, stats.STATS_TAG),
        "JournalOutputs",
    )
    return joined, [journal[stats.STATS_TAG], joined[stats.STATS_TAG]]


def _progress_context(todo, resumed_rows):
    """{"todo": boards to annotate, "resumed": boards from the journal}, one element, for the
    progress lines' ETA."""
    ones = [todo | "CountTodo" >> beam.Map(lambda _: ("todo", 1))]
    if resumed_rows is not None:
        ones.append(resumed_rows | "CountResumed" >> beam.Map(lambda _: ("resumed", 1)))
    counts = tuple(ones) | "AllCounted" >> beam.Flatten() | "Count" >> beam.CombinePerKey(sum)
    return singleton(counts, "Context", beam.combiners.ToDictCombineFn())


def _write_outputs(
    config: AnnotateConfig, rows, failures, all_stats: list, static: dict
) -> beam.PCollection:
    """Board rows -> sharded Parquet, failures -> one Parquet file, then (last) stats.json.

    The writers' (path, rows) results join the stats as counts, so that one merge brings
    everything to the last step (each merge is a shuffle, costly on Dask)."""
    split_dir = config.split_dir
    boards = rows | "WriteBoards" >> WriteShards(
        split_dir, BOARDS_PREFIX, config.num_shards, BOARD_SCHEMA
    )
    failed = failures | "WriteFailures" >> WriteShards(
        failures_dir(split_dir), FAILURES_PREFIX, 1, FAILURE_SCHEMA
    )
    written = [
        boards | "BoardsWritten" >> beam.MapTuple(lambda path, n: stats.written("boards", n)),
        failed | "FailuresWritten" >> beam.MapTuple(lambda path, n: stats.written("failures", n)),
    ]
    merged = stats.merge_all([*all_stats, *written])
    return merged | "WriteStats" >> beam.Map(
        finish, stats_path(split_dir), static, config.num_shards
    )


def finish(merged: dict, path: str, static: dict, num_shards: int) -> dict:
    """Checks that every row counted was written, once, then writes stats.json."""
    document = stats.summarize(merged, static)
    boards = document["boards"]
    stats.check_written(
        merged,
        {
            "boards": (boards["annotated"] + document["resumed"]["boards"], num_shards),
            "failures": (boards["failed"], 1),
        },
        path,
    )
    stats.write_json(path, document)
    return document
