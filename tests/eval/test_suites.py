import collections
import json

import chess
import pytest

from core.eval_sets import parse_epd_line, parse_points, read_suite, theme_of
from eval.agents.stockfish import EngineSettings, StockfishAgent
from eval.suites import main, run_suite, score_move

# Hand-made lines in the formats of the real suites.
STS_A = (
    "1kr5/3n4/q3p2p/p2n2p1/PppB1P2/5BP1/1P2Q2P/3R2K1 w - - bm f5; "
    'id "STS(v1.0) Undermine.001"; c0 "f5=10, Be5+=2, Bf2=3, Bg4=2";'
)
STS_B = (
    "1n5k/3q3p/pp1p2pB/5r2/1PP1Qp2/P6P/6P1/2R3K1 w - - bm c5; "
    'id "STS(v1.0) Undermine.002"; c0 "c5=10, Qd4+=4, b5=4, g4=3";'
)
STS_C = (
    "r1bqkbnr/pppp1ppp/2n5/4p3/2B1P3/5Q2/PPPP1PPP/RNB1K1NR w KQkq - 2 4 bm Qxf7#; "
    'id "STS(v1.0) Open Files.001"; c0 "Qxf7#=10, Qd1=1";'
)
WAC = 'r1bqkbnr/pppp1ppp/2n5/4p3/2B1P3/5Q2/PPPP1PPP/RNB1K1NR w KQkq - 2 4 bm Qxf7#; id "WAC.001";'
AVOID = (
    "rnbqkbnr/pppp1ppp/8/4p3/6P1/5P2/PPPPP2P/RNBQKBNR b KQkq - 0 2 am Qe7; "
    'id "AM.001"; c0 "J. Doe-R. Roe, Somewhere 1999";'
)


def test_parse_points():
    board = chess.Board(STS_A.split(" bm")[0])
    assert parse_points("f5=10, Be5+=2, Bf2=3, Bg4=2", board) == {
        "f4f5": 10,
        "d4e5": 2,
        "d4f2": 3,
        "f3g4": 2,
    }
    assert parse_points("J. Polgar-Berkes, Budapest 2003", board) is None
    with pytest.raises(ValueError, match="'Ke9'"):
        parse_points("f5=10, Ke9=3", board)
    with pytest.raises(ValueError, match="mixes"):
        parse_points("f5=10, whatever", board)


def test_themes():
    assert theme_of("STS(v1.0) Undermine.001") == "Undermine"
    assert theme_of("STS(v2.2) Open Files and Diagonals.100") == "Open Files and Diagonals"
    assert theme_of("WAC.001") == "WAC"
    assert theme_of("arasan2024.17") == "arasan2024"
    assert theme_of("BK.01") == "BK"
    assert theme_of("custom") == "custom"


def test_parse_lines():
    sts = parse_epd_line(STS_A, 7)
    assert (sts.line, sts.id, sts.theme, sts.max_points) == (
        7,
        "STS(v1.0) Undermine.001",
        "Undermine",
        10,
    )
    assert sts.best == {"f4f5"} and sts.points["f3g4"] == 2
    wac = parse_epd_line(WAC, 1)
    assert wac.points == {} and wac.best == {"f3f7"}
    avoid = parse_epd_line(AVOID, 1)
    assert avoid.points == {} and avoid.avoid == {"d8e7"} and avoid.best == frozenset()


def test_scoring_by_points_and_by_bm_am():
    sts = parse_epd_line(STS_A, 1)
    assert score_move(sts, "f4f5") == {"points": 10, "solved": True}
    assert score_move(sts, "d4f2") == {"points": 3, "solved": False}
    assert score_move(sts, "g1h1") == {"points": 0, "solved": False}
    avoid = parse_epd_line(AVOID, 1)
    assert score_move(avoid, "d8h4") == {"points": None, "solved": True}
    assert score_move(avoid, "d8e7") == {"points": None, "solved": False}


def test_malformed_lines_are_skipped_with_line_numbers(tmp_path):
    lines = [
        STS_A,  # 1
        "# a comment",  # 2
        "not/a/fen w - - bm e4;",  # 3
        STS_A.replace("Bg4=2", "Bg9=2"),  # 4: a point move that does not parse
        'rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - id "X.1";',  # 5: nothing to score
        "",  # 6
        WAC,  # 7
    ]
    path = tmp_path / "s.epd"
    path.write_text("\n".join(lines) + "\n")
    positions, skipped = read_suite(str(path))
    assert [p.line for p in positions] == [1, 7]
    assert [s.line for s in skipped] == [3, 4, 5]
    assert "Bg9" in skipped[1].error
    assert "nothing to score" in skipped[2].error
    assert [p.line for p in read_suite(str(path), num=1)[0]] == [1]


def test_run_suite_totals_per_theme(scripted):
    agent_class, _ = scripted
    positions = [parse_epd_line(line, i) for i, line in enumerate((STS_A, STS_B, STS_C), 1)]
    # 3 points, 10 points and 0 points (a move outside the list).
    agent = agent_class(
        {positions[0].fen: "d4f2", positions[1].fen: "c4c5", positions[2].fen: "f3e2"}
    )
    result = run_suite(agent, positions, show_progress=False)
    assert (result["points"], result["max_points"], result["solved"]) == (13, 30, 1)
    assert result["by_theme"] == {
        "Undermine": {
            "positions": 2,
            "points": 13,
            "max_points": 20,
            "solved": 1,
            "with_solution": 2,
        },
        "Open Files": {
            "positions": 1,
            "points": 0,
            "max_points": 10,
            "solved": 0,
            "with_solution": 1,
        },
    }
    assert agent.new_games == 3
    assert [r["move"] for r in result["records"]] == ["d4f2", "c4c5", "f3e2"]


def test_stockfish_on_a_suite_and_the_cli(tmp_path, stockfish):
    path = tmp_path / "s.epd"
    path.write_text("\n".join([STS_C, WAC, AVOID]) + "\n")
    positions, _ = read_suite(str(path))
    with StockfishAgent(EngineSettings(path=stockfish, nodes=5000)) as agent:
        result = run_suite(agent, positions, show_progress=False)
    assert (result["points"], result["solved"], result["with_solution"]) == (10, 3, 3)
    out = tmp_path / "r.json"
    argv = ["--agent", "random:seed=1", "--epd", str(path), "--out", str(out), "--quiet"]
    assert main(argv) == 0
    [report] = json.loads(out.read_text())["results"]
    assert report["agent"] == "random:seed=1" and report["positions"] == 3


def test_real_suites_parse_completely(shared_data):
    folder = shared_data / "epd"
    sts, skipped = read_suite(str(folder / "STS1-STS15_LAN_v3.epd"))
    assert len(sts) == 1500 and not skipped
    assert sum(p.max_points for p in sts) == 15_000
    themes = collections.Counter(p.theme for p in sts)
    # 15 themes of 100; one id of the file spells its theme's name in another order.
    assert sorted(themes.values())[-15:] == [99] + [100] * 14
    for name, count in [
        ("wac_300_revised__arasan.epd", 300),
        ("arasan2024.epd", 200),
        ("bratko-kopec.epd", 24),
    ]:
        positions, skipped = read_suite(str(folder / name))
        assert len(positions) == count and not skipped
        assert all(p.has_solution and not p.points for p in positions)


@pytest.mark.parametrize("text", ["", "\n\n", "not an epd line\n"])
def test_a_suite_without_positions_is_refused(tmp_path, capsys, text):
    epd = tmp_path / "empty.epd"
    epd.write_text(text)
    out = tmp_path / "suites.json"
    assert main(["--agent", "random", "--epd", str(epd), "--out", str(out), "--quiet"]) == 1
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines()[-1] == f"error: no well-formed positions in {epd}"
    assert "solved" not in captured.out and not out.exists()
