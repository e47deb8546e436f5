"""Move choosers for the UCI engine (eval/uci/server.py): what plays a move once the protocol has
the board, the moves allowed and the time it may take.

- PolicyChooser: a trained model's policy, one batched network call per move, no search;
- SearchChooser: the model searching (eval/mcts.py) within the `go` limits, in the engine's
  search thread, told by a SearchControl when to stop and when the ponder move was played;
- AgentChooser: any eval.engines agent (the random mover, Stockfish), for tests and as the
  fallback when there is no model;
- NeuralFactory / AgentFactory: build a chooser from the UCI options. NeuralFactory loads
  each (model, UseEMA) once, compiling every batch shape a move can need, and starts XLA's
  thread pools with `Threads` threads (eval/uci/threads.py).

A chooser that searches (`searches = True`) is run in a thread of its own, so that the
engine reads `stop`, `ponderhit` and `isready` meanwhile; the others answer at once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

import chess
import numpy as np

from core.game_end import terminal_value
from core.paths import resolve_path
from eval.engines import VALUE_TARGETS, Agent, NeuralAgent, make_agent, pick_index
from eval.evaluators import make_evaluator
from eval.mcts import SearchConfig, SearchInfo, SearchLimit, TreeSearch, max_nodes_for
from eval.uci import threads
from eval.uci.go import GoParams
from eval.uci.options import DEFAULT_WEIGHTS, UciOptions

# Seconds between the info lines of a running search.
INFO_EVERY = 1.0
# How often the engine's search thread looks at the clock and `stop` while the worker
# searches, and how long after `stop` it waits for the worker's batch to end: `stop` and
# `ponderhit` are answered within 100 ms whatever the batch is doing.
WAIT_STEP = 0.005
STOP_GRACE = 0.03


class SearchLate(RuntimeError):
    """The search had nothing to answer with when its move was due."""


class SearchControl:
    """What the engine's input thread tells a running search: `stop` (answer now) and
    `ponderhit` (the move pondered on was played: the clock runs from now). `wake` is set by
    either, for the waits that end on both."""

    def __init__(self):
        self.stop = threading.Event()
        self.wake = threading.Event()
        self.hit_at: float | None = None  # time.monotonic() of the ponderhit

    def request_stop(self) -> None:
        self.stop.set()
        self.wake.set()

    def ponderhit(self) -> None:
        if self.hit_at is None:
            self.hit_at = time.monotonic()
        self.wake.set()


@dataclass(frozen=True)
class MoveRequest:
    """What a move chooser is asked besides the board."""

    allowed: frozenset[chess.Move] | None = None  # `go searchmoves`; None = every legal move
    # Seconds the move may take (Move Overhead kept back); for `go ponder`, once ponderhit.
    budget: float | None = None
    go: GoParams = field(default_factory=GoParams)
    started: float | None = None  # time.monotonic() when the `go` arrived; budget runs from it
    control: SearchControl | None = None  # for a searching chooser
    on_info: Callable[[SearchInfo], None] | None = None  # a running search's progress


@dataclass(frozen=True)
class Decision:
    move: chess.Move
    win_prob: float | None = None  # the mover's expected score after the move, if known
    nodes: int = 0  # positions evaluated (network rows), or a search's playouts
    depth: int = 1
    # A search's: its deepest playout, the line it expects and the reply in it.
    seldepth: int = 1
    pv: tuple[chess.Move, ...] = ()
    ponder: chess.Move | None = None
    searched: bool = False


class MoveChooser(Protocol):
    name: str

    def choose(self, board: chess.Board, request: MoveRequest) -> Decision: ...

    def new_game(self) -> None: ...

    def close(self) -> None: ...


def move_value(value_model, board: chess.Board, move: chess.Move) -> float:
    """The mover's win probability after `move` by an AV or SV model (`model.predictor`)."""
    if value_model.config.target_kind.takes_action:
        [(ucis, values)] = value_model.move_values([board])
        return float(values[ucis.index(move.uci())])
    child = board.copy(stack=False)
    child.push(move)
    ended = terminal_value(child)  # for the side to move after the move
    if ended is None:
        ended = float(value_model.state_values([child.fen()])[0])
    return 1.0 - ended


class PolicyChooser:
    """A model's policy: one batched network call per move, no search. A BC policy has no
    value of its own: its move's value (the info line's score) comes from `value_model`
    where there is one."""

    def __init__(self, agent: NeuralAgent, seed: int, value_model=None):
        self.agent = agent
        self.name = agent.name
        self.value_model = value_model
        self.warning: str | None = None  # why it plays although a search was asked for
        self.value_error: str | None = None  # why the value model asked for is not used
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
        move = chess.Move.from_uci(moves[i])
        value = float(scores[i]) if self.agent.target in VALUE_TARGETS else None
        if value is None and self.value_model is not None:
            value = move_value(self.value_model, board, move)
        return Decision(move, win_prob=value, nodes=len(moves))

    def new_game(self) -> None:
        self.agent.new_game()

    def close(self) -> None:
        self.agent.close()


class SearchChooser:
    """The model searching with PUCT or search-contempt before each move, the tree kept
    between the moves of a game (eval/mcts.py). A move's limit comes from its `go`:

    - `nodes N`: N playouts; otherwise at most `simulations` (the Simulations option);
    - `movetime` or the clocks: the time budget too (eval/uci/go.py), whichever ends first,
      and no batch is started that would end past it;
    - `infinite`: until `stop`; `ponder`: up to the playouts above until `ponderhit`, then on
      with the clock's budget counted from the ponderhit (or until `stop`).

    The search runs in a worker thread. When the move is due (its deadline, or `stop`) while
    a batch is still running (compiling, or a loaded machine), the move is answered from the
    tree as it stands and the batch finishes on its own; the next search then grows a tree
    of its own. A full tree (`Hash`) ends the search early.

    A position whose game is already over by the rules though moves are left (a threefold
    repetition, fifty moves, bare kings) has nothing to search: the policy answers it."""

    searches = True

    def __init__(
        self,
        policy: PolicyChooser,
        search: TreeSearch,
        simulations: int,
        seed: int,
    ):
        self.policy = policy
        self.search = search
        self.simulations = simulations
        self.seed = seed
        self.name = policy.name
        self._games = 0
        self._restarts = 0  # trees started afresh beside a worker still busy
        self._worker: threading.Thread | None = None

    def choose(self, board: chess.Board, request: MoveRequest) -> Decision:
        if terminal_value(board) is not None:
            return self.policy.choose(board, request)
        control = request.control or SearchControl()
        started = request.started if request.started is not None else time.monotonic()
        self._own_tree()
        self.search.set_position(board)
        runs: list[SearchInfo] = []
        failed: list[BaseException] = []
        done, answered = threading.Event(), threading.Event()

        def work() -> None:
            try:
                self._search(request, control, started, runs, answered)
            except BaseException as e:  # re-raised below, in the engine's search thread
                failed.append(e)
            finally:
                done.set()

        self._worker = threading.Thread(target=work, name="search-batches", daemon=True)
        self._worker.start()
        self._wait(done, request, control, started)
        answered.set()  # a worker still busy reports no more
        if failed:
            raise failed[0]
        if not self.search.root.expanded:
            raise SearchLate("the position was not evaluated within the time of the move")
        return self._decision(request.allowed, runs + ([] if done.is_set() else [None]))

    def _search(self, request: MoveRequest, control, started: float, runs: list, answered) -> None:
        """The search of one `go`, run in the worker thread: each run's info into `runs`,
        its progress to `request.on_info` until the move is `answered`."""
        go = request.go
        sims = max(0, go.nodes) if go.nodes is not None else self.simulations

        def run(limit: SearchLimit) -> None:
            done = sum(info.playouts for info in runs)

            def on_info(info: SearchInfo) -> None:
                if request.on_info is not None and not answered.is_set():
                    request.on_info(dataclasses.replace(info, playouts=info.playouts + done))

            # The engine reports the final state itself, with the move it plays.
            runs.append(
                self.search.run(limit, on_info=on_info, info_every=INFO_EVERY, info_at_end=False)
            )

        if go.infinite:
            run(SearchLimit(stop=control.stop))
        elif go.ponder:
            run(SearchLimit(sims=sims, stop=control.wake))
            left = sims - runs[-1].playouts
            if control.hit_at is not None and not control.stop.is_set() and left > 0:
                budget = request.budget
                deadline = None if budget is None else control.hit_at + budget
                run(SearchLimit(left, deadline, control.stop, within_deadline=True))
        else:
            deadline = None if request.budget is None else started + request.budget
            run(SearchLimit(sims=sims, deadline=deadline, stop=control.stop, within_deadline=True))

    @staticmethod
    def _wait(done: threading.Event, request: MoveRequest, control, started: float) -> None:
        """Waits for the worker until it is done, or until the move is due however far its
        batch has got (a network call compiling or a loaded machine): at the move's deadline,
        or STOP_GRACE after `stop`. The worker then ends with its batch, on its own."""
        go = request.go
        while not done.wait(WAIT_STEP):
            if control.stop.is_set():
                done.wait(STOP_GRACE)
                return
            if go.infinite or request.budget is None:
                continue
            since = control.hit_at if go.ponder else started
            if since is not None and time.monotonic() >= since + request.budget:
                return

    def _own_tree(self) -> None:
        """A worker still finishing a batch keeps its tree: the next search grows a new one,
        and no command waits for that batch."""
        if self._worker is not None and self._worker.is_alive():
            self._restarts += 1
            self.search = TreeSearch(
                self.search.evaluator,
                self.search.config,
                np.random.default_rng([self.seed, self._games, self._restarts]),
            )

    def _decision(
        self, allowed: frozenset[chess.Move] | None, runs: list[SearchInfo | None]
    ) -> Decision:
        """The move most visited (within `allowed`); a None run is the one still going."""
        runs = [self.search.snapshot() if info is None else info for info in runs]
        stats = self.search.root_moves()  # most visited first
        pick = next((s for s in stats if allowed is None or s.move in allowed), stats[0])
        last = runs[-1]
        pv = last.pv if last.pv and last.pv[0] == pick.move else (pick.move,)
        reply = pv[1] if len(pv) > 1 else self.search.expected_reply(pick.move)
        if len(pv) == 1 and reply is not None:
            pv = (pick.move, reply)
        playouts = sum(info.playouts for info in runs)
        return Decision(
            pick.move,
            win_prob=pick.q,
            nodes=playouts,
            depth=max(1, round(sum(i.depth * i.playouts for i in runs) / max(1, playouts))),
            seldepth=max(1, *(info.seldepth for info in runs)),
            pv=pv,
            ponder=reply,
            searched=True,
        )

    def new_game(self) -> None:
        self._games += 1
        self._own_tree()
        self.search.clear()
        # Each game its own stream for search-contempt's samples, as the mcts agent does.
        self.search.rng = np.random.default_rng([self.seed, self._games])
        self.policy.new_game()

    def close(self) -> None:
        self.policy.close()


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
        self._fixed: dict[int, int] = {}  # id(predictor) -> boards per call its shapes fit

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
        value_model, note = self._value_model(predictor, options)
        policy = PolicyChooser(agent, options.seed, value_model)
        policy.warning = policy.value_error = note
        if options.simulations == 0:
            return policy
        try:
            evaluator = make_evaluator(
                predictor, value_model, prior_temperature=options.prior_temperature
            )
        except ValueError as e:  # a BC model without a value model: its policy plays
            policy.warning = f"Simulations {options.simulations} ignored: {e}"
            return policy
        for model in (predictor, value_model):
            if model is not None:
                self._fix_shapes(model, options.search_batch)
        config = SearchConfig(
            cpuct=options.cpuct,
            batch=options.search_batch,
            contempt=options.search_contempt or None,
            max_nodes=max_nodes_for(options.hash_mb),
        )
        search = TreeSearch(evaluator, config, np.random.default_rng(options.seed))
        return SearchChooser(policy, search, options.simulations, options.seed)

    def _value_model(self, predictor, options: UciOptions):
        """(the value model, None) beside a BC policy (UciOptions.value_model_path); (None,
        why not) when it cannot be used; (None, None) beside an AV or SV model, which values
        moves itself, or where there is none."""
        path = options.value_model_path()
        if predictor.config.target_kind.value_head or not path:
            return None, None
        named = bool(options.value_weights)  # the default companion may be absent quietly
        resolved = resolve_path(path, self.start_dir)
        if resolved.path is None:
            return None, (f"no value model: {resolved.describe_missing()}" if named else None)
        try:
            value_model = self._load(resolved.path, options)
        except ModelUnavailable as e:
            return None, str(e)
        if not value_model.config.target_kind.value_head:
            return None, f"ValueFile {resolved.path!r} is a BC model, not an AV or SV one"
        return value_model, None

    def _fix_shapes(self, predictor, boards: int) -> None:
        """Fixes the model's batch shapes for `boards` leaves per network call and compiles
        them all (unless warm-up is off), once per model and batch: from then on no search
        waits for XLA, however its batches and boards vary."""
        if self._fixed.get(id(predictor)) != boards:
            predictor.fix_shapes(boards, compile_now=self.warm_up)
            self._fixed[id(predictor)] = boards

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
