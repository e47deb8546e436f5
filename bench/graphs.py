"""Board graph throughput (model/networks/board_graph.py): boards per second through `encode_fens`.

Run as `python -m bench.graphs` (`make bench`). Prints one JSON object. The same boards (every
position of the bundled sample games, cycled to `--boards`) go, in turn and in one process,
through the encoder as first written (model/networks/board_graph_reference.py: the full swap for
every move's exchange), the encoder as it is on one core, and the encoder in `--workers` worker
processes (their start included); each is the best of `--repeats` rounds, the rounds
interleaved so that a change in the machine's load touches all three alike. All three must
give the same bytes. The load average is in the JSON: on a shared machine the ratios,
measured side by side, mean more than the rates, and the serial encoders' CPU time (also
given) more than their wall time.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import pathlib
import time

import chess
import chess.pgn
import numpy as np
import zstandard

from model.networks import board_graph
from model.networks.board_graph_reference import reference_encode_fens

SAMPLE = pathlib.Path("data/sample")
GAMES = ("games.pgn.zst", "mismatch.pgn.zst", "selfplay.pgn.zst")
FIELDS = ("offsets", "num_moves", "senders", "receivers", "kinds", "actions")


def sample_fens(num_boards: int) -> list[str]:
    """Every position of the sample games, cycled to `num_boards`."""
    fens = []
    for name in GAMES:
        raw = (SAMPLE / name).read_bytes()
        text = zstandard.ZstdDecompressor().decompressobj().decompress(raw).decode("utf-8")
        stream = io.StringIO(text)
        while (game := chess.pgn.read_game(stream)) is not None:
            board = game.board()
            for move in game.mainline_moves():
                fens.append(board.fen())
                board.push(move)
    return [fens[i % len(fens)] for i in range(num_boards)]


def same(a: board_graph.Graphs, b: board_graph.Graphs) -> bool:
    return all(
        getattr(a, f).dtype == getattr(b, f).dtype and np.array_equal(getattr(a, f), getattr(b, f))
        for f in FIELDS
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--boards", type=int, default=20_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    fens = sample_fens(args.boards)
    encoders = {
        "reference": reference_encode_fens,
        "serial": board_graph.encode_fens,
        "parallel": lambda xs: board_graph.encode_fens(xs, workers=args.workers),
    }
    best = dict.fromkeys(encoders, float("inf"))
    best_cpu = dict.fromkeys(encoders, float("inf"))
    load = [os.getloadavg()[0]]
    results = {}
    for _ in range(args.repeats):
        for name, encode in encoders.items():
            start, start_cpu = time.perf_counter(), time.process_time()
            results[name] = encode(fens)
            best[name] = min(best[name], time.perf_counter() - start)
            best_cpu[name] = min(best_cpu[name], time.process_time() - start_cpu)
            load.append(os.getloadavg()[0])
    rate = {name: len(fens) / seconds for name, seconds in best.items()}
    # This process's CPU time: what the other jobs of a loaded machine disturb least (the
    # workers' time is not in it, so the parallel encoder has none).
    cpu_rate = {name: len(fens) / best_cpu[name] for name in ("reference", "serial")}
    identical = same(results["serial"], results["reference"]) and same(
        results["parallel"], results["reference"]
    )
    print(
        json.dumps(
            {
                "bench": "graphs",
                "boards": len(fens),
                "usable_cores": len(os.sched_getaffinity(0)),
                "workers": args.workers,
                "reference_boards_per_s": round(rate["reference"]),
                "serial_boards_per_s": round(rate["serial"]),
                "parallel_boards_per_s": round(rate["parallel"]),
                "serial_vs_reference": round(rate["serial"] / rate["reference"], 2),
                "reference_cpu_boards_per_s": round(cpu_rate["reference"]),
                "serial_cpu_boards_per_s": round(cpu_rate["serial"]),
                "serial_vs_reference_cpu": round(cpu_rate["serial"] / cpu_rate["reference"], 2),
                "parallel_vs_serial": round(rate["parallel"] / rate["serial"], 2),
                "parallel_vs_reference": round(rate["parallel"] / rate["reference"], 2),
                "identical": identical,
                "load_average_1min": [round(min(load), 2), round(max(load), 2)],
            }
        )
    )
    if not identical:
        raise SystemExit("the encoders' graphs differ")


if __name__ == "__main__":
    main()
