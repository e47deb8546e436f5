"""Lichess puzzle accuracy: the paper's protocol, overall and per rating bucket.

A puzzle is a FEN, a list of UCI moves and a rating. `Moves[0]` is the opponent's move and is
pushed first; the agent must then play `Moves[1]`, `Moves[3]`, ... while the opponent replies
with `Moves[2]`, `Moves[4]`, .... A move other than the solution that checkmates at once also
solves the puzzle (Lichess accepts every mate). Anything else fails it.

    python -m eval.puzzles --agent stockfish:nodes=100000 --agent random \\
        --puzzles puzzles.csv[.zst] --num 500 --out results/puzzles.json --plot results/puzzles.png

The CSV may have the Lichess header (`PuzzleId,FEN,Moves,Rating,...`, 10 or 11 columns) or none:
then 3 columns are `FEN,Moves,Rating` and 10 or more the Lichess order. Malformed rows (bad
FEN, illegal or missing moves, no rating, wrong column count) are reported with their line
number and skipped.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from typing import TextIO

import chess

from core.progress import Progress
from eval.engines import SPEC_HELP, Agent, make_agent, parse_agent_spec

DEFAULT_BUCKET_WIDTH = 400
LICHESS_COLUMNS = ("PuzzleId", "FEN", "Moves", "Rating")  # the first four, in this order
SHORT_COLUMNS = ("FEN", "Moves", "Rating")  # a header-less 3-column file


@dataclass(frozen=True)
class Puzzle:
    line: int  # 1-based line of the record in its file
    fen: str
    moves: tuple[str, ...]  # UCI; moves[0] is the opponent's setup move
    rating: int
    puzzle_id: str = ""
    themes: str = ""


@dataclass(frozen=True)
class SkippedRow:
    line: int
    error: str


@dataclass(frozen=True)
class PuzzleOutcome:
    solved: bool
    played: tuple[str, ...]  # the agent's moves, in order
    reason: str  # "solution", "alternative mate", "wrong move", "illegal move"
    failed_at: int | None = None  # index in Puzzle.moves of the move the agent missed


# --- reading -----------------------------------------------------------------------------


def open_text(path: str) -> TextIO:
    """A text stream over `path`, decompressing `.zst` on the fly."""
    if path.endswith(".zst"):
        import zstandard

        raw = open(path, "rb")
        stream = zstandard.ZstdDecompressor().stream_reader(raw, closefd=True)
        return io.TextIOWrapper(stream, encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")


def _is_header(row: list[str]) -> bool:
    names = {cell.strip().lower() for cell in row}
    return bool(names & {name.lower() for name in LICHESS_COLUMNS})


def _header_columns(row: list[str], path: str) -> dict[str, int]:
    """Column positions by name (case-insensitive); ValueError if FEN, Moves or Rating lacks."""
    names = {cell.strip().lower(): i for i, cell in enumerate(row)}
    columns = {
        name: names[name.lower()] for name in (*LICHESS_COLUMNS, "Themes") if name.lower() in names
    }
    missing = [name for name in SHORT_COLUMNS if name not in columns]
    if missing:
        raise ValueError(f"{path}: header {row} lacks the column(s) {missing}")
    return columns


def _columns_for(row: list[str], header: dict[str, int] | None) -> dict[str, int]:
    if header is not None:
        return header
    if len(row) == len(SHORT_COLUMNS):
        return {name: i for i, name in enumerate(SHORT_COLUMNS)}
    if len(row) >= 10:
        columns = {name: i for i, name in enumerate(LICHESS_COLUMNS)}
        columns["Themes"] = 7
        return columns
    raise ValueError(
        f"{len(row)} columns: without a header a row needs 3 (FEN,Moves,Rating) "
        "or the Lichess 10+ (PuzzleId,FEN,Moves,Rating,...)"
    )


def parse_puzzle(row: list[str], columns: dict[str, int], line: int) -> Puzzle:
    """One CSV record -> Puzzle, checking the FEN and that every move is legal in turn.

    ValueError saying what is wrong (the caller adds the file and line).
    """

    def cell(name: str) -> str:
        index = columns.get(name)
        if index is None or index >= len(row):
            raise ValueError(f"no {name} column ({len(row)} fields)")
        return row[index].strip()

    fen = cell("FEN")
    moves = tuple(cell("Moves").split())
    rating_text = cell("Rating")
    try:
        rating = int(float(rating_text))
    except ValueError:
        raise ValueError(f"rating {rating_text!r} is not a number") from None
    if len(moves) < 2:
        raise ValueError(f"needs the setup move and at least one solution move, got {moves}")
    try:
        board = chess.Board(fen)
    except ValueError as e:
        raise ValueError(f"bad FEN {fen!r}: {e}") from None
    for ply, uci in enumerate(moves):
        try:
            board.push_uci(uci)
        except ValueError:
            raise ValueError(f"move {ply} {uci!r} is not legal after {moves[:ply]}") from None
    return Puzzle(
        line=line,
        fen=fen,
        moves=moves,
        rating=rating,
        puzzle_id=row[columns["PuzzleId"]].strip() if "PuzzleId" in columns else "",
        themes=row[columns["Themes"]].strip()
        if "Themes" in columns and columns["Themes"] < len(row)
        else "",
    )


def iter_puzzles(path: str, skipped: list[SkippedRow] | None = None) -> Iterator[Puzzle]:
    """The puzzles of a Lichess puzzle CSV (`.csv` or `.csv.zst`, header or none), in file
    order. Malformed rows are appended to `skipped` (and reported on stderr when it is None)."""
    with open_text(path) as stream:
        reader = csv.reader(stream)
        header: dict[str, int] | None = None
        first = True
        for row in reader:
            line = reader.line_num
            if not row or all(not cell.strip() for cell in row):
                continue
            if first:
                first = False
                if _is_header(row):
                    header = _header_columns(row, path)
                    continue
            try:
                yield parse_puzzle(row, _columns_for(row, header), line)
            except ValueError as e:
                record = SkippedRow(line, str(e))
                if skipped is None:
                    print(f"{path}:{line}: skipped: {e}", file=sys.stderr)
                else:
                    skipped.append(record)


def read_puzzles(path: str, num: int | None = None) -> tuple[list[Puzzle], list[SkippedRow]]:
    """The first `num` well-formed puzzles of `path` (all when None) and the rows skipped."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"puzzle file {path!r} does not exist")
    skipped: list[SkippedRow] = []
    puzzles: list[Puzzle] = []
    for puzzle in iter_puzzles(path, skipped):
        if num is not None and len(puzzles) >= num:
            break
        puzzles.append(puzzle)
    return puzzles, skipped


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
        puzzles, skipped = read_puzzles(args.puzzles, args.num)
    except (ValueError, FileNotFoundError) as e:
        parser.error(str(e))
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
