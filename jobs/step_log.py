"""Reusing finished steps of a multi-step job (`make demo`, `make cpu-model`), and the annotate
step both jobs share.

A step records a fingerprint of what it was computed from in `steps.json`; a rerun whose
fingerprint matches (and whose outputs still exist) reuses the step instead of redoing it.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
from collections.abc import Callable

from core.schema import find_stats, stats_path


class StepLog:
    """`steps.json`: each finished step's fingerprint (what it was computed from)."""

    def __init__(self, path: pathlib.Path):
        self.path = path
        self.done: dict[str, str] = json.loads(path.read_text()) if path.exists() else {}

    def finished(self, name: str, fingerprint: str, outputs: list[pathlib.Path]) -> bool:
        return self.done.get(name) == fingerprint and all(p.exists() for p in outputs)

    def reload(self) -> None:
        """Takes in what another process of the same job marked since this log was read."""
        if self.path.exists():
            self.done |= json.loads(self.path.read_text())

    def mark(self, name: str, fingerprint: str) -> None:
        # Merged into the file as it is now: another process of the same job (a step run on
        # its own beside it) may have marked steps since this log was read.
        on_disk = json.loads(self.path.read_text()) if self.path.exists() else {}
        self.done = on_disk | self.done | {name: fingerprint}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(self.done, indent=2) + "\n")
        tmp.replace(self.path)  # never a half-written file for the other process to read


# Where this checkout is: the same computation in another checkout (a clone, a worktree) names
# the repository's own files (the bundled puzzles) by another absolute path, and must still be
# recognised as finished rather than redone.
REPO = str(pathlib.Path(__file__).resolve().parents[1])


def fingerprint(*parts) -> str:
    """A digest of JSON-able parts and of the contents of any file paths among them; paths inside
    this checkout count by their place in it, not by where the checkout is."""
    digest = hashlib.sha256()
    for part in parts:
        text = json.dumps(part, sort_keys=True, default=str).replace(REPO + os.sep, "<repo>/")
        digest.update(text.encode())
        if isinstance(part, str) and os.path.isfile(part):
            digest.update(pathlib.Path(part).read_bytes())
    return digest.hexdigest()[:16]


def annotate_step(
    steps: StepLog,
    split: str,
    split_dir: pathlib.Path,
    argv: list[str],
    key: str,
    say: Callable[[str], None],
) -> dict:
    """A split annotated as a reusable step, `pipeline.annotate` run with `argv` unless the
    step is finished with `key`; an interrupted run resumes from its journal, one made from
    other inputs is started over. Returns the split's stats.json document."""
    stats_file = pathlib.Path(find_stats(str(split_dir)) or stats_path(str(split_dir)))
    if steps.finished(f"annotate-{split}", key, [stats_file]):
        say(f"reusing {split_dir}")
    else:
        # Beam loads only when a step is run, not when every step is reused.
        from pipeline.annotate.annotate import run_as_command
        from pipeline.annotate.split_output import JournalMismatch

        say(" ".join(argv))
        try:
            run_as_command(argv)
        except (FileExistsError, JournalMismatch) as e:
            say(f"starting over ({e})")
            run_as_command([*argv, "--overwrite"])
        steps.mark(f"annotate-{split}", key)
        stats_file = pathlib.Path(stats_path(str(split_dir)))
    return json.loads(stats_file.read_text())
