"""One game between two agents, as tournaments and the Elo ladder play it: the move loop (an
illegal move loses, the board's own endings, a ply cap), the optional Stockfish adjudication
and the game's PGN record."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import chess
import chess.engine
import chess.pgn

from core.engine_path import find_engine
from core.game_end import DRAW, Outcome, board_outcome
from core.openings import Opening
from eval.agents.base import Agent
from eval.agents.stockfish import start_engine


@dataclass(frozen=True)
class AdjudicationConfig:
    """Stockfish adjudication: `plies` consecutive plies with |eval| >= `threshold_cp` (mates
    count as beyond), all in favour of the same side, end the game as that side's win."""

    nodes: int = 10_000
    threshold_cp: int = 1000
    plies: int = 6
    engine: str | None = None  # None: --engine, $STOCKFISH, PATH or /usr/games/stockfish

    def __post_init__(self):
        if self.nodes < 1 or self.threshold_cp < 1 or self.plies < 1:
            raise ValueError(f"adjudication needs positive nodes, threshold and plies: {self}")

    @classmethod
    def parse(cls, text: str, engine: str | None = None) -> AdjudicationConfig:
        """`stockfish[:nodes=N][,cp=CP][,plies=K][,engine=PATH]`."""
        kind, _, rest = text.partition(":")
        if kind.strip().lower() != "stockfish":
            raise ValueError(f"--adjudicate {text!r}: only stockfish[:nodes=N,cp=CP,plies=K]")
        fields: dict[str, int | str | None] = {"engine": engine}
        names = {"nodes": "nodes", "cp": "threshold_cp", "plies": "plies", "engine": "engine"}
        for item in filter(None, (i.strip() for i in rest.split(","))):
            key, eq, value = item.partition("=")
            if not eq or key.strip() not in names:
                raise ValueError(f"--adjudicate {text!r}: bad item {item!r} (known: {list(names)})")
            key = key.strip()
            try:
                fields[names[key]] = value.strip() if key == "engine" else int(value)
            except ValueError:
                raise ValueError(
                    f"--adjudicate {text!r}: {key}={value!r} is not an integer"
                ) from None
        return cls(**fields)


@dataclass(frozen=True)
class ScheduledGame:
    round: str  # "<opening number>.<pair number>.<1|2>", unique in the tournament
    white: int  # agent index
    black: int
    opening: Opening


def termination_kind(termination: str) -> str:
    """The reason without its details: "adjudication: White ahead ..." -> "adjudication"."""
    return re.split(r"[:(]", termination)[0].strip()


class Adjudicator:
    """Watches a game with Stockfish and calls it once one side is clearly winning."""

    def __init__(self, config: AdjudicationConfig):
        self.config = config
        self._engine = start_engine(find_engine(config.engine), {"Threads": 1})
        self.new_game()

    def new_game(self) -> None:
        self._game = object()  # a new game object makes python-chess send ucinewgame
        self._streak_side: bool | None = None
        self._streak = 0

    def observe(self, board: chess.Board) -> Outcome | None:
        """Call after every ply; the adjudicated outcome when the streak is long enough."""
        info = self._engine.analyse(
            board, chess.engine.Limit(nodes=self.config.nodes), game=self._game
        )
        cp = info["score"].white().score(mate_score=100_000)
        side = chess.WHITE if cp >= self.config.threshold_cp else None
        side = chess.BLACK if cp <= -self.config.threshold_cp else side
        if side is None:
            self._streak_side, self._streak = None, 0
            return None
        self._streak = self._streak + 1 if side == self._streak_side else 1
        self._streak_side = side
        if self._streak < self.config.plies:
            return None
        # Named by the side ahead, not by the sign of White's score: a report written from
        # a player's side (the Elo ladder's) then says "ahead" or "behind" without a sign.
        return Outcome(
            "1-0" if side == chess.WHITE else "0-1",
            f"adjudication: {chess.COLOR_NAMES[side].capitalize()} ahead by "
            f"{self.config.threshold_cp} cp or more for {self.config.plies} plies "
            f"(Stockfish, {self.config.nodes} nodes)",
        )

    def close(self) -> None:
        self._engine.quit()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def play_game(
    white: Agent,
    black: Agent,
    opening: Opening,
    max_plies: int,
    adjudicator: Adjudicator | None = None,
) -> tuple[chess.Board, Outcome]:
    """Plays one game from the opening; returns the final board (whole move stack) and how it
    ended. An agent that returns an illegal move loses; an agent that raises stops the game
    (the exception propagates: a broken engine is not a chess result)."""
    board = opening.board()
    for agent in (white, black):
        getattr(agent, "new_game", lambda: None)()
    if adjudicator is not None:
        adjudicator.new_game()
    plies = 0
    while (outcome := board_outcome(board)) is None:
        if plies >= max_plies:
            outcome = Outcome(DRAW, f"max plies ({max_plies})")
            break
        mover = white if board.turn == chess.WHITE else black
        move = mover.choose_move(board.copy())  # a copy: an agent cannot disturb the game
        if not isinstance(move, chess.Move) or not board.is_legal(move):
            result = "0-1" if board.turn == chess.WHITE else "1-0"
            outcome = Outcome(result, f"illegal move: {move} by {mover.name}")
            break
        board.push(move)
        plies += 1
        if adjudicator is not None and board_outcome(board) is None:
            if (outcome := adjudicator.observe(board)) is not None:
                break
    return board, outcome


def to_pgn(
    board: chess.Board,
    outcome: Outcome,
    game: ScheduledGame,
    names: Sequence[str],
    event: str,
    date: str,
) -> chess.pgn.Game:
    pgn = chess.pgn.Game.from_board(board)  # sets FEN/SetUp when the opening is a position
    pgn.headers["Event"] = event
    pgn.headers["Site"] = "?"
    pgn.headers["Date"] = date
    pgn.headers["Round"] = game.round
    pgn.headers["White"] = names[game.white]
    pgn.headers["Black"] = names[game.black]
    pgn.headers["Result"] = outcome.result
    if game.opening.eco:
        pgn.headers["ECO"] = game.opening.eco
    pgn.headers["Opening"] = game.opening.name
    pgn.headers["Termination"] = outcome.termination
    pgn.headers["PlyCount"] = str(len(board.move_stack))
    return pgn
