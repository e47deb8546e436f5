"""Whether a binary speaks UCI, said in one line when it does not.

python-chess reports an engine that answers `uci` with something else as a bare timeout (its
message empty) or a dead process; the user needs the engine's path and what it printed. This
asks `uci` itself, reads until `uciok`, and raises `NotUciError` with the first of the output.
"""

from __future__ import annotations

import os
import select
import subprocess
import time

# Long enough for a real engine on a loaded machine (Stockfish answers in milliseconds).
HANDSHAKE_SECONDS = 10.0
_SHOWN = 120  # characters of the engine's output quoted in the error


class NotUciError(ValueError):
    """The engine did not answer `uci` with `uciok`; the message is the whole line."""


def _read_until_uciok(process: subprocess.Popen, seconds: float) -> tuple[bytes, str]:
    """(what the engine printed, why reading stopped: "" for uciok, else the reason)."""
    out = b""
    deadline = time.monotonic() + seconds
    fd = process.stdout.fileno()
    while True:
        if b"uciok" in out.split():
            return out, ""
        left = deadline - time.monotonic()
        if left <= 0:
            return out, f"no uciok within {seconds:g} s"
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            return out, f"it exited (status {process.wait()}) without uciok"
        out += chunk


def check_uci(path: str, seconds: float = HANDSHAKE_SECONDS) -> None:
    """Asks `path` for `uci`; NotUciError naming the engine and what it printed unless it
    answers `uciok` within `seconds`."""
    try:
        process = subprocess.Popen(
            [path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
    except OSError as e:
        raise NotUciError(f"engine {path} cannot be started: {e.strerror or e}") from None
    try:
        try:
            process.stdin.write(b"uci\n")
            process.stdin.flush()
        except OSError:
            pass  # it exited already: what it printed says why
        out, problem = _read_until_uciok(process, seconds)
    finally:
        process.kill()
        process.wait()
        for stream in (process.stdin, process.stdout):
            try:
                stream.close()
            except OSError:
                pass  # closing flushes the unsent `uci` into the pipe of an engine that exited
    if problem:
        text = out.decode(errors="replace").strip()
        shown = repr(text[:_SHOWN]) + ("..." if len(text) > _SHOWN else "")
        printed = f"it printed {shown}" if text else "it printed nothing"
        raise NotUciError(f"engine {path} is not a UCI engine: asked `uci`, {problem}; {printed}")
