"""Fixtures for the pipeline tests: small PGN texts the tests write themselves."""

from __future__ import annotations

import types

import pytest


def _game(site: str, moves: str, result: str = "1-0", extra: str = "") -> str:
    headers = f'[Event "Test"]\n[Site "https://lichess.org/{site}"]\n[Result "{result}"]\n'
    return f"{headers}{extra}\n{moves} {result}\n\n"


_SETUP_HEADERS = (
    '[Variant "From Position"]\n[FEN "6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1"]\n[SetUp "1"]\n'
)
_CHESS960_HEADERS = (
    '[Variant "Chess960"]\n[FEN "bbqnnrkr/pppppppp/8/8/8/8/PPPPPPPP/BBQNNRKR w HFhf - 0 1"]\n'
    '[SetUp "1"]\n'
)


@pytest.fixture(scope="session")
def pgn_samples() -> types.SimpleNamespace:
    """Real chess in made-up games; each attribute is the PGN text of one game (or junk)."""
    return types.SimpleNamespace(
        game=_game,
        scholars_mate=_game("scholar1", "1. e4 e5 2. Bc4 Nc6 3. Qh5 Nf6 4. Qxf7#"),
        italian=_game("italian1", "1. e4 e5 2. Nf3 Nc6 3. Bc4 Bc5 4. c3 Nf6", "*"),
        # Shares its first positions with italian (and the first two with scholars_mate).
        petrov=_game("petrov01", "1. e4 e5 2. Nf3 Nf6 3. Nxe5 d6", "1/2-1/2"),
        illegal=_game("illegal1", "1. e4 e5 2. Ke3 Nc6", "0-1"),  # Ke3 is not a legal move
        chess960=_game("c960game", "1. e4 e5", "1-0", _CHESS960_HEADERS),
        setup=_game("setup001", "1. Ra8#", "1-0", _SETUP_HEADERS),
        garbage="this is not PGN at all\n<html>nor this</html>\n\n",
    )
