"""An absolute Elo: each player against a ladder of Stockfish UCI_Elo levels, aimed where the
player scores about half, until the interval is narrow enough or the time is up.

    python -m eval.elo_ladder [--models SPEC ...] [--baselines SPEC ...] [--sf-time 0.05]
        [--target 60] [--max-minutes 25] [--out results/elo]

Each player starts against `stockfish:elo=MIN` (the lowest UCI_Elo the engine announces)
and plays opening pairs (one opening with either colour, from the bundled ECO set) in steps;
after each step its Elo is fitted against the fixed ratings of the levels it met
(eval/elo_fixed.py) and the next level is the estimate, rounded and kept within the engine's
range (a 0% or 100% score so far moves it `JUMP` beyond its bound). A model stops once its
interval is +-`target` Elo, at `max_games`, or when its share of `max_minutes` runs out
(flagged in the output); a baseline (greedy, random) plays `baseline_games` on the same ladder.

Stockfish thinks `sf_time` seconds per move (UCI movetime); the players have budgets of their
own per move (the searchless model one network call, the search its playouts); there is no
game clock. `<out>/elo.json` holds every game, each level's results, the fits and what the
scale is anchored to; `<out>/elo.md` the table, `<out>/elo.png` the plot and
`<out>/games.pgn` the games.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import pathlib
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

import chess.pgn

from core.cli import config_from_args
from core.engine_path import find_engine
from core.interrupts import interrupted
from core.openings import Opening, choose_openings, load_openings
from core.progress import format_duration
from eval.agent_base import Agent
from eval.elo_fixed import FixedFit, RatedGame, fit_against_fixed, games_for_half_width, summed
from eval.elo_ladder_report import ANCHOR_STATEMENT, format_markdown, replot, write_reports
from eval.engines import make_agent
from eval.game import AdjudicationConfig, Adjudicator, ScheduledGame, play_game, to_pgn
from eval.mcts import DEFAULT_SIMS
from eval.stockfish_agents import start_engine, uci_elo_range
from eval.uci.options import DEFAULT_SEARCH_BATCH, DEFAULT_VALUE_WEIGHTS, DEFAULT_WEIGHTS

# The model searchless, and searching as the UCI engine does when given Simulations: PUCT
# with models/cpu-av valuing the leaves, SearchBatch leaves per call, the mcts agent's playouts.
DEFAULT_MODELS = (
    f"neural:{DEFAULT_WEIGHTS},name={DEFAULT_WEIGHTS}",
    f"mcts:{DEFAULT_WEIGHTS},value={DEFAULT_VALUE_WEIGHTS},batch={DEFAULT_SEARCH_BATCH},"
    f"sims={DEFAULT_SIMS},name={DEFAULT_WEIGHTS}+search{DEFAULT_SIMS}",
)
DEFAULT_BASELINES = ("greedy", "random")
# How far past its bound the next level goes while a player has scored 0% or 100%.
JUMP = 400
OUTPUTS = ("elo.json", "elo.md", "elo.png", "games.pgn")
PGN_EVENT = "searchless-chess Elo ladder"


@dataclass(frozen=True)
class LadderConfig:
    sf_time: float = 0.05  # Stockfish's seconds per move (UCI movetime)
    pairs_per_step: int = 2  # opening pairs (4 games) between re-aimings of the level
    target: float = 60.0  # stop at a 95% interval of +- this many Elo
    max_minutes: float = 25.0  # the whole run; each player gets a share of what is left
    max_games: int = 400  # per model
    baseline_games: int = 8  # per baseline
    max_plies: int = 400  # a draw after this many plies
    # Stockfish calls a game one side clearly wins (eval.tournament's rule): games against weak
    # levels are decided long before they are mated, and a search's moves cost seconds.
    adjudicate: str = "stockfish:nodes=10000,cp=1000,plies=6"  # "": play every game out
    level_step: int = 10  # levels are multiples of this
    confidence: float = 0.95
    seed: int = 0  # chooses the openings

    def __post_init__(self) -> None:
        if not self.sf_time > 0 or not self.target > 0 or not self.max_minutes > 0:
            raise ValueError("sf-time, target and max-minutes must be positive")
        if min(self.pairs_per_step, self.max_games, self.baseline_games, self.max_plies) < 1:
            raise ValueError("pairs per step, max games, baseline games, max plies must be >= 1")
        if self.level_step < 1 or not 0 < self.confidence < 1:
            raise ValueError("level step must be >= 1 and confidence in (0, 1)")

    def time_control(self) -> str:
        adjudication = f", adjudicated by {self.adjudicate}" if self.adjudicate else ""
        return (
            f"Stockfish {self.sf_time:g} s per move (movetime), no game clock; the players "
            f"at their own per-move budgets; draw at {self.max_plies} plies{adjudication}"
        )


@dataclass(frozen=True)
class Engine:
    """The ladder's engine: path, UCI name and UCI_Elo range."""

    path: str
    name: str
    low: int
    high: int

    @classmethod
    def probe(cls, path: str | None) -> Engine:
        path = find_engine(path)
        engine = start_engine(path, {})
        try:
            low, high = uci_elo_range(engine, path)
            return cls(path, engine.id.get("name", path), low, high)
        finally:
            engine.quit()


@dataclass
class PlayerRun:
    """One player's ladder: its games, where it stopped and why, the fit."""

    spec: str
    name: str
    role: str  # "model" or "baseline"
    games: list[dict] = field(default_factory=list)
    stop: str = ""
    fit: FixedFit | None = None
    seconds: float = 0.0

    def rated(self) -> list[RatedGame]:
        return [RatedGame(g["opponent_elo"], g["score"]) for g in self.games]

    def to_dict(self) -> dict:
        levels = summed(self.rated())
        return {
            "spec": self.spec,
            "name": self.name,
            "role": self.role,
            "stop": self.stop,
            "target_reached": self.stop == "converged",
            "seconds": round(self.seconds, 1),
            "fit": self.fit.to_dict() if self.fit else None,
            "levels": [{"elo": e, "games": n, "points": p} for e, (n, p) in levels.items()],
            "games": self.games,
        }


def next_level(fit: FixedFit, current: int, engine: Engine, step: int) -> int:
    """Where the player should score about half: its estimate, or past its bound while it
    has scored 0% or 100%; a multiple of `step` within the engine's range."""
    if fit.bound == "upper":
        target = min(fit.upper, current) - JUMP
    elif fit.bound == "lower":
        target = max(fit.lower, current) + JUMP
    else:
        target = fit.elo
    rounded = int(round(target / step) * step)
    return min(max(rounded, engine.low), engine.high)


class _Opponents:
    """The Stockfish of the current level, restarted only when the level changes."""

    def __init__(self, engine: Engine, sf_time: float):
        self.engine, self.sf_time = engine, sf_time
        self.level: int | None = None
        self.agent: Agent | None = None

    def at(self, level: int) -> Agent:
        if level != self.level:
            self.close()
            spec = f"stockfish:elo={level},time={self.sf_time:g},name=stockfish elo={level}"
            self.agent, self.level = make_agent(spec, engine_path=self.engine.path), level
        return self.agent

    def close(self) -> None:
        if self.agent is not None:
            self.agent.close()
        self.agent, self.level = None, None


def rate_player(
    agent: Agent,
    run: PlayerRun,
    engine: Engine,
    openings: Sequence[Opening],
    config: LadderConfig,
    deadline: float,
    max_games: int,
    record: Callable[[chess.pgn.Game], None],
    log: Callable[[str], None],
    adjudicator: Adjudicator | None = None,
) -> PlayerRun:
    """Plays `agent`'s ladder into `run` until its interval is narrow enough (models only),
    `max_games`, or `deadline` (time.monotonic())."""
    level = engine.low
    opponents = _Opponents(engine, config.sf_time)
    started = time.monotonic()
    date = datetime.date.today().strftime("%Y.%m.%d")
    pair = 0
    try:
        while not run.stop:
            for _ in range(config.pairs_per_step):
                opening = openings[pair % len(openings)]
                pair += 1
                for as_white in (True, False):
                    if len(run.games) >= max_games:
                        run.stop = "game cap"
                    elif time.monotonic() >= deadline:
                        run.stop = "time cap"
                    if run.stop:
                        break
                    sf = opponents.at(level)
                    white, black = (agent, sf) if as_white else (sf, agent)
                    t0 = time.monotonic()
                    board, outcome = play_game(white, black, opening, config.max_plies, adjudicator)
                    scheduled = ScheduledGame(f"{len(run.games) + 1}", 0, 1, opening)
                    pgn = to_pgn(
                        board, outcome, scheduled, [white.name, black.name], PGN_EVENT, date
                    )
                    record(pgn)
                    points = {"1-0": 1.0, "0-1": 0.0}.get(outcome.result, 0.5)
                    run.games.append(
                        {
                            "opponent_elo": level,
                            "colour": "white" if as_white else "black",
                            "opening": opening.label,
                            "result": outcome.result,
                            "score": points if as_white else 1.0 - points,
                            "termination": outcome.termination,
                            "plies": len(board.move_stack) - len(opening.moves),
                            "seconds": round(time.monotonic() - t0, 2),
                        }
                    )
                    run.fit = fit_against_fixed(run.rated(), config.confidence)
                    log(_progress(run, level, config, started, deadline, max_games))
                if run.stop:
                    break
            if run.stop:
                break
            if run.role == "model" and run.fit.elo is not None:
                if run.fit.half_width <= config.target:
                    run.stop = "converged"
                    break
            level = next_level(run.fit, level, engine, config.level_step)
    finally:
        opponents.close()
        run.seconds = time.monotonic() - started
    return run


def _progress(
    run: PlayerRun, level: int, config: LadderConfig, started: float, deadline: float, cap: int
) -> str:
    """`elo ladder: NAME: game N vs elo L won as white (checkmate), 3.5/4 at L; Elo ...,
    2.1 games/min, elapsed 1m10s, ETA ...` (ETA: to the target interval, the game cap or the
    time cap, whichever comes first)."""
    now = time.monotonic()
    n = len(run.games)
    rate = n / max(now - started, 1e-9)  # games per second
    at_level = [g for g in run.games if g["opponent_elo"] == level]
    points = sum(g["score"] for g in at_level)
    fit = run.fit
    wanted = cap
    if run.role == "model" and fit.elo is not None:
        wanted = min(cap, games_for_half_width(fit.score, config.target, config.confidence))
    eta = min(max(wanted - n, 0) / rate if rate > 0 else float("inf"), max(deadline - now, 0))
    last = run.games[-1]
    verdict = {1.0: "won", 0.5: "drew", 0.0: "lost"}[last["score"]]
    return (
        f"elo ladder: {run.name}: game {n} vs elo {level} {verdict} as {last['colour']} "
        f"({last['termination']}), {points:g}/{len(at_level)} at {level}; "
        f"Elo {fit.describe()}, {60 * rate:.2f} games/min, "
        f"elapsed {format_duration(now - started)}, ETA {format_duration(eta)}"
    )


def check_writable(out: pathlib.Path) -> None:
    """Fails (OSError naming the path) before any game when an output cannot be written."""
    out.mkdir(parents=True, exist_ok=True)
    for name in OUTPUTS:
        path = out / name
        existed = path.exists()
        with open(path, "a", encoding="utf-8"):
            pass
        if not existed:
            path.unlink()


def run_ladder(
    models: Sequence[str],
    baselines: Sequence[str],
    out: str | pathlib.Path,
    config: LadderConfig = LadderConfig(),
    engine_path: str | None = None,
    command: str = "",
    log: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
) -> dict:
    """Every player's ladder (baselines first, they are quick), then the JSON, table and plot
    under `out`; returns the JSON document."""
    out = pathlib.Path(out)
    check_writable(out)
    engine = Engine.probe(engine_path)
    openings = choose_openings(load_openings(), 10_000, config.seed)
    adjudication = (
        AdjudicationConfig.parse(config.adjudicate, engine.path) if config.adjudicate else None
    )
    players = [(s, "baseline") for s in baselines] + [(s, "model") for s in models]
    if not players:
        raise ValueError("no players: give --models and/or --baselines")
    started = time.monotonic()
    end = started + 60 * config.max_minutes
    runs: list[PlayerRun] = []
    adjudicator = Adjudicator(adjudication) if adjudication else None
    with (
        open(out / "games.pgn", "w", encoding="utf-8") as pgn_file,
        adjudicator if adjudicator else contextlib.nullcontext(),
    ):

        def record(pgn) -> None:
            print(pgn, file=pgn_file, end="\n\n", flush=True)

        for i, (spec, role) in enumerate(players):
            # An equal share of what is left: time a quick player leaves goes to the next.
            deadline = time.monotonic() + (end - time.monotonic()) / (len(players) - i)
            cap = config.max_games if role == "model" else config.baseline_games
            with make_agent(spec, engine_path=engine.path) as agent:
                run = PlayerRun(spec, agent.name, role)
                log(
                    f"elo ladder: {agent.name} ({role}) from elo {engine.low}, "
                    f"until {format_duration(deadline - time.monotonic())} or {cap} games"
                )
                runs.append(
                    rate_player(
                        agent,
                        run,
                        engine,
                        openings,
                        config,
                        deadline,
                        cap,
                        record,
                        log,
                        adjudicator,
                    )
                )
            log(
                f"elo ladder: {run.name}: Elo {run.fit.describe()} ({run.stop}, "
                f"{len(run.games)} games)"
            )
    document = {
        "command": command,
        "anchor": ANCHOR_STATEMENT.format(
            engine=engine.name,
            time_control=config.time_control(),
            low=engine.low,
            high=engine.high,
        ),
        "time_control": config.time_control(),
        "engine": asdict(engine),
        "config": asdict(config),
        "wall_seconds": round(time.monotonic() - started, 1),
        "players": [r.to_dict() for r in runs],
    }
    (out / "elo.json").write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    write_reports(document, out)
    return document


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m eval.elo_ladder",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    d = LadderConfig()
    parser.add_argument(
        "--models",
        nargs="*",
        default=list(DEFAULT_MODELS),
        help="agent specs rated until --target or the time cap",
    )
    parser.add_argument(
        "--baselines",
        nargs="*",
        default=list(DEFAULT_BASELINES),
        help="agent specs rated with --baseline-games games",
    )
    parser.add_argument("--sf-time", type=float, default=d.sf_time, help="Stockfish s/move")
    parser.add_argument("--pairs-per-step", type=int, default=d.pairs_per_step)
    parser.add_argument("--target", type=float, default=d.target, help="interval half-width")
    parser.add_argument("--max-minutes", type=float, default=d.max_minutes)
    parser.add_argument("--max-games", type=int, default=d.max_games, help="per model")
    parser.add_argument("--baseline-games", type=int, default=d.baseline_games)
    parser.add_argument("--max-plies", type=int, default=d.max_plies)
    parser.add_argument(
        "--adjudicate",
        default=d.adjudicate,
        help='stockfish:nodes=N,cp=CP,plies=K as in eval.tournament; "" for none',
    )
    parser.add_argument("--level-step", type=int, default=d.level_step)
    parser.add_argument("--seed", type=int, default=d.seed, help="chooses the openings")
    parser.add_argument("--engine", default=None, help="Stockfish binary")
    parser.add_argument("--out", default="results/elo", help="output directory")
    parser.add_argument(
        "--replot",
        action="store_true",
        help="play nothing: redraw elo.md and elo.png from --out's elo.json",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        config = config_from_args(LadderConfig, args)
    except ValueError as e:
        parser.error(str(e))
    if args.replot:
        return replot(pathlib.Path(args.out))
    command = "python -m eval.elo_ladder " + shlex.join(sys.argv[1:] if argv is None else argv)
    try:
        document = run_ladder(
            args.models, args.baselines, args.out, config, args.engine, command.strip()
        )
    except KeyboardInterrupt:
        return interrupted(f"elo ladder: interrupted; {args.out}/games.pgn has the games so far")
    except (ValueError, OSError) as e:  # a bad spec or Elo, no engine, an unwritable output
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(format_markdown(document), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
