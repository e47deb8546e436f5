"""Readying and finishing the Lichess evaluations import's split (import_lichess_evals.py beside
it): a fresh import, the resumption of an interrupted one from its completed parts, or a refusal;
at the end, the parts renamed to their final names."""

from __future__ import annotations

import datetime
import itertools
import json
import os
import shutil
from typing import Any

from core.schema import (
    BOARDS_PREFIX,
    FAILURES_PREFIX,
    SCHEMA_VERSION,
    failures_dir,
    import_path,
    local_outputs,
    shard_name,
)
from pipeline.lichess_evals.lines import DEFAULT_FULLMOVE, DEFAULT_HALFMOVE
from pipeline.lichess_evals.parts import PART_MANIFEST, part_path, write_json
from pipeline.lichess_evals.settings import LichessEvalsConfig

RUN_FILE = "run.json"
FINISHED_FILE = "finished.json"


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
        "format": 1,  # of the import's rows; bump when a change alters them
        "schema_version": SCHEMA_VERSION,
        "input": os.path.abspath(input_path),
        "input_bytes": os.path.getsize(input_path),
        "rows_per_shard": config.rows_per_shard,
        "max_lines": config.max_lines,
        "default_clocks": [DEFAULT_HALFMOVE, DEFAULT_FULLMOVE],
    }


def load_parts(import_dir: str, finished: bool) -> list[dict[str, Any]]:
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


def prepare(input_path: str, split_dir: str, config: LichessEvalsConfig) -> list[dict] | None:
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
        parts = load_parts(import_dir, finished)
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


def finish(split_dir: str, parts: list[dict[str, Any]]) -> None:
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
