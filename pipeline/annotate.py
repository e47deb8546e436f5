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

The job's modules: this one is the command (options -> `AnnotateConfig`, then the run);
`annotate_config` the settings; `annotate_output` readies the split (fresh, resumed or refused);
`annotate_graph` the Beam graph, whose DoFns are in `annotate_games` (stages 1-2),
`annotate_boards` (stage 4) and `annotate_journal` (resume).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from core.engine_path import find_engine
from core.progress import format_duration, print_result
from core.schema import SCHEMA_VERSION, STATS_FILE
from pipeline import stats
from pipeline.annotate_config import DEFAULT_LIMIT, AnnotateConfig, EngineConfig
from pipeline.annotate_graph import build
from pipeline.annotate_journal import JOURNAL_EVERY, JOURNAL_SECONDS, delete_journal
from pipeline.annotate_output import prepare_output, run_identity
from pipeline.engine import Limit, UciEngine
from pipeline.sources import expand_inputs


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
    _add_engine_options(parser)
    _add_sampling_options(parser)
    _add_output_options(parser)
    return parser


def _add_engine_options(parser: argparse.ArgumentParser) -> None:
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


def _add_sampling_options(parser: argparse.ArgumentParser) -> None:
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


def _add_output_options(parser: argparse.ArgumentParser) -> None:
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


def _runner(options: PipelineOptions) -> str:
    return options.get_all_options().get("runner") or "DirectRunner"


def _static_stats(
    config: AnnotateConfig,
    inputs: list[str],
    options: PipelineOptions,
    engine_path: str | None,
    engine_name: str | None,
) -> dict:
    """The run's description that stats.json carries beside its counts."""
    return {
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
        "runner": _runner(options),
        "expected_workers": _expected_workers(options),
        "started_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


def run_config(config: AnnotateConfig, beam_args: Sequence[str]) -> dict:
    """Runs the job to completion and returns its stats document (also in stats.json)."""
    inputs = expand_inputs(list(config.inputs))
    options = PipelineOptions(list(beam_args))
    runner = _runner(options)
    local = runner in ("DirectRunner", "direct", "DirectRunner()")
    engine_path, engine_name = config.engine.path, None
    if local:  # the workers are this machine: check the engine before starting anything
        engine_path = find_engine(engine_path)
        engine_name = uci_name(engine_path)
    resume = prepare_output(config, run_identity(config, inputs, engine_name))
    static = _static_stats(config, inputs, options, engine_path, engine_name)
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
