"""What the tree search adds on one model, measured in one command.

    python -m bench.search_report --model models/cpu-av         # ~20 min on 2 cores
    python -m bench.search_report --model runs/x --parts speed puzzles --num 1000

Writes JSON into --out (default results/search/): `search.json` (every part's summary, also
printed on stdout) and each part's own files:

- speed (`speed.json`): playouts per second of the search at batch 1 and 8 on the same
  positions in the same run, and the ratio (bench/search.py's measure, with this model);
- puzzles (`puzzles.json`): accuracy of the model searching `--sims` playouts per move (0 =
  the network's own move, no search) on the first `--num` puzzles, beside the floors and the
  ceiling on the same puzzles (`--baselines`: random, greedy, stockfish:nodes=100000);
- elo (`elo/`, eval.elo.tournament's games.pgn and tournament.json): the model searching
  `--elo-sims` playouts against the same model without search (the searchless policy, as the
  UCI engine plays it), the Elo difference with its 95% interval;
- odds (`odds/games.pgn`, `odds.json`): the seed paper's queen-odds experiment at this scale.
  The searching side plays without its queen (removed after a bundled opening) against a
  fixed opponent (`--odds-opponent`), once with PUCT and once with search-contempt
  (`--contempt` N_scl) at equal playouts; each plays the same openings with both colours.
  Win % and score % with 95% Wilson intervals, per variant.

Every part shows its progress; the summary is written after each part, so an interrupted run
keeps the parts done. Speed figures of a busy machine are disturbed: compare the ratio.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import math
import pathlib
import random
import sys
import time

import chess
import chess.pgn

from bench.inference import boards_for
from bench.search import search_rate
from core.engine_path import EngineNotFoundError
from core.eval_sets import iter_puzzles
from core.game_end import DRAW
from core.openings import Opening, load_openings
from eval.agents.evaluators import make_evaluator
from eval.agents.mcts import DEFAULT_CPUCT, SearchConfig
from eval.agents.players import MctsAgent, NeuralAgent, make_agent
from eval.agents.specs import parse_agent_spec
from eval.elo.tournament import TournamentConfig, run_tournament
from eval.game import play_game
from eval.puzzles import evaluate
from model.predictor import Predictor
from runtime.interrupts import interrupted
from runtime.paths import project_root, resolve_path
from runtime.progress import Progress, format_duration

PARTS = ("speed", "puzzles", "elo", "odds")
SHARED_PUZZLES = "../shared/data/puzzles/lichess_puzzles_first1000__mihaipaulx_chess4c.csv"
SAMPLE_PUZZLES = "data/sample/puzzles.csv"
NO_SEARCH = "no-search"
Z_95 = 1.959963984540054


def wilson_interval(successes: float, trials: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of a proportion (draws may count as half a success)."""
    if trials == 0:
        return (0.0, 1.0)
    p = successes / trials
    centre = (p + z * z / (2 * trials)) / (1 + z * z / trials)
    half = (
        z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / (1 + z * z / trials)
    )
    return (max(0.0, centre - half), min(1.0, centre + half))


@dataclasses.dataclass(frozen=True)
class Setup:
    """The model and the search settings every part uses."""

    model: str
    value: str | None
    batch: int
    cpuct: float
    seed: int


class Models:
    """The model (and value model) loaded once, and the agents the parts play with."""

    def __init__(self, setup: Setup):
        self.setup = setup
        self.predictor = Predictor.from_checkpoint(setup.model)
        value = Predictor.from_checkpoint(setup.value) if setup.value else None
        self.evaluator = make_evaluator(self.predictor, value)

    def mcts(self, sims: int, name: str, contempt: int | None = None) -> MctsAgent:
        config = SearchConfig(cpuct=self.setup.cpuct, batch=self.setup.batch, contempt=contempt)
        return MctsAgent(self.evaluator, config, sims=sims, seed=self.setup.seed, name=name)

    def no_search(self) -> NeuralAgent:
        return NeuralAgent(self.predictor, name=NO_SEARCH)


# --- the parts -----------------------------------------------------------------------------


def speed_part(models: Models, positions: int, sims: int) -> dict:
    boards = boards_for(positions, seed=3)
    rates = {f"batch_{b}": search_rate(models.evaluator, boards, sims, b) for b in (1, 8)}
    for key, rate in (("batch_8_vs_1", "sims_per_s"), ("batch_8_vs_1_cpu", "sims_per_cpu_s")):
        rates[key] = round(rates["batch_8"][rate] / rates["batch_1"][rate], 2)
    return {"positions": len(boards), "sims_per_search": sims, **rates}


def puzzles_part(models: Models, path: str, num: int, sims: list[int], baselines: list[str]):
    puzzles = list(itertools.islice(iter_puzzles(path), num))
    results, skipped = [], []
    for s in sims:
        results.append(evaluate(models.mcts(s, f"mcts sims={s}"), puzzles) | {"sims": s})
    for spec in baselines:
        try:
            agent = make_agent(spec)
        except EngineNotFoundError as e:
            print(f"search_report: baseline {spec!r} skipped: {e}", file=sys.stderr)
            skipped.append(spec)
            continue
        with agent:
            results.append(evaluate(agent, puzzles))
    no_search = results[0]["accuracy"] if sims and sims[0] == 0 else None
    summary = {
        "puzzles": path,
        "num": len(puzzles),
        "accuracy": {r["agent"]: round(r["accuracy"], 4) for r in results},
        # Accuracy points the search adds over the same model without it (sims 0).
        "gain_points": {
            r["agent"]: round(100 * (r["accuracy"] - no_search), 1)
            for r in results
            if no_search is not None and "sims" in r and r["sims"] > 0
        },
        "solved": {r["agent"]: r["solved"] for r in results},
        "agent_seconds": {r["agent"]: r["seconds"] for r in results},
        "skipped_baselines": skipped,
    }
    return summary, {"summary": summary, "agents": results}


def elo_part(models: Models, out: pathlib.Path, sims: int, games: int, max_plies: int) -> dict:
    name = f"mcts sims={sims}"
    agents = [models.mcts(sims, name), models.no_search()]
    config = TournamentConfig(
        games_per_pair=games, max_plies=max_plies, seed=models.setup.seed, anchor=NO_SEARCH
    )
    summary = run_tournament(agents, out, config)
    rating = next(p for p in summary["elo"]["players"] if p["name"] == name)
    return {
        "search": name,
        "against": NO_SEARCH,
        "games": summary["games"],
        "elo": round(rating["elo"], 1),
        "elo_ci95": round(rating["ci"], 1),
        "wins_draws_losses": [rating["wins"], rating["draws"], rating["losses"]],
        "score": round(rating["score"], 4),
        "terminations": summary["terminations"],
        "tournament": str(out / "tournament.json"),
    }


def queen_odds(opening: Opening, color: chess.Color) -> Opening | None:
    """The opening's position with `color`'s queen taken off (None if it has none, or if the
    position would then be illegal)."""
    board = opening.board()
    queens = list(board.pieces(chess.QUEEN, color))
    if len(queens) != 1:
        return None
    board.remove_piece_at(queens[0])
    if not board.is_valid():
        return None
    side = "White" if color == chess.WHITE else "Black"
    return Opening(f"{opening.name}, {side} without the queen", opening.eco, board.fen(), ())


def odds_part(
    models: Models,
    out: pathlib.Path,
    sims: int,
    contempt: int,
    opponent_spec: str,
    games: int,
    max_plies: int,
) -> dict:
    """Each variant plays games/2 openings with both colours, giving queen odds."""
    rng = random.Random(models.setup.seed)
    openings = load_openings()
    rng.shuffle(openings)
    pairs = []  # (opening, colour of the searching side)
    for opening in openings:
        odds = [queen_odds(opening, c) for c in (chess.WHITE, chess.BLACK)]
        if all(odds):
            pairs += [(odds[0], chess.WHITE), (odds[1], chess.BLACK)]
        if len(pairs) >= games:
            break
    variants = {
        "puct": models.mcts(sims, f"puct sims={sims}"),
        "contempt": models.mcts(sims, f"contempt={contempt} sims={sims}", contempt=contempt),
    }
    out.mkdir(parents=True, exist_ok=True)
    records, results = [], {}
    meter = Progress("queen odds", len(pairs) * len(variants), "games")
    with make_agent(opponent_spec) as opponent, open(out / "games.pgn", "w") as pgn_file:
        for variant, agent in variants.items():
            wins = draws = losses = 0
            for opening, color in pairs:
                white, black = (agent, opponent) if color == chess.WHITE else (opponent, agent)
                board, outcome = play_game(white, black, opening, max_plies)
                mine = "1-0" if color == chess.WHITE else "0-1"
                if outcome.result == DRAW:
                    draws += 1
                elif outcome.result == mine:
                    wins += 1
                else:
                    losses += 1
                game = chess.pgn.Game.from_board(board)
                game.headers.update(
                    White=white.name, Black=black.name, Result=outcome.result,
                    Termination=outcome.termination, Opening=opening.name,
                )  # fmt: skip
                print(game, file=pgn_file, end="\n\n", flush=True)
                records.append(
                    {
                        "variant": variant,
                        "opening": opening.name,
                        "searching_side": "white" if color == chess.WHITE else "black",
                        "result": outcome.result,
                        "termination": outcome.termination,
                        "plies": len(board.move_stack),
                    }
                )
                meter.update(len(records), f"{variant}: +{wins} ={draws} -{losses}")
            n = wins + draws + losses
            results[variant] = {
                "agent": agent.name,
                "games": n,
                "wins_draws_losses": [wins, draws, losses],
                "win_pct": round(100 * wins / n, 1) if n else None,
                "win_pct_ci95": [round(100 * x, 1) for x in wilson_interval(wins, n)],
                "score_pct": round(100 * (wins + draws / 2) / n, 1) if n else None,
                "score_pct_ci95": [round(100 * x, 1) for x in wilson_interval(wins + draws / 2, n)],
            }
    meter.done()
    summary = {"opponent": opponent_spec, "sims": sims, "n_scl": contempt, "variants": results}
    (out / "odds.json").write_text(json.dumps({**summary, "games": records}, indent=2) + "\n")
    return summary


# --- the command -----------------------------------------------------------------------------


def default_puzzles() -> str:
    root = project_root() or pathlib.Path.cwd()
    shared = (root / SHARED_PUZZLES).resolve()
    return str(shared if shared.exists() else root / SAMPLE_PUZZLES)


# Solver moves per puzzle, at most (the first 100 shared Lichess puzzles have 2.36 on average;
# a puzzle missed ends sooner).
SOLVER_MOVES = 2.4


def _estimate(args: argparse.Namespace, sims_per_s: float) -> None:
    """Prints the most playouts the remaining parts can take and the time at `sims_per_s`
    (games counted at their full --max-plies: most end sooner)."""
    playouts = 0.0
    if "puzzles" in args.parts:  # the baselines' time is not counted
        playouts += args.num * SOLVER_MOVES * sum(args.sims)
    if "elo" in args.parts:
        playouts += args.elo_games * args.max_plies / 2 * args.elo_sims
    if "odds" in args.parts:
        playouts += 2 * args.odds_games * args.max_plies / 2 * args.odds_sims
    print(
        f"search_report: at most ~{playouts:,.0f} playouts to go, "
        f"~{format_duration(playouts / max(sims_per_s, 1e-9))} at {sims_per_s:,.0f} playouts/s",
        file=sys.stderr,
        flush=True,
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.search_report", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--model", required=True, help="run dir or checkpoint dir (AV, SV, BC)")
    parser.add_argument("--value", help="the value model (AV or SV) a BC --model searches with")
    parser.add_argument("--out", default="results/search", help="where the JSON goes")
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    parser.add_argument("--batch", type=int, default=8, help="leaves per network call")
    parser.add_argument("--cpuct", type=float, default=DEFAULT_CPUCT)
    parser.add_argument("--seed", type=int, default=0, help="openings and contempt's samples")
    parser.add_argument("--speed-positions", type=int, default=3)
    parser.add_argument("--speed-sims", type=int, default=64)
    parser.add_argument("--puzzles", default=None, help=f"default: {SHARED_PUZZLES}, else sample")
    parser.add_argument("--num", type=int, default=100, help="first N puzzles")
    parser.add_argument("--sims", type=int, nargs="+", default=[0, 32, 128, 512])
    parser.add_argument(
        "--baselines", nargs="*", default=["random", "greedy", "stockfish:nodes=100000"]
    )
    parser.add_argument("--elo-sims", type=int, default=128)
    parser.add_argument("--elo-games", type=int, default=10, help="even")
    parser.add_argument("--odds-sims", type=int, default=128)
    parser.add_argument("--contempt", type=int, default=5, help="search-contempt's N_scl")
    parser.add_argument("--odds-opponent", default="greedy", help="an agent spec")
    parser.add_argument("--odds-games", type=int, default=8, help="per variant, even")
    parser.add_argument("--max-plies", type=int, default=100, help="per game, then a draw")
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except KeyboardInterrupt:
        return interrupted(
            "search_report: interrupted; the parts done are in search.json, run the others "
            "again with --parts"
        )


def _main(argv: list[str] | None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    resolved = resolve_path(args.model, str(pathlib.Path.cwd()))
    if resolved.path is None:
        parser.error(f"--model {resolved.describe_missing()}")
    for name in ("elo_games", "odds_games"):
        if getattr(args, name) < 2 or getattr(args, name) % 2:
            parser.error(f"--{name.replace('_', '-')} must be even and >= 2")
    if min(args.sims) < 0 or args.batch < 1 or args.contempt < 1:
        parser.error("--sims must be >= 0, --batch and --contempt >= 1")
    for spec in [*args.baselines, args.odds_opponent]:
        try:
            parse_agent_spec(spec)
        except ValueError as e:
            parser.error(str(e))
    setup = Setup(resolved.path, args.value, args.batch, args.cpuct, args.seed)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        models = Models(setup)
    except (ValueError, FileNotFoundError) as e:
        print(f"search_report: error: {e}", file=sys.stderr)
        return 2
    report: dict = {"model": resolved.path, "setup": dataclasses.asdict(setup), "parts": {}}
    started = time.monotonic()

    def save(part: str, summary: dict, seconds: float) -> None:
        report["parts"][part] = summary | {"seconds": round(seconds, 1)}
        report["seconds"] = round(time.monotonic() - started, 1)
        (out / "search.json").write_text(json.dumps(report, indent=2) + "\n")

    for part in PARTS:
        if part not in args.parts:
            continue
        t0 = time.monotonic()
        print(f"search_report: {part} ...", file=sys.stderr, flush=True)
        if part == "speed":
            summary = speed_part(models, args.speed_positions, args.speed_sims)
            (out / "speed.json").write_text(json.dumps(summary, indent=2) + "\n")
            _estimate(args, summary["batch_8" if args.batch >= 8 else "batch_1"]["sims_per_s"])
        elif part == "puzzles":
            path = args.puzzles or default_puzzles()
            summary, full = puzzles_part(models, path, args.num, args.sims, args.baselines)
            (out / "puzzles.json").write_text(json.dumps(full, indent=2) + "\n")
        elif part == "elo":
            summary = elo_part(models, out / "elo", args.elo_sims, args.elo_games, args.max_plies)
        else:
            summary = odds_part(
                models, out / "odds", args.odds_sims, args.contempt, args.odds_opponent,
                args.odds_games, args.max_plies,
            )  # fmt: skip
        save(part, summary, time.monotonic() - t0)
        print(
            f"search_report: {part} done in {format_duration(time.monotonic() - t0)}",
            file=sys.stderr,
            flush=True,
        )
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
