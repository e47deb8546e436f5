"""`make setup`'s install step prints one line, not pip's pages: pip's output goes to
.venv/pip.log, and its tail comes out only when the install fails. Run with a stand-in for
the venv's python that talks like pip, in a scratch directory."""

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOISE = "WARNING: Location '/nowhere' is ignored: it is either a non-existing path"


def install(tmp_path: Path, exit_code: int) -> subprocess.CompletedProcess:
    for name in ("pyproject.toml", "constraints.txt"):
        shutil.copy(ROOT / name, tmp_path / name)
    venv = tmp_path / ".venv" / "bin"
    venv.mkdir(parents=True)
    python = venv / "python"
    # `-c` is the Makefile asking whether the venv's Python is new enough: it is.
    python.write_text(
        '#!/bin/sh\n[ "$1" = -c ] && exit 0\n'
        f'for i in $(seq 40); do echo "{NOISE} $i" >&2; done\n'
        f'echo "pip $*"\nexit {exit_code}\n'
    )
    python.chmod(0o755)
    # Under `make test` the outer make's variables would make this one a sub-make, which
    # prints "Entering directory" lines a user's `make setup` does not.
    outer = ("MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES")
    env = {k: v for k, v in os.environ.items() if k not in outer}
    return subprocess.run(
        ["make", "-f", str(ROOT / "Makefile"), ".venv/.installed"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def test_a_good_install_prints_one_line(tmp_path):
    done = install(tmp_path, 0)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "Installing the Python packages into .venv (minutes the first time; log: .venv/pip.log)"
    ]
    assert done.stderr == ""
    log = (tmp_path / ".venv" / "pip.log").read_text()
    assert "pip -m pip install -c constraints.txt -e .[dev]" in log and NOISE in log
    assert (tmp_path / ".venv" / ".installed").exists()


def test_a_failed_install_shows_the_end_of_the_log(tmp_path):
    done = install(tmp_path, 1)
    assert done.returncode != 0
    assert "pip install failed: the whole log is .venv/pip.log" in done.stdout
    assert f"{NOISE} 40" in done.stdout and f"{NOISE} 1\n" not in done.stdout
    assert not (tmp_path / ".venv" / ".installed").exists()
