"""Beam's chatter and litter (pipeline/beam/environment.py): real annotate and import runs as
commands, with the temporary directory pointed at a fresh folder, their stderr read line by line."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from pipeline.chessbench.bag import BagWriter
from pipeline.chessbench.records import encode_av

ROOT = pathlib.Path(__file__).resolve().parents[2]
GAME = (
    '[Event "T"]\n[Site "https://lichess.org/abcd1234"]\n[Result "1-0"]\n\n'
    "1. e4 e5 2. Nf3 Nc6 1-0\n\n"
)
# Two SDK worker processes: each used to add its own start-up lines.
WORKERS = ["--direct_num_workers=2", "--direct_running_mode=multi_processing"]


def run(args: list[str], tmp: pathlib.Path) -> subprocess.CompletedProcess:
    tmp.mkdir()
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=ROOT, env=dict(os.environ, TMPDIR=str(tmp)), capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip


def not_ours(stderr: str, prefix: str) -> list[str]:
    return [line for line in stderr.splitlines() if not line.startswith(prefix)]


@pytest.mark.slow
def test_annotate_prints_only_its_own_lines_unless_verbose_and_leaves_no_temp_folders(
    tmp_path, stockfish
):
    games = tmp_path / "games.pgn"
    games.write_text(GAME)
    command = ["pipeline.annotate", str(games), "--limit", "nodes=20", "--engine", stockfish]
    quiet = run([*command, "--out", str(tmp_path / "quiet"), *WORKERS], tmp_path / "tmp")
    assert quiet.returncode == 0, quiet.stderr[-3000:]
    assert not_ours(quiet.stderr, "annotate: ") == []
    assert len(quiet.stderr.splitlines()) == 2  # what it reads, and what it did
    assert list((tmp_path / "tmp").iterdir()) == []
    loud = run([*command, "--out", str(tmp_path / "loud"), *WORKERS, "--verbose"], tmp_path / "t2")
    assert loud.returncode == 0, loud.stderr[-3000:]
    chatter = not_ours(loud.stderr, "annotate: ")
    assert any("apitools not found" in line for line in chatter), loud.stderr[-3000:]
    assert any("semi_persistent_directory" in line for line in chatter), loud.stderr[-3000:]
    assert list((tmp_path / "t2").iterdir()) == []


def test_import_chessbench_leaves_no_temp_folders(tmp_path):
    bag = tmp_path / "in.bag"
    with BagWriter(str(bag)) as writer:
        writer.write(encode_av("4k3/8/8/8/8/8/4P3/4K3 w - - 0 1", "e2e4", 0.75))
    done = run(
        ["pipeline.chessbench.import_chessbench", "--input", str(bag), "--kind", "av", "--output",
         str(tmp_path / "out"), "--runner=DirectRunner"],
        tmp_path / "tmp",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert not_ours(done.stderr, "import_chessbench: ") == []
    assert list((tmp_path / "tmp").iterdir()) == []
