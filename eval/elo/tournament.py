"""Round-robin tournaments between agents, with every game in PGN and Elo by maximum likelihood.

    python -m eval.elo.tournament --agents random stockfish:nodes=1000 neural:runs/small \\
        --games 10 [--openings FILE.pgn|FILE.epd] [--adjudicate stockfish:nodes=10000] \\
        [--anchor random[=RATING]] [--out results/tournament] [--resume]

Every pair of agents plays `--games` games: `--games / 2` openings (a seeded choice from the
bundled ECO set or the given file, the same openings for every pair), each once with either
colour. A game ends on checkmate, stalemate, insufficient material, a claimable draw that has
happened on the board (the third occurrence of a position, or fifty moves without a capture or
pawn move), an illegal move (a loss for the side that played it), the optional Stockfish
adjudication (the evaluation beyond a threshold for the same side for several consecutive plies)
or the ply cap (a draw). Games are appended to `<out>/games.pgn` as they finish; `--resume`
keeps the finished games of an interrupted run (matched by round, players and opening).
At the end it fits Elo (eval/elo/ratings.py), prints the table and writes `<out>/tournament.json`.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import math
import pathlib
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import chess.pgn

from core.game_end import DRAW
from core.openings import Opening, choose_openings, load_openings
from eval.agents.base import Agent
from eval.agents.players import make_agent
from eval.agents.specs import SPEC_HELP
from eval.agents.stockfish import calibrated_elo
from eval.elo.ratings import EloConfig, GameResult, fit_elo, format_table
from eval.game import (
    AdjudicationConfig,
    Adjudicator,
    ScheduledGame,
    play_game,
    termination_kind,
    to_pgn,
)
from runtime.cli import config_from_args
from runtime.interrupts import interrupted
from runtime.outputs import OutputError, check_dir
from runtime.progress import Progress

PGN_NAME = "games.pgn"
JSON_NAME = "tournament.json"


@dataclass(frozen=True)
class TournamentConfig:
    games_per_pair: int = 10
    max_plies: int = 400  # plies played by the agents, the opening not counted
    seed: int = 0  # chooses the openings
    anchor: str | None = None  # agent name (or spec) fixed at anchor_elo; None: the first
    anchor_elo: float = 0.0
    prior_draws: float = EloConfig.prior_draws
    event: str = "searchless-chess tournament"

    def __post_init__(self):
        if self.games_per_pair < 2 or self.games_per_pair % 2:
            raise ValueError(
                f"--games must be even and >= 2 (each opening is played with both colours), "
                f"got {self.games_per_pair}"
            )
        if self.max_plies < 1:
            raise ValueError(f"max plies must be >= 1, got {self.max_plies}")


# --- the tournament ----------------------------------------------------------------------


def schedule(n_agents: int, openings: Sequence[Opening], config: TournamentConfig):
    """All games, opening by opening, so a cut-short run has played every pair alike."""
    chosen = choose_openings(openings, config.games_per_pair // 2, config.seed)
    pairs = list(itertools.combinations(range(n_agents), 2))
    games = []
    for k, opening in enumerate(chosen, 1):
        for p, (a, b) in enumerate(pairs, 1):
            games.append(ScheduledGame(f"{k}.{p}.1", a, b, opening))
            games.append(ScheduledGame(f"{k}.{p}.2", b, a, opening))
    return games


def _key(round_: str, white: str, black: str, opening: str) -> tuple[str, str, str, str]:
    return round_, white, black, opening


def read_finished(path: pathlib.Path) -> dict[tuple[str, str, str, str], chess.pgn.Game]:
    """Finished games of an earlier run. A game cut short by an interruption is left out: its
    move count must match its PlyCount header and its result must be decisive or a draw."""
    finished = {}
    if not path.exists():
        return finished
    with open(path, encoding="utf-8") as f:
        while (game := chess.pgn.read_game(f)) is not None:
            h = game.headers
            if game.errors or h.get("Result") not in ("1-0", "0-1", DRAW):
                continue
            if h.get("PlyCount") != str(sum(1 for _ in game.mainline_moves())):
                continue
            finished[_key(h["Round"], h["White"], h["Black"], h.get("Opening", ""))] = game
    return finished


def pair_results(results: Sequence[GameResult], names: Sequence[str]) -> list[dict]:
    """Per pair of agents: games, each side's wins, draws and the first agent's score."""
    out = []
    for a, b in itertools.combinations(names, 2):
        a_wins = b_wins = draws = 0
        for r in results:
            if {r.white, r.black} != {a, b}:
                continue
            a_score = r.score if r.white == a else 1.0 - r.score
            a_wins += a_score == 1.0
            b_wins += a_score == 0.0
            draws += a_score == 0.5
        games = a_wins + b_wins + draws
        out.append(
            {
                "a": a,
                "b": b,
                "games": games,
                "a_wins": a_wins,
                "draws": draws,
                "b_wins": b_wins,
                "a_score": (a_wins + 0.5 * draws) / games if games else None,
            }
        )
    return out


def _checked_anchor(names: Sequence[str], anchor: str | None) -> str:
    """The anchor's name (default: the first agent); ValueError for fewer than two agents,
    names that repeat, or an anchor that is none of them."""
    if len(names) < 2:
        raise ValueError("a tournament needs at least two agents")
    if len(set(names)) != len(names):
        raise ValueError(f"agent names must differ (use name=LABEL in the spec): {names}")
    anchor = anchor or names[0]
    if anchor not in names:
        raise ValueError(f"anchor {anchor!r} is not one of the agents {names}")
    return anchor


def _game_record(game: ScheduledGame, white: str, black: str, pgn: chess.pgn.Game) -> dict:
    """One game's entry in tournament.json's game list."""
    return {
        "round": game.round,
        "white": white,
        "black": black,
        "opening": game.opening.label,
        "result": pgn.headers["Result"],
        "termination": pgn.headers["Termination"],
        "plies": int(pgn.headers.get("PlyCount", 0)) - len(game.opening.moves),
    }


def run_tournament(
    agents: Sequence[Agent],
    out_dir: str | pathlib.Path,
    config: TournamentConfig = TournamentConfig(),
    openings: Sequence[Opening] | None = None,
    adjudication: AdjudicationConfig | None = None,
    resume: bool = False,
    progress: bool = True,
) -> dict:
    """Plays the round robin, writes `games.pgn` and `tournament.json` under `out_dir` and
    returns the JSON summary. The agents stay open (the caller owns them)."""
    names = [a.name for a in agents]
    anchor = _checked_anchor(names, config.anchor)
    openings = list(openings) if openings is not None else load_openings()
    games = schedule(len(agents), openings, config)

    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    pgn_path = out_dir / PGN_NAME
    finished = read_finished(pgn_path) if resume else {}
    date = datetime.date.today().strftime("%Y.%m.%d")

    results: list[GameResult] = []
    terminations: Counter[str] = Counter()
    records: list[dict] = []
    reused = 0
    started = time.monotonic()
    meter = Progress("tournament", len(games), "games") if progress else None
    adjudicator = Adjudicator(adjudication) if adjudication else None
    try:
        with open(pgn_path, "w", encoding="utf-8") as pgn_file:
            for i, game in enumerate(games, 1):
                white, black = names[game.white], names[game.black]
                key = _key(game.round, white, black, game.opening.name)
                if key in finished:
                    pgn = finished[key]
                    reused += 1
                else:
                    board, outcome = play_game(
                        agents[game.white],
                        agents[game.black],
                        game.opening,
                        config.max_plies,
                        adjudicator,
                    )
                    pgn = to_pgn(board, outcome, game, names, config.event, date)
                print(pgn, file=pgn_file, end="\n\n", flush=True)
                result, termination = pgn.headers["Result"], pgn.headers["Termination"]
                results.append(GameResult.from_pgn_result(white, black, result))
                terminations[termination_kind(termination)] += 1
                records.append(_game_record(game, white, black, pgn))
                if meter:
                    meter.update(i, f"last: {white} - {black} {result} ({termination})")
    finally:
        if adjudicator is not None:
            adjudicator.close()
    if meter:
        meter.done()

    fit = fit_elo(
        results,
        anchor=anchor,
        config=EloConfig(anchor_elo=config.anchor_elo, prior_draws=config.prior_draws),
    )
    summary = {
        "config": asdict(config) | {"anchor": anchor},
        "adjudication": asdict(adjudication) if adjudication else None,
        "agents": names,
        "games": len(results),
        "reused_games": reused,
        "wall_seconds": round(time.monotonic() - started, 3),
        "pgn": str(pgn_path),
        "elo": fit.to_dict(),
        "table": format_table(fit),
        "pairs": pair_results(results, names),
        "terminations": dict(terminations),
        "game_list": records,
    }
    (out_dir / JSON_NAME).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return summary


def format_pairs(pairs: Sequence[dict]) -> str:
    return "\n".join(
        f"  {p['a']} vs {p['b']}: +{p['a_wins']} ={p['draws']} -{p['b_wins']} "
        f"({100 * p['a_score']:.1f}%)"
        for p in pairs
        if p["games"]
    )


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return _run(parser, args)
    except KeyboardInterrupt:
        return interrupted(
            f"tournament: interrupted; the finished games are in {args.out}/{PGN_NAME}, "
            "and the same command with --resume continues from them"
        )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m eval.elo.tournament",
        description=__doc__.split("\n\n")[0],
        epilog=SPEC_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--agents", nargs="+", required=True, help="two or more agent specs")
    parser.add_argument("--games", type=int, default=10, help="games per pair (even; default 10)")
    parser.add_argument("--openings", default=None, help=".pgn or .epd (default: bundled ECO set)")
    parser.add_argument(
        "--adjudicate",
        default=None,
        metavar="stockfish:nodes=N,cp=CP,plies=K",
        help="end a game once Stockfish sees one side >= CP (default 1000) for K (default 6) "
        "consecutive plies at N nodes (default 10000)",
    )
    parser.add_argument(
        "--anchor",
        default=None,
        metavar="NAME[=RATING]",
        help="agent (name or spec) fixed at RATING, else at --anchor-elo, else a "
        "stockfish:elo=N agent at N and any other at 0 (default: the first agent)",
    )
    parser.add_argument("--anchor-elo", type=float, default=None)
    parser.add_argument(
        "--prior-draws",
        type=float,
        default=EloConfig.prior_draws,
        help="virtual draws per pair keeping perfect scores finite (0: pure MLE)",
    )
    parser.add_argument("--max-plies", type=int, default=400, help="draw after this many plies")
    parser.add_argument("--seed", type=int, default=0, help="chooses the openings")
    parser.add_argument("--engine", default=None, help="Stockfish binary (agents, adjudication)")
    parser.add_argument("--out", default="results/tournament", help="output directory")
    parser.add_argument("--resume", action="store_true", help="keep finished games in --out")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    return parser


def resolve_anchor(
    text: str, names: Sequence[str], specs: Sequence[str]
) -> tuple[str, float | None]:
    """`--anchor NAME[=RATING]` -> (the agent's name, RATING or None). NAME is an agent's name
    or the spec it was built from (`--anchor random`). Specs hold `=` themselves, so the whole
    text is tried as a name first and only then split at its last `=`. ValueError (one line)
    when no agent matches or RATING is not a number."""

    def agent(name: str) -> str | None:
        if name in names:
            return name
        return next((n for n, s in zip(names, specs, strict=True) if s == name), None)

    if (whole := agent(text)) is not None:
        return whole, None
    name, eq, rating = text.rpartition("=")
    if eq and (found := agent(name)) is not None:
        try:
            value = float(rating)
        except ValueError:
            raise ValueError(f"--anchor {text!r}: rating {rating!r} is not a number") from None
        if not math.isfinite(value):
            raise ValueError(f"--anchor {text!r}: rating must be finite")
        return found, value
    raise ValueError(f"--anchor {text!r} is none of the agents {list(names)}")


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    try:
        specs = list(args.agents)
        anchor = args.anchor
        # The anchor is resolved once the agents have names (below).
        config = config_from_args(
            TournamentConfig,
            args,
            games_per_pair=args.games,
            anchor=None,
            anchor_elo=args.anchor_elo or 0.0,
        )
        openings = load_openings(args.openings)
        adjudication = (
            AdjudicationConfig.parse(args.adjudicate, args.engine) if args.adjudicate else None
        )
    except ValueError as e:
        parser.error(str(e))

    try:
        check_dir(args.out, "--out")  # before any agent starts: games take long
    except OutputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    agents: list[Agent] = []
    try:
        for spec in specs:
            try:
                agents.append(make_agent(spec, engine_path=args.engine))
            except FileNotFoundError as e:  # a neural agent's checkpoint, an engine
                raise ValueError(f"agent {spec!r}: {e}") from None
        names = [a.name for a in agents]
        if anchor is not None:
            anchor, rating = resolve_anchor(anchor, names, specs)
            if rating is None and args.anchor_elo is None:
                # `--anchor stockfish:elo=1350` means what it says: that engine at 1350.
                rating = calibrated_elo(agents[names.index(anchor)])
            if rating is not None:
                config = TournamentConfig(**(asdict(config) | {"anchor_elo": rating}))
        config = TournamentConfig(**(asdict(config) | {"anchor": anchor}))
        summary = run_tournament(
            agents,
            args.out,
            config,
            openings,
            adjudication,
            resume=args.resume,
            progress=not args.quiet,
        )
    except (ValueError, FileNotFoundError) as e:  # e.g. a bad spec, no such checkpoint
        print(f"error: {e}", file=sys.stderr)
        return 2
    finally:
        for agent in agents:
            agent.close()

    print(summary["table"])
    print("pairs:")
    print(format_pairs(summary["pairs"]))
    print(f"games: {args.out}/{PGN_NAME}  results: {args.out}/{JSON_NAME}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
