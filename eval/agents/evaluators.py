"""What the tree search asks the networks: for each leaf board, priors over its legal moves and
a value, in one batched predictor call per model for all the leaves of a batch.

- AV and SV models (`ValueEvaluator`): the predictor's `move_values` scores every legal move
  in one call (AV: the move's predicted win probability; SV: one minus the successor's
  predicted state value). Priors are softmax(values / prior_temperature), the leaf's value is
  its best move's value, and the move values also serve as each child's value until the
  search has visited it.
- A BC model with an AV or SV value model (`PolicyValueEvaluator`, AlphaZero's policy and
  value pair): priors are the policy renormalised over the legal moves; the value is the
  value model's state value (SV) or its best action value (AV). A BC model with a value
  head beside its policy (model.policy_value) is its own value model where none is given.

All values are win probabilities for the side to move of the board evaluated. The search
never asks about finished games (it scores those exactly by core.game_end).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import chess
import numpy as np

from core.targets import target_kind

DEFAULT_PRIOR_TEMPERATURE = 0.1


@dataclass(frozen=True)
class LeafEvaluation:
    moves: tuple[chess.Move, ...]  # the legal moves, in action-space order
    priors: np.ndarray  # (len(moves),), summing to 1
    value: float  # win probability of the side to move
    # Each move's win probability for the side to move, where the model predicts one (AV,
    # SV); None for a policy model.
    move_values: np.ndarray | None


class LeafEvaluator(Protocol):
    """Evaluates the search's leaves, a batch at a time (one network call per model)."""

    target: str  # "av", "sv", "bc+av"/"bc+sv" or "bc+value" (its own): for names and reports

    def evaluate(self, boards: Sequence[chess.Board]) -> list[LeafEvaluation]: ...


class ModelPredictor(Protocol):
    """The part of model.predictor.Predictor the evaluators use."""

    config: object  # .target: "av", "sv" or "bc"

    def move_values(self, boards: Sequence[chess.Board]) -> list[tuple[list[str], np.ndarray]]: ...

    def state_values(self, fens: Sequence[str]) -> np.ndarray: ...


def softmax(logits: np.ndarray) -> np.ndarray:
    weights = np.exp(logits - logits.max())
    return weights / weights.sum()


@functools.cache
def _move(uci: str) -> chess.Move:
    # One object per move for the whole process: a search tree holds every node's moves,
    # and a chess.Move is ~350 bytes.
    return chess.Move.from_uci(uci)


def _moves(ucis: Sequence[str]) -> tuple[chess.Move, ...]:
    return tuple(_move(uci) for uci in ucis)


def _target(predictor: ModelPredictor) -> str:
    return str(predictor.config.target)  # type: ignore[attr-defined]


class ValueEvaluator:
    """An AV or SV model alone: priors from its move values, value = the best move's value."""

    def __init__(
        self, predictor: ModelPredictor, prior_temperature: float = DEFAULT_PRIOR_TEMPERATURE
    ):
        target = _target(predictor)
        if not target_kind(target).value_head:
            raise ValueError(
                f"a {target!r} model has no move values to search with on its own: "
                "give a policy (BC) model a value model (AV or SV)"
            )
        if not 0 < prior_temperature < np.inf:
            raise ValueError(f"prior temperature must be > 0, got {prior_temperature}")
        self.predictor = predictor
        self.prior_temperature = prior_temperature
        self.target = target

    def evaluate(self, boards: Sequence[chess.Board]) -> list[LeafEvaluation]:
        out = []
        for ucis, values in self.predictor.move_values(boards):
            values = np.asarray(values, np.float64)
            out.append(
                LeafEvaluation(
                    moves=_moves(ucis),
                    priors=softmax(values / self.prior_temperature),
                    value=float(values.max()),
                    move_values=values,
                )
            )
        return out


def _values_boards(predictor: ModelPredictor) -> bool:
    """An SV model, or a BC policy with a value head beside it (model.policy_value)."""
    return bool(getattr(predictor, "values_boards", _target(predictor) == "sv"))


class PolicyValueEvaluator:
    """A BC policy for the priors and an AV or SV model for the value (AlphaZero's pair), or
    the policy's own value head (one model, `value` the policy itself)."""

    def __init__(self, policy: ModelPredictor, value: ModelPredictor):
        if target_kind(_target(policy)).value_head:
            raise ValueError(f"the policy model must be BC, not {_target(policy)!r}")
        own = value is policy
        if own and not _values_boards(policy):
            raise ValueError(
                "the value model must be AV or SV, or the policy itself where it has a value "
                "head beside it; this BC model has no value head beside its policy"
            )
        if not own and not (target_kind(_target(value)).value_head or _values_boards(value)):
            raise ValueError(f"the value model must be AV or SV, not {_target(value)!r}")
        self.policy = policy
        self.value = value
        self.target = "bc+value" if own else f"bc+{_target(value)}"

    def evaluate(self, boards: Sequence[chess.Board]) -> list[LeafEvaluation]:
        if self.value is self.policy and hasattr(self.policy, "policies_and_values"):
            policies, values = self.policy.policies_and_values(boards)  # one pass for both
            return self._leaves(policies, values)
        policies = self.policy.move_values(boards)
        if _values_boards(self.value):  # it values boards
            values = self.value.state_values([board.fen() for board in boards])
        else:
            values = [float(np.max(v)) for _, v in self.value.move_values(boards)]
        return self._leaves(policies, values)

    @staticmethod
    def _leaves(policies, values) -> list[LeafEvaluation]:
        return [
            LeafEvaluation(
                moves=_moves(ucis),
                priors=np.asarray(probs, np.float64),
                value=float(value),
                move_values=None,
            )
            for (ucis, probs), value in zip(policies, values, strict=True)
        ]


def make_evaluator(
    predictor: ModelPredictor,
    value_predictor: ModelPredictor | None = None,
    prior_temperature: float = DEFAULT_PRIOR_TEMPERATURE,
) -> LeafEvaluator:
    """The evaluator for a model (and, for a BC model, its value model); ValueError naming
    the problem for a BC model without a value model or a value model beside an AV/SV one."""
    target = _target(predictor)
    if not target_kind(target).value_head:
        if value_predictor is None and _values_boards(predictor):
            return PolicyValueEvaluator(predictor, predictor)  # its own value head
        if value_predictor is None:
            raise ValueError(
                "a BC model needs a value model to search (value=RUN: AV or SV), "
                "or a value head of its own (model.policy_value)"
            )
        return PolicyValueEvaluator(predictor, value_predictor)
    if value_predictor is not None:
        raise ValueError(f"a value model goes with a BC policy, not with an {target!r} model")
    return ValueEvaluator(predictor, prior_temperature)
