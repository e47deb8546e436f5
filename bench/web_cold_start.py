"""The web board's first minute: `python -m eval.web` started as a person starts it (the
default models/cpu, searching with its own value head, on a free port), from an empty XLA
compilation cache (`cold`: a fresh temporary JAX_COMPILATION_CACHE_DIR, as on a first start)
and then again from the cache that start filled (`warm`).

For each start it times the first answer (`GET /api/status`, from the process's start), the
first search (`GET /api/analysis` with `--simulations` playouts, from its request) and a
searchless analysis (`simulations=0`) sent while that search waits for its compile (goal:
<= 3 s). Prints one JSON object with the load average (os.getloadavg) before and after: the
machine may be shared, so read the times with it.

    python -m bench.web_cold_start [--simulations 256] [--search-batch 8]
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
import urllib.parse
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[1]
READY = "serving the board on "  # what eval/web prints once it listens with its models
MOVES = "e2e4 e7e5 g1f3 b8c6 f1c4 g8f6"  # a middlegame: the policy and the search both work
TIMEOUT_S = 600
SEARCHLESS_GOAL_S = 3.0


class Server:
    """The server process, its URL read from its output."""

    def __init__(self, argv: list[str], env: dict[str, str]):
        self.proc = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def url(self) -> str:
        seen = []
        while True:
            line = self.lines.get(timeout=TIMEOUT_S)
            if line is None:
                raise RuntimeError(f"the server exited with {self.proc.wait()}: {seen}")
            seen.append(line)
            if READY in line:
                return line.split(READY, 1)[1].split()[0].rstrip("/")

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def get(url: str, path: str, **params) -> dict:
    query = "?" + urllib.parse.urlencode(params) if params else ""
    with urllib.request.urlopen(url + path + query, timeout=TIMEOUT_S) as response:
        return json.loads(response.read())


def first_search(url: str, simulations: int, out: dict) -> None:
    """The search's request, in a thread: its seconds (or the error) into `out`."""
    sent = time.monotonic()
    try:
        body = get(url, "/api/analysis", moves=MOVES, simulations=simulations)
        out["playouts"] = body["search"]["playouts"]
    except Exception as e:  # reported in the JSON, not a traceback from a thread
        out["error"] = str(e)
    out["seconds"] = time.monotonic() - sent


def one_start(argv: list[str], env: dict[str, str], simulations: int) -> dict:
    start = time.monotonic()
    server = Server(argv, env)
    try:
        url = server.url()
        listening_s = time.monotonic() - start
        waiting_at_start = get(url, "/api/status")["waiting"]
        first_answer_s = time.monotonic() - start
        search: dict = {}
        searching = threading.Thread(target=first_search, args=(url, simulations, search))
        searching.start()
        # The searchless request once the search has arrived (it counts as running), so
        # both share the server as a page's first two requests do.
        deadline = time.monotonic() + 30
        while get(url, "/api/status")["searches"] == 0 and searching.is_alive():
            if time.monotonic() > deadline:
                break
            time.sleep(0.02)
        waiting_then = get(url, "/api/status")["waiting"]
        sent = time.monotonic()
        searchless = get(url, "/api/analysis", moves=MOVES, simulations=0)
        searchless_s = time.monotonic() - sent
        searching.join(TIMEOUT_S)
        search_s = search.get("seconds")
        return {
            "listening_s": round(listening_s, 2),
            "first_answer_s": round(first_answer_s, 2),
            "waiting_at_first_answer": waiting_at_start,
            "searchless_s": round(searchless_s, 3),
            "searchless_within_goal": searchless_s <= SEARCHLESS_GOAL_S,
            "searchless_best": searchless["best"],
            "search_waiting_then": waiting_then,
            "first_search_s": None if search_s is None else round(search_s, 2),
            "first_search_playouts": search.get("playouts"),
            "first_search_error": search.get("error"),
            "search_answered_s": round(time.monotonic() - start, 2),
        }
    finally:
        server.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="bench.web_cold_start",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--simulations", type=int, default=256, help="the first search's")
    parser.add_argument("--search-batch", type=int, default=None, help="default: the server's")
    args = parser.parse_args(argv)
    if args.simulations < 1:
        parser.error(f"--simulations must be >= 1, got {args.simulations}")
    command = [sys.executable, "-m", "eval.web", "--port", "0"]
    if args.search_batch is not None:
        command += ["--search-batch", str(args.search_batch)]
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="web-cold-") as cache:
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "JAX_COMPILATION_CACHE_DIR": cache,
            # As the server's own cache (eval/agents/model_files.py) does: keep every shape, not
            # only the compilations over JAX's default 1 s.
            "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
        }
        env.pop("JAX_ENABLE_COMPILATION_CACHE", None)
        cold = one_start(command, env, args.simulations)
        warm = one_start(command, env, args.simulations)
    result = {
        "simulations": args.simulations,
        "search_batch": args.search_batch,
        "model": "models/cpu (its own value head)",
        "cpus": os.cpu_count(),
        "searchless_goal_s": SEARCHLESS_GOAL_S,
        "cold": cold,
        "warm": warm,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
