"""One job at a time per output split: an OS lock on `<split>.meta/lock`, held while the job
runs (beside the split, so that readers of the split folder never meet it).

`flock` on a file this process keeps open: the kernel releases it when the process ends, however
it ends (SIGKILL included), so it cannot go stale as a pid file can. The launching process
takes it; Beam's worker processes and engines do not inherit it (Python opens files
non-inheritable). The file is deleted on release, while still locked; a process that opened it
just before then finds, once it holds the lock, that its file is no longer the one at the path,
and tries again. A file left by a killed run is simply locked again by the next one. Only local
paths can be locked: on object stores (gs://, s3://) there is no such lock and none is taken.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator

from core.schema import lock_path, meta_dir


class SplitBusy(RuntimeError):
    """Another process holds the split's lock."""


def _is_local(path: str) -> bool:
    return "://" not in path


def _acquire(path: str) -> int:
    """An open descriptor of `path` holding its exclusive lock; SplitBusy when taken."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip()
            os.close(fd)
            raise SplitBusy(holder) from None
        try:
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)  # the lock of a file its holder deleted on release: take the new one


@contextlib.contextmanager
def split_lock(split_dir: str, job: str) -> Iterator[None]:
    """Holds `split_dir`'s lock for the block (creating its meta folder); SplitBusy, naming the
    holder, if another process holds it. `job` is written into the file for that message."""
    if not _is_local(split_dir):
        yield
        return
    os.makedirs(meta_dir(split_dir), exist_ok=True)
    path = lock_path(split_dir)
    try:
        fd = _acquire(path)
    except SplitBusy as e:
        raise SplitBusy(
            f"{split_dir} is being written by another run ({e or 'holder unknown'}, holding "
            f"{path}); wait for it to end or stop it"
        ) from None
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{job} pid {os.getpid()}\n".encode(), 0)
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):  # the directory deleted under the job
            os.unlink(path)
        os.close(fd)
