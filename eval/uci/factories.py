"""Move choosers from the UCI options (eval/uci/choosers.py): NeuralFactory for a trained
model, AgentFactory for the hidden --agent of the tests. NeuralFactory loads each (model,
UseEMA) once, compiling every batch shape a move can need, and starts XLA's thread pools with
`Threads` threads (eval/uci/threads.py). A factory that has no model to give raises
ModelUnavailable, and the engine plays on with the random mover.

With a search (Simulations > 0) the chooser is returned once the policy is compiled: the
search's shapes (and the value model's) compile in a thread of their own, and the chooser's
`ready` is set when they are done (eval/uci/choosers.SearchChooser plays the policy's moves
until then). So `readyok` comes within the time GUIs allow a starting engine, even with an
empty compile cache.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable
from typing import Literal, Protocol

import chess
import numpy as np

from eval.agents.model_files import keep_compilations_on_disk, label
from eval.agents.neural_setup import DEFAULT_MODEL, ModelPair, load_predictor
from eval.agents.players import NeuralAgent, make_agent
from eval.uci import threads
from eval.uci.choosers import AgentChooser, MoveChooser, PolicyChooser, SearchChooser
from eval.uci.options import UciOptions
from runtime.paths import resolve_path

# Seconds between the interpreter's thread switches while the search compiles in the
# background (Python's default is 0.005).
COMPILE_SWITCH_INTERVAL = 0.0005
_SWITCH_INTERVAL = sys.getswitchinterval()  # the process's own, restored after


# Boards per network call of the successors a mixed policy values (eval.agents.players
# .successor_mixed): a middlegame has ~35 legal moves, and two fixed shapes cover any count.
SUCCESSOR_BOARDS = 64


class ModelUnavailable(Exception):
    """There is no model to play with; the message says why and what to do."""


class ChooserFactory(Protocol):
    def __call__(self, options: UciOptions) -> MoveChooser: ...


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
        self._fixed: dict[int, int] = {}  # id(predictor) -> boards per call its shapes fit
        self._warmed: set[int] = set()  # id(predictor) of those compiled for play

    def __call__(self, options: UciOptions) -> MoveChooser:
        resolved = resolve_path(options.weights or DEFAULT_MODEL, self.start_dir)
        if resolved.path is None:
            raise ModelUnavailable(
                f"no model: {resolved.describe_missing()}; name one with --checkpoint PATH "
                "or setoption name WeightsFile value PATH"
            )
        predictor = self._load(resolved.path, options)
        # The value model of a search compiles with the search's shapes, off the start.
        value_warm = options.simulations == 0
        agent, weight_note = self._agent(predictor, options, label(resolved.path))
        value_model, note = self._value_model(predictor, options, value_warm)
        policy = PolicyChooser(agent, options.seed, value_model)
        policy.warning = policy.value_error = note
        if options.simulations == 0:
            policy.warning = policy.warning or weight_note
            if agent.successor_weight > 0:  # a move values its successors in one call
                self._fix_shapes(predictor, SUCCESSOR_BOARDS)
            return policy
        pair = ModelPair(predictor, value_model)
        try:
            search = pair.search(options.search_settings(), np.random.default_rng(options.seed))
        except ValueError as e:  # a BC model without a value model: its policy plays
            policy.warning = f"Simulations {options.simulations} ignored: {e}"
            return policy
        ready, end = self._compile_search([predictor, value_model], options.search_batch)
        return SearchChooser(
            policy, search, options.simulations, options.seed, ready, end_compiling=end
        )

    @staticmethod
    def _agent(predictor, options: UciOptions, name: str) -> tuple[NeuralAgent, str | None]:
        """The searchless agent, and why SuccessorWeight is not used where it cannot be."""
        settings = {
            "temperature": options.temperature,
            "seed": options.seed,
            "repetition_workaround": options.repetition_workaround,
            "name": name,
        }
        try:
            agent = NeuralAgent(predictor, successor_weight=options.successor_weight, **settings)
        except ValueError as e:  # a model without a value head beside its policy
            return NeuralAgent(predictor, successor_weight=0.0, **settings), (
                f"SuccessorWeight ignored: {e}"
            )
        return agent, None

    def _value_model(self, predictor, options: UciOptions, warm: bool = True):
        """(the value model, None) beside a BC policy (ValueFile); (the fallback, why not)
        when it cannot be used; (None, None) beside an AV or SV model, which values moves
        itself, or where there is none. The fallback, and the value model where none is
        named, is the policy itself where it has a value head beside it."""
        path = options.value_weights
        if predictor.config.target_kind.value_head:
            return None, None
        own = predictor if getattr(predictor, "values_boards", False) else None
        if not path:
            return own, None
        resolved = resolve_path(path, self.start_dir)
        if resolved.path is None:
            return own, f"no value model: {resolved.describe_missing()}"
        try:
            value_model = self._load(resolved.path, options, warm)
        except ModelUnavailable as e:
            return own, str(e)
        if not (value_model.config.target_kind.value_head or value_model.values_boards):
            return own, f"ValueFile {resolved.path!r} is a BC model, not an AV or SV one"
        return value_model, None

    def _compile_search(self, models: list, boards: int) -> tuple[threading.Event, Callable]:
        """Fixes the models' search shapes now and compiles them in a thread of its own
        (at once without warm-up). Returns an event set when they are compiled, and a
        function that ends the compiling early: the shapes not yet begun are skipped, those
        in hand finished, and the thread joined, so that no thread is inside XLA when the
        engine exits (the interpreter's end would abort it). A model's 1-board shapes come
        first: the value model's score of a policy move needs them."""
        ready, stop = threading.Event(), threading.Event()
        models = list({id(model): model for model in models if model is not None}.values())

        def compile_all() -> None:
            # Tracing holds the interpreter for long stretches: a move played meanwhile
            # gets it back sooner with a shorter switch interval.
            sys.setswitchinterval(COMPILE_SWITCH_INTERVAL)
            try:
                for model in models:
                    if stop.is_set():
                        break
                    self._fix_shapes(model, boards, stop)
                    if not stop.is_set():
                        self._warmed.add(id(model))
            finally:  # a shape that failed to compile fails again in the search, reported
                sys.setswitchinterval(_SWITCH_INTERVAL)
                ready.set()

        if not self.warm_up:
            compile_all()
            return ready, lambda: None
        thread = threading.Thread(target=compile_all, name="search-compile", daemon=True)
        thread.start()

        def end() -> None:
            stop.set()
            thread.join()

        return ready, end

    def _fix_shapes(self, predictor, boards: int, stop: threading.Event | None = None) -> None:
        """Fixes the model's batch shapes for `boards` leaves per network call and compiles
        them all (unless warm-up is off), once per model and batch: from then on no search
        waits for XLA, however its batches and boards vary. Ended by `stop`, the shapes left
        compile when first used, and the model counts as not yet compiled."""
        if self._fixed.get(id(predictor)) != boards:
            predictor.fix_shapes(boards, compile_now=self.warm_up, stop=stop)
            if stop is None or not stop.is_set():
                self._fixed[id(predictor)] = boards

    def _load(self, path: str, options: UciOptions, warm: bool = True):
        """The model at `path`, loaded once; with `warm` (and warm-up on) its shapes for
        one board a move are compiled before it is returned."""
        key = (path, options.use_ema)
        if key in self._predictors and warm and self.warm_up:
            predictor = self._predictors[key]
            if id(predictor) not in self._warmed:  # loaded for a search still compiling
                predictor.warm_up(max_boards=1)
                self._warmed.add(id(predictor))
        if key not in self._predictors:
            keep_compilations_on_disk()
            first = self.runtime_threads is None  # XLA's thread pools not made yet
            pools = threads.thread_pools_of(options.threads) if first else contextlib.nullcontext()
            try:
                with pools:
                    predictor = load_predictor(
                        path, use_ema=options.use_ema, rows_per_pass=self.rows_per_pass
                    )
                    if self.warm_up and warm:
                        predictor.warm_up(max_boards=1)  # one board per move
                        self._warmed.add(id(predictor))
                    elif not self.warm_up:  # as before the warm-up: the first move's shape
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
