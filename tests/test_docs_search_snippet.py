"""docs/search.md's Python snippet runs as written, from the checkout's root, on the shipped
models/cpu-av: a reader can paste it."""

import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
SNIPPET = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)
RUN_TIMEOUT_S = 600  # JAX's import and the first compilation on a loaded two-core machine


@pytest.mark.slow
def test_the_search_snippet_runs_as_written():
    if not (ROOT / "models" / "cpu-av" / "checkpoints").is_dir():
        pytest.skip("models/cpu-av is not in this checkout")
    snippets = SNIPPET.findall((ROOT / "docs" / "search.md").read_text(encoding="utf-8"))
    assert len(snippets) == 1, "docs/search.md should hold one Python snippet"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", snippets[0]],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "MoveStats(move=" in done.stdout  # the last line: the root moves' statistics
