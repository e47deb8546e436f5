"""A UCI engine for a trained model (AV, SV or BC): plug it into any GUI or tournament manager.

    python -m eval.uci --checkpoint runs/small        # or the console script searchless-uci

It has no search, so `go` answers at once whatever the time control; `go infinite` and
`go ponder` hold the answer until `stop` (or `ponderhit`). `position` keeps the whole move
list it is given, so the model sees repetitions (the paper's repetition workaround needs
them). Options: `Temperature` (0 = argmax; above 0 samples a softmax), `RepetitionWorkaround`
(value 0.5 for a move that lets the opponent claim a threefold draw; AV/SV only), `UseEMA`
(the EMA parameters, as evaluated in the paper) and `Seed` (for sampling).

Malformed input (an unknown command, an illegal move in `position`, a FEN that does not
parse, a bad option value) is answered with `info string error: ...` and the engine keeps
running; a `position` command with an error leaves the previous position unchanged.

The protocol loop (`UciEngine`) takes any agent factory, so it is tested with the real random
and Stockfish agents (the hidden `--agent SPEC` flag) as well as with a trained model.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TextIO

import chess
import numpy as np

from core.values import LICHESS_CP_SCALE
from eval.engines import Agent, NeuralAgent, make_agent, pick_index

ENGINE_AUTHOR = "searchless-chess authors"
VALUE_TARGETS = ("av", "sv")
# Centipawns reported for a win probability of 0 or 1 (the inverse Lichess formula diverges).
MAX_REPORTED_CP = 10_000


@dataclass(frozen=True)
class UciOptions:
    temperature: float = 0.0
    repetition_workaround: bool = True
    use_ema: bool = True
    seed: int = 0


AgentFactory = Callable[[UciOptions], Agent]


class UciError(ValueError):
    """Malformed input; reported as `info string error: ...`."""


def _bool(value: str) -> bool:
    if value.lower() in ("true", "1", "on", "yes"):
        return True
    if value.lower() in ("false", "0", "off", "no"):
        return False
    raise UciError(f"{value!r} is not true or false")


def win_prob_to_cp(p: float) -> int:
    """The centipawns whose Lichess win probability is `p` (the formula's inverse)."""
    if p <= 0.0 or p >= 1.0:
        return MAX_REPORTED_CP if p >= 1.0 else -MAX_REPORTED_CP
    cp = math.log(p / (1.0 - p)) / LICHESS_CP_SCALE
    return int(round(max(-MAX_REPORTED_CP, min(MAX_REPORTED_CP, cp))))


def parse_position(args: list[str]) -> chess.Board:
    """`startpos|fen FEN [moves m1 m2 ...]` -> the board with every move on its stack."""
    if not args:
        raise UciError("position needs startpos or fen")
    if "moves" in args:
        split = args.index("moves")
        head, moves = args[:split], args[split + 1 :]
    else:
        head, moves = args, []
    if head[0] == "startpos" and len(head) == 1:
        board = chess.Board()
    elif head[0] == "fen" and len(head) > 1:
        fen = " ".join(head[1:])
        try:
            board = chess.Board(fen)
        except ValueError as e:
            raise UciError(f"invalid FEN {fen!r}: {e}") from None
        if not board.is_valid():
            raise UciError(f"invalid FEN {fen!r}: {board.status()!r}")
    else:
        raise UciError(f"position needs startpos or fen FEN, got {' '.join(head)!r}")
    for uci in moves:
        try:
            board.push(board.parse_uci(uci))
        except ValueError:
            raise UciError(f"illegal move {uci!r} in position {board.fen()!r}") from None
    return board


class UciEngine:
    """The UCI protocol over one agent, built lazily by `factory` from the current options
    (at `isready` or the first `go`, and again after `setoption` changed them)."""

    def __init__(
        self,
        factory: AgentFactory,
        out: TextIO,
        name: str = "searchless-chess",
        defaults: UciOptions = UciOptions(),
    ):
        self.factory = factory
        self.out = out
        self.name = name
        self.options = defaults
        self.board = chess.Board()
        self._agent: Agent | None = None
        self._agent_options: UciOptions | None = None
        self._pending: str | None = None  # bestmove held by `go infinite` / `go ponder`
        self._rng = np.random.default_rng(defaults.seed)

    # --- output --------------------------------------------------------------------------

    def send(self, line: str) -> None:
        self.out.write(line + "\n")
        self.out.flush()

    def error(self, message: str) -> None:
        self.send(f"info string error: {' '.join(message.split())}")

    # --- the agent -----------------------------------------------------------------------

    @property
    def agent(self) -> Agent:
        if self._agent is None or self._agent_options != self.options:
            self.close()
            self._agent = self.factory(self.options)
            self._agent_options = self.options
            self._rng = np.random.default_rng(self.options.seed)
        return self._agent

    def close(self) -> None:
        if self._agent is not None:
            agent, self._agent = self._agent, None
            agent.close()

    def choose(self, board: chess.Board, allowed: set[chess.Move] | None) -> chess.Move:
        """The agent's move, restricted to `allowed` (`go searchmoves`) when given; a neural
        agent also reports its value of the move as `info ... score cp`."""
        agent = self.agent
        if isinstance(agent, NeuralAgent):
            moves, scores = agent.scored_moves(board)
            candidates = [
                i for i, m in enumerate(moves) if not allowed or chess.Move.from_uci(m) in allowed
            ]
            sub = np.asarray(scores)[candidates]
            i = candidates[pick_index(sub, agent.target, agent.temperature, self._rng)]
            info = f"info depth 1 nodes {len(moves)}"
            if agent.target in VALUE_TARGETS:
                info += f" score cp {win_prob_to_cp(float(scores[i]))}"
            self.send(f"{info} pv {moves[i]}")
            return chess.Move.from_uci(moves[i])
        move = agent.choose_move(board)
        if allowed and move not in allowed:
            move = min(allowed, key=lambda m: m.uci())
        return move

    # --- commands ------------------------------------------------------------------------

    def cmd_uci(self, args: list[str]) -> None:
        o = UciOptions()
        self.send(f"id name {self.name}")
        self.send(f"id author {ENGINE_AUTHOR}")
        self.send(f"option name Temperature type string default {o.temperature:g}")
        self.send(
            f"option name RepetitionWorkaround type check default "
            f"{str(o.repetition_workaround).lower()}"
        )
        self.send(f"option name UseEMA type check default {str(o.use_ema).lower()}")
        self.send(f"option name Seed type spin default {o.seed} min 0 max 2147483647")
        self.send("uciok")

    def cmd_isready(self, args: list[str]) -> None:
        self.agent  # noqa: B018 -- loads the model now, when GUIs expect the wait
        self.send("readyok")

    def cmd_ucinewgame(self, args: list[str]) -> None:
        self.board = chess.Board()
        self._pending = None
        if self._agent is not None:
            getattr(self._agent, "new_game", lambda: None)()

    def cmd_setoption(self, args: list[str]) -> None:
        if not args or args[0] != "name":
            raise UciError("setoption needs: name NAME [value VALUE]")
        if "value" in args:
            split = args.index("value")
            name, value = " ".join(args[1:split]), " ".join(args[split + 1 :])
        else:
            name, value = " ".join(args[1:]), ""
        key = name.lower().replace(" ", "")
        if key == "temperature":
            try:
                t = float(value)
            except ValueError:
                raise UciError(f"Temperature {value!r} is not a number") from None
            if not math.isfinite(t) or t < 0:
                raise UciError(f"Temperature must be a finite number >= 0, got {value!r}")
            self.options = replace(self.options, temperature=t)
        elif key == "repetitionworkaround":
            self.options = replace(self.options, repetition_workaround=_bool(value))
        elif key == "useema":
            self.options = replace(self.options, use_ema=_bool(value))
        elif key == "seed":
            try:
                self.options = replace(self.options, seed=int(value))
            except ValueError:
                raise UciError(f"Seed {value!r} is not an integer") from None
        else:
            raise UciError(f"unknown option {name!r}")

    def cmd_position(self, args: list[str]) -> None:
        self.board = parse_position(args)

    def cmd_go(self, args: list[str]) -> None:
        allowed: set[chess.Move] | None = None
        if "searchmoves" in args:
            allowed = set()
            for token in args[args.index("searchmoves") + 1 :]:
                try:
                    move = chess.Move.from_uci(token)
                except ValueError:
                    break  # the next go parameter
                if not self.board.is_legal(move):
                    raise UciError(f"searchmoves: {token} is not legal here")
                allowed.add(move)
        if not any(self.board.legal_moves):
            self.error(f"no legal move in {self.board.fen()!r}")
            bestmove = "bestmove 0000"
        else:
            bestmove = f"bestmove {self.choose(self.board.copy(), allowed).uci()}"
        if "infinite" in args or "ponder" in args:
            self._pending = bestmove
        else:
            self.send(bestmove)

    def cmd_stop(self, args: list[str]) -> None:
        if self._pending is not None:
            bestmove, self._pending = self._pending, None
            self.send(bestmove)

    cmd_ponderhit = cmd_stop

    def cmd_debug(self, args: list[str]) -> None:
        pass  # no debug output to switch

    def cmd_register(self, args: list[str]) -> None:
        pass  # nothing to register

    # --- the loop ------------------------------------------------------------------------

    def handle(self, line: str) -> bool:
        """Executes one input line; False once the engine should quit."""
        tokens = line.split()
        if not tokens:
            return True
        command, args = tokens[0], tokens[1:]
        if command == "quit":
            return False
        handler = getattr(self, f"cmd_{command}", None)
        if handler is None:
            self.error(f"unknown command {command!r}")
            return True
        try:
            handler(args)
        except UciError as e:
            self.error(str(e))
        return True

    def run(self, lines: Iterable[str]) -> None:
        try:
            for line in lines:
                if not self.handle(line):
                    break
        finally:
            self.close()


def neural_factory(checkpoint: str, label: str) -> AgentFactory:
    """Agents of one checkpoint; the parameters are loaded once per UseEMA setting."""
    from model.predictor import Predictor

    loaded: dict[bool, Predictor] = {}

    def make(options: UciOptions) -> Agent:
        if options.use_ema not in loaded:
            predictor = Predictor.from_checkpoint(checkpoint, use_ema=options.use_ema)
            # Compile now, during `isready`, so the first `go` answers at once.
            predictor.move_values([chess.Board()])
            loaded[options.use_ema] = predictor
        return NeuralAgent(
            loaded[options.use_ema],
            temperature=options.temperature,
            seed=options.seed,
            repetition_workaround=options.repetition_workaround,
            name=label,
        )

    return make


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="searchless-uci", description=__doc__.split("\n\n")[0], allow_abbrev=False
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--checkpoint", help="a run dir (latest checkpoint) or a checkpoint dir")
    source.add_argument("--agent", help=argparse.SUPPRESS)  # any agent spec, for tests
    parser.add_argument("--engine", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--temperature", type=float, default=0.0, help="initial Temperature")
    parser.add_argument(
        "--no-repetition-workaround", action="store_true", help="RepetitionWorkaround off"
    )
    parser.add_argument("--no-ema", action="store_true", help="UseEMA off")
    parser.add_argument("--seed", type=int, default=0, help="initial Seed")
    args = parser.parse_args(argv)
    defaults = UciOptions(
        temperature=args.temperature,
        repetition_workaround=not args.no_repetition_workaround,
        use_ema=not args.no_ema,
        seed=args.seed,
    )
    if args.checkpoint:
        if not os.path.exists(args.checkpoint):
            print(f"error: checkpoint {args.checkpoint!r} does not exist", file=sys.stderr)
            return 2
        label = os.path.basename(os.path.normpath(args.checkpoint))
        factory = neural_factory(args.checkpoint, label)
        name = f"searchless-chess {label}"
    else:
        spec = args.agent

        def factory(options: UciOptions) -> Agent:
            return make_agent(spec, engine_path=args.engine)

        name = f"searchless-chess ({spec})"

    engine = UciEngine(factory, sys.stdout, name=name, defaults=defaults)
    try:
        engine.run(sys.stdin)
    except BrokenPipeError:  # the GUI went away
        pass
    except Exception as e:  # e.g. a checkpoint that does not load: say so, then stop
        engine.error(f"{type(e).__name__}: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
