"""Commands run as a terminal runs them, for the tests that stop them: a session of its own,
so that a Ctrl-C (the process group's SIGINT) reaches the command and every process it
started, and the whole group killed on the way out, whatever the test asserted."""

from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import subprocess
import time
from collections.abc import Iterator

import pytest


@contextlib.contextmanager
def own_session(command: list[str], log: pathlib.Path, **popen) -> Iterator[subprocess.Popen]:
    """`command` started in a session of its own, its stderr written to `log`."""
    with open(log, "wb") as handle:
        process = subprocess.Popen(command, stderr=handle, start_new_session=True, **popen)
        try:
            yield process
        finally:
            with contextlib.suppress(ProcessLookupError):  # e.g. an engine left behind
                os.killpg(process.pid, signal.SIGKILL)


def wait_for_a_journal_part(
    process: subprocess.Popen, journal: pathlib.Path, log: pathlib.Path, seconds: float = 120
) -> None:
    """Until the running annotation has written its first journal part."""
    deadline = time.monotonic() + seconds
    while not list(journal.glob("part-*.parquet")):
        if process.poll() is not None:
            pytest.fail(f"the run ended before writing a journal part:\n{log.read_text()[-3000:]}")
        assert time.monotonic() < deadline, f"no journal part after {seconds:.0f} s"
        time.sleep(0.02)


def group_ends(pgid: int, seconds: float) -> bool:
    """Whether every process of group `pgid` is gone (zombies aside) within `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        states = subprocess.run(["ps", "-o", "stat=", "-g", str(pgid)], capture_output=True,
                                text=True).stdout.split()  # fmt: skip
        if all(state.startswith("Z") for state in states):
            return True
        time.sleep(0.1)
    return False
