"""pyproject.toml builds its metadata without setuptools' deprecation pages (`make setup`
showed them twice per install): the license as an SPDX expression."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PIP_TIMEOUT_S = 600  # pip fetches setuptools into an isolated build environment


def test_the_metadata_builds_quietly_with_an_spdx_license(tmp_path):
    # A copy of what the metadata reads, so that the build leaves nothing in the checkout.
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    report = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--quiet"]
        + ["--report", str(report), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=PIP_TIMEOUT_S,
    )
    if done.returncode != 0 and "setuptools" in done.stderr and "No matching" in done.stderr:
        pytest.skip("no package index to fetch setuptools from")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "deprecated" not in done.stderr.lower(), done.stderr[-2000:]
    [install] = json.loads(report.read_text())["install"]
    assert install["metadata"]["license_expression"] == "Apache-2.0"
