"""Shared fixtures: where the real data and the real engine are, skipping with a reason if not."""

from __future__ import annotations

import io
import pathlib

import chess.pgn
import pytest
import zstandard

from core.engine_path import EngineNotFoundError, find_engine

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"
SAMPLE = ROOT / "data" / "sample"


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


def _read_sample_games(name: str, count: int | None = None) -> list[chess.pgn.Game]:
    raw = (SAMPLE / name).read_bytes()
    text = zstandard.ZstdDecompressor().decompressobj().decompress(raw).decode("utf-8")
    stream, games = io.StringIO(text), []
    while count is None or len(games) < count:
        if (game := chess.pgn.read_game(stream)) is None:
            break
        games.append(game)
    return games


@pytest.fixture(scope="session")
def sample_games():
    """read(name, count=None): the games of data/sample/<name> (a .pgn.zst), the first
    `count` of them if given (test modules cannot import conftest)."""
    return _read_sample_games
