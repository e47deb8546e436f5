"""One job at a time per output split: runtime.dir_lock's lock on `<split>.meta/lock`, held while
the job runs (beside the split, so that readers of the split folder never meet it)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from core.schema import lock_path
from runtime.dir_lock import DirectoryBusy, dir_lock

SplitBusy = DirectoryBusy  # another process holds the split's lock


@contextlib.contextmanager
def split_lock(split_dir: str, job: str) -> Iterator[None]:
    """Holds `split_dir`'s lock for the block (creating its meta folder); SplitBusy, naming the
    holder, if another process holds it. `job` is written into the file for that message."""
    with dir_lock(split_dir, lock_path(split_dir), job):
        yield
