"""docker/worker.Dockerfile copies what the annotate workers import: every package of this
project that `python -m pipeline.annotate` loads is copied into the image and let through by
its .dockerignore (docker itself is not needed to check that)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCKER = ROOT / "docker"


def _loaded_packages() -> set[str]:
    """Top-level packages of this checkout that importing the annotate command loads."""
    code = (
        "import json, sys, pipeline.annotate.annotate, pipeline.annotate.beam_graph;"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    return {name for name in json.loads(out) if (ROOT / name / "__init__.py").is_file()}


def test_the_worker_image_holds_every_package_the_annotate_workers_import():
    dockerfile = (DOCKER / "worker.Dockerfile").read_text()
    copied = set(re.findall(r"^COPY (\w+) \./\1$", dockerfile, re.M))
    ignore = (DOCKER / "worker.Dockerfile.dockerignore").read_text().split()
    let_through = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    needed = _loaded_packages()
    assert "pipeline" in needed and "core" in needed
    assert needed <= copied, f"worker.Dockerfile does not copy {sorted(needed - copied)}"
    assert needed <= let_through, f".dockerignore leaves out {sorted(needed - let_through)}"
    for module in re.findall(r"import ([\w., ]+)\"", dockerfile)[0].split(","):
        assert module.strip().split(".")[0] in copied
