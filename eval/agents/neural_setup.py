"""A trained model set up to play, as every front end (the UCI engine, the web board, the
`mcts` agent and so the Elo ladder) sets it up: the default model files, the default search
settings, and how a policy, the value model beside it and the tree search are put together.

    pair = ModelPair.load("models/cpu")                 # its own value head
    search = pair.search(SearchSettings(batch=8))     # eval/agents/mcts.TreeSearch

A BC policy reports values and searches with a value head of its own beside the policy
(model.policy_value, as the default models/cpu has: AlphaZero's one network), or with an AV or
SV value model named beside it; an AV or SV model values its moves itself and takes none. No
value model comes with a policy unless someone names one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from eval.agents.evaluators import (
    DEFAULT_PRIOR_TEMPERATURE,
    LeafEvaluator,
    ModelPredictor,
    make_evaluator,
)
from eval.agents.mcts import DEFAULT_CPUCT, SearchConfig, TreeSearch

# The policy the UCI engine, the web board and the Elo ladder play by default (make cpu-model
# ships it): a BC policy with a value head of its own, so that it scores and searches alone.
# It searches at least as well with that head as beside models/cpu-av (an AV model, which
# anyone may name as its value model: 70.0% of 200 puzzles at 128 playouts against 68.5%), in
# 0.6 of the time (docs/cpu-model.md, "Search on top").
DEFAULT_MODEL = "models/cpu"
# Leaves per network call when a front end searches: on a CPU a batch of 8 leaves costs little
# more than their sum, and the virtual loss keeps the search close to the sequential one.
DEFAULT_SEARCH_BATCH = 8


@dataclass(frozen=True)
class SearchSettings:
    """How the tree search runs over a model pair; the defaults are the front ends' own."""

    cpuct: float = DEFAULT_CPUCT
    batch: int = DEFAULT_SEARCH_BATCH  # leaves per network call
    contempt: int | None = None  # search-contempt's N_scl; None = plain PUCT
    prior_temperature: float = DEFAULT_PRIOR_TEMPERATURE  # an AV/SV model's priors
    max_nodes: int | None = None  # the tree's bound (UCI's Hash); None = no bound

    def config(self) -> SearchConfig:
        """The search's own settings; ValueError naming a bad one."""
        return SearchConfig(
            cpuct=self.cpuct, batch=self.batch, contempt=self.contempt, max_nodes=self.max_nodes
        )


DEFAULT_SEARCH = SearchSettings()


def load_predictor(
    path: str, use_ema: bool = True, rows_per_pass: int | None | Literal["auto"] = "auto"
):
    """The model.predictor.Predictor of a run dir or checkpoint dir."""
    # JAX is imported here, not at the top: the front ends answer (UCI's handshake, the page,
    # an error line) before any model is wanted, and agents without a model never need it.
    from model.predictor import Predictor

    return Predictor.from_checkpoint(path, use_ema=use_ema, rows_per_pass=rows_per_pass)


@dataclass(frozen=True)
class ModelPair:
    """A policy and the value model beside it (None beside an AV or SV policy, or none)."""

    policy: ModelPredictor
    value: ModelPredictor | None = None

    @classmethod
    def load(cls, path: str, value_path: str | None = None, use_ema: bool = True) -> ModelPair:
        """Both models loaded (no value model where `value_path` is empty)."""
        policy = load_predictor(path, use_ema=use_ema)
        value = load_predictor(value_path, use_ema=use_ema) if value_path else None
        return cls(policy, value)

    def evaluator(self, prior_temperature: float = DEFAULT_PRIOR_TEMPERATURE) -> LeafEvaluator:
        """What the search asks of the pair (eval/agents/evaluators.make_evaluator); ValueError
        naming the problem for a BC policy without a value model, or a value model beside an
        AV or SV one."""
        return make_evaluator(self.policy, self.value, prior_temperature=prior_temperature)

    def search(
        self, settings: SearchSettings = DEFAULT_SEARCH, rng: np.random.Generator | None = None
    ) -> TreeSearch:
        """A fresh tree search over the pair; ValueError as `evaluator` says, or for a bad
        setting."""
        return TreeSearch(self.evaluator(settings.prior_temperature), settings.config(), rng)
