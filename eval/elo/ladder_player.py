"""One player's climb of the Elo ladder (eval/elo/ladder.py): the settings, the engine and its
levels, the games played (or reused from an earlier run) and the progress line after each."""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import chess.engine
import chess.pgn

from core.engine_path import find_engine
from core.openings import Opening
from eval.agents.base import Agent
from eval.agents.players import make_agent
from eval.agents.stockfish import start_engine, uci_elo_range
from eval.agents.uci_handshake import check_uci
from eval.elo.fixed_opponents import (
    FixedFit,
    RatedGame,
    fit_against_fixed,
    games_for_half_width,
    summed,
)
from eval.elo.ladder_report import describe_fit, how_it_ended
from eval.elo.ladder_resume import PLAYER_TAG, SECONDS_TAG, SETTINGS_TAG, EarlierGames, game_key
from eval.game import Adjudicator, ScheduledGame, play_game, to_pgn
from runtime.progress import format_duration

# How far past its bound the next level goes while a player has scored 0% or 100%.
JUMP = 400
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
    # Stockfish calls a game one side clearly wins (eval.elo.tournament's rule): games against weak
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
        """The engine at `path` (core.engine_path.find_engine); ValueError, one line naming
        it, when it is not a UCI engine (with what it printed) or has no UCI_Elo."""
        path = find_engine(path)
        check_uci(path)
        try:
            engine = start_engine(path, {})
        except (chess.engine.EngineError, TimeoutError) as e:
            raise ValueError(f"engine {path} failed to start: {e or type(e).__name__}") from None
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
    identity: str  # its games' LadderPlayer tag (ladder_resume.player_identity)
    games: list[dict] = field(default_factory=list)
    stop: str = ""
    fit: FixedFit | None = None
    seconds: float = 0.0
    reused: int = 0  # games taken from an earlier run, not played (not in the rate)

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
            spec = f"stockfish:elo={level},time={self.sf_time:g},name={opponent_name(level)}"
            self.agent, self.level = make_agent(spec, engine_path=self.engine.path), level
        return self.agent

    def close(self) -> None:
        if self.agent is not None:
            self.agent.close()
        self.agent, self.level = None, None


def opponent_name(level: int) -> str:
    return f"stockfish elo={level}"


@dataclass
class LadderGames:
    """Where a player's games come from and go: the earlier run's to reuse (matched by key),
    the PGN record, the settings tag and the date of new ones."""

    earlier: EarlierGames
    record: Callable[[chess.pgn.Game], None]
    settings: str
    date: str = field(default_factory=lambda: datetime.date.today().strftime("%Y.%m.%d"))


def _one_game(
    agent: Agent,
    run: PlayerRun,
    level: int,
    opponents: _Opponents,
    opening: Opening,
    as_white: bool,
    config: LadderConfig,
    games: LadderGames,
    adjudicator: Adjudicator | None,
) -> None:
    """One game of `run` at `level`: the earlier run's when it finished it, else played;
    recorded in the PGN and appended to `run.games`."""
    names = [run.name, opponent_name(level)] if as_white else [opponent_name(level), run.name]
    scheduled = ScheduledGame(f"{len(run.games) + 1}", 0, 1, opening)
    pgn = games.earlier.take(game_key(scheduled.round, *names, opening.name))
    run.reused += pgn is not None
    if pgn is None:
        sf = opponents.at(level)
        white, black = (agent, sf) if as_white else (sf, agent)
        t0 = time.monotonic()
        board, outcome = play_game(white, black, opening, config.max_plies, adjudicator)
        pgn = to_pgn(board, outcome, scheduled, names, PGN_EVENT, games.date)
        pgn.headers[SETTINGS_TAG] = games.settings
        pgn.headers[SECONDS_TAG] = f"{time.monotonic() - t0:.2f}"
        pgn.headers[PLAYER_TAG] = run.identity
    games.record(pgn)
    result = pgn.headers["Result"]
    points = {"1-0": 1.0, "0-1": 0.0}.get(result, 0.5)
    run.games.append(
        {
            "opponent_elo": level,
            "colour": "white" if as_white else "black",
            "opening": opening.label,
            "result": result,
            "score": points if as_white else 1.0 - points,
            "termination": pgn.headers["Termination"],
            "plies": int(pgn.headers["PlyCount"]) - len(opening.moves),
            "seconds": float(pgn.headers.get(SECONDS_TAG, 0.0)),
        }
    )


def rate_player(
    agent: Agent,
    run: PlayerRun,
    engine: Engine,
    openings: Sequence[Opening],
    config: LadderConfig,
    deadline: float,
    max_games: int,
    games: LadderGames,
    log: Callable[[str], None],
    adjudicator: Adjudicator | None = None,
) -> PlayerRun:
    """Plays `agent`'s ladder into `run` until its interval is narrow enough (models only),
    `max_games`, or `deadline` (time.monotonic()); the earlier run's finished games are
    reused, not played (eval/elo/ladder_resume.py)."""
    level = engine.low
    opponents = _Opponents(engine, config.sf_time)
    started = time.monotonic()
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
                    _one_game(
                        agent, run, level, opponents, opening, as_white, config, games, adjudicator
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
    rate = (n - run.reused) / max(now - started, 1e-9)  # games played per second
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
        f"elo ladder: {run.name}: game {n}{' (earlier run)' if n <= run.reused else ''} "
        f"vs elo {level} {verdict} as {last['colour']} "
        f"({how_it_ended(last)}), {points:g}/{len(at_level)} at {level}; "
        f"Elo {describe_fit(fit.to_dict())}, {60 * rate:.2f} games/min, "
        f"elapsed {format_duration(now - started)}, ETA {format_duration(eta)}"
    )
