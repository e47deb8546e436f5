"""Stockfish as an agent: playing normally (`StockfishAgent`) or as the paper's oracle, every
legal move searched on its own (`StockfishOracleAgent`), each in its own python-chess UCI
process, restarted once if it dies."""

from __future__ import annotations

from dataclasses import dataclass

import chess
import chess.engine

from core.actions import move_to_index
from core.engine_path import find_engine
from core.engine_settings import EngineLimit, EngineOptions
from core.values import Score, best_score_index
from eval.agents.base import AgentBase, legal_moves
from runtime.interrupts import sigint_deferred

# Seconds per move of `stockfish:elo=N` without a limit of its own. Stockfish weakened by
# UCI_LimitStrength picks its move when its iterative deepening reaches depth 1 + skill level
# (a handful of plies near the bottom of the range), which takes milliseconds.
ELO_MOVE_TIME = 0.1


@dataclass(frozen=True)
class EngineSettings(EngineOptions, EngineLimit):
    """An agent's engine: how to start it and how long each search runs, both records of
    core.engine_settings in one, as an agent spec gives them (keywords only)."""

    def __post_init__(self):
        EngineLimit.__post_init__(self)  # a missing limit is named before the engine's options
        EngineOptions.__post_init__(self)

    @property
    def limit(self) -> chess.engine.Limit:
        return chess.engine.Limit(nodes=self.nodes, time=self.time, depth=self.depth)

    def describe(self) -> str:
        keys = ("elo", "nodes", "time", "depth")
        return ",".join(f"{k}={getattr(self, k)}" for k in keys if getattr(self, k))


class _UciProcess:
    """One engine process, restarted once when it dies under us (a crashed engine is not
    the position's fault). Closed deterministically by `close()`."""

    def __init__(self, settings: EngineSettings):
        self.settings = settings
        self.path = find_engine(settings.path)
        self._engine: chess.engine.SimpleEngine | None = None
        self.restarts = 0
        self._start()

    def _start(self) -> None:
        self._engine = start_engine(self.path, self.settings.uci_options())

    @property
    def pid(self) -> int | None:
        return None if self._engine is None else self._engine.transport.get_pid()

    def call(self, fn):
        """Runs fn(engine); restarts the engine once if it died, then retries."""
        if self._engine is None:
            raise RuntimeError(f"engine {self.path} is closed")
        try:
            return fn(self._engine)
        except chess.engine.EngineTerminatedError:
            _shut_down(self._engine)
            self._engine = None
            self.restarts += 1
            self._start()
            return fn(self._engine)

    def close(self) -> None:
        if self._engine is not None:
            engine, self._engine = self._engine, None
            _shut_down(engine)


def uci_elo_range(engine: chess.engine.SimpleEngine, path: str) -> tuple[int, int]:
    """The UCI_Elo range the engine announces in its `uci` answer; ValueError (one line
    naming the engine) when it has no UCI_Elo option."""
    option = engine.options.get("UCI_Elo")
    if option is None or option.min is None or option.max is None:
        raise ValueError(f"engine {path} has no UCI_Elo option: it cannot play at an Elo")
    return int(option.min), int(option.max)


def engine_elo_range(path: str | None = None) -> tuple[int, int]:
    """The UCI_Elo range of the engine at `path` (core.engine_path.find_engine when None)."""
    path = find_engine(path)
    engine = start_engine(path, {})
    try:
        return uci_elo_range(engine, path)
    finally:
        _shut_down(engine)


def _check_elo(engine: chess.engine.SimpleEngine, path: str, options: dict) -> None:
    if "UCI_Elo" not in options:
        return
    low, high = uci_elo_range(engine, path)
    if not low <= int(options["UCI_Elo"]) <= high:
        raise ValueError(
            f"elo={options['UCI_Elo']} is outside {path}'s UCI_Elo range {low}..{high}"
        )


def start_engine(path: str, options: dict[str, str | int | bool]) -> chess.engine.SimpleEngine:
    """A running UCI engine with those of `options` it has; a UCI_Elo among them must lie in
    the engine's range (ValueError otherwise). Ctrl-C while it starts is
    deferred to the end, where it shuts the engine down before it propagates: an engine
    half-started by python-chess would keep the process from exiting."""
    engine = None
    try:
        with sigint_deferred():
            engine = chess.engine.SimpleEngine.popen_uci(path)
            _check_elo(engine, path, options)
            engine.configure({k: v for k, v in options.items() if k in engine.options})
    except BaseException:
        if engine is not None:
            _shut_down(engine)
        raise
    return engine


def _shut_down(engine: chess.engine.SimpleEngine, timeout: float = 10.0) -> None:
    """Asks the engine to quit, kills it if it does not, and waits until it is reaped."""
    try:
        engine.quit()
    except Exception:  # already dead or hung: killed below
        pass
    finally:
        engine.close()
        try:
            engine.returncode.result(timeout=timeout)
        except Exception:
            pass


class _EngineAgent(AgentBase):
    """An agent that owns one UCI engine process under `settings`."""

    kind = "engine"

    def __init__(self, settings: EngineSettings, name: str | None = None):
        self.settings = settings
        self.name = name or f"{self.kind}:{settings.describe()}"
        self._process = _UciProcess(settings)
        self._game = object()

    @property
    def pid(self) -> int | None:
        return self._process.pid

    def new_game(self) -> None:
        # A new `game` object makes python-chess send `ucinewgame`, which clears the hash.
        self._game = object()

    def close(self) -> None:
        self._process.close()


class StockfishAgent(_EngineAgent):
    """Stockfish playing normally under a node, time or depth limit (its own UCI process)."""

    kind = "stockfish"

    def choose_move(self, board: chess.Board) -> chess.Move:
        legal_moves(board)
        result = self._process.call(
            lambda engine: engine.play(board, self.settings.limit, game=self._game)
        )
        if result.move is None:
            raise RuntimeError(f"{self.name} returned no move for {board.fen()!r}")
        return result.move


@dataclass(frozen=True)
class RootMoveValue:
    move: chess.Move
    score: chess.engine.Score  # side to move's view
    win_prob: float


def engine_score(score: chess.engine.Score) -> Score:
    """A python-chess Score (side to move's view) as the labels' core.values.Score."""
    mate = score.mate()
    return Score(mate=mate) if mate is not None else Score(cp=score.score())


class StockfishOracleAgent(_EngineAgent):
    """The paper's Stockfish oracle: every legal move is searched on its own (UCI
    `searchmoves` with that one root move) under the same limit, and the best value wins.

    Values are compared as engine scores, which order like win probabilities but keep mate
    distances apart (mate in 1 beats mate in 5, where both are win probability 1.0). Ties go
    to the move earliest in action-space order, so the choice is deterministic. The score's
    win probability and that tie rule are the labels' own (core.values.Score and
    best_score_index). The process is python-chess's rather than the labels' client
    (pipeline.labels.uci_client) because the oracle also takes depth limits, combined limits, a
    skill level and the game's move history, which that client does not speak.
    """

    kind = "oracle"

    def move_values(self, board: chess.Board) -> list[RootMoveValue]:
        """Every legal move's value, in action-space order."""
        moves = sorted(legal_moves(board), key=move_to_index)
        values = []
        for move in moves:
            info = self._process.call(
                lambda engine, move=move: engine.analyse(
                    board, self.settings.limit, root_moves=[move], game=self._game
                )
            )
            if "score" not in info:
                raise RuntimeError(f"{self.name}: no score for {move.uci()} in {board.fen()!r}")
            score = info["score"].pov(board.turn)
            values.append(RootMoveValue(move, score, engine_score(score).win_prob))
        return values

    def choose_move(self, board: chess.Board) -> chess.Move:
        values = self.move_values(board)
        return values[best_score_index([engine_score(v.score) for v in values])].move


def calibrated_elo(agent: object) -> int | None:
    """The `UCI_Elo` a `stockfish:elo=N` agent plays at (the engine's own calibrated rating),
    None for any other agent."""
    return agent.settings.elo if isinstance(agent, _EngineAgent) else None
