"""UCI engine move times through python-chess: the slowest move of a self-played game (40 plies
by default) and the first move, which includes loading the model, for five engines, each a
fresh console-script process, in one run:

- `warm_up`: as shipped, with an empty XLA compilation cache (a first start on a machine);
- `warm_up_cached`: as shipped, started again: the compiled shapes come from the cache the
  first one filled (lichess-bot starts an engine per game, tournaments restart them);
- `buckets_warm_up` and `buckets_no_warm_up`: the predictor padding each move's rows to a
  power-of-two bucket (`--rows-per-pass none`, what it does on an accelerator and did on a CPU
  before its row passes), with the warm-up and without it (a move whose bucket is new waits
  for XLA; no cache: the engine before this work), the pair the warm-up is for;
- `lichess_bot`: as shipped and cached, driven as lichess-bot drives it: its default
  uci_options, ponder on, clocks; the engine plays White against a mover that plays the
  expected reply every other move (so both ponderhit and stop happen); times of its moves.

On a CPU the shipped predictor runs every move's rows a few at a time through one compiled
shape, so a move never meets a new shape; the buckets pair shows what the warm-up saves where
shapes vary.

    python -m bench.uci [--checkpoint RUN] [--size small] [--plies 40]

With no --checkpoint a randomly initialised model of --size is saved to a temporary directory
(move times do not depend on what the weights are). python-chess's first `play` sends
`ucinewgame` and `isready`, so `first_move_s` includes loading the model (and the warm-up);
the other figures are of the later moves. Prints one JSON object; `slowest_move_ratio` is
the slowest move of `buckets_no_warm_up` over that of `buckets_warm_up`.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import random
import statistics
import sys
import tempfile
import time

import chess
import chess.engine
import jax
import optax

from model.checkpoint import Checkpointer
from model.config import MODEL_SIZES, Config
from model.networks.transformer import count_params, init_params

SCRIPT = pathlib.Path(sys.executable).parent / "searchless-uci"


def make_checkpoint(size: str, directory: str) -> tuple[str, int]:
    """A run dir holding one checkpoint of a randomly initialised AV model; (path, params)."""
    config = Config().replace(model={"size": size, **MODEL_SIZES[size]}, train={"target": "av"})
    params = init_params(config, seed=0)
    checkpointer = Checkpointer(os.path.join(directory, "checkpoints"))
    meta = {"step": 0, "data_position": 0, "data_fingerprint": "", "config": config.to_dict()}
    checkpointer.save(0, params, params, optax.adam(1e-4).init(params), meta)
    checkpointer.close()
    return directory, count_params(params)


def play_game(command: list[str], plies: int, cwd: str, env: dict[str, str]) -> dict:
    """Our engine plays both sides with a 60+1 clock; the wall time of each `play`."""
    engine = chess.engine.SimpleEngine.popen_uci(
        command, cwd=cwd, timeout=600, env={**os.environ, **env}
    )
    board = chess.Board()
    times = []
    try:
        engine.configure({"Temperature": "0"})
        while len(board.move_stack) < plies and not board.is_game_over(claim_draw=True):
            limit = chess.engine.Limit(white_clock=60, black_clock=60, white_inc=1, black_inc=1)
            start = time.perf_counter()
            result = engine.play(board, limit)
            times.append(time.perf_counter() - start)
            board.push(result.move)
    finally:
        engine.quit()
    later = times[1:]
    return {
        "plies": len(times),
        "first_move_s": round(times[0], 3),
        "slowest_move_s": round(max(later), 3),
        "slowest_ply": later.index(max(later)) + 2,  # counted from 1; the first is ply 1
        "median_move_s": round(statistics.median(later), 4),
        "mean_move_s": round(statistics.fmean(later), 4),
    }


def play_like_lichess_bot(command: list[str], plies: int, cwd: str, env: dict[str, str]) -> dict:
    """Our engine as White with lichess-bot's defaults and ponder on (tests/eval/
    test_uci_lichess_bot.py checks this flow); the wall time of each of its `play`s."""
    engine = chess.engine.SimpleEngine.popen_uci(
        command, cwd=cwd, timeout=600, env={**os.environ, **env}
    )
    board, times, rng = chess.Board(), [], random.Random(0)
    try:
        engine.configure(
            {"Move Overhead": 100, "Threads": 4, "Hash": 512, "SyzygyPath": "./syzygy/"}
            | {"UCI_ShowWDL": True}
        )
        while len(board.move_stack) < plies and not board.is_game_over(claim_draw=True):
            first = len(board.move_stack) < 2
            limit = (
                chess.engine.Limit(time=10)
                if first
                else chess.engine.Limit(white_clock=178, black_clock=180, white_inc=2, black_inc=2)
            )
            start = time.perf_counter()
            result = engine.play(board, limit, info=chess.engine.INFO_ALL, ponder=not first)
            times.append(time.perf_counter() - start)
            board.push(result.move)
            if board.is_game_over(claim_draw=True):
                break
            replies = list(board.legal_moves)
            expected = result.ponder if result.ponder in replies else None
            board.push(expected if expected and len(times) % 2 else rng.choice(replies))
    finally:
        engine.quit()
    later = times[1:]
    return {
        "engine_moves": len(times),
        "first_move_s": round(times[0], 3),
        "slowest_move_s": round(max(later), 3),
        "median_move_s": round(statistics.median(later), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", help="a trained run; default: a random model of --size")
    parser.add_argument("--size", default="small", choices=sorted(MODEL_SIZES))
    parser.add_argument("--plies", type=int, default=40)
    args = parser.parse_args()
    if not SCRIPT.exists():
        sys.exit(f"error: {SCRIPT} is missing: run `make setup`")
    with tempfile.TemporaryDirectory() as tmp:
        if args.checkpoint:
            run, parameters = os.path.abspath(args.checkpoint), None
        else:
            run, parameters = make_checkpoint(args.size, os.path.join(tmp, "run"))
        command = [str(SCRIPT), "--checkpoint", run]
        cache = {"XDG_CACHE_HOME": os.path.join(tmp, "cache")}
        warm = play_game(command, args.plies, tmp, cache)
        cached = play_game(command, args.plies, tmp, cache)
        off = {"JAX_ENABLE_COMPILATION_CACHE": "false"}
        buckets = [*command, "--rows-per-pass", "none"]
        bucket_warm = play_game(buckets, args.plies, tmp, off)
        bucket_cold = play_game([*buckets, "--no-warm-up"], args.plies, tmp, off)
        bot = play_like_lichess_bot(command, args.plies, tmp, cache)
    print(
        json.dumps(
            {
                "bench": "uci",
                "model": args.checkpoint or f"random {args.size}",
                "parameters": parameters,
                "device": jax.devices()[0].platform,
                "cpus": len(os.sched_getaffinity(0)),
                "load_average": round(os.getloadavg()[0], 2),
                "warm_up": warm,
                "warm_up_cached": cached,
                "buckets_warm_up": bucket_warm,
                "buckets_no_warm_up": bucket_cold,
                "lichess_bot": bot,
                "slowest_move_ratio": round(
                    bucket_cold["slowest_move_s"] / bucket_warm["slowest_move_s"], 2
                ),
            }
        )
    )


if __name__ == "__main__":
    main()
