"""The Beam pipeline: PGN games -> deduplicated boards -> Stockfish action values -> Parquet.

    python -m pipeline.annotate INPUT... --out DIR --split train --limit nodes=2000 \\
        [--mode search [--multipv K]] [--exclude PUZZLES.csv SUITE.epd ...] \\
        [--sample-rate R] [--max-games N] [--num-shards K] [beam options]

Stages (each a Beam transform; the same code runs on the DirectRunner, Dataflow, Flink, Spark):

1. ReadGames: each input file streamed line by line (`.pgn.zst` decompressed on the fly),
   cut into games, garbage between games counted; games sampled by a hash of their id
   (`--sample-rate`, `--seed`), so the sample is the same on every runner.
2. ParseGames: python-chess parses each game; variants, set-up positions (unless
   `--allow-setup`), parse errors, illegal moves and empty games are skipped and counted.
   `--max-games N` then keeps the N valid games with the smallest sampling hash.
3. The FEN before each move (with `--random-move RATE`, that share of them replaced by the
   board after a random legal move: pipeline/random_move.py), counted per distinct full FEN
   (`count` column); with `--exclude`,
   boards whose position is one of the evaluation sets' (pipeline/exclude.py) are dropped
   and counted.
4. AnnotateBoards: one Stockfish per worker (started in `setup`, closed in `teardown`), one
   search per legal move restricted to that move (`--mode action-values`, the default) or one
   unrestricted search reporting `--multipv` lines (`--mode search`); engine failures restart
   the engine and retry, boards that still fail go to the failures output.
5. Sharded Parquet (`core/schema.py`), and in `<split>.meta/` the failures and `stats.json`,
   written last, once the rows written are checked against the rows counted.

Games and boards are spread over `--groups` work units, and only transforms that every runner
gets right are used (pipeline/beam/portable.py), so the job runs on Beam's DaskRunner too.

Resume: AnnotateBoards also appends its rows to `<split>.meta/journal/` as it goes
(`JournalWriter`).
A rerun with the same settings (`journal/run.json`) joins the journal's rows to the boards by
FEN (`ReadJournal`, `UseJournal`) and sends only the boards without a row to the engine; the
journal is deleted once the outputs are written.

With no `--runner`, `--runner=DirectRunner` is added (Beam's default would first try to download
its Prism runner); `--runner=DaskRunner` is Beam's DaskRunner (with `--dask_client_address`).
`--direct_num_workers=N --direct_running_mode=multi_processing` runs N engines at once.
`run(argv)` is the programmatic entry point and returns the stats document.

A run holds the split's lock (`split_lock`) while it writes the split. The command stops on
Ctrl-C or SIGTERM in one line, keeping the journal (`runtime.interrupts`), and exits 1, in one
line, on an error, on a run that read no game, and on a run in which every board failed.

The job's modules: this one is the command (the run, its stats and its exit); `arguments` the
command line -> `AnnotateConfig`; `config` the settings; `output` readies the split (fresh,
resumed or refused); `graph` the Beam graph, whose DoFns are in `games` (stages 1-2), `boards`
(stage 4) and `journal` (resume).
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import signal
import sys
import time
from collections.abc import Sequence

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from core.engine_path import find_engine
from core.schema import (
    FAILURES_PREFIX,
    SCHEMA_VERSION,
    failures_dir,
    shard_name,
    stats_path,
)
from pipeline.annotate.arguments import parse_args
from pipeline.annotate.beam_graph import build
from pipeline.annotate.games import stopping_input_error
from pipeline.annotate.journal import delete_journal, flush_open_writers
from pipeline.annotate.settings import AnnotateConfig
from pipeline.annotate.split_output import annotate_identity, prepare_output
from pipeline.beam import stats
from pipeline.beam.environment import VERBOSE_FLAG, keep_line, scratch_tempdir, set_verbose
from pipeline.beam.portable import for_workers, runner_args
from pipeline.beam.split_lock import SplitBusy, split_lock
from pipeline.card import write_card
from pipeline.exclude import Exclusions, load_exclusions
from pipeline.labels import engine_slots
from pipeline.labels.uci_client import EngineError, UciEngine
from pipeline.sources import expand_inputs
from runtime.interrupts import stop_on_signals
from runtime.outputs import check_dir, disk_full, disk_full_line, quiet_disk_full
from runtime.progress import format_duration, print_result


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


_LOCAL_RUNNERS = ("DirectRunner", "direct", "DirectRunner()")
# The failures output is one file (the graph writes it with one shard).
FAILURES_FILE = shard_name(FAILURES_PREFIX, 0, 1)


def _runner(options: PipelineOptions) -> str:
    return options.get_all_options().get("runner") or "DirectRunner"


def _static_stats(
    config: AnnotateConfig,
    inputs: list[str],
    options: PipelineOptions,
    engine_path: str | None,
    engine_name: str | None,
    exclusions: Exclusions,
) -> dict:
    """The run's description that stats.json carries beside its counts."""
    return {
        "schema_version": SCHEMA_VERSION,
        "inputs": inputs,
        "out": config.out,
        "split": config.split,
        "limit": str(config.limit),
        "mode": config.mode,
        "multipv": config.multipv,
        "row_limit": config.row_limit,
        "exclude": exclusions.describe(),
        "engine": {**config.engine.record(), "path": engine_path, "name": engine_name},
        "reproducible": config.limit.deterministic and config.engine.threads == 1,
        "sampling": {
            "rate": config.sample_rate,
            "seed": config.seed,
            "max_games": config.max_games,
            "allow_setup": config.allow_setup,
            "random_move_rate": config.random_move_rate,
        },
        "num_shards": config.num_shards,
        "groups": config.groups,
        "runner": _runner(options),
        "expected_workers": _expected_workers(options),
        "started_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


def run_config(config: AnnotateConfig, beam_args: Sequence[str]) -> dict:
    """Runs the job to completion and returns its stats document (also in stats.json).

    The split's lock is held from before its outputs are readied until they are complete
    (SplitBusy while another run holds it). An input error that stops the job
    (`--fail-on-input-error`) is raised as the InputError naming the file.
    """
    check_dir(config.out)  # before any work (object stores: the job's first write says)
    inputs = expand_inputs(list(config.inputs))
    options = PipelineOptions(runner_args(beam_args))
    if _runner(options) not in _LOCAL_RUNNERS:  # the workers may run in another directory
        inputs = [for_workers(path) for path in inputs]
        config = dataclasses.replace(config, out=for_workers(config.out))
    engine_name = None
    if _runner(options) in _LOCAL_RUNNERS:
        # The workers are this machine: check the engine before starting anything.
        engine_path = find_engine(config.engine.path)
        engine_name = uci_name(engine_path)
        config = dataclasses.replace(
            config, engine=dataclasses.replace(config.engine, path=engine_path)
        )
    exclusions = load_exclusions(config.exclude)
    for record in exclusions.files:
        if record.skipped:
            print(
                f"WARNING: --exclude {record.path}: {record.skipped:,} malformed record(s) "
                f"hold no position (first: {record.first_skipped})",
                file=sys.stderr,
            )
    with split_lock(config.split_dir, "annotate"):
        resume = prepare_output(config, annotate_identity(config, inputs, engine_name))
        static = _static_stats(config, inputs, options, config.engine.path, engine_name, exclusions)
        _announce(config, static, resume, exclusions)
        return _run_pipeline(config, inputs, options, static, resume or (), exclusions)


def _announce(
    config: AnnotateConfig, static: dict, resume: list[str] | None, exclusions: Exclusions
) -> None:
    print(
        f"annotate: {len(static['inputs'])} input(s) -> {config.split_dir} ({config.row_limit}, "
        f"{static['runner']}, {static['expected_workers'] or '?'} worker(s))",
        file=sys.stderr,
        flush=True,
    )
    if exclusions.files:
        print(
            f"annotate: excluding {len(exclusions):,} evaluation positions of "
            f"{len(exclusions.files)} file(s)",
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


def _run_pipeline(
    config: AnnotateConfig,
    inputs: list[str],
    options: PipelineOptions,
    static: dict,
    resume: Sequence[str],
    exclusions: Exclusions,
) -> dict:
    """Builds and runs the Beam job; completes stats.json and deletes the journal."""
    began = time.monotonic()
    with scratch_tempdir():
        root = beam.Pipeline(options=options)
        build(root, config, inputs, static, resume, exclusions.keys)
        try:
            root.run().wait_until_finish()
        except Exception as e:
            stop = stopping_input_error(e) if config.fail_on_input_error else None
            if stop is None:
                raise
            raise stop from None
    engine_slots.close_idle()  # the DirectRunner's in-process workers' engines: the job is done
    wall = time.monotonic() - began
    path = stats_path(config.split_dir)
    document = stats.read_json(path)
    document["wall_time_s"] = round(wall, 3)
    searched = document["action_values"] - document["resumed"]["action_values"]
    document["action_values_per_s"] = round(searched / wall, 2) if wall else 0
    stats.write_json(path, document)
    delete_journal(config.journal_dir)  # the outputs are complete: nothing left to resume
    write_card(config.out)
    return document


def run(argv: Sequence[str]) -> dict:
    """The programmatic entry point: same words as the command line; returns the stats."""
    config, beam_args = parse_args(argv)
    return run_config(config, beam_args)


def run_as_command(argv: Sequence[str]) -> dict:
    """`run` with the command line's Ctrl-C and SIGTERM: the journal saved, one line, the
    process ended with 130 or 143. For programs that run the annotation as a step of their own
    (`make cpu-model`, `make demo`): a bare `run` would leave Beam's workers printing their
    tracebacks (runtime/interrupts.py says why)."""
    config, beam_args = parse_args(argv)
    if VERBOSE_FLAG in argv:
        set_verbose(True)
    with stop_on_signals(functools.partial(_stopped, config), keep_line):
        return run_config(config, beam_args)


def _resume_hint(config: AnnotateConfig) -> str:
    """What a rerun of a stopped command does."""
    if config.journal_every == 0:
        return "no journal (--journal-every 0): a rerun starts over"
    return f"rerun the same command to resume from the journal {config.journal_dir}"


def _stopped(config: AnnotateConfig, signum: int) -> str:
    """Ctrl-C or SIGTERM: saves this process's buffered journal rows; the line to print."""
    saved = flush_open_writers()
    name = signal.Signals(signum).name
    if config.journal_every == 0:
        return f"annotate: stopped by {name}; no journal (--journal-every 0): a rerun starts over"
    at_stop = f" ({saved:,} of them written at the stop)" if saved else ""
    return (
        f"annotate: stopped by {name}; the boards annotated so far are in the journal "
        f"{config.journal_dir}{at_stop}: rerun the same command to resume"
    )


def unfinished(document: dict) -> str | None:
    """Why a completed run did not do its job (the command then exits 1), or None."""
    games, boards = document["games"], document["boards"]
    if games["read"] == 0:
        count = len(document["inputs"])
        where = "the input" if count == 1 else f"any of the {count} inputs"
        return f"no game read from {where}: nothing to annotate"
    if boards["failed"] and not boards["annotated"] and not document["resumed"]["boards"]:
        # An example is "FEN: error"; a FEN holds no colon.
        first = document["examples"].get("failed", [": ?"])[0].partition(": ")[2]
        split_dir = FileSystems.join(document["out"], document["split"])
        failures = FileSystems.join(failures_dir(split_dir), FAILURES_FILE)
        return (
            f"every board failed ({boards['failed']:,}; they are in {failures}); "
            f"the first: {first[:200]}"
        )
    return None


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    try:
        with quiet_disk_full():  # Beam logs each failed bundle with its traceback
            document = run_as_command(words)
    except Exception as e:  # noqa: BLE001 - a full disk, whatever Beam wrapped it in
        full = disk_full(e)
        if full is None and isinstance(e, OSError | ValueError | EngineError | SplitBusy):
            # ValueError: also the arguments' (e.g. --runner=DaskRunner without dask)
            print(f"error: {e}", file=sys.stderr)  # FileNotFound, InputError, ...
            return 1
        if full is None:
            raise
        config, _ = parse_args(words)
        print(disk_full_line(full, config.split_dir, _resume_hint(config)), file=sys.stderr)
        return 1
    boards, games = document["boards"], document["games"]
    print_result(
        f"annotate: {games['used']:,} games used ({games['skipped_total']:,} skipped), "
        f"{boards['unique']:,} unique boards, {boards['annotated']:,} annotated, "
        f"{document['resumed']['boards']:,} resumed, {boards['failed']:,} failed, "
        f"{document['excluded']['boards']:,} excluded, "
        f"{document['action_values']:,} action values "
        f"in {format_duration(document['wall_time_s'])}",
        document,
    )
    problem = unfinished(document)
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
