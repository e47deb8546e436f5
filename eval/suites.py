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
import sys
from dataclasses import asdict

import chess

from core.eval_sets import TestPosition, read_suite
from eval.agents.base import Agent
from eval.agents.players import make_agent
from eval.agents.specs import SPEC_HELP, parse_agent_spec
from runtime.interrupts import interrupted
from runtime.outputs import OutputError, check_file
from runtime.progress import Progress

STS_REFERENCE = {"max_points": 15_000, "Giraffe (0.1 s)": 8_526, "Stockfish 5 (0.1 s)": 10_505}


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
    try:
        return _main(argv)
    except KeyboardInterrupt:
        return interrupted(
            "suites: interrupted; the results are written only once every agent is done"
        )


def _main(argv: list[str] | None) -> int:
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
    except ValueError as e:
        parser.error(str(e))
    try:
        check_file(args.out, "--out")  # before any work: an evaluation may run for hours
    except OutputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    try:
        suites = {path: read_suite(path, args.num) for path in args.epd}
    except (ValueError, FileNotFoundError) as e:  # missing or not text
        print(f"error: {e}", file=sys.stderr)
        return 1
    for path, (positions, skipped) in suites.items():
        for row in skipped:
            print(f"{path}:{row.line}: skipped: {row.error}", file=sys.stderr)
        if not positions:  # "solved 0/0" would pass for a result
            print(f"error: no well-formed positions in {path}", file=sys.stderr)
            return 1
        print(f"{path}: {len(positions)} positions", file=sys.stderr)
    results = []
    for spec in specs:
        try:
            agent = make_agent(spec, engine_path=args.engine)
        except (ValueError, FileNotFoundError) as e:  # no checkpoint, no engine
            print(f"error: agent {spec.text!r}: {e}", file=sys.stderr)
            return 2
        with agent:
            results += _run_agent(agent, spec.text, suites, show_progress=not args.quiet)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump({"results": results}, f, indent=1)
        print(f"wrote {args.out}", file=sys.stderr)
    return 0


def _run_agent(agent: Agent, spec: str, suites: dict, show_progress: bool) -> list[dict]:
    """The agent on every suite, each result printed as it comes."""
    results = []
    for path, (positions, skipped) in suites.items():
        result = run_suite(agent, positions, show_progress=show_progress)
        result = {"agent": agent.name, "spec": spec, "epd": path} | result
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
    return results


if __name__ == "__main__":
    sys.exit(main())
