"""constraints.txt pins the JAX the lent GPU machine runs: the version its newest measurement
recorded (results/device/*.json, `jax.jax`; results/gpu-window/*.json,
`environment.jax_version`), so that what passes here is what runs there. pyproject.toml's
ranges must admit that pin."""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Measurement:
    path: Path
    date: str | None  # ISO YYYY-MM-DD, where the file records one
    jax: str
    jaxlib: str


def measurements() -> list[Measurement]:
    found = []
    for path in sorted(ROOT.glob("results/device/*.json")):
        record = json.loads(path.read_text())
        if "jax" in record:
            versions = record["jax"]
            found.append(Measurement(path, record.get("date"), versions["jax"], versions["jaxlib"]))
    for path in sorted(ROOT.glob("results/gpu-window/*.json")):
        environment = json.loads(path.read_text()).get("environment", {})
        if "jax_version" in environment:
            found.append(
                Measurement(path, None, environment["jax_version"], environment["jaxlib_version"])
            )
    return found


def device_versions() -> tuple[str, str]:
    """(jax, jaxlib) of the newest dated measurement; without dates, the one all agree on."""
    found = measurements()
    assert found, "no device measurement under results/device or results/gpu-window"
    dated = [m for m in found if m.date]
    if dated:
        newest = max(dated, key=lambda m: m.date)
        return newest.jax, newest.jaxlib
    versions = {(m.jax, m.jaxlib): m.path.name for m in found}
    assert len(versions) == 1, f"undated measurements disagree on JAX: {versions}"
    return next(iter(versions))


def pins() -> dict[str, str]:
    lines = (ROOT / "constraints.txt").read_text().splitlines()
    return dict(line.split("==") for line in lines if "==" in line)


def test_constraints_pin_the_jax_the_device_runs():
    jax, jaxlib = device_versions()
    pinned = pins()
    assert (pinned["jax"], pinned["jaxlib"]) == (jax, jaxlib)
    for plugin in ("cuda12-pjrt", "cuda12-plugin", "cuda13-pjrt", "cuda13-plugin"):
        assert pinned[f"jax-{plugin}"] == jax, plugin


def test_pyproject_admits_the_pinned_jax():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    requirements = [
        Requirement(r)
        for r in [*project["dependencies"], *extras["cuda12"], *extras["cuda13"], *extras["tpu"]]
    ]
    pinned = pins()
    jax_ones = [r for r in requirements if r.name in ("jax", "jaxlib")]
    assert len(jax_ones) == 5
    for requirement in jax_ones:
        assert pinned[requirement.name] in requirement.specifier, str(requirement)
