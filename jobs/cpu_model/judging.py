"""How `make cpu-model` judges an agent (jobs/cpu_model/recipe.py): fixed puzzle and STS subsets,
and the held-out test boards whose positions no training split holds."""

from __future__ import annotations

from dataclasses import dataclass

from core.eval_sets import read_puzzles, read_suite
from core.positions import position_key
from core.schema import read_boards
from eval.agents.players import NeuralAgent
from eval.metrics import read_rows
from eval.puzzles import evaluate as evaluate_puzzles
from eval.suites import run_suite
from jobs.cpu_model.settings import Paths, puzzle_file, sts_file
from model.predictor import Predictor


@dataclass(frozen=True)
class Judged:
    """The fixed evaluation sets of one step."""

    puzzles: list
    sts: list
    puzzle_file: str
    sts_file: str | None

    def describe(self) -> dict:
        return {
            "puzzles": {"file": self.puzzle_file, "first": len(self.puzzles)},
            "sts": {"file": self.sts_file, "positions": len(self.sts)},
        }


def judged_sets(paths: Paths, num_puzzles: int, sts_every: int) -> Judged:
    puzzles, _ = read_puzzles(puzzle_file(paths), num_puzzles)
    sts = []
    if sts_file(paths):
        every, _ = read_suite(sts_file(paths))
        sts = every[::sts_every]
    return Judged(puzzles, sts, puzzle_file(paths), sts_file(paths))


def judge(agent, sets: Judged) -> dict:
    out = {}
    if sets.puzzles:
        solved = evaluate_puzzles(agent, sets.puzzles)
        out["puzzles"] = {k: solved[k] for k in ("solved", "total", "accuracy", "buckets")}
    if sets.sts:
        suite = run_suite(agent, sets.sts)
        out["sts"] = {k: suite[k] for k in ("points", "max_points", "solved", "positions")}
    return out


def brief(entry: dict) -> str:
    parts = []
    if "puzzles" in entry:
        parts.append(f"puzzles {entry['puzzles']['accuracy']:.1%}")
    if "sts" in entry:
        parts.append(f"STS {entry['sts']['points']:,}/{entry['sts']['max_points']:,}")
    if "metrics" in entry:
        m = entry["metrics"]
        parts.append(f"action accuracy {m['action_accuracy']:.3f}, tau {m['kendall_tau']:.3f}")
    return ", ".join(parts)


def held_out_rows(paths: Paths, num: int, trained_on: str) -> tuple[list[dict], int]:
    """The first `num` test boards whose position (move counters aside) is in none of the
    boards at `trained_on` (a glob of the splits a model trains on): self-play games from
    other seeds still share their opening moves. Also the number of test boards left out."""
    train = {position_key(fen) for fen in read_boards(trained_on, ["fen"])["fen"].to_pylist()}
    rows = read_rows(str(paths.work / "annotated" / "test"))
    kept = [row for row in rows if position_key(row["fen"]) not in train]
    return kept[:num], len(rows) - len(kept)


def neural(path: str, name: str) -> NeuralAgent:
    return NeuralAgent(Predictor.from_checkpoint(path), name=name)
