"""Agents that choose moves: one Protocol for neural policies (with or without a tree search),
Stockfish, a random mover and a one-ply material counter (`greedy`, the floor a model must beat).

Every agent is a context manager and closes its processes in `close()`, never in `__del__`.
An agent receives the whole `chess.Board`, move stack included, so it can see repetitions.
The protocol and shared plumbing are in eval/agents/base.py, the Stockfish agents in
eval/agents/stockfish.py, the spec grammar in eval/agents/specs.py; this module has the other
agents and turns specs into agents (`make_agent`).

Agents are named on command lines by a spec, `KIND[:OPTIONS]`, OPTIONS being comma-separated
`key=value` pairs (see `eval.agents.specs.SPEC_HELP`, printed by every CLI's --help):

    random                      random:seed=3               greedy
    stockfish:nodes=100000      stockfish:time=0.1,threads=1      stockfish:depth=12,skill=5
    stockfish:elo=1500          stockfish:elo=1500,time=0.05
    oracle:nodes=2000           oracle:time=0.05
    neural:runs/small           neural:runs/small,temperature=0.5,ema=false,seed=1
    mcts:runs/small,sims=256    mcts:runs/bc,value=runs/sv,batch=8,contempt=5
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from time import monotonic

import chess
import chess.engine
import numpy as np

from core.actions import move_to_index
from core.material import PIECE_VALUES
from core.targets import VALUE_TARGETS, target_kind
from eval.agents.base import AgentBase, legal_moves
from eval.agents.evaluators import DEFAULT_PRIOR_TEMPERATURE, LeafEvaluator
from eval.agents.mcts import DEFAULT_SIMS, SearchConfig, SearchLimit, TreeSearch
from eval.agents.neural_setup import ModelPair, load_predictor
from eval.agents.specs import AgentSpec, agent_arguments, parse_agent_spec
from eval.agents.stockfish import StockfishAgent, StockfishOracleAgent


class RandomAgent(AgentBase):
    """Plays a uniformly random legal move; seeded, so games are reproducible."""

    def __init__(self, seed: int = 0, name: str = "random"):
        self.name = name
        self.seed = seed
        self._games = 0
        self._rng = random.Random(seed)

    def new_game(self) -> None:
        # Game n draws from its own stream (seed, n), so its moves do not depend on how long
        # earlier games ran: in a tournament those include games against a Stockfish whose
        # skill level plays randomly. The first game keeps the plain seed's stream, which the
        # bundled sample's mismatch games (one fresh agent per game) were made with.
        self._games += 1
        self._rng = random.Random(self.seed if self._games == 1 else f"{self.seed}/{self._games}")

    def choose_move(self, board: chess.Board) -> chess.Move:
        return self._rng.choice(legal_moves(board))


# --- greedy: one ply of material ---------------------------------------------------------


def material_balance(board: chess.Board, color: chess.Color) -> int:
    """`color`'s material minus the opponent's, in PIECE_VALUES."""
    total = 0
    for piece_type, value in PIECE_VALUES.items():
        total += value * (
            len(board.pieces(piece_type, color)) - len(board.pieces(piece_type, not color))
        )
    return total


def material_gain(board: chess.Board, move: chess.Move) -> int:
    """How much `move` changes the mover's material balance: the piece it captures (the pawn
    behind the target square for en passant) plus, for a promotion, the new piece less the
    pawn. Castling and quiet moves gain 0. Replies are not looked at."""
    gain = 0
    if board.is_en_passant(move):
        gain += PIECE_VALUES[chess.PAWN]
    else:
        captured = board.piece_at(move.to_square)
        if captured is not None and captured.color != board.turn:
            gain += PIECE_VALUES[captured.piece_type]
    if move.promotion is not None:
        gain += PIECE_VALUES[move.promotion] - PIECE_VALUES[chess.PAWN]
    return gain


def greedy_move(board: chess.Board) -> chess.Move:
    """A mate in one if the board has one, else the move that leaves the mover the best
    material balance (`material_gain`); ties go to the first move in action-space order.

    One ply and nothing else: a capture of a defended piece counts as a win, stalemating
    the opponent or allowing a mate in reply are not seen. The paper's tables have no such
    floor; this is the least a model that "plays chess" must beat.
    """
    moves = sorted(legal_moves(board), key=move_to_index)
    for move in moves:
        board.push(move)
        mate = board.is_checkmate()
        board.pop()
        if mate:
            return move
    gains = [material_gain(board, move) for move in moves]
    return moves[gains.index(max(gains))]


class GreedyAgent(AgentBase):
    """Plays `greedy_move`: deterministic, no engine, no state between positions."""

    def __init__(self, name: str = "greedy"):
        self.name = name

    def choose_move(self, board: chess.Board) -> chess.Move:
        return greedy_move(board)


# --- neural policies ---------------------------------------------------------------------

REPETITION_VALUE = 0.5


def allows_threefold_claim(board: chess.Board, move: chess.Move) -> bool:
    """Whether after `move` the opponent could claim a draw by threefold repetition."""
    board.push(move)
    try:
        # A claim needs an earlier occurrence after the last irreversible move, so at least
        # three reversible plies; the halfmove clock bounds those from above and is cheap.
        return board.halfmove_clock >= 3 and board.can_claim_threefold_repetition()
    finally:
        board.pop()


def repetition_adjusted(board: chess.Board, moves: Sequence[str], values: np.ndarray) -> np.ndarray:
    """The paper's workaround for value policies: a move after which the opponent can claim a
    threefold-repetition draw is valued at 0.5 (a draw), whatever the model said. Without it a
    winning value model shuffles in a won position, since every move "keeps" the win."""
    values = np.array(values, dtype=np.float64)
    for i, uci in enumerate(moves):
        if allows_threefold_claim(board, chess.Move.from_uci(uci)):
            values[i] = REPETITION_VALUE
    return values


SUCCESSOR_ODDS_CLIP = 1e-4  # a successor's win probability is read within [clip, 1 - clip]


def checked_successor_weight(weight: float) -> float:
    """`weight` as a float; ValueError unless it is finite and >= 0."""
    weight = float(weight)
    if weight < 0 or not math.isfinite(weight):
        raise ValueError(f"successor_weight must be finite and >= 0, got {weight}")
    return weight


def successor_mixed(probs: np.ndarray, wins: np.ndarray, weight: float) -> np.ndarray:
    """A BC policy's legal-move probabilities `probs` mixed with `wins`, each move's win
    probability for the mover by one ply of a value head (1 - the successor's value):
    p(a) x odds(a)^weight, renormalised, i.e. log p(a) + weight x logit(w(a)) as logits.

    This is the paper's SV rule (each successor board valued by the network, no reply looked
    at) beside its BC rule. A move that checkmates (win 1, a rule of the game, not a
    prediction) takes the whole probability, shared by the mates in the policy's proportion.
    """
    probs = np.asarray(probs, dtype=np.float64)
    wins = np.asarray(wins, dtype=np.float64)
    if probs.shape != wins.shape or probs.ndim != 1:
        raise ValueError(f"probs {probs.shape} and wins {wins.shape} must be equal 1-D shapes")
    weight = checked_successor_weight(weight)
    mates = wins >= 1.0
    if mates.any():
        mixed = np.where(mates, np.maximum(probs, 1e-30), 0.0)
        return mixed / mixed.sum()
    clipped = np.clip(wins, SUCCESSOR_ODDS_CLIP, 1.0 - SUCCESSOR_ODDS_CLIP)
    logits = np.log(np.maximum(probs, 1e-30)) + weight * np.log(clipped / (1.0 - clipped))
    weights = np.exp(logits - logits.max())
    return weights / weights.sum()


def pick_index(
    scores: np.ndarray, target: str, temperature: float, rng: np.random.Generator
) -> int:
    """The chosen move's index among `scores` (higher is better for the side to move).

    temperature 0: argmax (the first of equal best). Otherwise a softmax sample: for value
    targets over value / temperature; for BC, whose scores are probabilities, over
    log(probability) / temperature, so temperature 1 samples the model's own distribution.
    """
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 1 or scores.size == 0:
        raise ValueError(f"need a non-empty 1-D array of scores, got shape {scores.shape}")
    if temperature < 0 or not math.isfinite(temperature):
        raise ValueError(f"temperature must be finite and >= 0, got {temperature}")
    if temperature == 0:
        return int(np.argmax(scores))
    logits = target_kind(target).sampling_logits(scores)
    # Shift before dividing: every exponent is then <= 0 and the best is exactly 0, so a
    # tiny temperature (1e-320) drives the others to -inf (weight 0) instead of turning
    # scores / temperature into inf - inf = NaN, and a huge one gives uniform weights.
    with np.errstate(over="ignore", under="ignore"):
        weights = np.exp((logits - logits.max()) / temperature)
    return int(rng.choice(scores.size, p=weights / weights.sum()))


class NeuralAgent(AgentBase):
    """A trained AV, SV or BC model playing without search, built on model.predictor.

    `predictor` is a model.predictor.Predictor (or anything with `.config.target` and
    `.move_values(boards)` returning, per board, the legal moves in action-space order and a
    score per move, higher better for the side to move).

    `successor_weight` > 0 (a BC policy with a value head beside it only) mixes the policy
    with its own value head's one-ply value of each move (`successor_mixed`); None takes the
    model's `[play] successor_weight` (model/config.py), 0 plays the policy alone.
    """

    def __init__(
        self,
        predictor,
        temperature: float = 0.0,
        seed: int = 0,
        repetition_workaround: bool = True,
        name: str = "neural",
        successor_weight: float | None = None,
    ):
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {temperature}")
        self.predictor = predictor
        self.target = str(predictor.config.target)
        self.successor_weight = _successor_weight(predictor, successor_weight)
        self.temperature = temperature
        self.repetition_workaround = repetition_workaround and (
            self.target in VALUE_TARGETS or self.successor_weight > 0
        )
        self.name = name
        self._rng = np.random.default_rng(seed)

    @classmethod
    def from_checkpoint(cls, path: str, use_ema: bool = True, **kwargs) -> NeuralAgent:
        return cls(load_predictor(path, use_ema=use_ema), **kwargs)

    def scored_moves(self, board: chess.Board) -> tuple[list[str], np.ndarray]:
        """The legal moves (action-space order) and the scores the agent chooses by."""
        legal_moves(board)
        if self.successor_weight > 0:
            moves, probs, wins = self.policy_and_successors(board)
            return moves, successor_mixed(probs, wins, self.successor_weight) if moves else probs
        [(moves, scores)] = self.predictor.move_values([board])
        scores = np.asarray(scores, dtype=np.float64)
        if self.repetition_workaround:
            scores = repetition_adjusted(board, moves, scores)
        return list(moves), scores

    def policy_and_successors(self, board: chess.Board) -> tuple[list[str], np.ndarray, np.ndarray]:
        """A BC policy with a value head: the legal moves, their probabilities and each move's
        win by one ply of the value head (the repetition rule applied where it is on), the
        two halves `successor_mixed` mixes."""
        [(moves, probs)] = self.predictor.move_values([board])
        probs = np.asarray(probs, dtype=np.float64)
        if not len(moves):
            return [], probs, probs
        wins = self.predictor.successor_values(board, moves)
        if self.repetition_workaround:
            wins = repetition_adjusted(board, moves, wins)
        return list(moves), probs, np.asarray(wins, dtype=np.float64)

    def choose_move(self, board: chess.Board) -> chess.Move:
        moves, scores = self.scored_moves(board)
        return chess.Move.from_uci(
            moves[pick_index(scores, self.target, self.temperature, self._rng)]
        )


def _successor_weight(predictor, asked: float | None) -> float:
    """The weight a NeuralAgent mixes successor values with: `asked`, else the model's own
    `[play] successor_weight`; ValueError where the model cannot value successors."""
    play = getattr(predictor.config, "play", None)
    weight = checked_successor_weight(
        asked if asked is not None else getattr(play, "successor_weight", 0.0)
    )
    if weight > 0 and (
        target_kind(str(predictor.config.target)).value_head
        or not getattr(predictor, "values_boards", False)
    ):
        raise ValueError(
            f"successor_weight {weight:g} needs a BC policy with a value head beside it "
            "(model.policy_value); this model has none"
        )
    return weight


class MctsAgent(AgentBase):
    """A model searching with PUCT or search-contempt (eval/agents/mcts.py) before each move.

    The tree is kept between the moves of a game (a position continuing the last one reuses
    its subtree) and dropped by `new_game`. Each game draws search-contempt's samples from
    its own stream (seed, game number), so a game does not depend on the ones before it.
    """

    def __init__(
        self,
        evaluator: LeafEvaluator,
        config: SearchConfig | None = None,
        sims: int | None = DEFAULT_SIMS,
        time: float | None = None,
        seed: int = 0,
        reuse: bool = True,
        name: str = "mcts",
    ):
        if sims is None and time is None:
            raise ValueError("an mcts agent needs sims or time")
        if time is not None and not 0 < time < math.inf:
            raise ValueError(f"time must be finite and > 0 seconds, got {time}")
        self.sims = sims
        self.time = time
        self.seed = seed
        self.reuse = reuse
        self.name = name
        self.target = evaluator.target
        self.search = TreeSearch(evaluator, config or SearchConfig(), np.random.default_rng(seed))
        self._games = 0

    @classmethod
    def from_checkpoint(
        cls,
        path: str,
        value_path: str | None = None,
        use_ema: bool = True,
        prior_temperature: float = DEFAULT_PRIOR_TEMPERATURE,
        **kwargs,
    ) -> MctsAgent:
        """The agent for a run dir or checkpoint (and, for a BC policy, its value model's);
        the other keyword arguments are the constructor's."""
        pair = ModelPair.load(path, value_path, use_ema=use_ema)
        return cls(pair.evaluator(prior_temperature), **kwargs)

    def new_game(self) -> None:
        self._games += 1
        self.search.clear()
        self.search.rng = np.random.default_rng([self.seed, self._games])

    def choose_move(self, board: chess.Board) -> chess.Move:
        legal_moves(board)
        if not self.reuse:
            self.search.clear()
        self.search.set_position(board)
        deadline = None if self.time is None else monotonic() + self.time
        self.search.run(SearchLimit(sims=self.sims, deadline=deadline))
        return self.search.best_move()


# --- specs into agents -------------------------------------------------------------------


def make_agent(spec: str | AgentSpec, engine_path: str | None = None) -> AgentBase:
    """Builds the agent a spec names (see SPEC_HELP). `engine_path` is the CLI's --engine,
    used by Stockfish agents whose spec has no `engine=` option. ValueError for a bad spec,
    core.engine_path.EngineNotFoundError when no engine is found."""
    if isinstance(spec, str):
        spec = parse_agent_spec(spec)
    arguments = agent_arguments(spec, engine_path)
    if spec.kind == "random":
        return RandomAgent(**arguments)
    if spec.kind == "greedy":
        return GreedyAgent(**arguments)
    if spec.kind == "stockfish":
        return StockfishAgent(**arguments)
    if spec.kind == "oracle":
        return StockfishOracleAgent(**arguments)
    if spec.kind == "mcts":
        return MctsAgent.from_checkpoint(**arguments)
    return NeuralAgent.from_checkpoint(arguments.pop("path"), arguments.pop("use_ema"), **arguments)
