"""One writer at a time per output directory (an annotated split, a training run): an OS lock
on a lock file, held while the job runs.

`flock` on a file this process keeps open: the kernel releases it when the process ends, however
it ends (SIGKILL included), so a lock is never held by a dead process as a pid file can be. The
file names its holder (`<job> pid <pid> on <host>`) for the refusal of a second writer, which
touches nothing else. The launching process takes it; Beam's worker processes and engines do not
inherit it (Python opens files non-inheritable). The file is deleted on release, while still
locked; a process that opened it just before then finds, once it holds the lock, that its file is
no longer the one at the path, and tries again. A file left behind by a killed holder is taken
over by the next writer, with a warning naming the dead holder. Only local paths can be locked:
on object stores (gs://, s3://) there is no such lock and none is taken.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import sys
from collections.abc import Callable, Iterator


class DirectoryBusy(RuntimeError):
    """Another process holds the directory's lock; the message names it."""


class LockFileUnusable(DirectoryBusy):
    """The lock file cannot be opened (a directory in its place, no permission): the
    directory cannot be claimed, so the command stops as when it is busy; the message says
    why and what to do."""


def _is_local(path: str) -> bool:
    return "://" not in path


def _warn(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _shown(text: str) -> str:
    """What a lock file said, safe to print: a file with control bytes (not one this module
    wrote) is shown escaped, never sent raw to the terminal."""
    return text if text.isprintable() else repr(text)


def holder_text(job: str) -> str:
    """What a lock file says about the process holding it."""
    return f"{job} pid {os.getpid()} on {socket.gethostname()}"


def _acquire(path: str) -> tuple[int, str]:
    """(an open descriptor of `path` holding its exclusive lock, what the file said: the
    holder that left it, "" for a fresh file); DirectoryBusy(holder) when it is taken."""
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except IsADirectoryError:
            raise LockFileUnusable(f"{path} is a directory, not a lock file; remove it") from None
        except OSError as e:
            raise LockFileUnusable(f"{path} cannot be opened: {e.strerror or e}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 256, 0).decode(errors="replace").strip()
            os.close(fd)
            raise DirectoryBusy(_shown(holder)) from None
        try:
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                return fd, _shown(os.pread(fd, 256, 0).decode(errors="replace").strip())
        except FileNotFoundError:
            pass
        os.close(fd)  # the lock of a file its holder deleted on release: take the new one


@contextlib.contextmanager
def dir_lock(
    directory: str, lock_file: str, job: str, warn: Callable[[str], None] = _warn
) -> Iterator[None]:
    """Holds `lock_file` (creating its directory) for the block, the lock of writing
    `directory`; DirectoryBusy, one line naming the holder (job, pid, host), if another
    process holds it. A file left by a holder that died is taken over, `warn` saying so."""
    if not _is_local(directory):
        yield
        return
    os.makedirs(os.path.dirname(os.path.abspath(lock_file)), exist_ok=True)
    try:
        fd, left = _acquire(lock_file)
    except LockFileUnusable as e:
        raise LockFileUnusable(f"{directory} cannot be locked: {e}") from None
    except DirectoryBusy as e:
        raise DirectoryBusy(
            f"{directory} is being written by another run ({e or 'holder unknown'}, holding "
            f"{lock_file}); wait for it to end or stop it"
        ) from None
    try:
        if left:
            warn(
                f"warning: taking over {lock_file}, left by {left}, which ended without "
                "releasing it"
            )
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{holder_text(job)}\n".encode(), 0)
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):  # the directory deleted under the job
            os.unlink(lock_file)
        os.close(fd)
