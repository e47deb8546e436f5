"""Evaluation during training: test loss and accuracy, and move-ranking quality against
Stockfish, of the EMA parameters."""

from __future__ import annotations

import dataclasses

import chess
import jax
import numpy as np

from core.metrics import summarize
from model.config import Config
from model.data import BoardData
from model.predictor import Predictor
from model.train_data import loader_settings, make_batches
from model.train_step import Placement, jitted


class Evaluator:
    """Test loss and accuracy on fixed test batches, and action accuracy and Kendall's tau
    of the model's move scores against Stockfish's on a fixed subset of test boards."""

    def __init__(self, config: Config, test: BoardData, placement: Placement):
        t = config.train
        self.config = config
        self.placement = placement
        # Fixed test batches: drawn uniformly, on this thread.
        settings = dataclasses.replace(loader_settings(config), sampler="uniform", prefetch=0)
        batches = make_batches(config, test, settings)
        self.batches = [placement.global_batch(next(batches)) for _ in range(t.eval_batches)]
        self.step = jitted(config.model, t, placement).evaluate
        # Accuracy and tau compare every legal move, so they need complete boards.
        playable = np.flatnonzero((np.diff(test.pair_offsets) > 0) & ~test.partial)
        rng = np.random.default_rng(t.seed)
        chosen = np.sort(rng.choice(playable, min(t.eval_boards, len(playable)), replace=False))
        self.boards = [chess.Board(test.fens[i]) for i in chosen]
        self.truth = [
            dict(zip(test.legal_moves(i), test.move_win_probs(i), strict=True)) for i in chosen
        ]
        self.predictor: Predictor | None = None

    def __call__(self, params) -> dict[str, float]:
        sums: dict[str, float] = {}
        for batch in self.batches:
            for k, v in self.step(params, batch).items():
                sums[k] = sums.get(k, 0.0) + float(v)
        result = {f"test_{k}": v / len(self.batches) for k, v in sums.items()}
        host_params = jax.device_get(params)
        if self.predictor is None:
            self.predictor = Predictor(host_params, self.config)
        else:
            self.predictor.params = jax.device_put(host_params, jax.local_devices()[0])
        predicted, truth = [], []
        for (moves, scores), values in zip(
            self.predictor.move_values(self.boards), self.truth, strict=True
        ):
            predicted.append(scores)
            truth.append(np.array([values[m] for m in moves], np.float64))
        summary = summarize(predicted, truth)
        result.update(
            action_accuracy=summary["action_accuracy"],
            kendall_tau=summary["kendall_tau"],
            mean_abs_win_prob_error=summary["mean_abs_win_prob_error"],
            eval_boards=summary["boards"],
        )
        return result
