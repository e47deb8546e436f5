"""Run statistics: counted inside the pipeline, merged by a CombineFn, written as stats.json.

Each DoFn counts into a `BundleStats` and emits it as a `(STATS_TAG, counts)` output at the
end of each `process` call (outputs from `finish_bundle` are lost on the DaskRunner, see
pipeline/beam/portable.py); the DoFns that see many small elements take them in groups, so this is
a few records per group, not one per game. Every count is also a Beam metric (namespace
`searchless_chess`), so a runner's UI shows them while the job runs. Counting inside the
pipeline rather than reading metrics afterwards makes stats.json the same on every runner.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics

from pipeline.beam.portable import singleton, tagged
from runtime.outputs import writing

METRICS_NAMESPACE = "searchless_chess"
STATS_TAG = "stats"
MAX_EXAMPLES = 5  # per reason: enough to find the bad records, small enough to read


def empty() -> dict[str, Any]:
    return {
        "counts": {},
        "examples": {},
        "input_errors": [],
        "workers": {},
        "engines": [],
        "engine_paths": [],
    }


def merge(into: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    """Adds `other` into `into` (mutating and returning it). Order-independent."""
    counts = Counter(into["counts"])
    counts.update(other["counts"])
    into["counts"] = dict(counts)
    for reason, texts in other["examples"].items():
        merged = sorted(set(into["examples"].get(reason, [])) | set(texts))
        into["examples"][reason] = merged[:MAX_EXAMPLES]
    into["input_errors"] = sorted(
        into["input_errors"] + other["input_errors"], key=lambda e: (e["file"], e["error"])
    )
    for key, worker in other["workers"].items():
        mine = into["workers"].get(key)
        if mine is None:
            into["workers"][key] = dict(worker, engine_pids=list(worker["engine_pids"]))
            continue
        mine["engine_pids"] = sorted(set(mine["engine_pids"]) | set(worker["engine_pids"]))
        mine["first_board_at"] = min(mine["first_board_at"], worker["first_board_at"])
        mine["last_board_at"] = max(mine["last_board_at"], worker["last_board_at"])
        mine["boards"] += worker["boards"]
        mine["action_values"] += worker["action_values"]
        mine["busy_s"] += worker["busy_s"]
    into["engines"] = sorted(set(into["engines"]) | set(other["engines"]))
    into["engine_paths"] = sorted(set(into["engine_paths"]) | set(other.get("engine_paths", [])))
    return into


class MergeStats(beam.CombineFn):
    def create_accumulator(self) -> dict[str, Any]:
        return empty()

    def add_input(self, accumulator, element):
        return merge(accumulator, element)

    def merge_accumulators(self, accumulators):
        result = empty()
        for accumulator in accumulators:
            merge(result, accumulator)
        return result

    def extract_output(self, accumulator):
        return accumulator


class BundleStats:
    """Counts of one DoFn since its last `emit`, mirrored into Beam metrics as they happen."""

    def __init__(self) -> None:
        self.partial = empty()
        self._counters: dict[str, Any] = {}

    def count(self, key: str, n: int = 1) -> None:
        if n == 0:
            return
        self.partial["counts"][key] = self.partial["counts"].get(key, 0) + n
        counter = self._counters.get(key)
        if counter is None:
            counter = self._counters[key] = Metrics.counter(METRICS_NAMESPACE, key)
        counter.inc(n)

    def example(self, key: str, text: str) -> None:
        texts = self.partial["examples"].setdefault(key, [])
        if len(texts) < MAX_EXAMPLES:
            texts.append(text[:300])

    def input_error(self, path: str, error: str) -> None:
        self.partial["input_errors"].append({"file": path, "error": error})

    def emit(self) -> tuple[str, dict[str, Any]]:
        """The counts so far as a `(STATS_TAG, counts)` output of `process` (then starts over)."""
        partial, self.partial = self.partial, empty()
        return tagged(STATS_TAG, partial)


def written(kind: str, rows: int) -> dict[str, Any]:
    """One shard written, as counts (`written.<kind>.rows`, `.files`), merged with the job's
    other stats so that the last step can compare rows written with rows counted."""
    partial = empty()
    partial["counts"] = {f"written.{kind}.rows": rows, f"written.{kind}.files": 1}
    return partial


def check_written(merged: dict[str, Any], expected: dict[str, tuple[int, int]], path: str):
    """Raises RowsLost unless, for each kind, the rows and files written (`written`) are the
    (rows, files) expected; `path` is the stats file that is then not written."""
    c = merged["counts"]
    for kind, (rows, files) in expected.items():
        got_rows, got_files = c.get(f"written.{kind}.rows", 0), c.get(f"written.{kind}.files", 0)
        if (got_rows, got_files) != (rows, files):
            raise RowsLost(
                f"{kind}: {rows:,} rows counted in {files} shard(s) but {got_rows:,} written in "
                f"{got_files}; the runner lost or repeated work, so {path} was not written "
                "(rerun the command)"
            )


class RowsLost(RuntimeError):
    """The rows written are not the rows a job counted: a runner lost or repeated work."""


def merge_all(collections: list, label: str = "MergeStats"):
    """The stats outputs of every stage -> one merged stats element."""
    return singleton(tuple(collections) | f"{label}.All" >> beam.Flatten(), label, MergeStats())


def _engine(described: dict[str, Any] | None, partial: dict[str, Any]) -> dict[str, Any] | None:
    """The run's engine settings, with the name and path the workers reported where the
    launcher could not know them (workers elsewhere, as on Dask): one value, or several
    joined by "; " if the workers differ."""
    if described is None:
        return None
    engine = dict(described)
    for key, reported in (("name", partial["engines"]), ("path", partial["engine_paths"])):
        if engine.get(key) is None and reported:
            engine[key] = "; ".join(sorted(reported))
    return engine


def summarize(partial: dict[str, Any], static: dict[str, Any]) -> dict[str, Any]:
    """The stats.json document from the merged counts and the run's fixed settings."""
    c = partial["counts"]
    skipped = {k.split(".", 1)[1]: v for k, v in sorted(c.items()) if k.startswith("skipped.")}
    workers = sorted(partial["workers"].values(), key=lambda w: w["first_board_at"])
    return {
        **static,
        "engine": _engine(static.get("engine"), partial),
        "games": {
            "read": c.get("games_read", 0),
            "inputs_without_games": c.get("inputs_without_games", 0),
            "not_sampled": c.get("games_not_sampled", 0),
            "skipped": skipped,
            "skipped_total": sum(skipped.values()),
            "over_max_games": c.get("games_over_max", 0),
            "used": c.get("games_used", 0),
        },
        "garbage_blocks": c.get("garbage_blocks", 0),
        "boards": {
            "total": c.get("boards", 0),
            "unique": c.get("unique_boards", 0),
            "no_legal_moves": c.get("no_legal_moves", 0),
            # Occurrences replaced by the board after a random move (--random-move).
            "after_random_move": c.get("random_move_boards", 0),
            "annotated": c.get("annotated", 0),
            "failed": c.get("failed", 0),
        },
        # Boards taken from an interrupted run's journal instead of the engine; they are in
        # boards.unique and action_values above, not in boards.annotated or nodes_searched.
        "resumed": {
            "boards": c.get("resumed", 0),
            "action_values": c.get("resumed_action_values", 0),
            "journal_parts": c.get("journal_parts", 0),
            "journal_parts_unreadable": c.get("journal_parts_unreadable", 0),
            "journal_rows_unused": c.get("journal_rows_unused", 0),
        },
        # Evaluation positions (--exclude) dropped before annotation: distinct boards, and
        # their occurrences in the used games; neither is in boards.unique or boards.total.
        "excluded": {
            "boards": c.get("excluded", 0),
            "occurrences": c.get("excluded_occurrences", 0),
        },
        "action_values": c.get("action_values", 0),
        "nodes_searched": c.get("nodes", 0),
        "engine_restarts": c.get("engine_restarts", 0),
        "engine_names": partial["engines"],
        "input_errors": partial["input_errors"],
        "examples": partial["examples"],
        "workers": workers,
    }


def write_json(path: str, document: dict[str, Any]) -> None:
    """Writes JSON through Beam's filesystems (local, gs://, ...) via a temporary name."""
    temporary = path + ".tmp"
    with writing(path), FileSystems.create(temporary) as handle:
        handle.write(json.dumps(document, indent=2, sort_keys=False).encode() + b"\n")
    if FileSystems.exists(path):
        FileSystems.delete([path])
    FileSystems.rename([temporary], [path])


def read_json(path: str) -> dict[str, Any]:
    with FileSystems.open(path) as handle:
        return json.loads(handle.read().decode())
