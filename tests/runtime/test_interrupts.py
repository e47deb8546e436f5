"""runtime/interrupts.py in a real process: a signal saves, prints one line, kills the children
and exits 128 + N, and what a child prints after the signal does not reach the terminal."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

# A command in miniature: a child that, like Beam's workers started through /bin/sh, takes
# SIGINT itself and then writes to the stderr it shares with its parent.
COMMAND = textwrap.dedent(
    """
    import pathlib, subprocess, sys, time
    from runtime.interrupts import stop_on_signals

    CHILD = '''
    import signal, sys, time
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, lambda *_: print("child noise", file=sys.stderr, flush=True))
    print("child ready", file=sys.stderr, flush=True)
    time.sleep(600)
    '''

    def on_stop(signum):
        pathlib.Path(sys.argv[1]).write_text("saved")
        return f"stopped by signal {signum}"

    with stop_on_signals(on_stop):
        child = subprocess.Popen([sys.executable, "-c", CHILD])
        print(child.pid, flush=True)
        time.sleep(600)
    """
)


def _gone(pid: int) -> bool:
    """Whether `pid` has ended (a zombie waiting for init counts as ended)."""
    try:
        state = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state == "Z"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_saves_says_one_line_kills_the_children_and_exits_128_plus_n(tmp_path, signum):
    saved = tmp_path / "saved"
    process = subprocess.Popen(
        [sys.executable, "-c", COMMAND, str(saved)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    child = int(process.stdout.readline())
    assert process.stderr.readline() == "child ready\n"  # relayed while no signal came
    if signum == signal.SIGINT:
        os.killpg(process.pid, signum)  # as a terminal's Ctrl-C: the child gets it too
    else:
        process.send_signal(signum)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 128 + signum
    assert stderr == f"stopped by signal {int(signum)}\n"  # no "child noise", no traceback
    assert saved.read_text() == "saved"
    deadline = time.monotonic() + 10
    while not _gone(child):
        assert time.monotonic() < deadline, "the child outlived its parent's stop"
        time.sleep(0.05)


def test_outside_a_signal_the_block_leaves_stderr_and_the_handlers_as_they_were():
    script = textwrap.dedent(
        """
        import os, signal, subprocess, sys
        from runtime.interrupts import stop_on_signals
        before = (signal.getsignal(signal.SIGINT), signal.pthread_sigmask(signal.SIG_BLOCK, []))
        with stop_on_signals(lambda signum: "unused"):
            print("from the block", file=sys.stderr, flush=True)
            child = "import sys; print('from a child', file=sys.stderr)"
            subprocess.run([sys.executable, "-c", child])
        after = (signal.getsignal(signal.SIGINT), signal.pthread_sigmask(signal.SIG_BLOCK, []))
        print("after", file=sys.stderr, flush=True)
        assert before == after, (before, after)
        os.kill(os.getpid(), signal.SIGINT)  # outside the block: Python's KeyboardInterrupt
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    lines = result.stderr.splitlines()
    assert lines[:3] == ["from the block", "from a child", "after"]
    assert lines[-1] == "KeyboardInterrupt" and result.returncode != 0


def test_stop_requests_record_the_signal_and_a_second_ctrl_c_interrupts():
    from runtime.interrupts import StopRequests

    before = {number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGINT)}
    with StopRequests() as stops:
        assert stops.signal is None
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)  # delivered to the main thread at its next bytecode
        assert stops.signal == signal.SIGTERM
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
        assert stops.received == [signal.SIGTERM, signal.SIGINT]
        with pytest.raises(KeyboardInterrupt):  # the second Ctrl-C: SIGINT's own handler
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
    assert {number: signal.getsignal(number) for number in before} == before


def test_stop_requests_leave_an_ignored_signal_ignored():
    from runtime.interrupts import StopRequests

    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as under nohup
    try:
        with StopRequests() as stops:
            assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
            assert stops.signal is None
    finally:
        signal.signal(signal.SIGINT, previous)
