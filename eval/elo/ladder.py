"""An absolute Elo: each player against a ladder of Stockfish UCI_Elo levels, aimed where the
player scores about half, until the interval is narrow enough or the time is up.

    python -m eval.elo.ladder [--models SPEC ...] [--baselines SPEC ...] [--sf-time 0.05]
        [--target 60] [--max-minutes 25] [--out results/elo]

Each player starts against `stockfish:elo=MIN` (the lowest UCI_Elo the engine announces)
and plays opening pairs (one opening with either colour, from the bundled ECO set) in steps;
after each step its Elo is fitted against the fixed ratings of the levels it met
(eval/elo/fixed_opponents.py) and the next level is the estimate, rounded and kept within the
engine's range (a 0% or 100% score so far moves it `JUMP` beyond its bound). A model stops once its
interval is +-`target` Elo, at `max_games`, or when its share of `max_minutes` runs out
(flagged in the output); a baseline (greedy, random) plays `baseline_games` on the same ladder.

Stockfish thinks `sf_time` seconds per move (UCI movetime); the players have budgets of their
own per move (the searchless model one network call, the search its playouts); there is no
game clock. `<out>/elo.json` holds every game, each level's results, the fits and what the
scale is anchored to; `<out>/elo.md` the table, `<out>/elo.png` the plot and
`<out>/games.pgn` the games.

Every argument is checked, the engines asked for `uciok` and every agent built before `--out`
is touched; the run holds `<out>/lock` (runtime/dir_lock.py); a rerun reuses the finished games of
an interrupted one (eval/elo/ladder_resume.py); the JSON and the table are written whole (a
temporary file renamed), after each player and on Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import pathlib
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

import chess.engine
import chess.pgn

from core.engine_path import find_engine
from core.openings import choose_openings, load_openings
from eval.agents.base import Agent
from eval.agents.mcts import DEFAULT_SIMS
from eval.agents.neural_setup import DEFAULT_MODEL, DEFAULT_SEARCH
from eval.agents.players import make_agent
from eval.agents.uci_handshake import check_uci
from eval.elo.ladder_player import Engine, LadderConfig, LadderGames, PlayerRun, rate_player
from eval.elo.ladder_report import (
    ANCHOR_STATEMENT,
    describe_fit,
    format_markdown,
    replot,
    write_reports,
)
from eval.elo.ladder_resume import (
    EarlierGames,
    earlier_games,
    player_identity,
    set_aside,
    settings_text,
)
from eval.game import (
    AdjudicationConfig,
    Adjudicator,
)
from runtime.cli import config_from_args
from runtime.dir_lock import DirectoryBusy, dir_lock
from runtime.interrupts import interrupted
from runtime.outputs import check_dir, disk_full, disk_full_line, writing
from runtime.progress import format_duration

# The default model searchless, and searching as the front ends do by default
# (eval/agents/neural_setup.py): PUCT with its own value head valuing the leaves, the default
# leaves per call, the mcts agent's playouts.
DEFAULT_MODELS = (
    f"neural:{DEFAULT_MODEL},name={DEFAULT_MODEL}",
    f"mcts:{DEFAULT_MODEL},batch={DEFAULT_SEARCH.batch},"
    f"sims={DEFAULT_SIMS},name={DEFAULT_MODEL}+search{DEFAULT_SIMS}",
)
DEFAULT_BASELINES = ("greedy", "random")
PGN_NAME = "games.pgn"
OUTPUTS = ("elo.json", "elo.md", "elo.png", PGN_NAME)
LOCK_NAME = "lock"  # held while a ladder writes --out (runtime/dir_lock.py)


@dataclass
class _Players:
    """Every player's agent, built before anything in --out is touched: a bad spec or a
    missing checkpoint ends the run before an earlier run's results are."""

    entries: list[tuple[str, str, Agent]]  # (spec, role, agent)
    identities: dict[str, str] = field(default_factory=dict)  # name -> player_identity

    @classmethod
    def build(cls, models: Sequence[str], baselines: Sequence[str], engine: Engine) -> _Players:
        players = [(s, "baseline") for s in baselines] + [(s, "model") for s in models]
        if not players:
            raise ValueError("no players: give --models and/or --baselines")
        built = cls([])
        try:
            for spec, role in players:
                try:
                    agent = make_agent(spec, engine_path=engine.path)
                except FileNotFoundError as e:  # a neural agent's checkpoint
                    raise ValueError(f"{role} {spec!r}: {e}") from None
                built.entries.append((spec, role, agent))
                built.identities[agent.name] = player_identity(spec)
            names = [a.name for _, _, a in built.entries]
            if len(set(names)) != len(names):
                raise ValueError(f"player names must differ (use name=LABEL in the spec): {names}")
        except BaseException:
            built.close()
            raise
        return built

    def close(self) -> None:
        for _, _, agent in self.entries:
            agent.close()


def _document(command: str, engine: Engine, config: LadderConfig, runs, seconds: float) -> dict:
    return {
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
        "wall_seconds": round(seconds, 1),
        "players": [r.to_dict() for r in runs],
    }


def _start_games(out: pathlib.Path, settings: str, players: _Players, log) -> EarlierGames:
    """The earlier run's games to reuse, or, when they cannot be, its results moved aside."""
    earlier, reason = earlier_games(out, PGN_NAME, settings, players.identities)
    if reason is not None:
        folder = set_aside(out, OUTPUTS)
        log(f"elo ladder: {reason}: moved the earlier results to {folder}; starting over")
    elif earlier.games:
        log(f"elo ladder: resuming: {len(earlier.games)} finished games in {out / PGN_NAME}")
    return earlier


def keep_untaken(earlier: EarlierGames, record: Callable[[chess.pgn.Game], None]) -> None:
    for game in earlier.untaken():
        record(game)


def run_ladder(
    models: Sequence[str],
    baselines: Sequence[str],
    out: str | pathlib.Path,
    config: LadderConfig | None = None,
    engine_path: str | None = None,
    command: str = "",
    log: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
) -> dict:
    """Every player's ladder (baselines first, they are quick), then the JSON, table and plot
    under `out`; returns the JSON document. Everything is checked and every agent built
    before `out` is touched; `out` is locked for the run (runtime/dir_lock.py); the earlier
    run's finished games are reused (eval/elo/ladder_resume.py). The JSON is rewritten after
    each player and on an interruption, so it always matches games.pgn."""
    out = pathlib.Path(out)
    config = config or LadderConfig()
    check_dir(str(out), "--out")
    engine = Engine.probe(engine_path)
    openings = choose_openings(load_openings(), 10_000, config.seed)
    adjudication = (
        AdjudicationConfig.parse(config.adjudicate, engine.path) if config.adjudicate else None
    )
    if adjudication is not None and adjudication.engine != engine.path:
        check_uci(find_engine(adjudication.engine))  # its own engine=PATH
    settings = settings_text(engine.name, config)
    started = time.monotonic()
    end = started + 60 * config.max_minutes
    runs: list[PlayerRun] = []

    def save(complete: bool) -> dict:
        document = _document(command, engine, config, runs, time.monotonic() - started)
        write_reports(document | {"complete": complete}, out)
        return document | {"complete": complete}

    with (
        contextlib.closing(_Players.build(models, baselines, engine)) as players,
        dir_lock(str(out), str(out / LOCK_NAME), "elo ladder", warn=log),
        Adjudicator(adjudication) if adjudication else contextlib.nullcontext() as adjudicator,
    ):
        earlier = _start_games(out, settings, players, log)
        with writing(str(out / PGN_NAME)), open(out / PGN_NAME, "w", encoding="utf-8") as pgn:

            def record(game: chess.pgn.Game) -> None:
                print(game, file=pgn, end="\n\n", flush=True)

            games = LadderGames(earlier, record, settings)
            try:
                for i, (spec, role, agent) in enumerate(players.entries):
                    # An equal share of what is left: time a quick player leaves goes on.
                    deadline = time.monotonic() + (end - time.monotonic()) / (
                        len(players.entries) - i
                    )
                    cap = config.max_games if role == "model" else config.baseline_games
                    run = PlayerRun(spec, agent.name, role, players.identities[agent.name])
                    runs.append(run)
                    log(
                        f"elo ladder: {agent.name} ({role}) from elo {engine.low}, "
                        f"until {format_duration(deadline - time.monotonic())} or {cap} games"
                    )
                    rate_player(
                        agent, run, engine, openings, config, deadline, cap, games, log,
                        adjudicator,
                    )  # fmt: skip
                    log(
                        f"elo ladder: {run.name}: Elo {describe_fit(run.fit.to_dict())} "
                        f"({run.stop}, {len(run.games)} games)"
                    )
                    if i + 1 < len(players.entries):
                        save(complete=False)
            except KeyboardInterrupt:
                keep_untaken(earlier, record)
                if runs and not runs[-1].stop:
                    runs[-1].stop = "interrupted"
                runs[:] = [r for r in runs if r.games]
                with contextlib.suppress(Exception):  # the games are safe in games.pgn
                    save(complete=False)
                raise
            keep_untaken(earlier, record)
        return save(complete=True)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m eval.elo.ladder",
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
        help='stockfish:nodes=N,cp=CP,plies=K as in eval.elo.tournament; "" for none',
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
    command = "python -m eval.elo.ladder " + shlex.join(sys.argv[1:] if argv is None else argv)
    try:
        document = run_ladder(
            args.models, args.baselines, args.out, config, args.engine, command.strip()
        )
    except KeyboardInterrupt:
        return interrupted(
            f"elo ladder: interrupted; {args.out}/{PGN_NAME} has the finished games and "
            f"{args.out}/elo.json their fits; the same command resumes from them"
        )
    except (ValueError, OSError, DirectoryBusy) as e:
        # a bad spec or Elo, no engine, an unwritable output, another ladder on --out
        full = disk_full(e)
        if full is not None:
            resume = "the same command resumes from the games in games.pgn"
            print(disk_full_line(full, args.out, resume), file=sys.stderr)
        else:
            print(f"error: {e}", file=sys.stderr)
        return 2
    print(format_markdown(document), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
