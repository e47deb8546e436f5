"""Move choosers for the UCI engine (eval/uci/server.py): what plays a move once the protocol has
the board, the moves allowed and the time it may take.

- PolicyChooser: a trained model's policy, one batched network call per move, no search;
- SearchChooser: the model searching (eval/agents/mcts.py) within the `go` limits, in the engine's
  search thread, told by a SearchControl when to stop and when the ponder move was played;
- AgentChooser: any eval.agents.players agent (the random mover, Stockfish), for tests and as the
  fallback when there is no model.

eval/uci/factories.py builds them from the UCI options.

A chooser that searches (`searches = True`) is run in a thread of its own, so that the
engine reads `stop`, `ponderhit` and `isready` meanwhile; the others answer at once.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import chess
import numpy as np

from core.game_end import terminal_value
from core.targets import VALUE_TARGETS
from eval.agents.base import Agent
from eval.agents.mcts import SearchInfo, SearchLimit, TreeSearch
from eval.agents.players import NeuralAgent, pick_index
from eval.uci.go import GoParams
from eval.uci.info import mate_in

# Seconds between the info lines of a running search.
INFO_EVERY = 1.0
# How often the engine's search thread looks at the clock and `stop` while the worker
# searches, and how long after `stop` it waits for the worker's batch to end: `stop` and
# `ponderhit` are answered within 100 ms whatever the batch is doing.
WAIT_STEP = 0.005
STOP_GRACE = 0.03
# `go depth N` searches at most DEPTH_BASE ** N playouts (depth 3: 64, 5: 1024, 7: 16384);
# past MAX_DEPTH the playouts are capped by Simulations anyway.
DEPTH_BASE = 4
MAX_DEPTH = 16


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

    def choose(self, board: chess.Board, request: MoveRequest, valued: bool = True) -> Decision:
        """The policy's move; `valued` False skips a BC policy's value model (one network
        call less, for a move already late)."""
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
        if value is None and valued and self.value_model is not None:
            value = move_value(self.value_model, board, move)
        return Decision(move, win_prob=value, nodes=len(moves))

    def new_game(self) -> None:
        self.agent.new_game()

    def close(self) -> None:
        self.agent.close()


def playouts_for(go: GoParams, simulations: int) -> int:
    """The most playouts a `go` may take: `nodes`, else `simulations` (the option), and no
    more than DEPTH_BASE ** `depth` for `go depth` (a search has no depth to reach, so a
    depth is read as a budget: each level of a tree a few moves wide asks for a few times the
    playouts of the one above)."""
    sims = max(0, go.nodes) if go.nodes is not None else simulations
    if go.depth is not None:
        sims = min(sims, DEPTH_BASE ** max(1, min(go.depth, MAX_DEPTH)))
    return sims


class SearchChooser:
    """The model searching with PUCT or search-contempt before each move, the tree kept
    between the moves of a game (eval/agents/mcts.py). A move's limit comes from its `go`:

    - `nodes N`: N playouts; otherwise at most `simulations` (the Simulations option);
    - `depth N`: at most DEPTH_BASE ** N playouts of those (playouts_for);
    - `mate N`: until the search finds a mate in N moves or fewer (the info line's `score
      mate`), else as without it;
    - `movetime` or the clocks: the time budget too (eval/uci/go.py), whichever ends first,
      and no batch is started that would end past it;
    - `infinite`: until `stop`; `ponder`: up to the playouts above until `ponderhit`, then on
      with the clock's budget counted from the ponderhit (or until `stop`).

    The search runs in a worker thread. When the move is due (its deadline, or `stop`) while
    a batch is still running (compiling, or a loaded machine), the move is answered from the
    tree as it stands and the batch finishes on its own; the next search then grows a tree
    of its own. A full tree (`Hash`) ends the search early.

    When the move is due before the search has evaluated its root (a clock of a few
    milliseconds, a loaded machine), the policy's move is played: the search has nothing yet,
    and the policy is the model's own best guess, one network call away.

    Until `ready` is set (the search's batch shapes still compiling at the engine's start,
    eval/uci/factories.py), a move on the clock is the policy's, computed first, unless the
    search becomes ready within the move's time (it then searches for the rest of it); a
    `go` without a clock (nodes, depth, mate, infinite, ponder) waits for it, `stop` (and
    `ponderhit`) ending the wait with the policy's move.

    A position whose game is already over by the rules though moves are left (a threefold
    repetition, fifty moves, bare kings) has nothing to search: the policy answers it."""

    searches = True

    def __init__(
        self,
        policy: PolicyChooser,
        search: TreeSearch,
        simulations: int,
        seed: int,
        ready: threading.Event | None = None,
        end_compiling: Callable[[], None] | None = None,
    ):
        self.policy = policy
        self.search = search
        self.simulations = simulations
        self.seed = seed
        self.name = policy.name
        if ready is None:
            ready = threading.Event()
            ready.set()
        self.ready = ready  # set once every batch shape of the search is compiled
        # Ends the compiling thread behind `ready` (eval/uci/factories.py) when closed.
        self._end_compiling = end_compiling
        self._games = 0
        self._restarts = 0  # trees started afresh beside a worker still busy
        self._worker: threading.Thread | None = None

    def choose(self, board: chess.Board, request: MoveRequest) -> Decision:
        if terminal_value(board) is not None:
            return self.policy.choose(board, request)
        control = request.control or SearchControl()
        started = request.started if request.started is not None else time.monotonic()
        if not self.ready.is_set():
            early = self._until_ready(board, request, control, started)
            if early is not None:
                return early
        self._own_tree()
        self.search.set_position(board)
        runs: list[SearchInfo] = []
        failed: list[BaseException] = []
        done, answered = threading.Event(), threading.Event()

        def work() -> None:
            try:
                self._search(board, request, control, started, runs, answered)
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
        if not self.search.root.expanded:  # nothing searched yet: the model's own move
            return self.policy.choose(board, request, valued=False)
        return self._decision(request.allowed, runs + ([] if done.is_set() else [None]))

    def _search(
        self,
        board: chess.Board,
        request: MoveRequest,
        control,
        started: float,
        runs: list,
        answered,
    ) -> None:
        """The search of one `go`, run in the worker thread: each run's info into `runs`,
        its progress to `request.on_info` until the move is `answered`. With `go mate N` it
        looks after every batch for a mate in N or fewer and stops there (`control.stop`)."""
        go = request.go
        sims = playouts_for(go, self.simulations)
        mate = go.mate if go.mate is not None and go.mate > 0 else None
        reported = [started]  # when an info line last went out

        def run(limit: SearchLimit) -> None:
            done = sum(info.playouts for info in runs)

            def on_info(info: SearchInfo) -> None:
                if mate is not None and info.pv:
                    found = mate_in(board, list(info.pv), info.win_prob, exact=True)
                    if found is not None and 0 < found <= mate:
                        control.stop.set()  # the move is found: answer now
                now = time.monotonic()
                if now - reported[0] < INFO_EVERY:
                    return
                reported[0] = now
                if request.on_info is not None and not answered.is_set():
                    request.on_info(dataclasses.replace(info, playouts=info.playouts + done))

            # The engine reports the final state itself, with the move it plays; a mate
            # search looks at every batch.
            every = 0.0 if mate is not None else INFO_EVERY
            runs.append(
                self.search.run(limit, on_info=on_info, info_every=every, info_at_end=False)
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

    def _until_ready(
        self, board: chess.Board, request: MoveRequest, control: SearchControl, started: float
    ) -> Decision | None:
        """Waits for the search to be compiled; None once it is (search on), else the
        policy's move: on the clock, computed first and played when the move is due; without
        one, at `stop` (or `ponderhit`: the clock runs from there)."""
        go = request.go
        clocked = request.budget is not None and not go.ponder
        policy = self.policy.choose(board, request, valued=False) if clocked else None
        ends = control.wake if go.ponder else control.stop
        while not self.ready.wait(WAIT_STEP):
            if ends.is_set():
                return policy or self.policy.choose(board, request, valued=False)
            if clocked and time.monotonic() >= started + request.budget:
                return policy
        return None

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
        if self._end_compiling is not None:
            self._end_compiling()
        self.policy.close()


class AgentChooser:
    """Any eval.agents.players agent (random, Stockfish): its move, within `searchmoves`."""

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
