"""Lichess puzzle accuracy: the paper's protocol, overall and per rating bucket.

A puzzle is a FEN, a list of UCI moves and a rating. `Moves[0]` is the opponent's move and is
pushed first; the agent must then play `Moves[1]`, `Moves[3]`, ... while the opponent replies
with `Moves[2]`, `Moves[4]`, .... A move other than the solution that checkmates at once also
solves the puzzle (Lichess accepts every mate). Anything else fails it.

    python -m eval.puzzles --agent stockfish:nodes=100000 --agent random \\
        --puzzles puzzles.csv[.zst] --num 500 --out results/puzzles.json --plot results/puzzles.png

The CSV may have the Lichess header (`PuzzleId,FEN,Moves,Rating,...`, 10 or 11 columns) or none:
then 3 columns are `FEN,Moves,Rating` and 10 or more the Lichess order (read by
core/eval_sets.py). Malformed rows (bad FEN, illegal or missing moves, no rating, wrong column
count) are reported with their line number and skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass

import chess

from core.eval_sets import Puzzle, read_puzzles
from eval.agents.base import Agent
from eval.agents.players import make_agent
from eval.agents.specs import SPEC_HELP, parse_agent_spec
from runtime.interrupts import interrupted
from runtime.outputs import OutputError, check_file
from runtime.progress import Progress

DEFAULT_BUCKET_WIDTH = 400


@dataclass(frozen=True)
class PuzzleOutcome:
    solved: bool
    played: tuple[str, ...]  # the agent's moves, in order
    reason: str  # "solution", "alternative mate", "wrong move", "illegal move"
    failed_at: int | None = None  # index in Puzzle.moves of the move the agent missed


# --- solving -----------------------------------------------------------------------------


def play_puzzle(puzzle: Puzzle, agent: Agent) -> PuzzleOutcome:
    """Plays one puzzle with `agent` on the solver's side (the protocol in the module doc)."""
    board = chess.Board(puzzle.fen)
    board.push_uci(puzzle.moves[0])
    played: list[str] = []
    for index in range(1, len(puzzle.moves), 2):
        move = agent.choose_move(board)
        played.append(move.uci())
        expected = chess.Move.from_uci(puzzle.moves[index])
        if move == expected:
            board.push(move)
            if board.is_checkmate():
                return PuzzleOutcome(True, tuple(played), "solution")
        elif move not in board.legal_moves:
            return PuzzleOutcome(False, tuple(played), "illegal move", index)
        else:
            board.push(move)
            if board.is_checkmate():
                return PuzzleOutcome(True, tuple(played), "alternative mate")
            return PuzzleOutcome(False, tuple(played), "wrong move", index)
        if index + 1 < len(puzzle.moves):
            board.push_uci(puzzle.moves[index + 1])
    return PuzzleOutcome(True, tuple(played), "solution")


def bucket_of(rating: int, width: int = DEFAULT_BUCKET_WIDTH) -> int:
    """Lower edge of the rating bucket [lo, lo + width)."""
    return (rating // width) * width


def accuracy_by_bucket(
    ratings: Iterable[int], solved: Iterable[bool], width: int = DEFAULT_BUCKET_WIDTH
) -> list[dict]:
    """Per rating bucket (ascending, only non-empty ones): lo, hi, solved, total, accuracy."""
    counts: dict[int, list[int]] = {}
    for rating, ok in zip(ratings, solved, strict=True):
        entry = counts.setdefault(bucket_of(rating, width), [0, 0])
        entry[0] += int(ok)
        entry[1] += 1
    return [
        {"lo": lo, "hi": lo + width, "solved": s, "total": n, "accuracy": s / n}
        for lo, (s, n) in sorted(counts.items())
    ]


def evaluate(
    agent: Agent,
    puzzles: list[Puzzle],
    bucket_width: int = DEFAULT_BUCKET_WIDTH,
    show_progress: bool = True,
) -> dict:
    """Plays every puzzle; returns the agent's summary and per-puzzle records (JSON-ready)."""
    progress = (
        Progress(f"puzzles [{agent.name}]", len(puzzles), "puzzles") if show_progress else None
    )
    records = []
    solved = 0
    start = time.monotonic()
    for count, puzzle in enumerate(puzzles, 1):
        agent.new_game()
        outcome = play_puzzle(puzzle, agent)
        solved += outcome.solved
        records.append(
            {"line": puzzle.line, "id": puzzle.puzzle_id, "rating": puzzle.rating} | asdict(outcome)
        )
        if progress:
            progress.update(count, f"accuracy {solved / count:.1%}")
    seconds = time.monotonic() - start
    if progress:
        progress.done(f"accuracy {solved / max(1, len(puzzles)):.1%}")
    return {
        "agent": agent.name,
        "solved": solved,
        "total": len(puzzles),
        "accuracy": solved / len(puzzles) if puzzles else float("nan"),
        "seconds": round(seconds, 3),
        "puzzles_per_s": round(len(puzzles) / seconds, 3) if seconds > 0 else None,
        "bucket_width": bucket_width,
        "buckets": accuracy_by_bucket(
            [p.rating for p in puzzles], [r["solved"] for r in records], bucket_width
        ),
        "puzzles": records,
    }


def summary_table(results: list[dict]) -> str:
    """A plain-text table: one row per agent, overall then each bucket's accuracy."""
    buckets = sorted({(b["lo"], b["hi"]) for r in results for b in r["buckets"]})
    headers = ["agent", "overall"] + [f"{lo}-{hi - 1}" for lo, hi in buckets]
    rows = []
    for r in results:
        by = {(b["lo"], b["hi"]): b for b in r["buckets"]}
        cells = [r["agent"], f"{r['accuracy']:.1%} ({r['solved']}/{r['total']})"]
        for key in buckets:
            b = by.get(key)
            cells.append(f"{b['accuracy']:.1%} (n={b['total']})" if b else "-")
        rows.append(cells)
    widths = [max(len(str(x)) for x in column) for column in zip(headers, *rows, strict=True)]
    lines = [
        "  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)) for r in [headers, *rows]
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except KeyboardInterrupt:
        return interrupted(
            "puzzles: interrupted; the results are written only once every agent is done"
        )


def _main(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m eval.puzzles",
        description="Puzzle accuracy of one or several agents on a Lichess puzzle CSV.",
        epilog=SPEC_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--agent", action="append", required=True, help="agent spec (repeatable)")
    parser.add_argument("--puzzles", required=True, help="Lichess puzzle CSV, .csv or .csv.zst")
    parser.add_argument("--num", type=int, default=None, help="first N puzzles (default all)")
    parser.add_argument("--engine", default=None, help="Stockfish binary for stockfish/oracle")
    parser.add_argument("--bucket-width", type=int, default=DEFAULT_BUCKET_WIDTH)
    parser.add_argument("--out", default="results/puzzles.json", help="JSON results file")
    parser.add_argument("--plot", default=None, help="PNG of accuracy by rating bucket")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    args = parser.parse_args(argv)
    if args.num is not None and args.num < 1:
        parser.error("--num must be >= 1")
    if args.bucket_width < 1:
        parser.error("--bucket-width must be >= 1")
    try:
        specs = [parse_agent_spec(s) for s in args.agent]
    except ValueError as e:
        parser.error(str(e))
    try:  # before any work: an evaluation may run for hours
        check_file(args.out, "--out")
        check_file(args.plot, "--plot")
    except OutputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    try:
        puzzles, skipped = read_puzzles(args.puzzles, args.num)
    except (ValueError, FileNotFoundError) as e:  # missing, not text, bad header
        print(f"error: {e}", file=sys.stderr)
        return 1
    for row in skipped:
        print(f"{args.puzzles}:{row.line}: skipped: {row.error}", file=sys.stderr)
    if not puzzles:
        print(f"error: no well-formed puzzles in {args.puzzles}", file=sys.stderr)
        return 1
    print(
        f"{len(puzzles)} puzzles from {args.puzzles} ({len(skipped)} malformed rows skipped)",
        file=sys.stderr,
    )
    results = []
    for spec in specs:
        try:
            agent = make_agent(spec, engine_path=args.engine)
        except (ValueError, FileNotFoundError) as e:  # e.g. no such checkpoint, no engine
            print(f"error: agent {spec.text!r}: {e}", file=sys.stderr)
            return 2
        with agent:
            result = evaluate(agent, puzzles, args.bucket_width, show_progress=not args.quiet)
        result["spec"] = spec.text
        results.append(result)
    report = {
        "puzzles_file": args.puzzles,
        "num_puzzles": len(puzzles),
        "skipped": [asdict(s) for s in skipped],
        "agents": results,
    }
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
        print(f"wrote {args.out}", file=sys.stderr)
    if args.plot:
        from eval.plot import plot_puzzle_accuracy

        plot_puzzle_accuracy(results, args.plot, title=os.path.basename(args.puzzles))
        print(f"wrote {args.plot}", file=sys.stderr)
    print(summary_table(results))
    print(json.dumps({r["agent"]: round(r["accuracy"], 4) for r in results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
