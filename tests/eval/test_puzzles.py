import json

import chess
import pytest
import zstandard

from core.eval_sets import Puzzle, read_puzzles
from eval.agents.players import RandomAgent
from eval.agents.stockfish import EngineSettings, StockfishAgent
from eval.puzzles import accuracy_by_bucket, bucket_of, evaluate, main, play_puzzle

# Puzzles built here (checked by python-chess in test_the_built_puzzles_are_sound):
# MATE1: Black plays ...c5, White mates with Ra8# (the listed solution) or Rb8# (also mate).
MATE1 = ("6k1/2p2ppp/8/8/8/8/6PP/RR4K1 b - - 0 1", "c7c5 a1a8", 650)
# MATE2: ...Rc6, then Ra8+ Rc8 (forced) Rxc8#: two solver moves.
MATE2 = ("6k1/2r2ppp/8/8/8/8/R5PP/R5K1 b - - 0 1", "c7c6 a2a8 c6c8 a8c8", 1230)
# FORK: ...Qd5?? allows the fork Nc7+, and after ...Ke7 the solver takes the queen (no mate).
FORK = ("3qk3/8/8/1N6/8/8/8/4K3 b - - 0 1", "d8d5 b5c7 e8e7 c7d5", 1900)

HEADER = "PuzzleId,FEN,Moves,Rating,RatingDeviation,Popularity,NbPlays,Themes,GameUrl,OpeningTags"


def lichess_row(pid: str, puzzle, extra_columns: int = 6) -> str:
    fen, moves, rating = puzzle
    rest = ["75", "95", "1000", "mate short", "https://lichess.org/x", "", ""][:extra_columns]
    return ",".join([pid, fen, moves, str(rating), *rest])


def short_row(puzzle) -> str:
    fen, moves, rating = puzzle
    return f"{fen},{moves},{rating}"


def write(tmp_path, name: str, lines: list[str]) -> str:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def solution_agent(scripted, puzzles, overrides=None):
    """A scripted agent that plays every listed solution move, except where overridden."""
    agent_class, after = scripted
    script = {}
    for fen, moves, _ in puzzles:
        moves = moves.split()
        for i in range(1, len(moves), 2):
            script[after(fen, " ".join(moves[:i]))] = moves[i]
    script.update(overrides or {})
    return agent_class(script)


def as_puzzle(puzzle, line=1) -> Puzzle:
    fen, moves, rating = puzzle
    return Puzzle(line=line, fen=fen, moves=tuple(moves.split()), rating=rating)


def test_the_built_puzzles_are_sound():
    for fen, moves, _ in (MATE1, MATE2, FORK):
        board = chess.Board(fen)
        for uci in moves.split():
            board.push_uci(uci)
        assert board.is_checkmate() == (fen != FORK[0])
    board = chess.Board(MATE2[0])
    board.push_uci("c7c6")
    board.push_uci("a2a8")
    assert [m.uci() for m in board.legal_moves] == ["c6c8"]  # the reply is forced


def test_listed_solution_solves(scripted):
    for puzzle in (MATE1, MATE2, FORK):
        outcome = play_puzzle(as_puzzle(puzzle), solution_agent(scripted, [puzzle]))
        assert outcome.solved and outcome.reason == "solution"
        assert outcome.played == tuple(puzzle[1].split()[1::2])


def test_a_different_mate_also_solves(scripted):
    _, after = scripted
    agent = solution_agent(scripted, [MATE1], {after(MATE1[0], "c7c5"): "b1b8"})
    outcome = play_puzzle(as_puzzle(MATE1), agent)
    assert outcome.solved and outcome.reason == "alternative mate"
    assert outcome.played == ("b1b8",)


def test_failing_on_the_second_move(scripted):
    _, after = scripted
    # Right first move (Ra8+), then Rc8-c7 instead of the mate Rxc8#.
    agent = solution_agent(scripted, [MATE2], {after(MATE2[0], "c7c6 a2a8 c6c8"): "a8a7"})
    outcome = play_puzzle(as_puzzle(MATE2), agent)
    assert not outcome.solved and outcome.reason == "wrong move"
    assert outcome.failed_at == 3
    assert outcome.played == ("a2a8", "a8a7")


def test_a_wrong_first_move_and_an_illegal_move_fail(scripted):
    _, after = scripted
    wrong = solution_agent(scripted, [FORK], {after(FORK[0], "d8d5"): "e1e2"})
    outcome = play_puzzle(as_puzzle(FORK), wrong)
    assert (outcome.solved, outcome.reason, outcome.failed_at) == (False, "wrong move", 1)
    illegal = solution_agent(scripted, [FORK], {after(FORK[0], "d8d5"): "e1e3"})
    outcome = play_puzzle(as_puzzle(FORK), illegal)
    assert (outcome.solved, outcome.reason) == (False, "illegal move")


def test_all_layouts_read_the_same(tmp_path):
    puzzles = [MATE1, MATE2, FORK]
    files = {
        "short.csv": [short_row(p) for p in puzzles],
        "header.csv": [HEADER] + [lichess_row(f"id{i}", p) for i, p in enumerate(puzzles)],
        "noheader10.csv": [lichess_row(f"id{i}", p) for i, p in enumerate(puzzles)],
        "header11.csv": [HEADER + ",DailyDate"]
        + [lichess_row(f"id{i}", p, 7) for i, p in enumerate(puzzles)],
    }
    read = {}
    for name, lines in files.items():
        got, skipped = read_puzzles(write(tmp_path, name, lines))
        assert skipped == []
        read[name] = [(p.fen, " ".join(p.moves), p.rating) for p in got]
        assert read[name] == puzzles
    with_ids, _ = read_puzzles(str(tmp_path / "header.csv"))
    assert [p.puzzle_id for p in with_ids] == ["id0", "id1", "id2"]
    assert [p.line for p in with_ids] == [2, 3, 4]
    assert with_ids[0].themes == "mate short"


def test_zstd_file(tmp_path):
    text = "\n".join([HEADER] + [lichess_row("a", MATE1), lichess_row("b", FORK)]) + "\n"
    path = tmp_path / "puzzles.csv.zst"
    path.write_bytes(zstandard.ZstdCompressor().compress(text.encode()))
    puzzles, skipped = read_puzzles(str(path))
    assert [p.puzzle_id for p in puzzles] == ["a", "b"] and skipped == []


def test_malformed_rows_are_reported_with_their_line_and_skipped(tmp_path):
    lines = [
        HEADER,
        lichess_row("ok1", MATE1),  # line 2
        lichess_row("badfen", ("not a fen", "c7c5 a1a8", 900)),  # line 3
        lichess_row("illegal", (MATE1[0], "c7c5 a1a7", 900)),  # line 4: a1a7 is legal...
        lichess_row("short", (MATE1[0], "c7c5", 900)),  # line 5: no solution move
        lichess_row("norating", (MATE1[0], "c7c5 a1a8", "")),  # line 6
        "",  # line 7: blank lines are not rows
        "ok?,only,three",  # line 8: too few columns for the header
        lichess_row("wrongside", (MATE1[0], "a1a8 c7c5", 900)),  # line 9: White cannot start
        lichess_row("ok2", FORK),  # line 10
    ]
    puzzles, skipped = read_puzzles(write(tmp_path, "mixed.csv", lines))
    assert [p.puzzle_id for p in puzzles] == ["ok1", "illegal", "ok2"]
    assert [p.line for p in puzzles] == [2, 4, 10]
    assert [s.line for s in skipped] == [3, 5, 6, 8, 9]
    reasons = {s.line: s.error for s in skipped}
    assert "bad FEN" in reasons[3]
    assert "at least one solution move" in reasons[5]
    assert "rating" in reasons[6]
    assert "no Rating column" in reasons[8]
    assert "not legal" in reasons[9]


def test_num_counts_well_formed_puzzles(tmp_path):
    lines = [short_row(MATE1), "x,y,z", short_row(MATE2), short_row(FORK)]
    puzzles, skipped = read_puzzles(write(tmp_path, "p.csv", lines), num=2)
    assert [p.line for p in puzzles] == [1, 3]
    assert [s.line for s in skipped] == [2]


def test_missing_file_and_header_without_moves(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.csv"):
        read_puzzles(str(tmp_path / "nope.csv"))
    path = write(tmp_path, "h.csv", ["PuzzleId,FEN,Rating", "a,b,1"])
    with pytest.raises(ValueError):
        read_puzzles(path)


def test_buckets():
    assert [bucket_of(r) for r in (0, 399, 400, 1199, 1200, 2799)] == [0, 0, 400, 800, 1200, 2400]
    buckets = accuracy_by_bucket([650, 700, 1230, 1900, 1950], [True, False, True, True, True])
    assert buckets == [
        {"lo": 400, "hi": 800, "solved": 1, "total": 2, "accuracy": 0.5},
        {"lo": 1200, "hi": 1600, "solved": 1, "total": 1, "accuracy": 1.0},
        {"lo": 1600, "hi": 2000, "solved": 2, "total": 2, "accuracy": 1.0},
    ]
    assert accuracy_by_bucket([1230], [True], width=100)[0]["lo"] == 1200


def test_evaluate_summarises_and_starts_a_new_game_per_puzzle(scripted):
    _, after = scripted
    puzzles = [as_puzzle(p, i) for i, p in enumerate((MATE1, MATE2, FORK), 1)]
    agent = solution_agent(
        scripted, [MATE1, MATE2, FORK], {after(MATE2[0], "c7c6 a2a8 c6c8"): "a8a7"}
    )
    result = evaluate(agent, puzzles, show_progress=False)
    assert agent.new_games == 3
    assert (result["solved"], result["total"]) == (2, 3)
    assert result["accuracy"] == pytest.approx(2 / 3)
    assert [b["lo"] for b in result["buckets"]] == [400, 1200, 1600]
    assert [r["solved"] for r in result["puzzles"]] == [True, False, True]
    assert result["puzzles"][1]["failed_at"] == 3


def test_stockfish_solves_the_built_puzzles(stockfish):
    puzzles = [as_puzzle(p) for p in (MATE1, MATE2, FORK)]
    with StockfishAgent(EngineSettings(path=stockfish, nodes=20_000)) as agent:
        result = evaluate(agent, puzzles, show_progress=False)
    assert result["solved"] == 3


def test_random_agent_fails_the_two_move_mate():
    # Ra8+ has probability 1/24, and the mate after it 1/24: far below solving.
    with RandomAgent(seed=1) as agent:
        result = evaluate(agent, [as_puzzle(MATE2)] * 20, show_progress=False)
    assert result["solved"] <= 2


def test_cli_writes_json_and_plot(tmp_path, stockfish, capsys):
    lines = [HEADER, lichess_row("a", MATE1), "broken,row", lichess_row("b", MATE2)]
    path = write(tmp_path, "p.csv", lines)
    out, plot = tmp_path / "r.json", tmp_path / "r.png"
    code = main(
        [
            "--agent", "random:seed=2",
            "--agent", "stockfish:nodes=5000,name=SF",
            "--engine", stockfish,
            "--puzzles", path, "--out", str(out), "--plot", str(plot), "--quiet",
        ]
    )  # fmt: skip
    assert code == 0
    report = json.loads(out.read_text())
    assert report["num_puzzles"] == 2
    assert report["skipped"][0]["line"] == 3
    assert [a["agent"] for a in report["agents"]] == ["random:seed=2", "SF"]
    assert report["agents"][1]["accuracy"] == 1.0
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"{path}:3: skipped" in capsys.readouterr().err


def test_cli_rejects_a_bad_spec(tmp_path):
    path = write(tmp_path, "p.csv", [short_row(MATE1)])
    with pytest.raises(SystemExit):
        main(["--agent", "stockfish", "--puzzles", path, "--out", ""])
    with pytest.raises(SystemExit):
        main(["--agent", "random:seed=x", "--puzzles", path, "--out", ""])


def test_real_puzzle_files_read_cleanly(shared_data):
    folder = shared_data / "puzzles"
    short, skipped = read_puzzles(
        str(folder / "lichess_puzzles_10k_fen_moves_rating__jorgenwh_alpha-nonzero.csv"), 1000
    )
    assert len(short) == 1000 and not skipped and short[0].line == 1
    full, skipped = read_puzzles(str(folder / "lichess_puzzles_first1000__mihaipaulx_chess4c.csv"))
    assert len(full) == 1000 and not skipped and full[0].puzzle_id == "00008"
    newer, skipped = read_puzzles(
        str(folder / "lichess_db_puzzle_1499__Darlinx25_Chess-Practice.csv"), 100
    )
    assert len(newer) == 100 and not skipped
