"""Tree-search rate: playouts (simulations) per second of eval/agents/mcts.py, leaves evaluated one
at a time (batch 1) and eight at a time with virtual loss (batch 8), on the same positions in the
same run; randomly initialised parameters (the rate does not depend on what the weights are).

Run as `python -m bench.search` (`make bench`). Prints one JSON object; per evaluator (AV, SV,
BC policy + SV value):

- `sims_per_s` at each batch size: playouts of a whole search divided by its time, and
  `sims_per_cpu_s` divided by the CPU time of the process (all its threads), which a busy
  machine disturbs less than the wall clock;
- `network_share`: the fraction of that time spent in the evaluator's predictor calls (the
  rest is the tree walk, python-chess and the terminal checks);
- `batch_8_vs_1`: the speed-up of batch 8 over batch 1, what batching buys (and
  `batch_8_vs_1_cpu`, the same in CPU time).

On a CPU the network is compute-bound: a batch of leaves costs about the sum of its leaves,
so batching gains only where a single leaf fills little of the smallest padded shape the
predictor compiles (16 rows): BC + SV uses 2 rows a leaf, AV and SV one row per legal move.

Each search is run once untimed first, so every padded shape it needs is compiled before
the timed run (a search is deterministic: the second run builds the same tree).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import chess
import jax

from bench.inference import boards_for
from eval.agents.evaluators import LeafEvaluator, make_evaluator
from eval.agents.mcts import SearchConfig, SearchLimit, TreeSearch
from model.config import MODEL_SIZES, Config
from model.networks.transformer import init_params
from model.predictor import Predictor

EVALUATORS = ("av", "sv", "bc+sv")


class TimedEvaluator:
    """Delegates to an evaluator and adds up the time its calls take."""

    def __init__(self, inner: LeafEvaluator):
        self.inner = inner
        self.target = inner.target
        self.seconds = 0.0
        self.calls = 0
        self.leaves = 0

    def evaluate(self, boards):
        start = time.perf_counter()
        out = self.inner.evaluate(boards)
        self.seconds += time.perf_counter() - start
        self.calls += 1
        self.leaves += len(boards)
        return out


def predictor(size: str, target: str) -> Predictor:
    config = Config().replace(model={"size": size, **MODEL_SIZES[size]}, train={"target": target})
    return Predictor(init_params(config, seed=0), config)


def evaluator_for(name: str, size: str) -> LeafEvaluator:
    if name == "bc+sv":
        return make_evaluator(predictor(size, "bc"), predictor(size, "sv"))
    return make_evaluator(predictor(size, name))


def search_rate(evaluator: LeafEvaluator, boards: list[chess.Board], sims: int, batch: int) -> dict:
    timed = TimedEvaluator(evaluator)
    config = SearchConfig(batch=batch)
    for board in boards:  # compiles every shape the timed searches will use
        search = TreeSearch(evaluator, config)
        search.set_position(board)
        search.run(SearchLimit(sims=sims))
    playouts, start, cpu_start = 0, time.perf_counter(), time.process_time()
    for board in boards:
        search = TreeSearch(timed, config)
        search.set_position(board)
        playouts += search.run(SearchLimit(sims=sims)).playouts
    seconds = time.perf_counter() - start
    cpu_seconds = time.process_time() - cpu_start
    return {
        "playouts": playouts,
        "seconds": round(seconds, 3),
        "cpu_seconds": round(cpu_seconds, 3),
        "sims_per_s": round(playouts / seconds, 2),
        "sims_per_cpu_s": round(playouts / cpu_seconds, 2),
        "network_share": round(timed.seconds / seconds, 3),
        "leaves_per_call": round(timed.leaves / timed.calls, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="small", choices=sorted(MODEL_SIZES))
    parser.add_argument("--evaluators", nargs="+", default=list(EVALUATORS), choices=EVALUATORS)
    parser.add_argument("--positions", type=int, default=3, help="root positions searched")
    parser.add_argument("--sims", type=int, default=48, help="playouts per search")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    args = parser.parse_args()
    boards = boards_for(args.positions, seed=3)
    results = {}
    for name in args.evaluators:
        evaluator = evaluator_for(name, args.size)
        rates = {f"batch_{b}": search_rate(evaluator, boards, args.sims, b) for b in args.batches}
        if "batch_1" in rates and "batch_8" in rates:
            for key, rate in (
                ("batch_8_vs_1", "sims_per_s"),
                ("batch_8_vs_1_cpu", "sims_per_cpu_s"),
            ):
                rates[key] = round(rates["batch_8"][rate] / rates["batch_1"][rate], 2)
        results[name] = rates
    print(
        json.dumps(
            {
                "bench": "search",
                "size": args.size,
                "device": jax.devices()[0].platform,
                "cpus": len(os.sched_getaffinity(0)),
                "positions": len(boards),
                "sims_per_search": args.sims,
                "evaluators": results,
            }
        )
    )


if __name__ == "__main__":
    main()
