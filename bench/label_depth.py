"""How much a deeper search changes the best-move label, and what it costs a board.

    python -m bench.label_depth --boards 'data/cpu-model/annotated/search-lichess' \
        [--num 300] [--nodes 500,2000,5000,10000,40000] [--seed 0]

Draws `--num` boards (seeded) from annotated splits (directories or globs of their Parquet
files) and searches each one from a cleared hash (`ucinewgame`, one thread, 16 MB), as the
annotator's search mode does, at every node count of `--nodes`. Prints one JSON object:

- `ms_per_board`: the engine's wall time per search at each node count (the client's
  round trip included);
- `agrees_with_deepest`: how often each node count's best move is the deepest one's, the
  label a deeper search would give (the deepest agrees with itself: 1.0);
- `agrees_with_label`: how often it is the split's stored `best_move`; at the node count the
  split was labelled with this is 1.0 when the labels are reproducible (the annotator's
  searches are: one thread, a node limit, a cleared hash).

Other processes on the machine slow the engine: `load_average` is reported at the start.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time

import chess
import chess.engine

from core.engine_path import find_engine
from core.schema import SchemaError, read_boards


def sample_boards(specs: list[str], num: int, seed: int) -> list[dict]:
    """`num` rows (fen, best_move) drawn with `seed` from the splits' board shards."""
    try:
        table = read_boards(",".join(specs), ["fen", "best_move"])
    except (FileNotFoundError, SchemaError) as e:
        raise SystemExit(f"label_depth: no Parquet files in {', '.join(specs)} ({e})") from None
    rows = table.to_pylist()
    random.Random(seed).shuffle(rows)
    return rows[:num]


def measure(rows: list[dict], nodes: list[int], engine: str) -> dict:
    moves: dict[int, list[str]] = {n: [] for n in nodes}
    seconds = dict.fromkeys(nodes, 0.0)
    with chess.engine.SimpleEngine.popen_uci(engine) as uci:
        uci.configure({"Threads": 1, "Hash": 16})
        for row in rows:
            board = chess.Board(row["fen"])
            for n in nodes:
                uci.protocol.send_line("ucinewgame")
                start = time.perf_counter()
                moves[n].append(uci.play(board, chess.engine.Limit(nodes=n)).move.uci())
                seconds[n] += time.perf_counter() - start
    deepest = moves[max(nodes)]
    labels = [row["best_move"] for row in rows]

    def share(a: list[str], b: list[str]) -> float:
        return round(sum(x == y for x, y in zip(a, b, strict=True)) / len(a), 4)

    return {
        "ms_per_board": {str(n): round(1000 * seconds[n] / len(rows), 2) for n in nodes},
        "agrees_with_deepest": {str(n): share(moves[n], deepest) for n in nodes},
        "agrees_with_label": {str(n): share(moves[n], labels) for n in nodes},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boards", nargs="+", required=True, help="annotated splits or globs")
    parser.add_argument("--num", type=int, default=300)
    parser.add_argument("--nodes", default="500,2000,5000,10000,40000")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--engine", default=None, help="the engine binary (default: Stockfish)")
    args = parser.parse_args(argv)
    try:
        nodes = sorted({int(n) for n in args.nodes.split(",")})
    except ValueError:
        parser.error(f"--nodes: a comma list of node counts, not {args.nodes!r}")
    if not nodes or nodes[0] < 1 or args.num < 1:
        parser.error("--nodes and --num must be positive")
    rows = sample_boards(args.boards, args.num, args.seed)
    load = os.getloadavg()[0]
    result = measure(rows, nodes, find_engine(args.engine))
    print(
        json.dumps(
            {
                "boards": len(rows),
                "splits": args.boards,
                "seed": args.seed,
                "nodes": nodes,
                "load_average": round(load, 2),
                **result,
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
