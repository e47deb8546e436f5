"""The Lichess evaluation database -> annotated-board Parquet (schema v2, `source` lichess-evals).

    python -m pipeline.lichess_evals.import_lichess_evals --input lichess_db_eval.jsonl.zst
    --output DIR \\
        [--split train] [--rows-per-shard 1000000] [--max-lines N] [--overwrite] [--workers N]

Input: https://database.lichess.org/#evals (CC0), one JSON object per line,
`{"fen": ..., "evals": [{"pvs": [{"cp"|"mate": ..., "line": "uci uci ..."}, ...],
"knodes": ..., "depth": ...}, ...]}`, zstd-compressed (recognised by its magic bytes; an
uncompressed `.jsonl` works too). It is streamed, never held in memory.

Each line becomes one board row, or one failure row, by `pipeline.lichess_evals.lines` (the
rules are there); boards + failures == lines, and stats.json counts the failures by reason.

Damage: an input that is corrupt or cut short part-way (a download that stopped) keeps every
line before the damage (pipeline/zstd_blocks.py decodes block by block); the line the damage
cut is dropped, the import ends there as finished, and the damage is named in one warning
line, in stats.json's `input_errors` and by an exit status of 1. A file of 0 bytes is an
error, not an empty import: an export holds at least a zstd frame.

Output: `DIR/<split>/boards-SSSSS-of-NNNNN.parquet`, and in `DIR/<split>.meta/`
`failures-SSSSS-of-NNNNN.parquet` (shard i holds the failures of the lines of boards shard i)
and `stats.json` (core/schema.py has the layout). Shards are cut in input order,
`rows_per_shard` boards each (the last one fewer). NNNNN is known only at the end, so while
the import runs each completed part is kept in `DIR/<split>.meta/import/` (its two Parquet
files, each written under a temporary name and renamed, then `part-SSSSS.json` with its line
range and counts, which makes it complete), beside `run.json` (the settings). Once the input
is read, `finished.json` is written, the parts are renamed to their final names, stats.json
is written and `import/` is deleted.

Resume: rerun with the same arguments and the completed parts are kept, their lines skipped
(decompressed and counted, not parsed) and the import goes on from the next line; a rerun
that finds `finished.json` only finishes the renaming. Different settings are an error
(ImportMismatch); `--overwrite` starts over; a finished output is refused unless
`--overwrite`. Paths are local.

Workers: `--workers N` converts the lines in N processes (0: one per CPU), in batches of 2,000
lines, two batches per worker in flight, and takes the results in input order, so the output
(files, part boundaries, stats, failure messages) is the same whatever N; N is therefore not a
setting a resume must match. The workers only convert: reading, writing and every file stay in
this process. A worker that dies (killed, out of memory) ends the import with WorkerDied, the
completed parts kept for a rerun; workers end with a killed import. They are started as
runtime/workers.py says ("spawn"): a program calling `import_lichess_evals` with workers
therefore needs the usual `if __name__ == "__main__":` guard.

`import_lichess_evals(input_path, output_dir, config)` is the programmatic entry point.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import functools
import itertools
import json
import os
import shutil
import signal
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

from core.schema import SOURCE_LICHESS_EVALS, import_path, stats_path
from pipeline.card import write_card
from pipeline.lichess_evals.convert import WorkerDied, converted_lines
from pipeline.lichess_evals.input import JsonlInput, split_lines
from pipeline.lichess_evals.lines import ENGINE, REASONS, BadLine
from pipeline.lichess_evals.parts import MAX_EXAMPLES, Part, write_json
from pipeline.lichess_evals.settings import (
    DEFAULT_PROGRESS_SECONDS,
    DEFAULT_ROWS_PER_SHARD,
    LichessEvalsConfig,
)
from pipeline.lichess_evals.split_output import (
    FINISHED_FILE,
    RUN_FILE,
    finish,
    import_identity,
    load_parts,
    prepare,
)
from runtime.cli import config_from_args, plain_name
from runtime.interrupts import stop_on_signals
from runtime.outputs import check_dir
from runtime.progress import Progress, format_duration, print_result
from runtime.text_files import InputError

_PROGRESS_EVERY_LINES = 1024  # how often the clock is looked at, not how often it prints
_DEFAULTS = LichessEvalsConfig()


def _until_damage(lines: Iterator[bytes], damage: list[str]) -> Iterator[bytes]:
    """`lines` up to damage to the input (InputError), whose message goes to `damage`."""
    try:
        yield from lines
    except InputError as e:
        damage.append(str(e))


def _read_parts(
    source: JsonlInput,
    import_dir: str,
    config: LichessEvalsConfig,
    done: list[dict[str, Any]],
    input_name: str,
    damage: list[str],
) -> tuple[list[dict[str, Any]], int]:
    """Imports the lines after the completed parts `done`; returns all parts' manifests and
    how many lines this call converted. Damage to the input ends the lines early, its
    message appended to `damage`."""
    parts = list(done)
    skip = parts[-1]["last_line"] if parts else 0
    if skip:
        print(
            f"import: resuming after {len(parts)} completed parts: skipping their {skip:,} lines "
            "(decompressed, not parsed)",
            file=sys.stderr,
            flush=True,
        )
    progress: Progress | None = None
    baseline = 0
    part: Part | None = None
    number = skip
    started = time.monotonic()
    lines: Iterator[tuple[int, bytes]] = enumerate(
        _until_damage(split_lines(source.chunks(), skip), damage), skip + 1
    )
    if config.max_lines is not None:
        lines = itertools.islice(lines, max(config.max_lines - skip, 0))
    with contextlib.closing(converted_lines(lines, config.worker_count)) as converted:
        for number, text, result in converted:
            if progress is None:  # after the skipped lines: the rate counts this run's work
                progress = Progress(
                    "import", source.size, "MB", config.progress_seconds, scale=1e-6
                )
                baseline = source.position
                started = time.monotonic()
            if part is None:
                part = Part(import_dir, len(parts), number, input_name)
            if isinstance(result, BadLine):
                part.add_failure(result, number, text)
            else:
                part.add_board(result)
            if part.counts["boards"] == config.rows_per_shard:
                parts.append(part.commit(number))
                part = None
            if not number % _PROGRESS_EVERY_LINES:
                progress.update(source.position, _progress_extra(number - skip, started), baseline)
    if part is not None or not parts:  # the rest, or one empty part for an empty input
        parts.append((part or Part(import_dir, len(parts), number + 1, input_name)).commit(number))
    if progress is not None:
        progress.update(source.position, _progress_extra(number - skip, started), baseline, True)
    return parts, number - skip


def _progress_extra(lines: int, started: float) -> str:
    elapsed = time.monotonic() - started
    rate = lines / elapsed if elapsed > 0 else 0.0
    return f"| {lines:,} lines, {rate:,.0f} lines/s"


def summarize(
    parts: list[dict[str, Any]], identity: dict[str, Any], split_dir: str, run: dict[str, Any]
) -> dict[str, Any]:
    """The stats.json document: the parts' counts added up, with the run's settings."""
    counts: Counter[str] = Counter()
    examples: dict[str, list[str]] = {}
    for manifest in parts:
        counts.update(manifest["counts"])
        for reason, texts in manifest["examples"].items():
            mine = examples.setdefault(reason, [])
            mine.extend(texts[: MAX_EXAMPLES - len(mine)])
    failures = {reason: counts.get(f"failed.{reason}", 0) for reason in REASONS}
    boards = counts.get("boards", 0)
    return {
        "input": identity["input"],
        "input_bytes": identity["input_bytes"],
        "output": split_dir,
        "settings": identity,
        "source": SOURCE_LICHESS_EVALS,
        "engine": ENGINE,
        "lines": parts[-1]["last_line"] if parts else 0,
        "boards": boards,
        "partial_boards": counts.get("partial_boards", 0),
        "complete_boards": boards - counts.get("partial_boards", 0),
        "action_values": counts.get("action_values", 0),
        "failures": {"total": sum(failures.values()), "by_reason": failures},
        "duplicate_pv_moves": counts.get("duplicate_pv_moves", 0),
        "best_pv_not_first": counts.get("best_pv_not_first", 0),
        "examples": examples,
        "shards": len(parts),
        **run,
    }


def import_lichess_evals(
    input_path: str, output_dir: str, config: LichessEvalsConfig = _DEFAULTS
) -> dict[str, Any]:
    """Imports `input_path` into `output_dir/<config.split>/`; returns the stats.json document.

    Raises InputError (naming the file) for an unreadable input, ImportMismatch or
    FileExistsError as described in the module doc.
    """
    began = time.monotonic()
    if not os.path.isfile(input_path):
        raise InputError(input_path, "no such file")
    if os.path.getsize(input_path) == 0:
        raise InputError(input_path, "empty file (0 bytes): not an evaluations export")
    split_dir = os.path.join(output_dir, config.split)
    import_dir = import_path(split_dir)
    done = prepare(input_path, split_dir, config)
    finished_file = os.path.join(import_dir, FINISHED_FILE)
    converted = 0
    if os.path.exists(finished_file):
        parts = done
        with open(finished_file) as handle:
            damage = json.load(handle).get("input_errors", [])
    else:
        source = JsonlInput(input_path)
        damage = []
        try:
            parts, converted = _read_parts(source, import_dir, config, done, input_path, damage)
        finally:
            source.close()
        if damage:
            print(
                f"WARNING: {damage[0]}; kept the {parts[-1]['last_line']:,} lines before it",
                file=sys.stderr,
                flush=True,
            )
        write_json(finished_file, {"parts": len(parts), "input_errors": damage})
    finish(split_dir, parts)
    elapsed = time.monotonic() - began
    run = {
        "resumed": {"parts": len(done), "lines": done[-1]["last_line"] if done else 0},
        "lines_converted": converted,
        "elapsed_s": round(elapsed, 3),
        "lines_per_s": round(converted / elapsed, 1) if elapsed > 0 else 0.0,
        "workers": config.worker_count,
        "finished_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    document = summarize(parts, import_identity(input_path, config), split_dir, run)
    document["input_errors"] = [{"file": input_path, "error": text} for text in damage]
    write_json(stats_path(split_dir), document)
    os.remove(os.path.join(import_dir, RUN_FILE))  # first: leftovers are then never resumed
    shutil.rmtree(import_dir)
    write_card(output_dir)
    return document


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pipeline.lichess_evals.import_lichess_evals",
        description="Import the Lichess evaluation database as annotated-board Parquet.",
    )
    parser.add_argument("--input", required=True, help="lichess_db_eval.jsonl.zst (or .jsonl)")
    parser.add_argument("--output", required=True, help="output directory (DIR/<split>/...)")
    parser.add_argument(
        "--split", default="train", type=plain_name, help="subdirectory of --output"
    )
    parser.add_argument(
        "--rows-per-shard",
        type=int,
        default=DEFAULT_ROWS_PER_SHARD,
        help="boards per output file (also the unit of resumption)",
    )
    parser.add_argument("--max-lines", type=int, help="read only the first N input lines")
    parser.add_argument("--overwrite", action="store_true", help="delete any earlier output")
    parser.add_argument(
        "--progress-seconds",
        type=float,
        default=DEFAULT_PROGRESS_SECONDS,
        help="seconds between progress lines on stderr",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="processes converting lines (0: one per usable core); any N gives the same output",
    )
    return parser


def _stopped(import_dir: str, signum: int) -> str:
    """Ctrl-C or SIGTERM: the completed parts are on disk already; the line to print."""
    kept = len(load_parts(import_dir, False)) if os.path.isdir(import_dir) else 0
    return (
        f"import: stopped by {signal.Signals(signum).name}; {kept} completed part(s) kept in "
        f"{import_dir}: rerun the same command to resume"
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    import_dir = import_path(os.path.join(args.output, args.split))
    try:
        config = config_from_args(LichessEvalsConfig, args)
        check_dir(args.output, "--output")
        with stop_on_signals(functools.partial(_stopped, import_dir)):
            document = import_lichess_evals(args.input, args.output, config)
    except (OSError, ValueError, WorkerDied) as e:  # InputError, ImportMismatch, ...
        print(f"error: {e}", file=sys.stderr)
        return 1
    print_result(
        f"import: {document['lines']:,} lines -> {document['boards']:,} boards "
        f"({document['partial_boards']:,} partial), {document['failures']['total']:,} failures, "
        f"{document['shards']} shards, {len(document['input_errors'])} input error(s) in "
        f"{format_duration(document['elapsed_s'])}",
        document,
    )
    return 1 if document["input_errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
