"""The paper's three training targets as one type, each with its behaviour in one place.

- AV (action values): a network row is (board, move); one example per valued move; the head
  is K value bins; a move scores its predicted win probability.
- SV (state values): a row is a board; one example per board with a state value; K value
  bins; a move scores 1 - the predicted value of the board after it (the opponent's).
- BC (behavioural cloning): a row is a board; one example per board with a best move; the
  head covers the 1968 actions; a move scores its probability over the legal moves.

Code that behaves differently per target asks its `TargetKind` (`target_kind(name)`) what
to do instead of comparing names: a new target is one more `TargetKind` here plus the
branches its new behaviour needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np

from core.actions import MAX_LEGAL_MOVES, NUM_ACTIONS

Target = Literal["av", "sv", "bc"]
TARGETS: tuple[Target, ...] = get_args(Target)

# How `move_values` turns the network's output into one score per legal move.
MoveScore = Literal["move_value", "successor_value", "policy"]


@dataclass(frozen=True)
class TargetKind:
    name: Target
    takes_action: bool  # a network row is (board, move), not a board alone
    value_head: bool  # the head is value bins (win probabilities), not the action space
    per_move_examples: bool  # one training example per valued move, not per board
    label_column: str  # the board-row column (core.schema) its labels come from
    move_score: MoveScore
    # Board-at-once backbones (gateau): an output per move edge, the loss masked to the
    # edges that carry a label (AV: the valued moves; BC: a softmax over the move edges).
    per_edge_output: bool
    masked_loss: bool

    def output_size(self, num_bins: int) -> int:
        """Width of the network's head."""
        return num_bins if self.value_head else NUM_ACTIONS

    @property
    def rows_per_board(self) -> int:
        """The most network rows `move_values` runs for one board: a row per legal move for
        a value target (AV: the moves, SV: the successors), one row for a policy."""
        return MAX_LEGAL_MOVES if self.value_head else 1

    def sampling_logits(self, scores: np.ndarray) -> np.ndarray:
        """Move scores as logits to sample from: value scores as they are; policy scores,
        which are probabilities, as their logarithm (temperature 1 = the model's own)."""
        scores = np.asarray(scores, dtype=np.float64)
        return scores if self.value_head else np.log(np.maximum(scores, 1e-30))


AV = TargetKind(
    name="av",
    takes_action=True,
    value_head=True,
    per_move_examples=True,
    label_column="win_probs",
    move_score="move_value",
    per_edge_output=True,
    masked_loss=True,
)
SV = TargetKind(
    name="sv",
    takes_action=False,
    value_head=True,
    per_move_examples=False,
    label_column="state_win_prob",
    move_score="successor_value",
    per_edge_output=False,
    masked_loss=False,
)
BC = TargetKind(
    name="bc",
    takes_action=False,
    value_head=False,
    per_move_examples=False,
    label_column="best_move",
    move_score="policy",
    per_edge_output=True,
    masked_loss=False,
)
TARGET_KINDS: dict[Target, TargetKind] = {kind.name: kind for kind in (AV, SV, BC)}
VALUE_TARGETS: tuple[Target, ...] = tuple(k.name for k in TARGET_KINDS.values() if k.value_head)


def target_kind(name: str) -> TargetKind:
    """The TargetKind named `name`; ValueError naming the known ones otherwise."""
    try:
        return TARGET_KINDS[name]  # type: ignore[index]
    except KeyError:
        raise ValueError(f"unknown target {name!r}: one of {list(TARGETS)}") from None
