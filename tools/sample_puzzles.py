"""The sample's puzzles (step 4 of tools/make_sample.py): positions of the sample games where
Stockfish finds one move clearly best and proves it, rated by how many nodes it needs, and
written in the Lichess puzzle CSV format."""

from __future__ import annotations

import csv
import hashlib
import math
import pathlib
from collections.abc import Sequence
from dataclasses import dataclass

import chess
import chess.engine
import chess.pgn

from core.values import win_probability
from runtime.progress import Progress

PUZZLE_COLUMNS = (
    "PuzzleId,FEN,Moves,Rating,RatingDeviation,Popularity,NbPlays,Themes,GameUrl,OpeningTags"
).split(",")


@dataclass(frozen=True)
class PuzzleRules:
    """When a position makes a puzzle. Win probabilities are the side to move's
    (core.values); a "mate" is a forced mate for the solver."""

    screen_nodes: int = 50_000  # every position, two best lines
    solve_nodes: int = 500_000  # the candidates' solution lines
    verify_nodes: int = 200_000  # the independent check, as tests/test_sample.py runs it
    min_ply: int = 8  # skip the first moves (book knowledge, not tactics)
    max_mate: int = 4  # mate puzzles up to mate in 4
    max_solver_moves: int = 3  # material puzzles: up to 3 solver moves
    winning: float = 0.8  # a material puzzle's best move wins at least this (~ +380 cp)
    holding: float = 0.3  # a defence puzzle's only move keeps at least this (~ -230 cp)
    gap: float = 0.3  # and every alternative is worse by at least this
    max_second: float = 0.65  # and no alternative keeps more than this
    verify_gap: float = 0.2  # the looser margin the independent check applies
    per_game: int = 6  # at most this many puzzles from one game
    max_puzzles: int = 100


def wp(score: chess.engine.PovScore | chess.engine.Score) -> float:
    mate = score.mate()
    return win_probability(mate=mate) if mate is not None else win_probability(cp=score.score())


def top_lines(
    engine: chess.engine.SimpleEngine, board: chess.Board, nodes: int, multipv: int = 2
) -> list[tuple[chess.Move, chess.engine.Score]]:
    """The engine's best moves (at most `multipv`) and scores, side to move's view. A fresh
    `game` object per call clears the hash, so results do not depend on the call order."""
    infos = engine.analyse(board, chess.engine.Limit(nodes=nodes), multipv=multipv, game=object())
    return [(info["pv"][0], info["score"].pov(board.turn)) for info in infos if info.get("pv")]


def positive_mate(score: chess.engine.Score | None) -> bool:
    return score is not None and score.mate() is not None and score.mate() > 0


def check_solution(
    engine: chess.engine.SimpleEngine, fen: str, moves: Sequence[str], nodes: int, gap: float
) -> str | None:
    """None if every solver move is the engine's best (or mates at once) and each
    alternative is clearly worse; else what is wrong. The same rule as tests/test_sample.py."""
    board = chess.Board(fen)
    board.push_uci(moves[0])
    for i in range(1, len(moves), 2):
        move = chess.Move.from_uci(moves[i])
        if not board.is_legal(move):
            return f"solver move {i} {moves[i]} is illegal"
        after = board.copy(stack=False)
        after.push(move)
        if not after.is_checkmate():
            lines = top_lines(engine, board, nodes)
            (best_move, best), second = lines[0], (lines[1][1] if len(lines) > 1 else None)
            if best_move != move:
                return f"solver move {i} {moves[i]} is not the engine's best {best_move.uci()}"
            if positive_mate(best):
                if positive_mate(second):
                    return f"solver move {i}: an alternative mates too"
            elif second is not None and wp(best) - wp(second) < gap:
                return f"solver move {i}: an alternative is nearly as good"
        board.push(move)
        if i + 1 < len(moves):
            reply = chess.Move.from_uci(moves[i + 1])
            if not board.is_legal(reply):
                return f"reply {i + 1} {moves[i + 1]} is illegal"
            board.push(reply)
    return None


@dataclass(frozen=True)
class Puzzle:
    fen: str
    moves: tuple[str, ...]
    kind: str  # "mate", "material" or "defence"
    mate_in: int | None
    best_wp: float
    game_id: str
    ply: int
    source: str


def solve(
    engine: chess.engine.SimpleEngine, start: chess.Board, rules: PuzzleRules
) -> tuple[str, int | None, float, list[str]] | None:
    """(kind, mate_in, win probability, solver/reply moves) from `start` (solver to move),
    or None when the position has no unique winning line."""
    board, line = start.copy(), []
    first = top_lines(engine, board, rules.solve_nodes)
    best = first[0][1]
    if positive_mate(best) and best.mate() <= rules.max_mate:
        kind, mate_in = "mate", best.mate()
    elif wp(best) >= rules.winning:
        kind, mate_in = "material", None
    else:  # the only move that holds: one solver move, the Lichess "defensiveMove"
        kind, mate_in = "defence", None
    if kind == "defence" and (len(first) < 2 or wp(best) < rules.holding):
        return None
    best_wp = wp(best)
    steps = {"mate": mate_in, "material": rules.max_solver_moves, "defence": 1}[kind]
    lines = first
    for step in range(steps):
        if step:
            lines = top_lines(engine, board, rules.solve_nodes)
        (move, best), second = lines[0], (lines[1][1] if len(lines) > 1 else None)
        if kind == "mate":
            if not positive_mate(best):
                return None
            board.push(move)
            line.append(move.uci())
            if board.is_checkmate():
                return kind, mate_in, best_wp, line
            if positive_mate(second):
                return None  # more than one way to mate: not a puzzle
        else:
            unique = second is None or (
                best.mate() is None
                and wp(best) - wp(second) >= rules.gap
                and wp(second) <= rules.max_second
            )
            threshold = rules.winning if kind == "material" else rules.holding
            if wp(best) < threshold or not unique or positive_mate(second):
                if step == 0:
                    return None
                line.pop()  # end on the solver's last unique move
                return kind, mate_in, best_wp, line
            board.push(move)
            line.append(move.uci())
            if board.is_game_over() or step == steps - 1:
                return kind, mate_in, best_wp, line
        reply = top_lines(engine, board, rules.solve_nodes, multipv=1)[0][0]
        board.push(reply)
        line.append(reply.uci())
    return None


def find_puzzles(
    engine_path: str, games: Sequence[tuple[str, chess.pgn.Game]], rules: PuzzleRules
) -> list[Puzzle]:
    puzzles: list[Puzzle] = []
    engine = chess.engine.SimpleEngine.popen_uci(engine_path)
    engine.configure({"Threads": 1, "Hash": 16})
    total = sum(1 for _, g in games for _ in g.mainline_moves())
    progress, seen, done = Progress("puzzle search", total, "positions"), set(), 0
    try:
        for source, game in games:
            game_id, found = game.headers["GameId"], 0
            board = game.board()
            moves = list(game.mainline_moves())
            skip_until = -1  # the plies of a puzzle already cut are not cut again
            for ply, move in enumerate(moves):
                done += 1
                progress.update(done, f"{len(puzzles)} puzzles")
                start_fen = board.fen()
                board.push(move)
                if (
                    found >= rules.per_game
                    or board.is_game_over()
                    or ply + 1 < rules.min_ply
                    or ply <= skip_until
                ):
                    continue
                lines = top_lines(engine, board, rules.screen_nodes)
                best, second = lines[0][1], (lines[1][1] if len(lines) > 1 else None)
                mate_first = positive_mate(best) and best.mate() <= rules.max_mate
                material = wp(best) >= rules.winning and (
                    second is None or wp(best) - wp(second) >= rules.gap
                )
                only_move = (
                    second is not None
                    and wp(best) >= rules.holding
                    and wp(best) - wp(second) >= rules.gap
                )
                if not (mate_first or material or only_move) or board.fen() in seen:
                    continue
                solved = solve(engine, board, rules)
                if solved is None:
                    continue
                kind, mate_in, best_wp, line = solved
                full = (move.uci(), *line)
                if check_solution(engine, start_fen, full, rules.verify_nodes, rules.verify_gap):
                    continue
                seen.add(board.fen())
                puzzles.append(
                    Puzzle(start_fen, full, kind, mate_in, best_wp, game_id, ply, source)
                )
                found += 1
                skip_until = ply + len(full)
    finally:
        engine.quit()
    progress.done(f"{len(puzzles)} puzzles")
    return puzzles


def difficulty_nodes(engine: chess.engine.SimpleEngine, puzzle: Puzzle) -> int:
    """The smallest node budget (a power of two from 32 to 2^20) from which Stockfish keeps
    choosing the first solver move at every larger budget: how hard the key move is to see."""
    board = chess.Board(puzzle.fen)
    board.push_uci(puzzle.moves[0])
    budgets = [2**k for k in range(5, 21)]
    found = budgets[-1]
    for nodes in reversed(budgets):
        if top_lines(engine, board, nodes, multipv=1)[0][0].uci() != puzzle.moves[1]:
            break
        found = nodes
    return found


def rating(puzzle: Puzzle, nodes: int) -> int:
    """A plausible rating (there are no plays to rate it by): a base by kind and length plus
    100 points per doubling of the nodes Stockfish needs to see the key move beyond 32."""
    solver_moves = len(puzzle.moves) // 2
    if puzzle.kind == "mate":
        base = {1: 800, 2: 1200, 3: 1500}.get(puzzle.mate_in, 1700)
    elif puzzle.kind == "defence":
        base = 1300
    else:
        base = {1: 1100, 2: 1400}.get(solver_moves, 1600)
    value = base + 100 * math.log2(max(nodes, 32) / 32)
    return int(round(min(2800, max(500, value)) / 10) * 10)


def themes(puzzle: Puzzle) -> str:
    solver_moves = len(puzzle.moves) // 2
    out = [f"mateIn{puzzle.mate_in}", "mate"] if puzzle.kind == "mate" else []
    if puzzle.kind == "material":
        out.append("crushing" if puzzle.best_wp >= 0.9 else "advantage")
    if puzzle.kind == "defence":
        out.extend(["defensiveMove", "equality" if puzzle.best_wp < 0.65 else "advantage"])
    out.append({1: "oneMove", 2: "short", 3: "long"}.get(solver_moves, "veryLong"))
    board = chess.Board(puzzle.fen)
    pieces = sum(
        len(board.pieces(kind, colour))
        for kind in (chess.KNIGHT, chess.BISHOP, chess.ROOK, chess.QUEEN)
        for colour in chess.COLORS
    )
    out.append("endgame" if pieces <= 4 else "opening" if puzzle.ply < 20 else "middlegame")
    return " ".join(out)


def puzzle_id(puzzle: Puzzle, taken: set[str]) -> str:
    alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    salt = 0
    while True:
        digest = hashlib.sha256(f"{puzzle.fen} {' '.join(puzzle.moves)} {salt}".encode())
        value, chars = int.from_bytes(digest.digest()[:8], "big"), []
        for _ in range(5):
            value, r = divmod(value, len(alphabet))
            chars.append(alphabet[r])
        if (pid := "".join(chars)) not in taken:
            taken.add(pid)
            return pid
        salt += 1


def select(puzzles: Sequence[Puzzle], limit: int) -> list[Puzzle]:
    """At most `limit`, taken round-robin over the games so no game dominates."""
    by_game: dict[str, list[Puzzle]] = {}
    for p in puzzles:
        by_game.setdefault(p.game_id, []).append(p)
    chosen, rank = [], 0
    while len(chosen) < min(limit, len(puzzles)):
        for group in by_game.values():
            if rank < len(group) and len(chosen) < limit:
                chosen.append(group[rank])
        rank += 1
    return chosen


def write_puzzles(
    puzzles: Sequence[Puzzle], engine_path: str, path: pathlib.Path
) -> list[dict[str, str]]:
    engine = chess.engine.SimpleEngine.popen_uci(engine_path)
    engine.configure({"Threads": 1, "Hash": 16})
    rows, taken = [], set()
    try:
        for p in puzzles:
            rows.append(
                {
                    "PuzzleId": puzzle_id(p, taken),
                    "FEN": p.fen,
                    "Moves": " ".join(p.moves),
                    "Rating": str(rating(p, difficulty_nodes(engine, p))),
                    "RatingDeviation": "100",
                    "Popularity": "0",
                    "NbPlays": "0",
                    "Themes": themes(p),
                    "GameUrl": f"{p.source}#{p.game_id}/{p.ply + 1}",
                    "OpeningTags": "",
                }
            )
    finally:
        engine.quit()
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=PUZZLE_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return rows
