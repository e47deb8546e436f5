"""EPD test suites: STS-style move points and bm/am solved counts.

    python -m eval.suites --agent stockfish:time=0.1 --epd STS1-STS15_LAN_v3.epd \\
        [--epd wac.epd ...] [--num N] [--out results/suites.json]

Each EPD line is a position and operations. When `c0` (or `c1`) lists move points,
`"f5=10, Be5+=2, Bf2=3"` (SAN), the position is scored by points: the chosen move's points, 0
for an unlisted move, out of the best listed (10 in the Strategic Test Suite); totals are
given overall and per theme, the theme being the `id` without its number
("STS(v1.0) Undermine.001" -> "Undermine"). Every position with `bm` (best moves) and/or `am`
(moves to avoid) also counts as solved when the move is a `bm` and not an `am`; WAC, Arasan and
Bratko-Kopec are scored that way. Malformed lines are reported with their line number and
skipped.

Published STS totals at 0.1 s per position (out of 15,000): Giraffe 8,526; Stockfish 5 10,505.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass

import chess

from core.progress import Progress
from eval.engines import SPEC_HELP, Agent, make_agent, parse_agent_spec

POINT_FIELDS = ("c0", "c1")
STS_REFERENCE = {"max_points": 15_000, "Giraffe (0.1 s)": 8_526, "Stockfish 5 (0.1 s)": 10_505}
_POINT_ITEM = re.compile(r"^\s*(\S+?)\s*=\s*(-?\d+)\s*$")


@dataclass(frozen=True)
class TestPosition:
    line: int
    fen: str
    id: str
    theme: str
    points: dict[str, int]  # UCI -> points; empty when the line has no point list
    best: frozenset[str]  # UCI moves of `bm`
    avoid: frozenset[str]  # UCI moves of `am`

    @property
    def max_points(self) -> int:
        return max(self.points.values()) if self.points else 0

    @property
    def has_solution(self) -> bool:
        return bool(self.best or self.avoid)


@dataclass(frozen=True)
class SkippedLine:
    line: int
    error: str


def parse_points(text: str, board: chess.Board) -> dict[str, int] | None:
    """`"f5=10, Be5+=2"` -> {UCI: points}; None when `text` is not a point list at all (e.g. a
    game's name in Arasan's c0); ValueError when it is one but a move does not parse."""
    items = [item for item in text.split(",") if item.strip()]
    matches = [_POINT_ITEM.match(item) for item in items]
    if not items or not any(matches):
        return None
    if not all(matches):
        raise ValueError(f"point list {text!r} mixes moves=points with other text")
    points: dict[str, int] = {}
    for match in matches:
        san, value = match.group(1), int(match.group(2))
        try:
            move = board.parse_san(san)
        except ValueError:
            raise ValueError(f"{san!r} in point list {text!r} is not a legal move") from None
        points[move.uci()] = value
    return points


def theme_of(position_id: str) -> str:
    """The test's theme from its id: "STS(v1.0) Undermine.001" -> "Undermine", "WAC.001" ->
    "WAC"; the id itself when it has no trailing number."""
    name = position_id.split(") ", 1)[1] if ") " in position_id else position_id
    stem, dot, number = name.strip().rpartition(".")
    return stem if dot and number.isdigit() and stem else name.strip()


def parse_epd_line(text: str, line: int) -> TestPosition:
    """One EPD line -> TestPosition; ValueError saying what is wrong."""
    fields = text.split()
    if len(fields) > 6 and fields[4].isdigit() and fields[5].isdigit():
        # A full FEN (halfmove clock and move number) where EPD has four fields: accept it.
        text = " ".join(fields[:4] + fields[6:])
    try:
        board, ops = chess.Board.from_epd(text)
    except ValueError as e:
        raise ValueError(f"not a valid EPD line: {e}") from None
    position_id = str(ops.get("id", "") or "")
    points: dict[str, int] = {}
    for key in POINT_FIELDS:
        if isinstance(ops.get(key), str):
            parsed = parse_points(ops[key], board)
            if parsed:
                points = parsed
                break

    def moves(key: str) -> frozenset[str]:
        value = ops.get(key)
        if value is None:
            return frozenset()
        if not isinstance(value, list):
            raise ValueError(f"{key} {value!r} is not a move list")
        return frozenset(m.uci() for m in value)

    position = TestPosition(
        line=line,
        fen=board.fen(),
        id=position_id,
        theme=theme_of(position_id) if position_id else "",
        points=points,
        best=moves("bm"),
        avoid=moves("am"),
    )
    if not position.points and not position.has_solution:
        raise ValueError("neither move points (c0/c1) nor bm/am: nothing to score")
    if board.is_game_over():
        raise ValueError("the position is already over")
    return position


def iter_suite(path: str, skipped: list[SkippedLine]) -> Iterator[TestPosition]:
    with open(path, encoding="utf-8") as f:
        for number, text in enumerate(f, 1):
            text = text.strip()
            if not text or text.startswith("#"):
                continue
            try:
                yield parse_epd_line(text, number)
            except ValueError as e:
                skipped.append(SkippedLine(number, str(e)))


def read_suite(path: str, num: int | None = None) -> tuple[list[TestPosition], list[SkippedLine]]:
    """The first `num` well-formed positions of an EPD file (all when None), and the lines
    skipped as malformed."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"EPD file {path!r} does not exist")
    skipped: list[SkippedLine] = []
    positions: list[TestPosition] = []
    for position in iter_suite(path, skipped):
        if num is not None and len(positions) >= num:
            break
        positions.append(position)
    return positions, skipped


def score_move(position: TestPosition, move: str) -> dict:
    """What one chosen move (UCI) earns: points (None without a point list) and solved (None
    without bm/am)."""
    return {
        "points": position.points.get(move, 0) if position.points else None,
        "solved": (move in position.best or not position.best) and move not in position.avoid
        if position.has_solution
        else None,
    }


def _tally(records: list[dict]) -> dict:
    scored = [r for r in records if r["points"] is not None]
    judged = [r for r in records if r["solved"] is not None]
    return {
        "positions": len(records),
        "points": sum(r["points"] for r in scored),
        "max_points": sum(r["max_points"] for r in scored),
        "solved": sum(bool(r["solved"]) for r in judged),
        "with_solution": len(judged),
    }


def summarize_suite(records: list[dict]) -> dict:
    """Totals overall and per theme (themes in order of first appearance)."""
    themes: dict[str, list[dict]] = {}
    for r in records:
        themes.setdefault(r["theme"], []).append(r)
    return _tally(records) | {"by_theme": {t: _tally(rs) for t, rs in themes.items()}}


def run_suite(agent: Agent, positions: list[TestPosition], show_progress: bool = True) -> dict:
    """Asks the agent for a move in every position; per-position records and totals."""
    progress = (
        Progress(f"suite [{agent.name}]", len(positions), "positions") if show_progress else None
    )
    records = []
    for count, position in enumerate(positions, 1):
        agent.new_game()
        move = agent.choose_move(chess.Board(position.fen)).uci()
        records.append(
            {
                "line": position.line,
                "id": position.id,
                "theme": position.theme,
                "move": move,
                "max_points": position.max_points,
            }
            | score_move(position, move)
        )
        if progress:
            so_far = _tally(records)
            progress.update(count, f"points {so_far['points']} solved {so_far['solved']}")
    if progress:
        progress.done()
    return summarize_suite(records) | {"records": records}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m eval.suites",
        description="Score agents on EPD test suites (STS points; bm/am solved counts).",
        epilog=SPEC_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--agent", action="append", required=True, help="agent spec (repeatable)")
    parser.add_argument("--epd", action="append", required=True, help="EPD file (repeatable)")
    parser.add_argument("--num", type=int, default=None, help="first N positions of each file")
    parser.add_argument("--engine", default=None, help="Stockfish binary for stockfish/oracle")
    parser.add_argument("--out", default="results/suites.json", help="JSON results file")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    args = parser.parse_args(argv)
    try:
        specs = [parse_agent_spec(s) for s in args.agent]
        suites = {path: read_suite(path, args.num) for path in args.epd}
    except (ValueError, FileNotFoundError) as e:
        parser.error(str(e))
    for path, (positions, skipped) in suites.items():
        for row in skipped:
            print(f"{path}:{row.line}: skipped: {row.error}", file=sys.stderr)
        print(f"{path}: {len(positions)} positions", file=sys.stderr)
    results = []
    for spec in specs:
        try:
            agent = make_agent(spec, engine_path=args.engine)
        except (ValueError, FileNotFoundError) as e:  # e.g. no such checkpoint, no engine
            print(f"error: agent {spec.text!r}: {e}", file=sys.stderr)
            return 2
        with agent:
            for path, (positions, skipped) in suites.items():
                result = run_suite(agent, positions, show_progress=not args.quiet)
                result = {"agent": agent.name, "spec": spec.text, "epd": path} | result
                result["skipped"] = [asdict(s) for s in skipped]
                if result["max_points"] == STS_REFERENCE["max_points"]:
                    result["reference"] = STS_REFERENCE
                results.append(result)
                print(
                    f"{agent.name} on {os.path.basename(path)}: "
                    + (
                        f"points {result['points']}/{result['max_points']}  "
                        if result["max_points"]
                        else ""
                    )
                    + f"solved {result['solved']}/{result['with_solution']}"
                )
                for theme, tally in result["by_theme"].items():
                    if tally["max_points"]:
                        print(f"  {theme}: points {tally['points']}/{tally['max_points']}")
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump({"results": results}, f, indent=1)
        print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
