"""Readying a split's output directory: a fresh run, the resumption of an interrupted one,
or a refusal.

A run is identified by everything that decides its rows (`annotate_identity`), recorded in the
journal's run.json when the run starts; a rerun resumes the journal only when it matches.
"""

from __future__ import annotations

import datetime
import json
import sys

from apache_beam.io.filesystems import FileSystems

from core.schema import JOURNAL_RUN_FILE, SCHEMA_VERSION
from pipeline.annotate.journal import delete_journal, list_journal_parts
from pipeline.annotate.settings import AnnotateConfig
from pipeline.beam import stats
from pipeline.beam.shards import clear_outputs, list_files


class JournalMismatch(ValueError):
    """The split holds an interrupted run's journal made with other settings."""


def annotate_identity(config: AnnotateConfig, inputs: list[str], engine: str | None = None) -> dict:
    """Everything that decides a run's rows: a journal is reused only when this matches.

    `engine` is the engine's UCI name with its version (None where the launcher cannot run
    the workers' engine, on a cluster), so a journal is never finished by another engine."""
    return {
        "schema_version": SCHEMA_VERSION,
        "engine": engine,
        "limit": config.row_limit,  # the mode too: a search-mode journal is not full values
        "engine_threads": config.engine.threads,
        "engine_hash_mb": config.engine.hash_mb,
        "sample_rate": config.sample_rate,
        "seed": config.seed,
        "max_games": config.max_games,
        "allow_setup": config.allow_setup,
        "random_move_rate": config.random_move_rate,
        "inputs": list(inputs),
    }


# annotate_identity's keys as the command line spells them, for error messages.
_IDENTITY_FLAGS = {
    "engine": "--engine (its name)",
    "limit": "--limit",  # its value shows --mode and --multipv too
    "engine_threads": "--threads",
    "engine_hash_mb": "--hash",
    "sample_rate": "--sample-rate",
    "seed": "--seed",
    "max_games": "--max-games",
    "allow_setup": "--allow-setup",
    "random_move_rate": "--random-move",
}


def _short(value) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _differences(old: dict, new: dict) -> list[str]:
    """One phrase per setting that differs between the journal's run and this one."""
    phrases = []
    for key in sorted(set(old) | set(new)):
        was, now = old.get(key, "(absent)"), new.get(key, "(absent)")
        if was == now:
            continue
        name = _IDENTITY_FLAGS.get(key, key)
        if isinstance(was, list) and isinstance(now, list):
            gone, added = [x for x in was if x not in now], [x for x in now if x not in was]
            detail = f"{len(was)} in the journal's run, {len(now)} now"
            if gone:
                detail += f"; not given now: {_short(gone)}"
            if added:
                detail += f"; new: {_short(added)}"
            phrases.append(f"{name} ({detail})")
        else:
            phrases.append(f"{name} ({_short(was)} in the journal's run, {_short(now)} now)")
    return phrases


def prepare_output(config: AnnotateConfig, identity: dict) -> list[str] | None:
    """Readies the split directory; returns the journal parts to resume from, or None for a
    fresh run.

    An interrupted run's journal (its run.json) with the same settings is resumed and its
    partial outputs deleted; with other settings it is an error naming them. A completed
    run's outputs are refused. `--overwrite` deletes outputs and journal alike. A journal
    without run.json (a start or a cleanup cut short) cannot be checked and is discarded.
    A fresh run (unless `journal_every` is 0) starts by writing run.json.
    """
    split_dir, journal = config.split_dir, config.journal_dir
    journaled = list_files(journal)
    run_file = FileSystems.join(journal, JOURNAL_RUN_FILE)
    resume = None
    if not config.overwrite and FileSystems.exists(run_file):
        try:
            recorded = stats.read_json(run_file)["run"]
        except Exception as e:  # noqa: BLE001 - missing, cut short or not ours: same advice
            raise JournalMismatch(
                f"{run_file} is not a readable run description ({type(e).__name__}: {e}); "
                "pass --overwrite to delete the journal and start over"
            ) from None
        differences = _differences(recorded, json.loads(json.dumps(identity)))
        if differences:
            raise JournalMismatch(
                f"{split_dir} holds an interrupted run made with other settings: "
                f"{'; '.join(differences)}. Rerun with its settings to resume it, or pass "
                "--overwrite to delete its journal and start over"
            )
        resume = list_journal_parts(journal)
    # An interrupted run's partial outputs are replaced as it resumes; a finished run's only
    # with --overwrite.
    clear_outputs(split_dir, overwrite=config.overwrite or resume is not None)
    if resume is None:
        if journaled:
            if not config.overwrite:
                print(f"WARNING: discarding {journal}: no {JOURNAL_RUN_FILE}", file=sys.stderr)
            delete_journal(journal)
        if config.journal_every > 0:
            created = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
            stats.write_json(run_file, {"run": identity, "created_at": created})
    return resume
