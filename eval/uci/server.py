"""The UCI protocol loop of the engine (`python -m eval.uci`, eval/uci/command.py).

The model is loaded, and every batch shape a move can need is compiled, at the first
`isready`, `ucinewgame` or `go`, and after that at each `setoption` that changes it: no move
waits for XLA. A search's shapes compile in the background meanwhile, the policy playing
until they are done (eval/uci/factories.py), so `readyok` comes early even from an empty
compile cache. A model that cannot be loaded then leaves the one playing, with one `info
string error` saying why. `position` keeps the whole move list, so the model sees
repetitions. The options: eval/uci/options.py.

With `Simulations` 0 (the default) it plays the searchless policy and `go` answers at once
whatever the limits; `go infinite` holds the `bestmove` until `stop`, and `go ponder` holds its
info line and `bestmove` until `ponderhit` or `stop`. With `Simulations` N > 0 it searches
(eval/agents/mcts.py, eval/uci/choosers.SearchChooser) in a thread of its own, reading `stop`,
`ponderhit` and `isready` meanwhile: `go nodes M` runs M playouts, otherwise at most N
(`go depth D`: at most 4^D of them), `go mate M` ends at a mate in M found, and `go movetime`
or the clocks (eval/uci/go.time_budget, Move Overhead kept back) end it sooner; `go infinite`
searches until `stop`, `go ponder` until `ponderhit` (then on the clock) or `stop`; a batch
still running when the move is due (or at `stop`) is left to finish while the move is
answered from the tree, or by the policy where the tree has nothing yet. A random legal move
is played only where no model answers at all (none loaded, or its policy failing too). It
sends an info line a second and a last one with the move; the tree (bounded by `Hash`) is
kept between the moves of a game (`ucinewgame`, or a position not continuing the game,
starts a new one). A `setoption` during a search is applied once the search has ended (as
Stockfish does); any other command but `isready`, `stop` and `ponderhit` ends it first, with
its `bestmove`.

With `Ponder` on, `bestmove` names the reply expected (`bestmove e2e4 ponder e7e5`): the
model's, or the search's most visited. The info line (eval/uci/info.py) gives the move's value
as `score cp` (the inverse of the win-probability formula; `score mate 1` for a move that
mates, and for a search `score mate N` when its line ends in mate with a value of exactly 1 or
0) and, with `UCI_ShowWDL`, `wdl W D L` per mille; `nodes` is the network rows of a policy move
or the playouts of a search, `pv` the reply too (policy with Ponder) or the most visited line.

Malformed input (an unknown command, an illegal move or bad FEN in `position`, a bad option
value, a bad `go` parameter) is answered with `info string error: ...` and the engine keeps
running: a `position` with an error leaves the previous position, a rejected `setoption`
the previous value, and every `go` gets its `bestmove`. A board's halfmove clock or fullmove
number above 999 is read by the model as 999 (core/tokenizer.py).

The protocol loop (`UciServer`) takes any factory of move choosers (eval/uci/factories.py), so
it is tested with the real random and Stockfish agents (the hidden `--agent SPEC` flag) as well
as with a trained model.
"""

from __future__ import annotations

import dataclasses
import os
import random
import re
import threading
import time
from collections.abc import Iterable
from typing import TextIO

import chess

from eval.agents.mcts import SearchInfo
from eval.agents.neural_setup import DEFAULT_MODEL
from eval.agents.players import RandomAgent
from eval.uci.choosers import AgentChooser, Decision, MoveChooser, MoveRequest, SearchControl
from eval.uci.factories import ChooserFactory, ModelUnavailable, NeuralFactory
from eval.uci.go import GoParams, parse_go, time_budget
from eval.uci.info import info_line
from eval.uci.options import (
    UciError,
    UciOptions,
    find_option,
    option_lines,
    parse_value,
    with_option,
)
from eval.uci.position import parse_position
from runtime.paths import resolve_path

ENGINE_NAME = "searchless-chess"
ENGINE_AUTHOR = "searchless-chess authors"
_SETOPTION = re.compile(r"name\s+(?P<name>.+?)(?:\s+value(?:\s+(?P<value>.*))?)?")


class UciServer:
    """The UCI protocol over a move chooser, built by `factory` from the current options at
    the first `isready`, `ucinewgame` or `go`, and again after an option it depends on
    (UciOptions.policy_key) changed."""

    def __init__(
        self,
        factory: ChooserFactory,
        out: TextIO,
        name: str = ENGINE_NAME,
        defaults: UciOptions | None = None,
        start_dir: str | None = None,
    ):
        self.factory = factory
        self.out = out
        self.name = name
        self.defaults = defaults or UciOptions()
        self.options = self.defaults
        self.start_dir = start_dir or os.getcwd()
        self.board = chess.Board()
        self._chooser: MoveChooser | None = None
        self._chooser_key: tuple | None = None
        self._built = self.options  # the options the chooser was built with
        self._chooser_error: str | None = None  # why the chooser is the no-model fallback
        self._held: list[str] = []  # output of `go ponder`/`go infinite` awaiting stop
        self._search: _Search | None = None  # the running search of a searching chooser
        self._deferred: list[str] = []  # `setoption` lines sent during the search
        self._lock = threading.Lock()  # the search thread writes too

    # --- output --------------------------------------------------------------------------

    def send(self, line: str) -> None:
        with self._lock:
            self.out.write(line + "\n")
            self.out.flush()

    def error(self, message: str) -> None:
        self.send(f"info string error: {' '.join(message.split())}")

    # --- the move chooser ----------------------------------------------------------------

    def chooser(self) -> MoveChooser:
        if self._chooser is None or self.options.policy_key() != self._chooser_key:
            self._build()
        return self._chooser

    def _build(self) -> None:
        """Builds the move chooser for the current options. Where a model was playing and
        the model or value model now named cannot be used, the one playing stays, with the
        WeightsFile and ValueFile it plays with, and one line says why."""
        playing = self._chooser is not None and self._chooser_error is None
        try:
            chooser, refused = self.factory(self.options), None
            if playing:
                refused = getattr(_policy_of(chooser), "value_error", None)
        except ModelUnavailable as e:
            chooser, refused = None, str(e)
        if refused and playing:
            if chooser is not None:
                chooser.close()
            kept = self._built
            self._chooser_key = kept.policy_key()  # as built (setoption WeightsFile unset it)
            self.options = dataclasses.replace(
                self.options, weights=kept.weights, value_weights=kept.value_weights
            )
            self.error(f"{refused}; kept the model playing ({self._chooser.name})")
            if self.options.policy_key() != self._chooser_key:
                self._build()  # the other options changed meanwhile, with the same models
            return
        self.close()
        self._chooser_key, self._built = self.options.policy_key(), self.options
        self._chooser_error = refused
        if chooser is None:
            chooser = AgentChooser(RandomAgent(seed=self.options.seed, name="random"))
        self._chooser = chooser
        warning = getattr(chooser, "warning", None)
        if warning:
            self.send(f"info string {warning}")

    def close(self) -> None:
        if self._chooser is not None:
            chooser, self._chooser = self._chooser, None
            chooser.close()

    def _decide(self, board: chess.Board, request: MoveRequest) -> Decision:
        chooser = self.chooser()
        if self._chooser_error:
            self.error(f"{self._chooser_error}; playing a random legal move")
        return self._choose(chooser, board, request)

    def _choose(self, chooser: MoveChooser, board: chess.Board, request: MoveRequest) -> Decision:
        """`chooser`'s move, or where it fails the fallback's (`_fallback`)."""
        try:
            return chooser.choose(board.copy(), request)
        # The GUI waits for a bestmove whatever went wrong inside the model: answer it.
        except Exception as e:
            return self._fallback(chooser, board, request, e)

    def _fallback(
        self, chooser: MoveChooser, board: chess.Board, request: MoveRequest, failure: Exception
    ) -> Decision:
        """The move when `chooser` failed with `failure`: its policy's where a search failed
        and the policy still answers; a random legal one only where no model answers."""
        why = f"{chooser.name} failed on {board.fen()!r} ({type(failure).__name__}: {failure})"
        policy = _policy_of(chooser)
        if policy is not chooser:
            try:
                decision = policy.choose(board.copy(), request)
            except Exception as e:  # the model itself fails: nothing of it can answer
                why += f", and its policy too ({type(e).__name__}: {e})"
            else:
                self.error(f"{why}; playing the policy's move")
                return decision
        self.error(f"{why}; playing a random legal move")
        return Decision(random_move(board, request.allowed, self.options.seed))

    def _ponder_move(self, board: chess.Board, move: chess.Move) -> chess.Move | None:
        """The reply the chooser expects, when the game goes on after `move`."""
        after = board.copy()
        after.push(move)
        if after.is_game_over(claim_draw=True):
            return None
        try:
            return self.chooser().choose(after, MoveRequest()).move
        except Exception as e:  # the move stands; a bestmove without ponder is valid UCI
            self.error(f"no ponder move after {move.uci()} ({type(e).__name__}: {e})")
            return None

    def _info(self, board: chess.Board, decision: Decision, pv: list[chess.Move], secs: float):
        return info_line(
            board,
            pv,
            decision.win_prob,
            decision.depth,
            decision.seldepth,
            decision.nodes,
            secs,
            exact=decision.searched,
            show_wdl=self.options.show_wdl,
        )

    def answer(
        self, board: chess.Board, go: GoParams, allowed: frozenset[chess.Move] | None
    ) -> list[str]:
        """The info line(s) and the `bestmove` line for `go` on `board`."""
        if not any(board.legal_moves):
            self.error(f"no legal move in {board.fen()!r}")
            return ["bestmove 0000"]
        start = time.perf_counter()
        budget = time_budget(go, board.turn, self.options.move_overhead_ms)
        decision = self._decide(board, MoveRequest(allowed, budget, go))
        ponder = self._ponder_move(board, decision.move) if self.options.ponder else None
        pv = [decision.move] + ([ponder] if ponder else [])
        info = self._info(board, decision, pv, time.perf_counter() - start)
        bestmove = f"bestmove {decision.move.uci()}" + (f" ponder {ponder.uci()}" if ponder else "")
        return [info, bestmove]

    # --- commands ------------------------------------------------------------------------

    def cmd_uci(self, args: list[str], rest: str) -> None:
        self.send(f"id name {self.name}")
        self.send(f"id author {ENGINE_AUTHOR}")
        for line in option_lines(self.defaults):
            self.send(line)
        self.send("uciok")

    def cmd_isready(self, args: list[str], rest: str) -> None:
        if self._search is None:  # a running search has its chooser, and UCI its answer now
            self.chooser()  # loads and compiles the model now, when GUIs expect the wait
            if self._chooser_error:
                self.error(self._chooser_error)
        self.send("readyok")

    def cmd_ucinewgame(self, args: list[str], rest: str) -> None:
        self.board = chess.Board()
        self.chooser().new_game()

    def cmd_setoption(self, args: list[str], rest: str) -> None:
        # From the raw text, not the words: a path may hold several spaces in a row.
        match = _SETOPTION.fullmatch(rest.strip())
        if match is None:
            raise UciError("setoption needs: name NAME [value VALUE]")
        name, value = match["name"], match["value"] or ""
        spec = find_option(name)
        parsed = parse_value(spec, value)
        if spec.field == "weights":
            resolved = resolve_path(parsed or DEFAULT_MODEL, self.start_dir)
            if resolved.path is None:
                raise UciError(f"WeightsFile {resolved.describe_missing()}; kept the previous one")
            default = resolve_path(DEFAULT_MODEL, self.start_dir).path
            # The default model, however it is named, keeps its name: it has a value model.
            parsed = DEFAULT_MODEL if resolved.path == default else resolved.path
            self._chooser_key = None  # load it again even if the path is the same
        elif spec.field == "threads" and isinstance(self.factory, NeuralFactory):
            note = self.factory.threads_note(parsed)
            if note:
                self.send(f"info string {note}")
        self.options = with_option(self.options, spec, parsed)
        if self._chooser is not None:
            # Mid-game the model loads and compiles now, not in the next `go` on a clock;
            # before the first `isready` it waits for the other options (Threads).
            self.chooser()

    def cmd_position(self, args: list[str], rest: str) -> None:
        self.board = parse_position(args)

    def cmd_go(self, args: list[str], rest: str) -> None:
        self._release()  # a `go` before the last one's `stop`: that one is answered first
        go, problems = parse_go(args)
        for problem in problems:
            self.error(problem)
        allowed = None
        if go.searchmoves:
            legal = set()
            for token in go.searchmoves:
                try:
                    move = chess.Move.from_uci(token)
                except ValueError:
                    move = None
                if move is None or not self.board.is_legal(move):
                    self.error(f"searchmoves: {token!r} is not legal here; ignored")
                else:
                    legal.add(move)
            allowed = frozenset(legal) or None
        chooser = self.chooser()
        if getattr(chooser, "searches", False) and any(self.board.legal_moves):
            self._start_search(chooser, go, allowed)
            return
        lines = self.answer(self.board, go, allowed)
        if go.ponder:
            self._held = lines
        elif go.infinite:
            for line in lines[:-1]:
                self.send(line)
            self._held = lines[-1:]
        else:
            for line in lines:
                self.send(line)

    def _release(self) -> None:
        held, self._held = self._held, []
        for line in held:
            self.send(line)

    def cmd_stop(self, args: list[str], rest: str) -> None:
        self._release()
        self._finish_search()

    def cmd_ponderhit(self, args: list[str], rest: str) -> None:
        if self._search is not None:
            self._search.control.ponderhit()  # the search goes on, on the clock now
        else:
            self._release()

    # --- searching (a chooser with `searches`) --------------------------------------------

    def _start_search(self, chooser: MoveChooser, go: GoParams, allowed) -> None:
        """Runs the search in a thread; its info lines and `bestmove` come from there, the
        latter held for `go infinite` and `go ponder` until `stop` or `ponderhit`."""
        started = time.monotonic()
        board = self.board.copy()
        # For `go ponder` the budget is the one after ponderhit: the same clocks, not pondering.
        budget = time_budget(
            dataclasses.replace(go, ponder=False), board.turn, self.options.move_overhead_ms
        )
        control = SearchControl()

        def on_info(info: SearchInfo) -> None:
            if info.pv:
                line = info_line(
                    board,
                    list(info.pv),
                    info.win_prob,
                    info.depth,
                    info.seldepth,
                    info.playouts,
                    time.monotonic() - started,
                    exact=True,
                    show_wdl=self.options.show_wdl,
                )
                self.send(line)

        request = MoveRequest(allowed, budget, go, started, control, on_info)
        thread = threading.Thread(
            target=self._search_thread, args=(chooser, board, request), daemon=True
        )
        self._search = _Search(control, thread)
        thread.start()

    def _search_thread(self, chooser: MoveChooser, board: chess.Board, request: MoveRequest):
        decision = self._choose(chooser, board, request)
        pv = list(decision.pv) or [decision.move]
        ponder = decision.ponder if self.options.ponder else None
        secs = time.monotonic() - request.started
        self.send(self._info(board, decision, pv, secs))
        if request.go.infinite or request.go.ponder:
            request.control.wake.wait()  # UCI: no bestmove before stop or ponderhit
        self.send(f"bestmove {decision.move.uci()}" + (f" ponder {ponder.uci()}" if ponder else ""))

    def _finish_search(self, apply_options: bool = True) -> None:
        """Stops the running search, if any, and waits for its `bestmove`; then applies the
        options set meanwhile (not when the engine quits: nothing would use them)."""
        search, self._search = self._search, None
        if search is not None:
            search.control.request_stop()
            search.thread.join()
        deferred, self._deferred = self._deferred, []
        for line in deferred if apply_options else ():
            self.handle(line)

    def cmd_debug(self, args: list[str], rest: str) -> None:
        pass  # no debug output to switch

    def cmd_register(self, args: list[str], rest: str) -> None:
        pass  # nothing to register

    # --- the loop ------------------------------------------------------------------------

    def handle(self, line: str) -> bool:
        """Executes one input line; False once the engine should quit. As UCI asks, unknown
        words before a command are skipped (`joho isready` is `isready`)."""
        tokens = line.split()
        start = next((i for i, t in enumerate(tokens) if t == "quit" or _is_command(self, t)), None)
        if start is None:
            if tokens:
                self.error(f"unknown command {tokens[0]!r}")
            return True
        if self._search is not None and not self._search.thread.is_alive():
            self._finish_search()  # it has answered: what waits for its end can go on
        if self._search is not None and tokens[start] == "setoption":
            # Stockfish's way: the search goes on with the options it started with.
            self._deferred.append(line)
            return True
        if self._search is not None and tokens[start] not in _WHILE_SEARCHING:
            # UCI sends these only after `stop`; a GUI that does not gets the answer first.
            self._finish_search(apply_options=tokens[start] != "quit")
        if tokens[start] == "quit":
            return False
        if start:
            self.error(f"unknown command {tokens[0]!r}; read from {tokens[start]!r} on")
        handler = getattr(self, f"cmd_{tokens[start]}")
        rest = line.strip().split(None, start + 1)[start + 1 :]
        try:
            handler(tokens[start + 1 :], rest[0] if rest else "")
        except UciError as e:
            self.error(str(e))
        return True

    def run(self, lines: Iterable[str]) -> None:
        try:
            for line in lines:
                if not self.handle(line):
                    break
        finally:
            self._finish_search(apply_options=False)
            self.close()


def random_move(board: chess.Board, allowed: frozenset[chess.Move] | None, seed: int) -> chess.Move:
    """The move of last resort: one of `allowed` (else of the legal moves) drawn by `seed`,
    the same for the same position and seed whatever order the moves come in."""
    moves = sorted(allowed or board.legal_moves, key=lambda m: m.uci())
    return random.Random(seed).choice(moves)


def _policy_of(chooser: MoveChooser) -> MoveChooser:
    return getattr(chooser, "policy", chooser)


@dataclasses.dataclass
class _Search:
    control: SearchControl
    thread: threading.Thread


# Commands a running search goes on through; any other ends it (with its bestmove) first.
_WHILE_SEARCHING = ("isready", "stop", "ponderhit", "debug")


def _is_command(engine: UciServer, token: str) -> bool:
    return callable(getattr(engine, f"cmd_{token}", None))
