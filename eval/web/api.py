"""The web board's JSON API over the models: each handler takes a checked request
(eval/web/params.py) and returns a JSON-ready dict, or raises ApiError with the HTTP status
and one line saying what was wrong, or Cancelled when nobody waits for the answer any more.

A position is a start FEN (default: the standard start) plus the UCI moves played from it,
so that the model sees repetitions as it does in a game. Scores are for the side to move:
a policy's probability of each legal move (kind "prob", BC) or a value model's win chance
after it (kind "win", AV/SV); a BC policy's moves also get the win chance of its value
model, or of its own value head where none is named, which gives the position's value too.

No lock is held over a network call or a search: every request searches a tree of its own,
so a policy's answer (a few milliseconds) never waits behind another request's search.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import chess
import numpy as np

from core.targets import target_kind
from eval.agents.mcts import SearchLimit, TreeSearch
from eval.agents.neural_setup import DEFAULT_SEARCH, ModelPair, SearchSettings
from eval.agents.players import NeuralAgent
from eval.web.cancel import Activity, StopWhen
from eval.web.models import ModelError, ModelStore
from eval.web.params import ApiError, BoardRequest

# Playouts a request may ask for: a few seconds of the CPU model. A request whose client
# hangs up, or whose page asks again, stops between batches.
MAX_SIMULATIONS = 5000
READ_TIMEOUT_S = 30.0  # a client silent this long mid-request (or idle between) is dropped


@dataclass(frozen=True)
class WebSettings:
    search_batch: int = DEFAULT_SEARCH.batch  # leaves per network call when searching
    max_simulations: int = MAX_SIMULATIONS
    read_timeout: float = READ_TIMEOUT_S


def never() -> StopWhen:
    """The stop event of a request nobody cancels (a script calling the functions)."""
    return StopWhen(lambda: False)


# --- handlers ----------------------------------------------------------------------------


def models(store: ModelStore, settings: WebSettings) -> dict:
    return {
        "models": [info.as_json() for info in store.models.values()],
        "default_model": store.default_model,
        "default_value": store.default_value,
        "max_simulations": settings.max_simulations,
    }


def status(store: ModelStore, activity: Activity) -> dict:
    """What a search waits for now ("waiting": words for the page, or None), the searches
    running and those given up since the start."""
    return {"waiting": store.waiting_for(), **activity.counts()}


@dataclass(frozen=True)
class _Models:
    """A request's models, loaded: the policy's and its value model's (None for none)."""

    name: str
    value_name: str | None
    pair: ModelPair

    @classmethod
    def of(cls, store: ModelStore, request: BoardRequest) -> _Models:
        """4xx for names that are not models."""
        try:
            name = request.model or store.default_model
            predictor = store.predictor(name)  # first: it names an unknown model
            value_name = store.value_model(name, request.value)
            value_predictor = store.predictor(value_name) if value_name else None
            return cls(name, value_name, ModelPair(predictor, value_predictor))
        except ModelError as e:
            raise ApiError(e.status, str(e)) from None

    def search(
        self, store: ModelStore, request: BoardRequest, settings: WebSettings, stop: StopWhen
    ) -> TreeSearch:
        """A fresh tree over the request's board after its playouts; Cancelled as soon as
        `stop` says nobody waits (while waiting for the compile, or between batches)."""
        try:
            search = self.pair.search(SearchSettings(batch=settings.search_batch))
        except ValueError as e:  # a BC policy with no value model
            raise ApiError(400, f"cannot search with {self.name!r}: {e}") from None
        names = [name for name in (self.name, self.value_name) if name is not None]
        # Every batch shape compiled before the clock starts.
        store.warm_up(names, settings.search_batch, stop.is_set)
        stop.check()
        search.set_position(request.board)
        search.run(SearchLimit(sims=request.simulations, stop=stop))
        stop.check()  # stopped early: its answer is not the one asked for
        return search


def _policy(loaded: _Models, board: chess.Board) -> tuple[list[str], list, dict, float | None]:
    """The policy's moves and scores, each move's win chance (a value model's, or the
    policy's own value head's), and the position's value (None without either)."""
    agent = NeuralAgent(loaded.pair.policy)
    ucis, scores = agent.scored_moves(board)
    if loaded.pair.value is not None:
        value_agent = NeuralAgent(loaded.pair.value)
        wins = dict(zip(*value_agent.scored_moves(board), strict=True))
    elif target_kind(agent.target).value_head:
        wins = dict(zip(ucis, scores, strict=True))
    elif getattr(loaded.pair.policy, "values_boards", False):  # a value head of its own
        wins = dict(zip(ucis, loaded.pair.policy.successor_values(board, ucis), strict=True))
    else:
        wins = {}
    position_value = None
    if wins:  # the value the search starts from: the search's evaluator's rule
        evaluator = loaded.pair.evaluator()
        position_value = float(evaluator.evaluate([board.copy(stack=False)])[0].value)
    return ucis, scores, wins, position_value


def analysis(
    store: ModelStore,
    settings: WebSettings,
    request: BoardRequest,
    stop: StopWhen | None = None,
    activity: Activity | None = None,
) -> dict:
    """Every legal move's score, best first, the position's value and, with simulations,
    the search's visits and values beside them."""
    stop = stop or never()
    board = request.board
    started = time.perf_counter()
    stop.check()
    loaded = _Models.of(store, request)
    ucis, scores, wins, position_value = _policy(loaded, board)
    search = None
    if request.simulations:
        with (activity or Activity()).searching():
            search = loaded.search(store, request, settings, stop)
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


def play(
    store: ModelStore,
    settings: WebSettings,
    request: BoardRequest,
    stop: StopWhen | None = None,
    activity: Activity | None = None,
) -> dict:
    """The model's move: its policy's best (simulations 0) or the search's most visited."""
    stop = stop or never()
    board = request.board.copy()
    stop.check()
    loaded = _Models.of(store, request)
    if request.simulations:
        with (activity or Activity()).searching():
            search = loaded.search(store, request, settings, stop)
        move = search.best_move()
        stats = next(s for s in search.root_moves() if s.move == move)
        extra = {"visits": stats.visits, "win": stats.q, "playouts": search.info().playouts}
    else:
        ucis, scores = NeuralAgent(loaded.pair.policy).scored_moves(board)
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
