"""`make setup`'s install step prints one line, not pip's pages: pip's output goes to
.venv/pip.log, and its tail comes out only when the install fails. Run with a stand-in for
the venv's python that talks like pip, in a scratch directory."""

import os
import shutil
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOISE = "WARNING: Location '/nowhere' is ignored: it is either a non-existing path"


def pip_stand_in(exit_code: int, python_ok: bool = True) -> str:
    """A venv's python that talks like pip; `-c` is the Makefile asking whether its Python is
    new enough (>= 3.12)."""
    return (
        f'#!/bin/sh\n[ "$1" = -c ] && exit {0 if python_ok else 1}\n'
        f'for i in $(seq 40); do echo "{NOISE} $i" >&2; done\n'
        f'echo "pip $*"\nexit {exit_code}\n'
    )


def install(tmp_path: Path, exit_code: int, python_ok: bool = True) -> subprocess.CompletedProcess:
    for name in ("pyproject.toml", "constraints.txt"):
        shutil.copy(ROOT / name, tmp_path / name)
    venv = tmp_path / ".venv" / "bin"
    venv.mkdir(parents=True, exist_ok=True)
    python = venv / "python"
    python.write_text(pip_stand_in(exit_code, python_ok))
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


def test_a_venv_on_an_older_python_is_made_again(tmp_path):
    """JAX 0.11 needs Python >= 3.12: a .venv on 3.11 is replaced by one made with the
    interpreter tools/python_for_jax.sh names, even when its install stamp is up to date."""
    newer = tmp_path / "python3.13"
    newer.write_text(
        '#!/bin/sh\n[ "$1 $2" = "-m venv" ] || exit 1\nmkdir -p "$3/bin"\n'
        f'cat > "$3/bin/python" <<"EOF"\n{pip_stand_in(0)}EOF\nchmod +x "$3/bin/python"\n'
    )
    finder = tmp_path / "tools" / "python_for_jax.sh"
    finder.parent.mkdir()
    finder.write_text(f"#!/bin/sh\necho {newer}\n")
    for script in (newer, finder):
        script.chmod(0o755)
    stamp = tmp_path / ".venv" / ".installed"
    stamp.parent.mkdir()
    stamp.touch()
    os.utime(stamp, (time.time() + 3600,) * 2)  # newer than pyproject.toml and constraints.txt
    done = install(tmp_path, 0, python_ok=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == f"Making .venv with {newer}"
    log = (tmp_path / ".venv" / "pip.log").read_text()
    assert "pip -m pip install -c constraints.txt -e .[dev]" in log
    assert stamp.exists()
