"""The web board's JSON API: each handler takes the request's parameters (strings from a query
or values from a JSON body) and returns a JSON-ready dict, or raises ApiError with the HTTP
status and one line saying what was wrong.

A position is a start FEN (default: the standard start) plus the UCI moves played from it,
so that the model sees repetitions as it does in a game. Scores are for the side to move:
a policy's probability of each legal move (kind "prob", BC) or a value model's win chance
after it (kind "win", AV/SV); a BC policy's moves also get the win chance of its value
model, which gives the position's value too.
"""

from __future__ import annotations

import io
import time
from collections.abc import Iterable
from dataclasses import dataclass

import chess
import chess.pgn
import numpy as np

from core.game_end import board_outcome
from core.targets import target_kind
from eval.engines import NeuralAgent
from eval.evaluators import make_evaluator
from eval.mcts import SearchConfig, SearchLimit, TreeSearch
from eval.uci.options import DEFAULT_SEARCH_BATCH, UciError
from eval.uci.position import parse_position
from eval.web.models import ModelError, ModelStore

# Playouts a request may ask for: a few seconds of the CPU model; a request is not stoppable.
MAX_SIMULATIONS = 5000
PGN_EVENT = "searchless-chess web board"


class ApiError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class WebSettings:
    search_batch: int = DEFAULT_SEARCH_BATCH  # leaves per network call when searching
    max_simulations: int = MAX_SIMULATIONS


# --- parameters --------------------------------------------------------------------------


def move_list(moves: str | Iterable[str] | None) -> list[str]:
    """UCI moves from a JSON list or a query string (separated by spaces or commas)."""
    if moves is None:
        return []
    if isinstance(moves, str):
        return moves.replace(",", " ").split()
    if not all(isinstance(m, str) for m in moves):
        raise ApiError(400, "moves must be a list of UCI strings")
    return list(moves)


def game_board(fen: str | None, moves: str | Iterable[str] | None = None) -> chess.Board:
    """The board after `moves` from `fen` (the standard start when empty), every move on
    its stack; 400 naming a bad FEN or the first illegal move."""
    if fen is not None and not isinstance(fen, str):
        raise ApiError(400, "fen must be a string")
    head = ["fen", *fen.split()] if fen and fen.strip() else ["startpos"]
    try:
        return parse_position([*head, "moves", *move_list(moves)])
    except UciError as e:
        raise ApiError(400, str(e)) from None


def simulations_of(value, settings: WebSettings) -> int:
    try:
        sims = int(value or 0)
    except (TypeError, ValueError):
        raise ApiError(400, f"simulations must be a whole number, got {value!r}") from None
    if not 0 <= sims <= settings.max_simulations:
        raise ApiError(
            400, f"simulations must be between 0 and {settings.max_simulations}, got {sims}"
        )
    return sims


def require_playable(board: chess.Board) -> None:
    outcome = board_outcome(board)
    if outcome is not None:
        raise ApiError(
            409, f"the game is over ({outcome.termination}, {outcome.result}): no move to make"
        )


# --- handlers ----------------------------------------------------------------------------


def models(store: ModelStore, settings: WebSettings) -> dict:
    return {
        "models": [info.as_json() for info in store.models.values()],
        "default_model": store.default_model,
        "default_value": store.default_value,
        "max_simulations": settings.max_simulations,
    }


def position(fen: str | None = None, moves=None) -> dict:
    """The game's state for the page: legal moves with SAN, the moves' SAN, the outcome."""
    board = game_board(fen, moves)
    outcome = board_outcome(board)
    replay = board.root()
    sans = []
    for move in board.move_stack:
        sans.append(replay.san(move))
        replay.push(move)
    legal = [] if outcome else [{"uci": m.uci(), "san": board.san(m)} for m in board.legal_moves]
    return {
        "fen": board.fen(),
        "start_fen": board.root().fen(),
        "turn": "white" if board.turn == chess.WHITE else "black",
        "check": board.is_check(),
        "moves": [m.uci() for m in board.move_stack],
        "sans": sans,
        "legal": legal,
        "over": {"result": outcome.result, "termination": outcome.termination} if outcome else None,
    }


def pgn(
    fen: str | None = None, moves=None, white: str | None = None, black: str | None = None
) -> str:
    """The game as PGN (a FEN header when it does not start from the standard position)."""
    board = game_board(fen, moves)
    game = chess.pgn.Game.from_board(board)
    game.headers["Event"] = PGN_EVENT
    game.headers["White"] = white or "?"
    game.headers["Black"] = black or "?"
    outcome = board_outcome(board)
    game.headers["Result"] = outcome.result if outcome else "*"
    if outcome:
        game.headers["Termination"] = outcome.termination
    return str(game) + "\n"


def load(text) -> dict:
    """A pasted FEN or PGN -> its start FEN and UCI moves (the main line)."""
    if not isinstance(text, str) or not text.strip():
        raise ApiError(400, "paste a FEN or a PGN")
    text = text.strip()
    if "\n" not in text and not text.startswith("["):
        try:
            board = chess.Board(text)
        except ValueError:
            board = None
        if board is not None and board.is_valid():
            return {"fen": board.fen(), "moves": []}
    game = chess.pgn.read_game(io.StringIO(text))
    if game is None:
        raise ApiError(400, "neither a FEN nor a PGN")
    if game.errors:
        raise ApiError(400, f"bad PGN: {game.errors[0]}")
    moves = [m.uci() for m in game.mainline_moves()]
    if not moves and not text.startswith("["):
        raise ApiError(400, f"neither a valid FEN nor a PGN with moves: {text[:80]!r}")
    try:
        start = game.board()
    except ValueError as e:  # a bad FEN header
        raise ApiError(400, f"bad PGN: {e}") from None
    return {"fen": start.fen(), "moves": moves}


@dataclass(frozen=True)
class BoardRequest:
    """What /api/analysis and /api/play are asked: a playable position, the model and value
    model named (None: the defaults), and the playouts to search (0: the policy alone)."""

    board: chess.Board
    model: str | None
    value: str | None
    simulations: int

    @classmethod
    def parse(
        cls, settings: WebSettings, fen=None, moves=None, model=None, value=None, simulations=0
    ) -> BoardRequest:
        """The request from its parameters; 4xx naming the first bad one."""
        board = game_board(fen, moves)
        require_playable(board)
        return cls(board, model, value, simulations_of(simulations, settings))


@dataclass(frozen=True)
class _Models:
    """A request's models, loaded: the policy's and its value model's (None for none)."""

    name: str
    predictor: object
    value_name: str | None
    value_predictor: object | None

    @classmethod
    def of(cls, store: ModelStore, request: BoardRequest) -> _Models:
        """4xx for names that are not models."""
        try:
            name = request.model or store.default_model
            predictor = store.predictor(name)  # first: it names an unknown model
            value_name = store.value_model(name, request.value)
            value_predictor = store.predictor(value_name) if value_name else None
            return cls(name, predictor, value_name, value_predictor)
        except ModelError as e:
            raise ApiError(e.status, str(e)) from None

    def search(self, store: ModelStore, request: BoardRequest, settings: WebSettings) -> TreeSearch:
        """A fresh tree over the request's board after its playouts."""
        try:
            evaluator = make_evaluator(self.predictor, self.value_predictor)
        except ValueError as e:  # a BC policy with no value model
            raise ApiError(400, f"cannot search with {self.name!r}: {e}") from None
        for name in (self.name, self.value_name):
            if name is not None:  # every batch shape compiled before the clock starts
                store.warm_up(name, settings.search_batch)
        search = TreeSearch(evaluator, SearchConfig(batch=settings.search_batch))
        search.set_position(request.board)
        search.run(SearchLimit(sims=request.simulations))
        return search


def analysis(store: ModelStore, settings: WebSettings, request: BoardRequest) -> dict:
    """Every legal move's score, best first, the position's value and, with simulations,
    the search's visits and values beside them."""
    board = request.board
    started = time.perf_counter()
    with store.lock:
        loaded = _Models.of(store, request)
        agent = NeuralAgent(loaded.predictor)
        ucis, scores = agent.scored_moves(board)
        if loaded.value_predictor is not None:
            value_agent = NeuralAgent(loaded.value_predictor)
            wins = dict(zip(*value_agent.scored_moves(board), strict=True))
        elif target_kind(agent.target).value_head:
            wins = dict(zip(ucis, scores, strict=True))
        else:
            wins = {}
        position_value = None
        if wins:  # the value the search starts from: make_evaluator's rule
            evaluator = make_evaluator(loaded.predictor, loaded.value_predictor)
            position_value = float(evaluator.evaluate([board.copy(stack=False)])[0].value)
        search = loaded.search(store, request, settings) if request.simulations else None
    kind = store.models[loaded.name].kind
    entries = {
        uci: {
            "uci": uci,
            "san": board.san(chess.Move.from_uci(uci)),
            "score": float(score),
            "kind": kind,
        }
        for uci, score in zip(ucis, scores, strict=True)
    }
    for uci, win in wins.items():
        entries[uci]["win"] = float(win)
    result = {
        "fen": board.fen(),
        "turn": "white" if board.turn == chess.WHITE else "black",
        "model": loaded.name,
        "value_model": loaded.value_name,
        "target": store.models[loaded.name].target,
        "kind": kind,
        "value": position_value,
        "white_value": None if position_value is None else _white(board, position_value),
        "search": None,
    }
    if search is not None:
        result["search"] = _search_json(board, search, entries)
    ranked = sorted(entries.values(), key=lambda e: -e["score"])
    result["moves"] = ranked
    result["best"] = ranked[0]["uci"]
    result["seconds"] = round(time.perf_counter() - started, 4)
    return result


def _white(board: chess.Board, value: float) -> float:
    return value if board.turn == chess.WHITE else 1.0 - value


def _search_json(board: chess.Board, search: TreeSearch, entries: dict) -> dict:
    for stats in search.root_moves():
        entry = entries[stats.move.uci()]
        entry["visits"] = stats.visits
        entry["q"] = stats.q
    info = search.info()
    pv_board = board.copy()
    pv = []
    for move in info.pv:
        pv.append(pv_board.san(move))
        pv_board.push(move)
    return {
        "playouts": info.playouts,
        "visits": info.nodes,
        "seconds": round(info.seconds, 4),
        "best": search.best_move().uci(),
        "value": info.win_prob,
        "white_value": _white(board, info.win_prob),
        "pv": pv,
    }


def play(store: ModelStore, settings: WebSettings, request: BoardRequest) -> dict:
    """The model's move: its policy's best (simulations 0) or the search's most visited."""
    board = request.board.copy()
    with store.lock:
        loaded = _Models.of(store, request)
        if request.simulations:
            search = loaded.search(store, request, settings)
            move = search.best_move()
            stats = next(s for s in search.root_moves() if s.move == move)
            extra = {"visits": stats.visits, "win": stats.q, "playouts": search.info().playouts}
        else:
            ucis, scores = NeuralAgent(loaded.predictor).scored_moves(board)
            i = int(np.argmax(scores))
            move = chess.Move.from_uci(ucis[i])
            extra = {"score": float(scores[i]), "kind": store.models[loaded.name].kind}
    san = board.san(move)
    board.push(move)
    return {
        "move": move.uci(),
        "san": san,
        "fen": board.fen(),
        "model": loaded.name,
        "simulations": request.simulations,
        **extra,
    }
