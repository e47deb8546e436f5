"""runtime/dir_lock.py: one writer per directory, the holder named, a dead holder's file taken
over. Real processes: the lock is the kernel's."""

from __future__ import annotations

import os
import pathlib
import signal
import socket
import subprocess
import sys
import textwrap

import pytest

from runtime.dir_lock import DirectoryBusy, dir_lock

ROOT = pathlib.Path(__file__).resolve().parents[2]
HOLD = textwrap.dedent(
    """
    import sys, time
    from runtime.dir_lock import dir_lock
    with dir_lock(sys.argv[1], sys.argv[2], "holder"):
        print("locked", flush=True)
        time.sleep(600)
    """
)


def test_a_held_lock_refuses_naming_pid_and_host_and_a_killed_holders_is_taken_over(tmp_path):
    directory, lock = tmp_path / "run", tmp_path / "run" / "lock"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(directory), str(lock)],
                              cwd=ROOT, stdout=subprocess.PIPE, text=True)  # fmt: skip
    host = socket.gethostname()
    try:
        assert holder.stdout.readline() == "locked\n"
        with pytest.raises(DirectoryBusy) as refused, dir_lock(str(directory), str(lock), "me"):
            pass
        assert str(refused.value) == (
            f"{directory} is being written by another run (holder pid {holder.pid} on {host}, "
            f"holding {lock}); wait for it to end or stop it"
        )
    finally:
        holder.send_signal(signal.SIGKILL)  # no release: its file stays, naming it
        holder.wait()
    assert lock.read_text() == f"holder pid {holder.pid} on {host}\n"
    warnings: list[str] = []
    with dir_lock(str(directory), str(lock), "me", warn=warnings.append):
        assert lock.read_text() == f"me pid {os.getpid()} on {host}\n"
    assert warnings == [
        f"warning: taking over {lock}, left by holder pid {holder.pid} on {host}, which ended "
        "without releasing it"
    ]
    assert not lock.exists()


def test_a_lock_file_with_control_bytes_is_shown_escaped(tmp_path, capsys):
    directory, lock = tmp_path / "run", tmp_path / "run" / "lock"
    directory.mkdir()
    lock.write_bytes(b"\x1b[2Jgone\x07\n")  # not a holder this module wrote
    warnings: list[str] = []
    with dir_lock(str(directory), str(lock), "me", warn=warnings.append):
        pass
    (warning,) = warnings
    assert "\x1b" not in warning and "\x07" not in warning
    assert "left by '\\x1b[2Jgone\\x07'," in warning


def test_a_lock_file_that_is_a_directory_is_one_line(tmp_path):
    directory, lock = tmp_path / "run", tmp_path / "run" / "lock"
    lock.mkdir(parents=True)
    with pytest.raises(DirectoryBusy) as refused, dir_lock(str(directory), str(lock), "me"):
        pass
    assert str(refused.value) == (
        f"{directory} cannot be locked: {lock} is a directory, not a lock file; remove it"
    )
    assert lock.is_dir()  # left as it was
