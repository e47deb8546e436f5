"""Whether averaging move probabilities at inference solves more puzzles than one policy alone.

    python -m bench.policy_averaging --puzzles PUZZLES.csv [--num 1000] \
        --arm gateau=models/cpu \
        --arm pair=models/cpu+models/cpu-transformer@0.5 \
        --arm mirrored=mirror:models/cpu

An arm is `NAME=ITEM[+ITEM...]`, an item `[mirror:]CHECKPOINT[@WEIGHT]` (weight 1 by default).
The arm plays the legal move with the highest weighted sum of its items' log-probabilities:
two networks at once (an ensemble), or one network asked twice. `mirror:` also asks the
network about the board mirrored left to right where neither side may castle (the rules are
the same there: castling is the only rule that tells the a-file from the h-file) and averages
the two readings of each move. Every item must be a BC policy: an AV or SV model's scores are
win probabilities, not a distribution over moves. No reply is ever looked at: each arm is as
searchless as its networks.

Shows each arm's progress on stderr and prints one JSON object: per arm its items, puzzles
solved, accuracy, rating buckets and seconds (an arm of two items, or one mirrored, takes
about twice one's time: twice the boards go through a network).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass

import chess

from core.eval_sets import read_puzzles
from core.targets import BC
from eval.agents.base import AgentBase, legal_moves
from eval.agents.neural_setup import load_predictor
from eval.puzzles import evaluate


@dataclass(frozen=True)
class Item:
    checkpoint: str
    weight: float = 1.0
    mirror: bool = False


def parse_arm(text: str) -> tuple[str, list[Item]]:
    """`NAME=ITEM[+ITEM...]` -> (name, items); ValueError naming the arm otherwise."""
    name, sep, rest = text.partition("=")
    if not sep or not name.strip() or not rest.strip():
        raise ValueError(f"arm {text!r}: expected NAME=ITEM[+ITEM...]")
    items = []
    for part in rest.split("+"):
        part = part.strip()
        mirror = part.startswith("mirror:")
        part = part.removeprefix("mirror:")
        checkpoint, _, weight = part.partition("@")
        try:
            value = float(weight) if weight else 1.0
        except ValueError:
            raise ValueError(f"arm {text!r}: weight {weight!r} is not a number") from None
        if not checkpoint or not math.isfinite(value) or value <= 0:
            raise ValueError(f"arm {text!r}: {part!r} needs a checkpoint and a weight > 0")
        items.append(Item(checkpoint, value, mirror))
    return name.strip(), items


def mirror_move(move: chess.Move) -> chess.Move:
    """The same move on the board mirrored left to right (file a <-> h, ranks kept)."""

    def flip(square: int) -> int:
        return chess.square(7 - chess.square_file(square), chess.square_rank(square))

    return chess.Move(flip(move.from_square), flip(move.to_square), move.promotion)


def log_probabilities(predictor, board: chess.Board, mirror: bool) -> dict[chess.Move, float]:
    """Each legal move's log-probability under a BC policy; with `mirror`, where no castling
    right is left, the mean of the board's and its mirror image's."""
    mirrored = mirror and not board.castling_rights
    boards = [board, board.transform(chess.flip_horizontal)] if mirrored else [board]
    readings = predictor.move_values(boards)  # both boards in one network call
    # BC's sampling logits are the probabilities' logarithm, floored: a move the policy gives
    # probability 0 (underflow) keeps a finite score, so no sum of items is undefined.
    moves, probabilities = readings[0]
    logs = BC.sampling_logits(probabilities)
    scores = {chess.Move.from_uci(m): float(v) for m, v in zip(moves, logs, strict=True)}
    for moves, probabilities in readings[1:]:
        for uci, value in zip(moves, BC.sampling_logits(probabilities), strict=True):
            move = mirror_move(chess.Move.from_uci(uci))
            scores[move] = 0.5 * (scores[move] + float(value))
    return scores


class AveragedPolicy(AgentBase):
    """Plays the legal move with the highest weighted sum of its items' log-probabilities."""

    def __init__(self, name: str, items: list[Item]):
        self.name = name
        self.items = items
        self.predictors = [load_predictor(item.checkpoint) for item in items]
        for item, predictor in zip(items, self.predictors, strict=True):
            if predictor.config.target_kind is not BC:
                raise ValueError(
                    f"arm {name!r}: {item.checkpoint} is a {predictor.config.target} model; "
                    "only BC policies give move probabilities to average"
                )

    def choose_move(self, board: chess.Board) -> chess.Move:
        total = {move: 0.0 for move in legal_moves(board)}
        for item, predictor in zip(self.items, self.predictors, strict=True):
            for move, value in log_probabilities(predictor, board, item.mirror).items():
                total[move] += item.weight * value
        # Ties go to the first legal move in python-chess's order: deterministic.
        return max(total, key=total.__getitem__)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--puzzles", required=True, help="a Lichess puzzle CSV")
    parser.add_argument("--num", type=int, default=1000, help="the first N puzzles")
    parser.add_argument("--arm", action="append", required=True, help="NAME=ITEM[+ITEM...]")
    args = parser.parse_args(argv)
    if args.num < 1:
        parser.error("--num must be positive")
    try:
        arms = [parse_arm(text) for text in args.arm]
        puzzles, skipped = read_puzzles(args.puzzles, args.num)
    except (ValueError, FileNotFoundError) as e:
        print(f"policy_averaging: {e}", file=sys.stderr)
        return 1
    results = {}
    for name, items in arms:
        try:
            agent = AveragedPolicy(name, items)
        except (ValueError, FileNotFoundError) as e:
            print(f"policy_averaging: {e}", file=sys.stderr)
            return 1
        start = time.monotonic()
        outcome = evaluate(agent, puzzles)  # progress (rate, ETA) on stderr
        results[name] = {
            "items": [vars(item) for item in items],
            "solved": outcome["solved"],
            "total": outcome["total"],
            "accuracy": outcome["accuracy"],
            "buckets": outcome["buckets"],
            "seconds": round(time.monotonic() - start, 1),
        }
    document = {"puzzles": args.puzzles, "num": len(puzzles), "skipped_rows": len(skipped)}
    print(json.dumps(document | {"arms": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
