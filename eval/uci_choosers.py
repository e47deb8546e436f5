"""Move choosers for the UCI engine (eval/uci.py): what plays a move once the protocol has
the board, the moves allowed and the time it may take.

- PolicyChooser: a trained model's policy, one batched network call per move, no search;
- AgentChooser: any eval.engines agent (the random mover, Stockfish), for tests and as the
  fallback when there is no model;
- NeuralFactory / AgentFactory: build a chooser from the UCI options. NeuralFactory loads
  each (model, UseEMA) once, compiling every batch shape a move can need, and starts XLA's
  thread pools with `Threads` threads (eval/threads.py).

A search plugs in as one more MoveChooser: it gets the time budget in its MoveRequest and
returns a Decision (move, value, depth, nodes) that the engine turns into its info line.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from typing import Literal, Protocol

import chess
import numpy as np

from core.paths import resolve_path
from eval import threads
from eval.engines import VALUE_TARGETS, Agent, NeuralAgent, make_agent, pick_index
from eval.uci_go import GoParams
from eval.uci_options import DEFAULT_WEIGHTS, UciOptions


@dataclass(frozen=True)
class MoveRequest:
    """What a move chooser is asked besides the board."""

    allowed: frozenset[chess.Move] | None = None  # `go searchmoves`; None = every legal move
    budget: float | None = None  # seconds the move may take (Move Overhead kept back)
    go: GoParams = field(default_factory=GoParams)


@dataclass(frozen=True)
class Decision:
    move: chess.Move
    win_prob: float | None = None  # the mover's expected score after the move, if known
    nodes: int = 0  # positions evaluated (network rows)
    depth: int = 1


class MoveChooser(Protocol):
    name: str

    def choose(self, board: chess.Board, request: MoveRequest) -> Decision: ...

    def new_game(self) -> None: ...

    def close(self) -> None: ...


class PolicyChooser:
    """A model's policy: one batched network call per move, no search."""

    def __init__(self, agent: NeuralAgent, seed: int):
        self.agent = agent
        self.name = agent.name
        self._rng = np.random.default_rng(seed)

    def choose(self, board: chess.Board, request: MoveRequest) -> Decision:
        moves, scores = self.agent.scored_moves(board)
        candidates = [
            i
            for i, uci in enumerate(moves)
            if request.allowed is None or chess.Move.from_uci(uci) in request.allowed
        ] or list(range(len(moves)))
        pick = pick_index(scores[candidates], self.agent.target, self.agent.temperature, self._rng)
        i = candidates[pick]
        value = float(scores[i]) if self.agent.target in VALUE_TARGETS else None
        return Decision(chess.Move.from_uci(moves[i]), win_prob=value, nodes=len(moves))

    def new_game(self) -> None:
        self.agent.new_game()

    def close(self) -> None:
        self.agent.close()


class AgentChooser:
    """Any eval.engines agent (random, Stockfish): its move, within `searchmoves`."""

    def __init__(self, agent: Agent):
        self.agent = agent
        self.name = agent.name

    def choose(self, board: chess.Board, request: MoveRequest) -> Decision:
        move = self.agent.choose_move(board)
        if request.allowed and move not in request.allowed:
            move = min(request.allowed, key=lambda m: m.uci())
        return Decision(move)

    def new_game(self) -> None:
        self.agent.new_game()

    def close(self) -> None:
        self.agent.close()


class ModelUnavailable(Exception):
    """There is no model to play with; the message says why and what to do."""


class ChooserFactory(Protocol):
    def __call__(self, options: UciOptions) -> MoveChooser: ...


def label(path: str) -> str:
    """A run's name for a run dir or one of its checkpoint dirs."""
    parts = os.path.normpath(path).split(os.sep)
    if len(parts) >= 3 and parts[-1].isdigit() and parts[-2] == "checkpoints":
        return f"{parts[-3]}@{parts[-1]}"
    return parts[-1]


def xla_cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "searchless-chess", "xla")


def keep_compilations_on_disk() -> None:
    """Keeps XLA's compiled batch shapes in xla_cache_dir() (JAX's persistent compilation
    cache), so an engine started again for the same architecture (lichess-bot starts one
    per game, tournament managers restart them) reads them back instead of compiling: the
    warm-up then costs a fraction. A cache the user set (JAX_COMPILATION_CACHE_DIR) or
    turned off (JAX_ENABLE_COMPILATION_CACHE=false) is left alone."""
    import jax  # only with a model: see NeuralFactory._load

    if jax.config.jax_compilation_cache_dir or not jax.config.jax_enable_compilation_cache:
        return
    directory = xla_cache_dir()
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError:
        return  # nowhere to keep them: every start compiles
    jax.config.update("jax_compilation_cache_dir", directory)
    # JAX keeps only compilations slower than 1 s by default; each shape counts here.
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)


class NeuralFactory:
    """Policies of the model WeightsFile names; each (model, UseEMA) is loaded once, and the
    first load starts XLA with `Threads` threads."""

    def __init__(
        self,
        start_dir: str,
        warm_up: bool = True,
        rows_per_pass: int | None | Literal["auto"] = "auto",
    ):
        self.start_dir = start_dir
        self.warm_up = warm_up
        self.rows_per_pass = rows_per_pass  # the predictor's (model/predictor.py)
        self.runtime_threads: int | None = None  # threads XLA's pools were made with
        self._predictors: dict[tuple[str, bool], object] = {}

    def __call__(self, options: UciOptions) -> MoveChooser:
        resolved = resolve_path(options.weights or DEFAULT_WEIGHTS, self.start_dir)
        if resolved.path is None:
            raise ModelUnavailable(
                f"no model: {resolved.describe_missing()}; name one with --checkpoint PATH "
                "or setoption name WeightsFile value PATH"
            )
        predictor = self._load(resolved.path, options)
        agent = NeuralAgent(
            predictor,
            temperature=options.temperature,
            seed=options.seed,
            repetition_workaround=options.repetition_workaround,
            name=label(resolved.path),
        )
        return PolicyChooser(agent, options.seed)

    def _load(self, path: str, options: UciOptions):
        key = (path, options.use_ema)
        if key not in self._predictors:
            # JAX is imported here, not at the top: `uci` must be answered in the
            # handshake's few seconds, and the test agents (--agent) never need it.
            from model.predictor import Predictor

            keep_compilations_on_disk()
            first = self.runtime_threads is None  # XLA's thread pools not made yet
            pools = threads.thread_pools_of(options.threads) if first else contextlib.nullcontext()
            try:
                with pools:
                    predictor = Predictor.from_checkpoint(
                        path, use_ema=options.use_ema, rows_per_pass=self.rows_per_pass
                    )
                    if self.warm_up:
                        predictor.warm_up(max_boards=1)  # one board per move
                    else:  # as the engine did before the warm-up: the first move's shape
                        predictor.move_values([chess.Board()])
            # A user's file can fail to load in as many ways as orbax and JAX have errors;
            # whichever it is, the engine must report it and stay up.
            except Exception as e:
                raise ModelUnavailable(
                    f"cannot load model {path!r}: {type(e).__name__}: {e}"
                ) from None
            if first:  # the pools were made by the computations above
                self.runtime_threads = threads.effective_threads(options.threads)
            self._predictors[key] = predictor
        return self._predictors[key]

    def threads_note(self, requested: int) -> str | None:
        """Why a Threads change cannot take effect now, if it cannot."""
        if self.runtime_threads is None or not threads.supported():
            return None
        if threads.effective_threads(requested) == self.runtime_threads:
            return None
        return (
            f"Threads {requested} applies when the engine restarts: the model computes with "
            f"{self.runtime_threads} thread(s), fixed when it was loaded"
        )


class AgentFactory:
    """Choosers of one agent spec (random, stockfish:...): the hidden --agent, for tests."""

    def __init__(self, spec: str, engine_path: str | None = None):
        self.spec = spec
        self.engine_path = engine_path

    def __call__(self, options: UciOptions) -> MoveChooser:
        try:
            return AgentChooser(make_agent(self.spec, engine_path=self.engine_path))
        except Exception as e:  # a bad spec or a missing engine: reported, engine stays up
            raise ModelUnavailable(f"cannot make agent {self.spec!r}: {e}") from None
