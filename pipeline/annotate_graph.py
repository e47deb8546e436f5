"""The annotate job as a Beam graph: inputs -> games -> unique boards -> action values ->
sharded Parquet, the failures output and stats.json.

The stages' DoFns live in `annotate_games` (read, parse, `--max-games`), `annotate_boards`
(the engine) and `annotate_journal` (reusing an interrupted run's rows).
"""

from __future__ import annotations

from collections.abc import Sequence

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from core.schema import BOARD_SCHEMA, BOARDS_PREFIX, FAILURE_SCHEMA, FAILURES_PREFIX, STATS_FILE
from pipeline import stats
from pipeline.annotate_boards import FAILURES_TAG, AnnotateBoards
from pipeline.annotate_config import AnnotateConfig
from pipeline.annotate_games import KeepGames, ParseGames, ReadGames, max_games_threshold
from pipeline.annotate_journal import TODO_TAG, ReadJournal, UseJournal
from pipeline.shards import WriteShards


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
    unique, all_stats = _unique_boards(root, config, inputs)
    todo, side_inputs, resumed_rows = unique, [], None
    if journal_parts:
        joined, journal_stats = _join_journal(root, unique, journal_parts)
        todo, resumed_rows = joined[TODO_TAG], joined.rows
        all_stats += journal_stats
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
    if resumed_rows is not None:
        rows = (annotated.rows, resumed_rows) | "AllRows" >> beam.Flatten()
    _write_outputs(config, rows, annotated[FAILURES_TAG], [*all_stats, annotated.stats], static)


def _unique_boards(root: beam.Pipeline, config: AnnotateConfig, inputs: list[str]):
    """Input paths -> (fen, count) of each distinct board of the kept games, and the stages'
    stats collections."""
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
            | "Threshold" >> beam.Map(max_games_threshold)
        )
    kept = parsed.games | "KeepGames" >> beam.ParDo(KeepGames(), threshold=threshold).with_outputs(
        stats.STATS_TAG, main="fens"
    )
    unique = kept.fens | "CountBoards" >> beam.combiners.Count.PerElement()
    return unique, [read.stats, parsed.stats, kept.stats]


def _join_journal(root: beam.Pipeline, unique, journal_parts: Sequence[str]):
    """(fen, count) boards joined to the journal's rows: UseJournal's outputs (`rows` reused,
    TODO_TAG boards still to annotate) and the stats collections of reading and joining."""
    journal = (
        root | "JournalParts" >> beam.Create(sorted(journal_parts)) | "ReadJournal" >> ReadJournal()
    )
    joined = (
        {"boards": unique, "journal": journal.rows}
        | "JoinJournal" >> beam.CoGroupByKey()
        | "UseJournal"
        >> beam.ParDo(UseJournal()).with_outputs(stats.STATS_TAG, TODO_TAG, main="rows")
    )
    return joined, [journal.stats, joined.stats]


def _write_outputs(config: AnnotateConfig, rows, failures, all_stats: list, static: dict) -> None:
    """Board rows -> sharded Parquet, failures -> one Parquet file, stats -> stats.json."""
    split_dir = config.split_dir
    _ = rows | "WriteBoards" >> WriteShards(
        split_dir, BOARDS_PREFIX, config.num_shards, BOARD_SCHEMA
    )
    _ = failures | "WriteFailures" >> WriteShards(split_dir, FAILURES_PREFIX, 1, FAILURE_SCHEMA)
    stats_path = FileSystems.join(split_dir, STATS_FILE)
    _ = (
        tuple(all_stats)
        | "AllStats" >> beam.Flatten()
        | "MergeStats" >> beam.CombineGlobally(stats.MergeStats())
        | "WriteStats"
        >> beam.Map(lambda merged: stats.write_json(stats_path, stats.summarize(merged, static)))
    )
