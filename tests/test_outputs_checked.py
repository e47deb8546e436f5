"""Every command that writes checks its outputs before any work: one line naming the option
and the path, a non-zero exit, nothing read, run or written first. (The evaluations, the
annotator, select_boards and the trainer have tests of their own beside their other faults.)

The unwritable path lies below a regular file: unwritable whoever runs the tests, root too.
"""

from __future__ import annotations

import pathlib

import pytest

from jobs import demo
from jobs.cpu_model import recipe as cpu_model
from model import import_reference
from pipeline import download, selfplay
from pipeline.chessbench import export_chessbench, import_chessbench
from pipeline.lichess_evals import import_lichess_evals


def _commands(nowhere: str, missing: str) -> dict:
    """(main, argv, option) per command: every input missing, so that reaching any work
    would fail another way."""
    return {
        "selfplay": (selfplay.main, ["--games", "2", "--out", f"{nowhere}/g.pgn"], "--out"),
        "export_chessbench": (
            export_chessbench.main,
            ["--input", missing, "--kind", "av", "--output", f"{nowhere}/av.bag"],
            "--output",
        ),
        "import_reference": (
            import_reference.main,
            [missing, "--out", nowhere, "--target", "av"],
            "--out",
        ),
        "download": (
            download.main,
            ["--url", "http://127.0.0.1:9/x.pgn", "--out", nowhere],
            "--out",
        ),
        "demo": (demo.main, ["--results", nowhere], "--results"),
        "cpu_model": (cpu_model.main, ["--results", nowhere], "--results"),
        "import_chessbench": (
            import_chessbench.main,
            ["--input", missing, "--kind", "av", "--output", nowhere],
            "--output",
        ),
        "import_lichess_evals": (
            import_lichess_evals.main,
            ["--input", missing, "--output", nowhere],
            "--output",
        ),
    }


@pytest.mark.parametrize("name", list(_commands("", "")))
def test_an_output_that_cannot_be_written_is_one_line_before_any_work(tmp_path, capsys, name):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    nowhere = str(blocker / "out")
    main, argv, option = _commands(nowhere, str(tmp_path / "missing"))[name]
    assert main(argv) != 0
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert "Traceback" not in captured.err and len(lines) == 1, captured.err
    path = next(word for word in argv if word.startswith(nowhere))
    assert lines[0] == f"error: {option} {path} cannot be written: {blocker} is not a directory"
    assert sorted(p.name for p in pathlib.Path(tmp_path).iterdir()) == ["a-file"]
