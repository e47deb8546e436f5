"""Training from the streaming loader (model/data/stream.py): chosen by `data.streaming` or when
the split would not fit in `data.memory_budget_gb`, resumed exactly, refused where it cannot
serve the config."""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

import jax
import numpy as np
import pytest

from core.schema import board_files, shard_name
from model import config as config_lib
from model.checkpoint import load_params
from model.config import ConfigError
from model.training.train import train

ROOT = pathlib.Path(__file__).resolve().parents[2]
TINY_MODEL = {"num_layers": 1, "embedding_dim": 32, "num_heads": 2}


def tiny(train_dir: pathlib.Path, data: dict | None = None, **settings) -> config_lib.Config:
    return config_lib.from_dict(
        {
            "model": TINY_MODEL,
            "train": {
                "batch_size": 32,
                "num_steps": 8,
                "learning_rate": 1e-3,
                "log_every": 2,
                "checkpoint_every": 3,
                "prefetch": 2,
                **settings,
            },
            "data": {"train": str(train_dir), "test": "", **(data or {})},
        }
    )


def trees_equal(a, b) -> None:
    # Bitwise on purpose: exact resume is a promise (see test_train.assert_trees_equal).
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@pytest.fixture(scope="module")
def many_copies(synthetic_data, tmp_path_factory) -> pathlib.Path:
    """60 copies of the synthetic train shards: ~13 MB if loaded, over a 10 MB budget."""
    files = board_files(str(synthetic_data / "train"))
    out = tmp_path_factory.mktemp("copies")
    total = 60 * len(files)
    for i in range(total):
        shutil.copy(files[i % len(files)], out / shard_name("boards", i, total))
    return out


def test_a_streaming_run_resumes_to_the_uninterrupted_result(synthetic_data, tmp_path):
    config = tiny(synthetic_data / "train", {"streaming": True, "memory_budget_gb": 0.05},
                  hl_gauss=True)  # fmt: skip
    logs: list[str] = []
    first = train(config, str(tmp_path / "resumed"), stop_after=5, log=logs.append)
    assert first.stopped_early and first.step == 5
    assert any(line.startswith("data: streaming 120 boards from 3 shard(s) (data.streaming")
               for line in logs)  # fmt: skip
    logs.clear()
    resumed = train(config, str(tmp_path / "resumed"), log=logs.append)
    assert "resumed from step 5 (data position 160)" in " ".join(logs)
    assert not any("warning" in line for line in logs)
    straight = train(config, str(tmp_path / "straight"), log=lambda _: None)
    assert resumed.step == straight.step == 8
    trees_equal(resumed.state.params, straight.state.params)
    trees_equal(resumed.state.opt_state, straight.state.opt_state)
    _, _, meta = load_params(str(tmp_path / "resumed"), use_ema=False)
    assert meta["loader"]["streaming"] is True and meta["loader"]["window_items"] > 0
    assert meta["data_fingerprint"] == {"boards": 120, "files": 3}


def test_resuming_with_another_budget_warns_that_the_order_changes(synthetic_data, tmp_path):
    config = tiny(synthetic_data / "train", {"streaming": True, "memory_budget_gb": 0.05})
    train(config, str(tmp_path), stop_after=3, log=lambda _: None)
    logs: list[str] = []
    smaller = config.replace(data={"memory_budget_gb": 0.008})
    train(smaller, str(tmp_path), log=logs.append)
    assert any(line.startswith("warning: the loader differs from the checkpoint's")
               for line in logs)  # fmt: skip


def test_data_over_the_budget_are_streamed_from_the_cli(many_copies, tmp_path):
    command = [sys.executable, "-m", "model.training.train", "--config", "model/configs/small.toml"]
    command += ["--data", str(many_copies), "--test-data", "", "--out", str(tmp_path)]
    command += ["--steps", "4", "--batch-size", "32", "--set", "data.memory_budget_gb=0.01"]
    for key, value in TINY_MODEL.items():
        command += ["--set", f"model.{key}={value}"]
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    expected = "data: streaming 7200 boards from 180 shard(s) (over data.memory_budget_gb 0.01; ~"
    assert expected in run.stdout and " MB if loaded)" in run.stdout
    assert "step 4/4" in run.stdout
    # The same data with room for them: loaded whole.
    roomy = [*command[:-4], "--set", "data.memory_budget_gb=1"]
    roomy[roomy.index("--out") + 1] = str(tmp_path / "roomy")
    run = subprocess.run(roomy, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "data: 7200 boards" in run.stdout


def test_streaming_is_refused_where_it_cannot_serve_the_config(many_copies, synthetic_data):
    weighted = tiny(many_copies, {"memory_budget_gb": 0.01}, sampler="weighted")
    with pytest.raises(ConfigError, match="train.sampler 'weighted' needs the whole table"):
        train(weighted, "/tmp/never-written", log=lambda _: None)
    with pytest.raises(ConfigError, match="data.streaming samples uniformly"):
        config_lib.validate(tiny(synthetic_data / "train", {"streaming": True},
                                 sampler="weighted"))  # fmt: skip
    gateau = tiny(synthetic_data / "train", {"streaming": True}).replace(
        model={"backbone": "gateau"}
    )
    with pytest.raises(ConfigError, match="gateau loads boards whole"):
        config_lib.validate(gateau)
    too_small = tiny(synthetic_data / "train", {"streaming": True, "memory_budget_gb": 0.001})
    with pytest.raises(ConfigError, match="data.memory_budget_gb: memory budget 0.001 GB"):
        train(too_small, "/tmp/never-written-either", log=lambda _: None)
