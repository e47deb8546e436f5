"""Shared fixtures: where the real data and the real engine are, skipping with a reason if not."""

from __future__ import annotations

import pathlib

import pytest

from pipeline.engine_path import EngineNotFoundError, find_engine

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> pathlib.Path:
    """../shared/data (real Lichess games, puzzles and EPD suites), or skip."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"{SHARED_DATA} is absent: the real-data checks run where it exists")
    return SHARED_DATA


@pytest.fixture(scope="session")
def stockfish() -> str:
    """Path to the real Stockfish binary, or skip (make setup installs it)."""
    try:
        return find_engine()
    except EngineNotFoundError as e:
        pytest.skip(str(e))
