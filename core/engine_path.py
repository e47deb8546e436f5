"""Finding a UCI engine binary: an explicit path, $STOCKFISH, PATH, or Debian's /usr/games."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

# Debian installs games outside the usual PATH.
_FALLBACK_DIRS = ("/usr/games", "/usr/local/games", "/opt/homebrew/bin")


class EngineNotFoundError(FileNotFoundError):
    pass


def find_engine(path: str | None = None) -> str:
    """Returns an executable engine path.

    `path` wins when given (a name on PATH or a file); then the STOCKFISH environment
    variable; then `stockfish` on PATH; then Debian's /usr/games/stockfish.
    """
    for candidate in (path, os.environ.get("STOCKFISH")):
        if candidate:
            found = shutil.which(candidate)
            if found is None:
                raise EngineNotFoundError(f"engine {candidate!r} is not an executable file")
            return found
    found = shutil.which("stockfish")
    if found:
        return found
    for directory in _FALLBACK_DIRS:
        candidate = os.path.join(directory, "stockfish")
        if os.access(candidate, os.X_OK):
            return candidate
    raise EngineNotFoundError(
        "no Stockfish found: run `make setup` (installs Debian's stockfish) or pass --engine PATH"
    )


def engine_id(path: str, timeout: float = 10.0) -> str:
    """The engine's `id name` line (e.g. 'Stockfish 15.1'), read over UCI."""
    out = subprocess.run(
        [path], input="uci\nquit\n", capture_output=True, text=True, timeout=timeout, check=False
    ).stdout
    for line in out.splitlines():
        if line.startswith("id name "):
            return line[len("id name ") :].strip()
    raise RuntimeError(f"{path} did not answer `uci` with an `id name` line")


def main() -> int:
    try:
        path = find_engine(sys.argv[1] if len(sys.argv) > 1 else None)
    except EngineNotFoundError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"engine: {path} ({engine_id(path)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
