"""Resolving a user's relative path: the start directory first, then the project's checkout."""

from __future__ import annotations

import pathlib

from runtime.paths import project_root, resolve_path

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_the_checkout_this_package_runs_from_is_the_project_root():
    assert project_root() == ROOT


def test_a_relative_path_is_looked_for_in_the_start_directory_then_the_checkout(tmp_path):
    # model/configs exists only in the checkout.
    found = resolve_path("model/configs/small.toml", str(tmp_path))
    assert found.path == str(ROOT / "model" / "configs" / "small.toml")
    assert found.tried == (
        str(tmp_path / "model/configs/small.toml"),
        str(ROOT / "model/configs/small.toml"),
    )
    # The start directory wins when both have it.
    (tmp_path / "model" / "configs").mkdir(parents=True)
    (tmp_path / "model" / "configs" / "small.toml").write_text("")
    assert resolve_path("model/configs/small.toml", str(tmp_path)).path == str(
        tmp_path / "model" / "configs" / "small.toml"
    )


def test_absolute_and_missing_paths(tmp_path):
    assert resolve_path(str(tmp_path), "/nonexistent").path == str(tmp_path)
    missing = resolve_path("runs/nope", str(tmp_path))
    assert missing.path is None
    message = missing.describe_missing()
    assert "'runs/nope' not found" in message and str(tmp_path / "runs/nope") in message
    assert str(ROOT / "runs/nope") in message
