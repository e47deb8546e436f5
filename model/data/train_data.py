"""The training data as the loop reads it: the train split loaded whole or streamed (when it
would not fit in memory), the test split, and the loaders over them set up from the config."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass

import jax

from core.schema import board_files
from model.data.board_view import BoardBatches
from model.config import Config, ConfigError
from model.data.loader import Batches, BoardData, fingerprint, load_boards
from model.data.loader_settings import LoaderSettings
from model.networks.network import is_graph
from model.data.stream import StreamBatches
from model.data.stream_plan import estimate_in_memory_bytes, should_stream, stream_fingerprint


def loader_settings(config: Config) -> LoaderSettings:
    """The loaders' settings that follow from the config and this process's place among the
    processes."""
    t = config.train
    return LoaderSettings(
        target=t.target,
        num_bins=t.num_bins,
        batch_size=t.batch_size,
        seed=t.seed,
        sampler=t.sampler,
        hl_gauss=t.hl_gauss,
        hl_gauss_sigma_ratio=t.hl_gauss_sigma_ratio,
        av_partial=t.av_partial,
        board_values=config.model.policy_value,
        soft_targets=t.soft_targets,
        soft_temperature=t.soft_temperature,
        prefetch=t.prefetch,
        process_index=jax.process_index(),
        process_count=jax.process_count(),
    )


def make_batches(
    config: Config, data: BoardData, settings: LoaderSettings, position: int = 0
) -> Batches:
    """The loader over `data` that the config's backbone reads: (board, move) rows for the
    transformer, whole boards for the board-at-once backbones, from global example `position`
    on."""
    loader = BoardBatches if is_graph(config) else Batches
    return loader(data, settings, position)


@dataclass
class TrainData:
    """The training split as the loop reads it: loaded whole (`boards`) or streamed from
    `files` (model/data/stream.py)."""

    files: list[str]
    boards: BoardData | None
    memory_budget_gb: float
    window_items: int | None = None

    @property
    def streaming(self) -> bool:
        return self.boards is None

    @functools.cached_property
    def fingerprint(self) -> dict:
        """Read once: every checkpoint stores it, and streaming reads it from every footer."""
        return (
            fingerprint(self.boards) if self.boards is not None else stream_fingerprint(self.files)
        )

    @property
    def loader(self) -> dict:
        """What a resumed run must share to continue the same order (besides the data)."""
        if self.streaming:
            return {"streaming": True, "window_items": self.window_items}
        return {"streaming": False}

    def batches(self, config: Config, position: int) -> Batches | StreamBatches:
        """The training loader over this split from global example `position` on."""
        settings = loader_settings(config)
        if self.boards is not None:
            return make_batches(config, self.boards, settings, position)
        try:
            stream = StreamBatches(
                self.files, settings, position, memory_budget_gb=self.memory_budget_gb
            )
        except ValueError as e:  # a budget that cannot hold one block besides a window
            raise ConfigError(f"data.memory_budget_gb: {e}") from None
        self.window_items = stream.window_items
        return stream


def _size(num_bytes: float) -> str:
    return f"{num_bytes / 1e9:.1f} GB" if num_bytes >= 1e9 else f"{num_bytes / 1e6:.1f} MB"


def load_data(
    config: Config, meta: dict | None, log: Callable[[str], None]
) -> tuple[TrainData, BoardData | None]:
    """The train split (loaded, or opened for streaming when `data.streaming` or when it would
    not fit in `data.memory_budget_gb`) and the test boards, with a warning when they are not
    the resumed run's."""
    d = config.data
    started = time.perf_counter()
    files = board_files(d.train)
    streaming = d.streaming or should_stream(files, d.memory_budget_gb)
    if streaming and not d.streaming:
        needed = estimate_in_memory_bytes(files) / 1e9
        problem = (
            f"the {config.model.backbone} backbone loads boards whole"
            if is_graph(config)
            else f"train.sampler {config.train.sampler!r} needs the whole table"
            if config.train.sampler != "uniform"
            else None
        )
        if problem:
            raise ConfigError(
                f"data.train needs ~{needed:.1f} GB in memory, above data.memory_budget_gb = "
                f"{d.memory_budget_gb}, and streaming cannot serve it: {problem}; raise the budget"
            )
    test_data = load_boards(d.test) if d.test else None
    test = f"; test: {test_data.num_boards} boards" if test_data else "; no test split"
    if streaming:
        train = TrainData(files, None, d.memory_budget_gb)
        boards = train.fingerprint["boards"]
        why = (
            "data.streaming" if d.streaming else f"over data.memory_budget_gb {d.memory_budget_gb}"
        )
        log(
            f"data: streaming {boards} boards from {len(files)} shard(s) ({why}; "
            f"~{_size(estimate_in_memory_bytes(files))} if loaded){test}"
        )
    else:
        train = TrainData(files, load_boards(d.train), d.memory_budget_gb)
        log(
            f"data: {train.boards.num_boards} boards, {train.boards.num_pairs} action values "
            f"from {len(files)} shard(s) in {time.perf_counter() - started:.1f}s{test}"
        )
    if meta is not None and meta.get("data_fingerprint") != train.fingerprint:
        log(
            f"warning: the training data differ from the checkpoint's "
            f"({meta.get('data_fingerprint')} vs {train.fingerprint}): "
            "the data order does not continue exactly"
        )
    return train, test_data
