"""The web board's analysis latency: `GET /api/analysis` over real HTTP on 127.0.0.1 for
puzzle positions (the position the solver faces), the models loaded and warmed up first.

    python -m bench.web [--model models/cpu] [--num 50] [--simulations 0] [--puzzles CSV]

The server is the one `python -m eval.web` runs, started in this process on a free port.
Each position is asked once untimed (the warm pass), then once timed. Prints one JSON
object: the median, p90, mean and max milliseconds per request as the client sees them, and
the median of the handler's own time (the `seconds` of each answer: the network calls and
the search, without HTTP and JSON).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
import urllib.parse
import urllib.request

from core.eval_sets import read_puzzles
from eval.web.__main__ import load_models
from eval.web.api import WebSettings
from eval.web.http_server import WebServer
from eval.web.models import ModelStore
from runtime.paths import project_root

ROOT = project_root() or os.getcwd()
SHARED_PUZZLES = os.path.join(
    ROOT, "..", "shared", "data", "puzzles", "lichess_puzzles_first1000__mihaipaulx_chess4c.csv"
)
SAMPLE_PUZZLES = os.path.join(ROOT, "data", "sample", "puzzles.csv")


def analyse(url: str, fen: str, moves: str, simulations: int) -> tuple[float, float]:
    """(client milliseconds, the handler's own milliseconds) of one analysis."""
    query = urllib.parse.urlencode({"fen": fen, "moves": moves, "simulations": simulations})
    start = time.perf_counter()
    with urllib.request.urlopen(f"{url}api/analysis?{query}", timeout=600) as response:
        body = json.loads(response.read())
    return 1000 * (time.perf_counter() - start), 1000 * body["seconds"]


def summary(times: list[float]) -> dict:
    return {
        "median_ms": round(statistics.median(times), 2),
        "p90_ms": round(statistics.quantiles(times, n=10, method="inclusive")[8], 2),
        "mean_ms": round(statistics.fmean(times), 2),
        "max_ms": round(max(times), 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.web", description=__doc__)
    parser.add_argument("--model", default=None, help="default models/cpu")
    parser.add_argument("--value", default=None, help="a value model beside it (default none)")
    parser.add_argument("--num", type=int, default=50)
    parser.add_argument("--simulations", type=int, default=0)
    parser.add_argument("--puzzles", default=None, help="default ../shared's, else the sample's")
    args = parser.parse_args(argv)
    path = args.puzzles or (SHARED_PUZZLES if os.path.exists(SHARED_PUZZLES) else SAMPLE_PUZZLES)
    puzzles, _ = read_puzzles(path, args.num)
    if len(puzzles) < 2:
        print(f"bench.web: error: {path} has fewer than 2 puzzles", file=sys.stderr)
        return 2
    store = ModelStore.create(args.model, args.value, os.getcwd())
    load_models(store)
    server = WebServer(("127.0.0.1", 0), store, WebSettings())
    if args.simulations:
        store.warm_up(store.default_model, server.settings.search_batch)
        if store.default_value:
            store.warm_up(store.default_value, server.settings.search_batch)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        requests = [(p.fen, p.moves[0]) for p in puzzles]
        for fen, move in requests:  # the warm pass
            analyse(server.url, fen, move, args.simulations)
        timed = [analyse(server.url, fen, move, args.simulations) for fen, move in requests]
    finally:
        server.shutdown()
        server.server_close()
    client = [c for c, _ in timed]
    handler = [h for _, h in timed]
    print(
        json.dumps(
            {
                "model": store.default_model,
                "value_model": store.default_value,
                "puzzles": os.path.basename(path),
                "positions": len(timed),
                "simulations": args.simulations,
                **summary(client),
                "handler_median_ms": round(statistics.median(handler), 2),
                "cpus": os.cpu_count(),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
