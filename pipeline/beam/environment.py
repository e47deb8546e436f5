"""How this project's Beam jobs run: without Beam's chatter on the terminal, and without
litter in the temporary directory.

Chatter: Apache Beam logs, at every start, lines that say nothing about the job (`apitools not
found`, `Logging handler created`, `No semi_persistent_directory found`, `Discarding
unparseable args`, the last one false for `--dask_client_address`, which the DaskRunner does
use), in this process and in each of its SDK worker processes, which relay theirs through the
job service as well. By default they are dropped: this process's Beam loggers only pass
errors, and the lines Beam's workers write to the stderr they share with this process are
dropped by the relay of runtime/interrupts.py (`keep_line`). `--verbose` (anywhere on a command
line, or `set_verbose`) lets all of them through. Errors always pass.

The first of those lines is logged when apache_beam is imported, before any command line is
parsed, so `--verbose` is looked for in sys.argv when this module loads (pipeline/__init__.py
loads it before any module of the package imports Beam).

Litter: Beam makes temporary folders (`beam-pipeline-temp*`, `beam-temp*`, `tmp*`, a
`beam-requirements-cache`) and leaves some behind, empty, after every job. `scratch_tempdir`
points the temporary directory of this process and of the workers it starts at one private
folder for the job, and deletes it afterwards.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator

VERBOSE_FLAG = "--verbose"
VERBOSE_HELP = "also print Apache Beam's own log lines (start-up notes, worker messages)"
# A Python log line of Beam's (or of one of its worker processes, whose loggers are `__main__`
# and `root`) below ERROR, in logging's default format, as Beam's processes write them.
_BEAM_LINE = re.compile(rb"^(DEBUG|INFO|WARNING|WARN):(root|__main__|apache_beam[\w.]*):")
_BEAM_PACKAGE = os.sep + "apache_beam" + os.sep

_verbose = False


def verbose() -> bool:
    return _verbose


def set_verbose(on: bool) -> None:
    """Lets Beam's log lines through (True) or keeps them off the terminal (False)."""
    global _verbose
    _verbose = on
    logging.getLogger("apache_beam").setLevel(logging.NOTSET if on else logging.ERROR)


def keep_line(line: bytes) -> bool:
    """For the stderr relay: whether a line written by this process or a child goes out."""
    return _verbose or _BEAM_LINE.match(line) is None


class _BeamRootRecords(logging.Filter):
    """Drops what Beam's modules log through the root logger (`logging.warning(...)`) below
    ERROR, unless verbose: a logger's level cannot catch those."""

    def filter(self, record: logging.LogRecord) -> bool:
        return _verbose or record.levelno >= logging.ERROR or _BEAM_PACKAGE not in record.pathname


def install() -> None:
    """Called once, as the package loads."""
    logging.getLogger().addFilter(_BeamRootRecords())
    set_verbose(VERBOSE_FLAG in sys.argv[1:])


@contextlib.contextmanager
def scratch_tempdir() -> Iterator[str]:
    """The block's temporary files (this process's and its children's) go to one new folder,
    deleted with everything in it when the block ends."""
    scratch = tempfile.mkdtemp(prefix="searchless-chess-beam-")
    saved_tempdir, saved_env = tempfile.tempdir, os.environ.get("TMPDIR")
    tempfile.tempdir = scratch
    os.environ["TMPDIR"] = scratch  # Beam's worker processes read it as they start
    try:
        yield scratch
    finally:
        tempfile.tempdir = saved_tempdir
        if saved_env is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved_env
        shutil.rmtree(scratch, ignore_errors=True)
