"""Move 1,000 and later on the web board: a legal position whose fullmove number is past the
tokenizer's three digits is analysed and played as if it read 999, against the real server
with models/cpu (BC, its own value head) and models/cpu-av (AV)."""

from __future__ import annotations

import chess
import pytest

LATE_MATE = "6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1000"
# Move 999 for Black, then one move each: the game reaches move 1,000 in `moves`.
BEFORE_1000 = "6k1/5ppp/8/8/8/8/5PPP/R5K1 b - - 0 999"
# (A halfmove clock past 999 is a game over by the fifty-move rule: the board refuses it.)
LATE_CLOCKS = "4k3/8/8/8/8/8/4P3/4K3 w - - 3 12345"


@pytest.mark.parametrize("simulations", [0, 16])
@pytest.mark.parametrize("model", ["cpu", "cpu-av"])
def test_analysis_past_move_999_answers_200(client, model, simulations):
    for fen in (LATE_MATE, LATE_CLOCKS):
        status, body = client.get("/api/analysis", fen=fen, model=model, simulations=simulations)
        assert status == 200, (fen, body)
        assert {m["uci"] for m in body["moves"]} == {m.uci() for m in chess.Board(fen).legal_moves}
        assert 0.0 <= body["value"] <= 1.0
    status, body = client.get("/api/analysis", fen=BEFORE_1000, moves="g8h8 a1b1 h8g8", model=model)
    assert status == 200, body
    assert body["fen"].endswith(" 1001")


def test_play_past_move_999_gives_the_models_move(client):
    status, body = client.post("/api/play", {"fen": LATE_MATE})
    assert status == 200, body
    assert body["move"] == "a1a8"
    status, body = client.post("/api/play", {"fen": LATE_CLOCKS, "simulations": 16})
    assert status == 200, body
    assert chess.Board(LATE_CLOCKS).is_legal(chess.Move.from_uci(body["move"]))
