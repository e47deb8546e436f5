"""Which `[play] successor_weight` a BC policy with a value head should play with, and what the
mix costs a move.

    python -m bench.successor_weights --model models/cpu --puzzles PUZZLES.csv \
        --skip 1000 --num 3000 --weights 0 0.5 1 2 3 4

Each weight W plays the puzzles with `eval.agents.players.successor_mixed`: the legal move with
the highest log p(move) + W x logit(the value head's win probability for the mover after it),
W 0 being the policy alone. A puzzle's boards do not depend on W (a wrong move ends it), so
each board is asked once, the policy and the successors' values apart, and every weight is
judged from those answers under the puzzles' own protocol (`eval.puzzles.play_puzzle`).
`--skip` leaves out the first puzzles of the file, so that the weight is chosen on puzzles
other than the ones a model is reported on.

Prints one JSON object: per weight the puzzles solved, accuracy and rating buckets; and the
network's time a move on this machine, the policy alone and with its successors valued
(`policy_ms`, `successor_ms`, `mixed_vs_policy`: the ratio of the mixed move's time to the
policy's, both timed on the same boards in the same process).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import chess
import numpy as np

from core.eval_sets import read_puzzles
from eval.agents.base import AgentBase
from eval.agents.neural_setup import load_predictor
from eval.agents.players import NeuralAgent, successor_mixed
from eval.puzzles import accuracy_by_bucket, play_puzzle
from runtime.progress import Progress


class _TimedPolicy:
    """A predictor whose `move_values`, the policy's pass that begins a mixed move, is timed."""

    def __init__(self, predictor):
        self._predictor = predictor
        self.seconds = 0.0

    def __getattr__(self, name: str):
        return getattr(self._predictor, name)

    def move_values(self, boards):
        start = time.perf_counter()
        try:
            return self._predictor.move_values(boards)
        finally:
            self.seconds += time.perf_counter() - start


class SuccessorCache:
    """Each board's legal moves, policy and successor wins, asked of the network once."""

    def __init__(self, predictor):
        self._timed = _TimedPolicy(predictor)
        self.agent = NeuralAgent(self._timed, successor_weight=1.0)  # refuses one that cannot mix
        self.boards: dict[str, tuple[list[str], np.ndarray, np.ndarray]] = {}
        self.policy_s = 0.0
        self.successor_s = 0.0

    def answers(self, board: chess.Board) -> tuple[list[str], np.ndarray, np.ndarray]:
        key = board.fen()
        if key not in self.boards:
            policy_before, start = self._timed.seconds, time.perf_counter()
            self.boards[key] = self.agent.policy_and_successors(board)
            policy = self._timed.seconds - policy_before
            self.policy_s += policy
            self.successor_s += time.perf_counter() - start - policy
        return self.boards[key]


class CachedMix(AgentBase):
    """NeuralAgent's choice at `weight` (temperature 0, the repetition rule on), from the
    cache's answers."""

    def __init__(self, cache: SuccessorCache, weight: float):
        self.cache = cache
        self.weight = weight
        self.name = f"successor_weight={weight:g}"

    def choose_move(self, board: chess.Board) -> chess.Move:
        moves, probs, wins = self.cache.answers(board)
        scores = successor_mixed(probs, wins, self.weight) if self.weight > 0 else probs
        return chess.Move.from_uci(moves[int(np.argmax(scores))])


def run(model: str, puzzles, weights: list[float]) -> dict:
    cache = SuccessorCache(load_predictor(model))
    cache.answers(chess.Board())  # compiles the first shapes outside the timing
    cache.boards.clear()
    cache.policy_s = cache.successor_s = 0.0
    results = {}
    progress = Progress("successor weights", len(puzzles) * len(weights), "puzzles")
    for weight in weights:
        agent = CachedMix(cache, weight)
        solved = []
        for puzzle in puzzles:
            solved.append(play_puzzle(puzzle, agent).solved)
            progress.update(progress.count + 1, f"weight {weight:g}")
        results[f"{weight:g}"] = {
            "solved": sum(solved),
            "total": len(solved),
            "accuracy": sum(solved) / len(solved),
            "buckets": accuracy_by_bucket([p.rating for p in puzzles], solved),
        }
    progress.done()
    boards = len(cache.boards)
    policy_ms = 1000 * cache.policy_s / boards
    successor_ms = 1000 * cache.successor_s / boards
    return {
        "model": model,
        "puzzles": len(puzzles),
        "weights": results,
        "boards": boards,
        "policy_ms": round(policy_ms, 2),
        "successor_ms": round(successor_ms, 2),
        "mixed_vs_policy": round((policy_ms + successor_ms) / policy_ms, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="models/cpu", help="a BC run with a value head")
    parser.add_argument("--puzzles", required=True, help="a Lichess puzzle CSV")
    parser.add_argument("--skip", type=int, default=0, help="leave out the first N puzzles")
    parser.add_argument("--num", type=int, default=1000, help="then judge on N puzzles")
    parser.add_argument("--weights", type=float, nargs="+", default=[0.0, 1.0, 2.0, 3.0, 4.0])
    args = parser.parse_args(argv)
    if args.num < 1 or args.skip < 0:
        parser.error("--num must be positive and --skip >= 0")
    if any(not 0 <= w < float("inf") for w in args.weights):
        parser.error("every weight must be finite and >= 0")
    try:
        puzzles, _ = read_puzzles(args.puzzles, args.skip + args.num)
        puzzles = puzzles[args.skip :]
        if not puzzles:
            raise ValueError(f"{args.puzzles}: no puzzles after the first {args.skip}")
        print(json.dumps(run(args.model, puzzles, args.weights), indent=2))
    except (ValueError, FileNotFoundError) as e:
        print(f"successor_weights: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
