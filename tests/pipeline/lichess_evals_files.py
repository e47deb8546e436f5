"""Small Lichess evaluation-database files the tests of pipeline/lichess_evals/ write
themselves, and the means to read what an import made of them."""

from __future__ import annotations

import json
import random
from pathlib import Path

import chess
import pyarrow.parquet as pq
import zstandard

from core.schema import BOARD_SCHEMA, FAILURE_SCHEMA, check_schema, meta_dir

ROOT = Path(__file__).resolve().parents[2]

START = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq -"
AFTER_E4 = "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq -"
ONE_MOVE = "k7/8/8/8/8/8/1r6/K7 w - -"  # only a1b2
TWO_MOVES = "7k/8/8/8/8/8/8/K5r1 w - -"  # only a1b2 and a1a2
CASTLING = "r3k2r/8/8/8/8/8/8/R3K2R w KQkq -"
CHECKMATED = "7k/6Q1/6K1/8/8/8/8/8 b - -"


def pv(line: str, cp: int | None = None, mate: int | None = None) -> dict:
    out: dict = {"line": line}
    if cp is not None:
        out["cp"] = cp
    if mate is not None:
        out["mate"] = mate
    return out


def record(fen: str, *pvs: dict, depth: int = 30, knodes: int = 1000) -> str:
    return json.dumps({"fen": fen, "evals": [{"pvs": list(pvs), "knodes": knodes, "depth": depth}]})


def write_input(path: Path, lines: list[str], compressed: bool = True) -> Path:
    data = "".join(line + "\n" for line in lines).encode()
    path.write_bytes(zstandard.ZstdCompressor().compress(data) if compressed else data)
    return path


def rows_of(split_dir: Path, prefix: str = "boards") -> list[dict]:
    rows = []
    schema = BOARD_SCHEMA if prefix == "boards" else FAILURE_SCHEMA
    directory = split_dir if prefix == "boards" else Path(meta_dir(str(split_dir)))
    for file in sorted(directory.glob(f"{prefix}-*.parquet")):
        check_schema(pq.read_schema(file), str(file), schema)
        rows.extend(pq.read_table(file).to_pylist())
    return rows


def contents(split_dir: Path) -> dict[str, list[dict]]:
    """Every Parquet file of a finished split (and its meta folder) by name, as rows."""
    files = [*split_dir.glob("*.parquet"), *Path(meta_dir(str(split_dir))).glob("*.parquet")]
    return {f.name: pq.read_table(f).to_pylist() for f in sorted(files)}


def random_positions(count: int, seed: int = 0) -> list[chess.Board]:
    rng = random.Random(seed)
    boards = []
    while len(boards) < count:
        board = chess.Board()
        for _ in range(rng.randrange(60)):
            moves = list(board.legal_moves)
            if not moves:
                break
            board.push(rng.choice(moves))
        if any(board.legal_moves):
            boards.append(board)
    return boards


def realistic_lines(count: int, seed: int = 0) -> list[str]:
    """Lines shaped like the database's: several evaluations, up to 5 PVs, real moves."""
    rng = random.Random(seed)
    lines = []
    for board in random_positions(count, seed):
        legal = [board.uci(m) for m in board.legal_moves]
        evals = []
        for _ in range(rng.choice([1, 2])):
            firsts = rng.sample(legal, min(len(legal), rng.choice([1, 3, 5])))
            pvs = [pv(f"{m} e7e5", cp=rng.randrange(-300, 300)) for m in firsts]
            evals.append({"pvs": pvs, "knodes": rng.randrange(10**6), "depth": rng.randrange(40)})
        lines.append(json.dumps({"fen": board.epd(), "evals": evals}))
    return lines


BAD_LINES = {
    "not_json": "{this is not json",
    "bad_record": json.dumps({"fen": START}),
    "bad_fen": record("rnbqkbnr/pppppppp/8/8 w KQkq -", pv("e2e4", cp=0)),
    "invalid_position": record("8/8/8/8/8/8/8/8 w - -", pv("e2e4", cp=0)),
    "no_legal_moves": record(CHECKMATED),
    "no_pvs": record(START),
    "illegal_move": record(START, pv("e2e4", cp=0), pv("e2e5", cp=0)),
    "no_score": record(START, pv("e2e4", cp=0), pv("d2d4")),
    "bad_score": record(START, pv("e2e4", cp=0, mate=3)),
}
