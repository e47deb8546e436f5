"""The annotate command's words -> `AnnotateConfig` and Beam's own options.

`python -m pipeline.annotate --help` lists them; options it does not know go to Beam.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from core.engine_settings import EngineLimit
from core.schema import MAX_SHARDS
from pipeline.annotate.journal import JOURNAL_EVERY, JOURNAL_SECONDS
from pipeline.annotate.settings import DEFAULT_LIMIT, AnnotateConfig, EngineConfig
from pipeline.beam.environment import VERBOSE_FLAG, VERBOSE_HELP
from pipeline.beam.portable import DEFAULT_GROUPS, runner_args
from pipeline.labels.action_values import MODES
from runtime.cli import (
    config_from_args,
    int_at_least,
    non_negative_int,
    plain_name,
    positive_float,
    positive_int,
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pipeline.annotate",
        description="Lichess PGN -> deduplicated boards -> Stockfish action values -> Parquet. "
        "Options not listed here go to Beam (e.g. --runner, --direct_num_workers).",
    )
    parser.add_argument(VERBOSE_FLAG, action="store_true", help=VERBOSE_HELP)
    parser.add_argument(
        "inputs",
        nargs="+",
        help="PGN inputs: paths, globs, dirs or URLs "
        "(.pgn, .pgn.zst, .pgn.gz; local, gs://, s3://, http(s)://)",
    )
    parser.add_argument("--out", required=True, help="output root (any Beam filesystem)")
    parser.add_argument(
        "--split",
        default="train",
        type=plain_name,
        help="subdirectory of --out, a plain name (default train)",
    )
    _add_engine_options(parser)
    _add_sampling_options(parser)
    _add_output_options(parser)
    return parser


def _add_engine_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--limit",
        default=DEFAULT_LIMIT,
        type=EngineLimit.parse,
        help="each search's limit: nodes=N (reproducible) or time=SECONDS "
        f"(the paper: time=0.05); default {DEFAULT_LIMIT}",
    )
    parser.add_argument(
        "--mode",
        choices=MODES,
        default="action-values",
        help="action-values: every legal move searched alone under --limit (full AV rows, "
        "the default); search: one unrestricted search per board (state value, best move, "
        "and the --multipv best moves' values as a partial row), 1/32 of the nodes at the "
        "same --limit",
    )
    parser.add_argument(
        "--multipv",
        type=positive_int,
        default=1,
        help="--mode search: the K best lines whose first moves are valued (default 1)",
    )
    parser.add_argument(
        "--engine",
        default=None,
        help="UCI engine path on the workers (default: $STOCKFISH, PATH, /usr/games/stockfish)",
    )
    parser.add_argument(
        "--threads",
        type=positive_int,
        default=1,
        help="engine threads per worker (1 keeps nodes= runs reproducible)",
    )
    parser.add_argument(
        "--hash", type=positive_int, default=16, dest="hash_mb", help="engine hash, MB"
    )
    parser.add_argument(
        "--engine-timeout",
        type=positive_float,
        default=None,
        help="seconds an engine may stay silent mid-search before it is "
        "killed and restarted (default: from the limit)",
    )
    parser.add_argument(
        "--retries",
        type=non_negative_int,
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
        type=positive_int,
        default=None,
        help="keep at most N valid games: those with the smallest sample hash",
    )
    parser.add_argument(
        "--allow-setup",
        action="store_true",
        help="also use games that start from a set-up position (FEN header)",
    )
    parser.add_argument(
        "--random-move",
        type=float,
        default=0.0,
        dest="random_move_rate",
        metavar="RATE",
        help="replace this share of the boards by the board after one random legal move "
        "(chosen by a hash of the board and --seed): positions after a mistake, whose label "
        "is the move that punishes it, as in puzzles (default 0)",
    )


def _add_output_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--num-shards",
        type=int_at_least(1, MAX_SHARDS),
        default=1,
        help=f"board shards to write (at most {MAX_SHARDS:,})",
    )
    parser.add_argument(
        "--groups",
        type=positive_int,
        default=DEFAULT_GROUPS,
        help="work units the games and boards are spread over, the unit a worker takes "
        f"(default {DEFAULT_GROUPS}; on a big cluster a few per engine)",
    )
    parser.add_argument(
        "--exclude",
        nargs="+",
        action="extend",
        default=[],
        metavar="PATH",
        help="evaluation sets never to train on: Lichess puzzle CSVs (.csv, .csv.zst: the "
        "positions after Moves[0]) and EPD files; boards of those positions are dropped and "
        "counted in stats.json (excluded)",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace shards and stats already in <out>/<split>, and delete an interrupted "
        "run's journal there instead of resuming it",
    )
    parser.add_argument(
        "--journal-every",
        type=non_negative_int,
        default=JOURNAL_EVERY,
        help="annotated boards per journal part in <out>/<split>.meta/journal (a part is also "
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
        type=positive_float,
        default=30.0,
        help="seconds between progress lines from each annotation worker",
    )


def parse_args(argv: Sequence[str]) -> tuple[AnnotateConfig, list[str]]:
    """Command-line words -> (config, Beam's own options)."""
    args, beam_args = _parser().parse_known_args(list(argv))
    if not 0 < args.sample_rate <= 1:
        raise SystemExit(f"--sample-rate must be in (0, 1], got {args.sample_rate}")
    if not 0 <= args.random_move_rate <= 1:
        raise SystemExit(f"--random-move must be in [0, 1], got {args.random_move_rate}")
    if args.multipv != 1 and args.mode != "search":
        raise SystemExit("--multipv is for --mode search (action-values values every move)")
    config = config_from_args(
        AnnotateConfig,
        args,
        inputs=tuple(args.inputs),
        engine=EngineConfig(
            path=args.engine,
            threads=args.threads,
            hash_mb=args.hash_mb,
            timeout=args.engine_timeout,
            retries=args.retries,
        ),
        exclude=tuple(args.exclude),
    )
    beam_args = runner_args(beam_args)
    if not any(a.startswith("--default_sdk_harness_log_level") for a in beam_args):
        # Worker processes log every gRPC channel at INFO; progress lines are what matter.
        beam_args.append("--default_sdk_harness_log_level=WARNING")
    return config, beam_args
