"""What every training-data loader is told (model/data/loader.py's Batches, model/data/board_view.py's
BoardBatches, model/data/stream.py's StreamBatches): one record, built once from the config
(model.data.train_data.loader_settings) or by hand in tests and benchmarks."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LoaderSettings:
    """The order and shape of the batches. `batch_size` is the global batch: process
    `process_index` of `process_count` takes rows p*b:(p+1)*b of each, b = batch_size /
    process_count. `prefetch`: batches prepared ahead on a thread (<= 0: none, the caller's
    thread makes them)."""

    target: str
    num_bins: int
    batch_size: int
    seed: int
    sampler: str = "uniform"  # uniform | weighted (by the board's `count`)
    hl_gauss: bool = False  # soft HL-Gauss targets over the bins instead of one bin
    hl_gauss_sigma_ratio: float = 0.75
    # BC boards also carry their state value's bin (`Batch.value_targets`) for a value head
    # beside the policy (model.policy_value).
    board_values: bool = False
    # BC: this share of each fully valued board's target is the softmax of its moves' win
    # probabilities over `soft_temperature` (model.config.TrainConfig.soft_targets).
    soft_targets: float = 0.0
    soft_temperature: float = 0.05
    av_partial: bool = False  # AV keeps the boards with only some moves valued
    prefetch: int = 4
    process_index: int = 0
    process_count: int = 1

    def __post_init__(self) -> None:
        if self.batch_size % self.process_count:
            raise ValueError(
                f"batch size {self.batch_size} is not divisible by {self.process_count} hosts"
            )
        if not 0 <= self.process_index < self.process_count:
            raise ValueError(
                f"process_index {self.process_index} is not in [0, {self.process_count})"
            )

    @property
    def local_batch(self) -> int:
        """This process's rows of a global batch."""
        return self.batch_size // self.process_count

    @property
    def local_rows(self) -> slice:
        """This process's rows of a global batch, as a slice."""
        start = self.process_index * self.local_batch
        return slice(start, start + self.local_batch)
