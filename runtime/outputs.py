"""What a command writes: checked writable before any work, and a full disk said in one line.

Evaluations run for hours and pipelines longer: an output that cannot be written must stop
the command at its start, not lose its results at the end. `check_file` and `check_dir` are
called before any work with each output a command will write; they create nothing, and
raise `OutputError`, one line naming the option and the path.

A full disk (ENOSPC) while writing is not a bug of the command: `disk_full` finds it in an
exception (also where a library wrapped or re-raised it as something else) so that the command
says which file and that rerunning continues, in one line, instead of a traceback.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import sys
import tempfile
from collections.abc import Iterator


class OutputError(OSError):
    """An output that cannot be written; its message is the whole line to print."""

    def __str__(self) -> str:
        return self.args[0] if self.args else ""


def _is_local(path: str) -> bool:
    return "://" not in path  # gs://, s3://: checked by the job that writes there


def _reason(e: OSError) -> str:
    return e.strerror or str(e)


def _writable_dir(directory: str, option: str, path: str) -> None:
    """That files can be made in `directory`, or, where it does not exist yet, in the
    nearest directory above it (where the command will make it): nothing is left behind."""
    existing = os.path.abspath(directory)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise OutputError(f"{option} {path} cannot be written: {existing} is not a directory")
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as e:
        raise OutputError(f"{option} {path} cannot be written: {_reason(e)}") from None


def check_dir(path: str, option: str = "--out") -> None:
    """That the command can write directory `path` (made later if missing); OutputError if
    not. Creates nothing."""
    if path and _is_local(path):
        _writable_dir(path, option, path)


def folder_bytes(path: str) -> int:
    """The bytes of every file under `path`."""
    return sum(
        os.path.getsize(os.path.join(where, name))
        for where, _, names in os.walk(path)
        for name in names
    )


def check_file(path: str, option: str = "--out") -> None:
    """That the command can write file `path` (its directory made later if missing; an
    existing file opened for writing but left as it is); OutputError if not. Creates
    nothing."""
    if not path or not _is_local(path):
        return
    if os.path.isdir(path):
        raise OutputError(f"{option} {path} cannot be written: it is a directory")
    if not os.path.exists(path):
        _writable_dir(os.path.dirname(os.path.abspath(path)), option, path)
        return
    try:
        with open(path, "r+b"):  # write access, without truncating what is there
            pass
    except OSError as e:
        raise OutputError(f"{option} {path} cannot be written: {_reason(e)}") from None


# --- a full disk --------------------------------------------------------------------------

_NO_SPACE = os.strerror(errno.ENOSPC)  # "No space left on device"
_FILE_IN_MESSAGE = re.compile(r"\[Errno 28\] [^:]*: '([^']+)'")


def _chain(e: BaseException):
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        yield e
        e = e.__cause__ or e.__context__


def _says_disk_full(text: str) -> bool:
    # tensorstore (orbax's array writer) says "[os_error_code='28']"
    return "[Errno 28]" in text or _NO_SPACE in text or "os_error_code='28'" in text


def disk_full(e: BaseException) -> OSError | None:
    """The ENOSPC OSError in `e`'s chain of causes, or None. Beam re-raises a worker's error
    as another exception carrying its text: one saying "[Errno 28]" counts too (an OSError
    is made of its text, the file taken from it when it names one)."""
    for link in _chain(e):
        if isinstance(link, OSError) and link.errno == errno.ENOSPC:
            return link
    for link in _chain(e):
        text = str(link)
        if _says_disk_full(text):
            found = _FILE_IN_MESSAGE.search(text)
            return OSError(errno.ENOSPC, _NO_SPACE, found.group(1) if found else None)
    return None


def disk_full_line(error: OSError, fallback: str, resume: str) -> str:
    """The one line for a full disk: the file being written (`fallback`, e.g. the output
    directory, when the error does not name one), and `resume`, what rerunning does."""
    where = error.filename or fallback
    return f"error: no space left on device writing {where}; free some space: {resume}"


@contextlib.contextmanager
def writing(path: str) -> Iterator[None]:
    """Names `path` in a full disk's error raised within the block: a write's OSError
    names no file, and the one line must say which."""
    try:
        yield
    except Exception as e:
        full = disk_full(e)
        if full is None or full.filename:
            raise
        raise OSError(errno.ENOSPC, _NO_SPACE, path) from e


class _DiskFullNoise(logging.Filter):
    """Drops log records of a full disk and, once one came, the errors that follow from it
    (a library's threads each logging their failed write with its traceback)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = False

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            text += str(record.exc_info[1])
        if _says_disk_full(text):
            self.seen = True
            return False
        return not (self.seen and record.levelno >= logging.ERROR)


@contextlib.contextmanager
def quiet_disk_full(*loggers: str) -> Iterator[None]:
    """Within the block, nothing of a full disk reaches stderr through logging (the root
    logger's handlers, Python's last-resort one and the named `loggers`' own records) or
    through exceptions a library's callbacks could not raise (sys.unraisablehook): the
    command says it in one line (`disk_full_line`) once the error reaches it. Once a full disk
    was seen, the named loggers' filter and the hook stay for the rest of the process: a
    library's threads (orbax's) may still be failing as it ends."""
    noise = _DiskFullNoise()
    named = [logging.getLogger(name) for name in loggers]
    handlers = [
        *logging.getLogger().handlers,
        *([logging.lastResort] if logging.lastResort else []),
    ]
    for target in [*named, *handlers]:
        target.addFilter(noise)
    previous_hook = sys.unraisablehook

    def unraisable(hook_args) -> None:
        if _says_disk_full(str(hook_args.exc_value)):
            noise.seen = True
        if not noise.seen:
            previous_hook(hook_args)

    sys.unraisablehook = unraisable
    try:
        yield
    except BaseException as e:
        if disk_full(e) is not None:
            noise.seen = True
        raise
    finally:
        for target in handlers if noise.seen else [*named, *handlers]:
            target.removeFilter(noise)
        if not noise.seen:
            sys.unraisablehook = previous_hook
