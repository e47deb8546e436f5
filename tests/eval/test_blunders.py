"""A player's blunders in games (eval/blunders.py): each kind on a position set by hand, and the
whole command with the real Stockfish on games whose blunders are known."""

from __future__ import annotations

import json

import chess
import pytest

from eval.blunders import blunder_kind, main

# Black to move: the bishop on g5 attacks the queen on d8; the knight on d5 hangs to the queen.
QUEEN_ATTACKED = "r1bqkb1r/pppp1ppp/8/3n2B1/4p3/2P2N2/PP3PPP/R2QKB1R b KQkq - 1 9"

KINDS = [
    # (FEN, the blunder, the reply, mate found, kind)
    (QUEEN_ATTACKED, "e4f3", "g5d8", False, "threat ignored"),
    (QUEEN_ATTACKED, "a7a6", "g5d8", True, "allows mate"),  # the engine's word decides
    ("4k3/8/8/8/8/2n5/8/R3K3 w - - 0 1", "a1a3", "c3b1", False, "quiet"),
    ("4k3/8/8/8/8/2n5/8/R3K3 w - - 0 1", "a1a4", "c3a4", False, "moved piece lost"),
    # The rook leaves the b-file, where it guarded the bishop from the queen.
    ("4k3/1q6/8/8/8/8/1B6/1R2K3 w - - 0 1", "b1c1", "b7b2", False, "piece exposed"),
    ("4k3/1q6/8/8/8/8/1B6/1R2K3 w - - 0 1", "e1d2", "b7b5", False, "quiet"),
    ("4k3/1q6/8/8/8/8/1B6/1R2K3 w - - 0 1", "e1f2", "b7f3", False, "check"),
    # En passant takes the pawn that just moved.
    ("4k3/3p4/8/4P3/8/8/8/4K3 b - - 0 1", "d7d5", "e5d6", False, "moved piece lost"),
]


@pytest.mark.parametrize(("fen", "move", "reply", "mate", "kind"), KINDS)
def test_each_kind_of_blunder(fen, move, reply, mate, kind):
    board = chess.Board(fen)
    move, reply = chess.Move.from_uci(move), chess.Move.from_uci(reply)
    assert move in board.legal_moves
    after = board.copy()
    after.push(move)
    assert reply in after.legal_moves
    assert blunder_kind(board, move, reply, mate) == kind


# Black walks into the scholar's mate; White, the other player, blunders nothing.
GAMES = """[White "sound"]
[Black "careless"]
[Result "1-0"]

1. e4 e5 2. Qh5 Nc6 3. Bc4 Nf6 4. Qxf7# 1-0

[White "careless"]
[Black "sound"]
[Result "0-1"]

1. e4 e5 2. Nf3 Nc6 3. Bc4 Nd4 4. Nxe5 Qg5 5. Nxf7 Qxg2 6. Rf1 Qxe4+ 7. Be2 Nf3# 0-1
"""


def test_the_blunders_of_a_player_in_real_games(tmp_path, stockfish, capsys):
    games = tmp_path / "games.pgn"
    games.write_text(GAMES)
    out = tmp_path / "blunders.json"
    args = ["--games", str(games), "--nodes", "20000", "--from-move", "1", "--quiet"]
    assert main([*args, "--player", "careless", "--out", str(out), "--engine", stockfish]) == 0
    result = json.loads(out.read_text())
    assert result["games_played"] == 2
    # Black's 3...Nf6 and White's 6.Rf1 (into a mate) at least; 4.Nxe5 loses the knight's game.
    found = {(r["game"], r["move_number"], r["move"]): r["kind"] for r in result["records"]}
    assert found[(1, 3, "g8f6")] == "allows mate"
    assert any(game == 2 for game, _, _ in found), found
    assert result["blunders"] == len(result["records"]) == sum(result["by_kind"].values())
    assert result["moves_judged"] == 3 + 7
    for record in result["records"]:
        assert record["before"] - record["after"] > 0.25
    assert "careless:" in capsys.readouterr().err


def test_bad_input_gets_one_line(tmp_path, capsys):
    games = tmp_path / "games.pgn"
    games.write_text(GAMES)
    assert main(["--games", str(tmp_path / "none.pgn"), "--player", "x"]) == 1
    assert "no such file" in capsys.readouterr().err.lower()
    assert main(["--games", str(games), "--player", "nobody"]) == 1
    err = capsys.readouterr().err
    assert "no game of a player named 'nobody'" in err and "Traceback" not in err
    assert main(["--games", str(tmp_path), "--player", "careless"]) == 1  # a directory
    assert "--games" in capsys.readouterr().err
    (tmp_path / "taken").mkdir()
    assert (
        main(["--games", str(games), "--player", "careless", "--out", str(tmp_path / "taken")]) == 1
    )
    assert "is a directory" in capsys.readouterr().err


def test_a_game_that_cannot_be_replayed_is_one_line_and_left_out(tmp_path, stockfish, capsys):
    games = tmp_path / "games.pgn"
    games.write_text(GAMES + '\n[White "careless"]\n[Black "x"]\n\n1. e4 e5 2. Ke3 *\n')
    out = tmp_path / "blunders.json"
    args = ["--games", str(games), "--player", "careless", "--from-move", "1", "--quiet"]
    assert main([*args, "--nodes", "2000", "--out", str(out), "--engine", stockfish]) == 0
    err = capsys.readouterr().err
    assert "game 3: skipped:" in err and "Ke3" in err and "Traceback" not in err
    result = json.loads(out.read_text())
    assert result["games_played"] == 2 and len(result["skipped"]) == 1


def test_a_draw_is_judged_by_its_result(tmp_path, stockfish):
    # Black, a rook down, repeats until the third time is a draw: the best it can do.
    games = tmp_path / "games.pgn"
    games.write_text(
        '[White "strong"]\n[Black "defender"]\n[FEN "6kr/8/8/8/8/8/5PPP/3Q2K1 w - - 0 30"]\n'
        '[SetUp "1"]\n\n30. Kh1 Kh7 31. Kg1 Kg8 32. Kh1 Kh7 33. Kg1 Kg8 1/2-1/2\n'
    )
    out = tmp_path / "blunders.json"
    args = ["--games", str(games), "--player", "defender", "--from-move", "1", "--quiet"]
    assert main([*args, "--nodes", "5000", "--out", str(out), "--engine", stockfish]) == 0
    result = json.loads(out.read_text())
    assert result["moves_judged"] == 4 and result["blunders"] == 0, result["records"]
    # Stalemating a lone king throws the win away: a blunder of the kind `draw`.
    games.write_text(
        '[White "careless"]\n[Black "lone"]\n[FEN "7k/8/6K1/8/8/8/8/5Q2 w - - 0 1"]\n'
        '[SetUp "1"]\n\n1. Qf7 1/2-1/2\n'
    )
    args = ["--games", str(games), "--player", "careless", "--from-move", "1", "--quiet"]
    assert main([*args, "--nodes", "5000", "--out", str(out), "--engine", stockfish]) == 0
    (record,) = json.loads(out.read_text())["records"]
    assert record["kind"] == "draw" and record["after"] == 0.5 and record["before"] > 0.9


def test_a_program_that_is_not_an_engine_is_one_line(tmp_path, capsys):
    games = tmp_path / "games.pgn"
    games.write_text(GAMES)
    assert main(["--games", str(games), "--player", "careless", "--engine", "/bin/true"]) == 2
    err = capsys.readouterr().err
    assert err.strip().startswith("error: engine /bin/true") and "Traceback" not in err
