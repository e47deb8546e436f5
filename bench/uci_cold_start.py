"""The UCI engine's start with the search on: `uci` to `readyok` with `Simulations` set (256
by default) and the default model (models/cpu, its own value head), from an empty XLA
compilation cache (`cold`: a fresh temporary cache, as on a first start) and then again from
the cache that start filled (`warm`: lichess-bot's engine per game, a tournament's restarts).

For each start it also times the first move on a clock given right after `readyok` (the
policy's while the search still compiles, eval/uci/choosers.SearchChooser) against its
budget, and how long after `readyok` the search was ready (a `go nodes 1`, which waits for
it). Prints one JSON object with the load average (os.getloadavg) before and after: the
machine may be shared, so read the times with it.

    python -m bench.uci_cold_start [--simulations 256] [--checkpoint RUN] [--clock-ms 10000]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import queue
import subprocess
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
# The position of the first move: a middlegame, so the policy and the search both have work.
FEN = "r1bqkb1r/pppp1ppp/2n2n2/4p3/2B1P3/5N2/PPPP1PPP/RNBQK2R w KQkq - 4 4"
TIMEOUT_S = 600


class Engine:
    """The engine process, its output read a line at a time."""

    def __init__(self, argv: list[str], env: dict[str, str]):
        self.proc = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def send(self, *lines: str) -> None:
        self.proc.stdin.write("".join(line + "\n" for line in lines))
        self.proc.stdin.flush()

    def until(self, prefix: str) -> list[str]:
        got = []
        while True:
            line = self.lines.get(timeout=TIMEOUT_S)
            if line is None:
                raise RuntimeError(f"the engine ended: {got}")
            got.append(line)
            if line.startswith(prefix):
                return got

    def close(self) -> None:
        self.send("quit")
        self.proc.wait(timeout=60)


def one_start(argv: list[str], env: dict[str, str], simulations: int, clock_ms: int) -> dict:
    start = time.monotonic()
    engine = Engine(argv, env)
    try:
        engine.send("uci", f"setoption name Simulations value {simulations}", "isready")
        engine.until("readyok")
        ready = time.monotonic() - start
        engine.send(f"position fen {FEN}", f"go wtime {clock_ms} btime {clock_ms}")
        went = time.monotonic()
        first = engine.until("bestmove")
        first_s = time.monotonic() - went
        engine.send("go nodes 1")  # waits for the search's shapes
        engine.until("bestmove")
        search_ready = time.monotonic() - start
        # The first move's budget (eval/uci/go.time_budget: the clock over 30 moves).
        budget_s = (clock_ms - 10) / 30 / 1000
        return {
            "readyok_s": round(ready, 2),
            "first_move_s": round(first_s, 3),
            "first_move_budget_s": round(budget_s, 3),
            "first_move_info": first[-2],
            "search_ready_s": round(search_ready, 2),
        }
    finally:
        engine.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.uci_cold_start", description=__doc__)
    parser.add_argument("--simulations", type=int, default=256)
    parser.add_argument("--checkpoint", default=None, help="default: models/cpu")
    parser.add_argument("--clock-ms", type=int, default=10_000)
    args = parser.parse_args(argv)
    command = [sys.executable, "-m", "eval.uci"]
    if args.checkpoint:
        command += ["--checkpoint", args.checkpoint]
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="uci-cold-") as cache:
        # A fresh XDG cache home: eval/model_files.xla_cache_dir is empty under it.
        env = {**os.environ, "XDG_CACHE_HOME": cache, "PYTHONPATH": str(ROOT)}
        env.pop("JAX_COMPILATION_CACHE_DIR", None)
        cold = one_start(command, env, args.simulations, args.clock_ms)
        warm = one_start(command, env, args.simulations, args.clock_ms)
    result = {
        "simulations": args.simulations,
        "checkpoint": args.checkpoint or "models/cpu",
        "cpus": os.cpu_count(),
        "cold": cold,
        "warm": warm,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
