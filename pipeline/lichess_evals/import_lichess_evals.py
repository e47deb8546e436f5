"""The Lichess evaluation database -> annotated-board Parquet (schema v2, `source` lichess-evals).

    python -m pipeline.import_lichess_evals --input lichess_db_eval.jsonl.zst --output DIR \\
        [--split train] [--rows-per-shard 1000000] [--max-lines N] [--overwrite] [--workers N]

Input: https://database.lichess.org/#evals (CC0), one JSON object per line,
`{"fen": ..., "evals": [{"pvs": [{"cp"|"mate": ..., "line": "uci uci ..."}, ...],
"knodes": ..., "depth": ...}, ...]}`, zstd-compressed (recognised by its magic bytes; an
uncompressed `.jsonl` works too). It is streamed, never held in memory.

Each line becomes one board row, or one failure row, by `pipeline.lichess_evals` (the rules
are there); boards + failures == lines, and stats.json counts the failures by reason.

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
pipeline/workers.py says ("spawn"): a program calling `import_lichess_evals` with workers
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
from collections import Counter, deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

from core.cli import config_from_args, plain_name
from core.interrupts import stop_on_signals
from core.outputs import check_dir
from core.progress import Progress, format_duration, print_result
from core.schema import (
    BOARDS_PREFIX,
    FAILURES_PREFIX,
    SCHEMA_VERSION,
    SOURCE_LICHESS_EVALS,
    failures_dir,
    import_path,
    local_outputs,
    shard_name,
    stats_path,
)
from core.text_files import InputError
from pipeline.card import write_card
from pipeline.lichess_evals.input import JsonlInput, split_lines
from pipeline.lichess_evals.lines import (
    DEFAULT_FULLMOVE,
    DEFAULT_HALFMOVE,
    ENGINE,
    REASONS,
    BadLine,
    Converted,
    convert_line,
)
from pipeline.lichess_evals.parts import (
    MAX_EXAMPLES,
    PART_MANIFEST,
    part_path,
    write_json,
)
from pipeline.lichess_evals.parts import Part as _Part  # tests patch it here
from pipeline.workers import SPAWN, usable_cores, worker_start

DEFAULT_ROWS_PER_SHARD = 1_000_000
DEFAULT_PROGRESS_SECONDS = 5.0

RUN_FILE = "run.json"
FINISHED_FILE = "finished.json"

_PROGRESS_EVERY_LINES = 1024  # how often the clock is looked at, not how often it prints
# A task is ~0.3 s of a worker's time: long enough that sending it costs little, short enough
# that the lines read ahead (workers * _BATCHES_PER_WORKER batches) take little memory.
_BATCH_LINES = 2000
_BATCHES_PER_WORKER = 2  # one being converted, one waiting, so no worker idles


# --- converting lines ------------------------------------------------------------------------

# A failure as BadLine's arguments: a BadLine does not unpickle (its `args` are the message).
_Failure = tuple[str, str, str | None, str | None]
_Batch = list[tuple[int, bytes]]  # (line number, text)


class WorkerDied(RuntimeError):
    """A worker process ended while converting (killed, out of memory, ...)."""


def _convert(text: bytes) -> Converted | BadLine:
    try:
        return convert_line(text)
    except BadLine as e:
        return e


def _convert_batch(texts: list[bytes]) -> list[Converted | _Failure]:
    """A worker's task: the lines' conversions, in order."""
    results: list[Converted | _Failure] = []
    for text in texts:
        try:
            results.append(convert_line(text))
        except BadLine as e:
            results.append((e.reason, e.detail, e.fen, e.limit))
    return results


def _converted(
    lines: Iterator[tuple[int, bytes]], workers: int
) -> Iterator[tuple[int, bytes, Converted | BadLine]]:
    """`lines` (number, text) with their conversions, in input order, by `workers` processes
    (in this one if 1). Close it to stop the workers: they are not left running."""
    if workers == 1:
        for number, text in lines:
            yield number, text, _convert(text)
        return
    batches: Iterator[_Batch] = iter(lambda: list(itertools.islice(lines, _BATCH_LINES)), [])
    pool = ProcessPoolExecutor(workers, mp_context=SPAWN, initializer=worker_start)
    in_flight: deque[tuple[_Batch, Future[list[Converted | _Failure]]]] = deque()
    try:
        while True:
            # Topped up before the oldest batch is waited for, so the workers never run dry.
            for batch in itertools.islice(batches, workers * _BATCHES_PER_WORKER - len(in_flight)):
                in_flight.append((batch, pool.submit(_convert_batch, [t for _, t in batch])))
            if not in_flight:
                return
            batch, future = in_flight.popleft()
            for (number, text), result in zip(batch, future.result(), strict=True):
                yield number, text, result if isinstance(result, Converted) else BadLine(*result)
    except BrokenProcessPool as e:
        raise WorkerDied(
            "a worker process died while converting lines (killed? out of memory?); the "
            "completed parts are kept: rerun to resume"
        ) from e
    finally:
        pool.shutdown(cancel_futures=True)


# --- the run ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class LichessEvalsConfig:
    """How to import (the command line's options; see `_parser` for each one's meaning)."""

    split: str = "train"
    rows_per_shard: int = DEFAULT_ROWS_PER_SHARD
    max_lines: int | None = None
    overwrite: bool = False
    progress_seconds: float = DEFAULT_PROGRESS_SECONDS
    workers: int = 1

    def __post_init__(self) -> None:
        if self.rows_per_shard < 1:
            raise ValueError(f"--rows-per-shard must be at least 1, got {self.rows_per_shard}")
        if self.max_lines is not None and self.max_lines < 0:
            raise ValueError(f"--max-lines must not be negative, got {self.max_lines}")
        if self.workers < 0:
            raise ValueError(f"--workers must not be negative, got {self.workers}")

    @property
    def worker_count(self) -> int:
        """`workers`, 0 meaning one per core this process may use."""
        return self.workers or usable_cores()


class ImportMismatch(ValueError):
    """The split holds an interrupted import made with other settings."""


# import_identity's keys as the command line spells them, for error messages.
_FLAGS = {
    "input": "--input",
    "input_bytes": "--input (its size)",
    "rows_per_shard": "--rows-per-shard",
    "max_lines": "--max-lines",
}


def import_identity(input_path: str, config: LichessEvalsConfig) -> dict[str, Any]:
    """Everything that decides an import's output: its parts are reused only if this matches.

    (Not `workers`: the output is the same whatever their number.)
    """
    return {
        "format": 1,  # of this module's rows; bump when a change alters them
        "schema_version": SCHEMA_VERSION,
        "input": os.path.abspath(input_path),
        "input_bytes": os.path.getsize(input_path),
        "rows_per_shard": config.rows_per_shard,
        "max_lines": config.max_lines,
        "default_clocks": [DEFAULT_HALFMOVE, DEFAULT_FULLMOVE],
    }


def _load_parts(import_dir: str, finished: bool) -> list[dict[str, Any]]:
    """The manifests of the completed parts, in order: the longest run of consecutive parts
    whose files are there (in `import/`, or already renamed when `finished`)."""
    manifests = []
    for index in itertools.count():
        path = os.path.join(import_dir, PART_MANIFEST.format(index))
        if not os.path.exists(path):
            break
        with open(path) as handle:
            manifest = json.load(handle)
        expected_first = manifests[-1]["last_line"] + 1 if manifests else 1
        present = all(
            os.path.exists(part_path(import_dir, p, index)) or finished
            for p in (BOARDS_PREFIX, FAILURES_PREFIX)
        )
        if manifest["index"] != index or manifest["first_line"] != expected_first or not present:
            break
        manifests.append(manifest)
    return manifests


def _prepare(input_path: str, split_dir: str, config: LichessEvalsConfig) -> list[dict] | None:
    """Readies `split_dir`: returns the completed parts to resume from (possibly none).

    Raises ImportMismatch for an interrupted import with other settings and FileExistsError
    for a finished one, unless `overwrite`, which deletes outputs and parts alike.
    """
    import_dir = import_path(split_dir)
    run_file = os.path.join(import_dir, RUN_FILE)
    identity = import_identity(input_path, config)
    if config.overwrite:
        for path in local_outputs(split_dir):
            if os.path.isdir(path):  # an old layout's _import/
                shutil.rmtree(path)
            else:
                os.remove(path)
        shutil.rmtree(import_dir, ignore_errors=True)
    if os.path.exists(run_file):
        with open(run_file) as handle:
            recorded = json.load(handle)["settings"]
        differences = [
            f"{_FLAGS.get(key, key)} ({json.dumps(recorded.get(key))} then, "
            f"{json.dumps(identity.get(key))} now)"
            for key in sorted(set(recorded) | set(identity))
            if recorded.get(key) != identity.get(key)
        ]
        if differences:
            raise ImportMismatch(
                f"{split_dir} holds an interrupted import made with other settings: "
                f"{'; '.join(differences)}. Rerun with its settings to resume it, or pass "
                "--overwrite to start over"
            )
        finished = os.path.exists(os.path.join(import_dir, FINISHED_FILE))
        parts = _load_parts(import_dir, finished)
        keep = {RUN_FILE, FINISHED_FILE} | {PART_MANIFEST.format(p["index"]) for p in parts}
        keep |= {
            os.path.basename(part_path(import_dir, prefix, p["index"]))
            for p in parts
            for prefix in (BOARDS_PREFIX, FAILURES_PREFIX)
        }
        for name in os.listdir(import_dir):  # a killed part's files, temporary files
            if name not in keep:
                os.remove(os.path.join(import_dir, name))
        return parts
    if os.path.isdir(import_dir):  # a start cut short before run.json was written
        shutil.rmtree(import_dir)
    existing = local_outputs(split_dir)
    if existing:
        raise FileExistsError(
            f"{split_dir} already holds a finished output ({len(existing)} files, e.g. "
            f"{existing[0]}); pass --overwrite to replace it"
        )
    os.makedirs(import_dir, exist_ok=True)
    created = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    write_json(run_file, {"settings": identity, "created_at": created})
    return []


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
    part: _Part | None = None
    number = skip
    started = time.monotonic()
    lines: Iterator[tuple[int, bytes]] = enumerate(
        _until_damage(split_lines(source.chunks(), skip), damage), skip + 1
    )
    if config.max_lines is not None:
        lines = itertools.islice(lines, max(config.max_lines - skip, 0))
    with contextlib.closing(_converted(lines, config.worker_count)) as converted:
        for number, text, result in converted:
            if progress is None:  # after the skipped lines: the rate counts this run's work
                progress = Progress(
                    "import", source.size, "MB", config.progress_seconds, scale=1e-6
                )
                baseline = source.position
                started = time.monotonic()
            if part is None:
                part = _Part(import_dir, len(parts), number, input_name)
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
        parts.append((part or _Part(import_dir, len(parts), number + 1, input_name)).commit(number))
    if progress is not None:
        progress.update(source.position, _progress_extra(number - skip, started), baseline, True)
    return parts, number - skip


def _progress_extra(lines: int, started: float) -> str:
    elapsed = time.monotonic() - started
    rate = lines / elapsed if elapsed > 0 else 0.0
    return f"| {lines:,} lines, {rate:,.0f} lines/s"


def _finish(split_dir: str, parts: list[dict[str, Any]]) -> None:
    """Renames the parts to their final names (a rerun after a crash here goes on renaming)."""
    import_dir = import_path(split_dir)
    os.makedirs(split_dir, exist_ok=True)
    for manifest in parts:
        index = manifest["index"]
        for prefix, directory in (
            (BOARDS_PREFIX, split_dir),
            (FAILURES_PREFIX, failures_dir(split_dir)),
        ):
            final = os.path.join(directory, shard_name(prefix, index, len(parts)))
            part = part_path(import_dir, prefix, index)
            if os.path.exists(part):
                os.replace(part, final)
            elif not os.path.exists(final):
                raise FileNotFoundError(f"{part}: missing, and not renamed to {final} either")


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
    input_path: str, output_dir: str, config: LichessEvalsConfig = LichessEvalsConfig()
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
    done = _prepare(input_path, split_dir, config)
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
    _finish(split_dir, parts)
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
        prog="python -m pipeline.import_lichess_evals",
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
    kept = len(_load_parts(import_dir, False)) if os.path.isdir(import_dir) else 0
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
