"""Where a model runs: the device line, the dtype `auto` resolves to, model FLOPs, and the
one-line warning for a large model trained on CPU."""

from __future__ import annotations

import pathlib
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import pytest

from model import config as config_lib
from model import devices
from model.networks.transformer import count_params, param_shapes

CONFIGS = pathlib.Path(__file__).resolve().parents[2] / "model" / "configs"


def fake(platform: str, kind: str) -> SimpleNamespace:
    return SimpleNamespace(platform=platform, device_kind=kind)


def test_the_device_line_names_the_platform_and_the_device_kind():
    assert devices.describe_devices([fake("cpu", "cpu")] * 2) == "2 cpu device(s)"
    h100 = fake("gpu", "NVIDIA H100 80GB HBM3")
    assert devices.describe_devices([h100]) == "1 gpu device(s) (NVIDIA H100 80GB HBM3)"
    assert devices.describe_devices([h100] * 8) == "8 gpu device(s) (NVIDIA H100 80GB HBM3)"
    mixed = [h100, h100, fake("gpu", "NVIDIA A100-SXM4-40GB")]
    assert devices.describe_devices(mixed) == (
        "3 gpu device(s) (2x NVIDIA H100 80GB HBM3, 1x NVIDIA A100-SXM4-40GB)"
    )
    here = devices.describe_devices()
    assert here.startswith(f"{len(jax.devices())} {jax.default_backend()} device(s)")


def test_auto_is_bfloat16_on_accelerators_and_float32_on_cpu():
    assert devices.resolve_dtype("auto", on="gpu") == "bfloat16"
    assert devices.resolve_dtype("auto", on="tpu") == "bfloat16"
    assert devices.resolve_dtype("auto", on="cpu") == "float32"
    assert devices.resolve_dtype("float32", on="gpu") == "float32"
    assert devices.resolve_dtype("bfloat16", on="cpu") == "bfloat16"
    assert devices.compute_dtype("auto", on="gpu") == jnp.bfloat16
    expected = jnp.float32 if jax.default_backend() == "cpu" else jnp.bfloat16
    assert devices.compute_dtype("auto") == expected


def test_configs_written_with_the_former_dtype_key_still_load(tmp_path):
    saved = tmp_path / "old.toml"
    saved.write_text('[model]\nsize = "tiny"\n[train]\ncompute_dtype = "bfloat16"\n')
    assert config_lib.load(saved).train.dtype == "bfloat16"
    assert config_lib.load(saved, ["compute_dtype=float32"]).train.dtype == "float32"
    both = tmp_path / "both.toml"
    both.write_text('[train]\ncompute_dtype = "bfloat16"\ndtype = "float32"\n')
    with pytest.raises(config_lib.ConfigError, match="sets both compute_dtype and dtype"):
        config_lib.load(both)
    # The shipped model's config carries the former key.
    shipped = pathlib.Path(__file__).resolve().parents[2] / "models" / "cpu" / "config.toml"
    assert config_lib.load(shipped).train.dtype == "float32"


@pytest.mark.parametrize("size", ["9M", "136M", "270M"])
def test_the_paper_configs_default_to_auto(size):
    assert config_lib.load(CONFIGS / f"{size}.toml").train.dtype == "auto"


def test_model_flops_follow_the_formula():
    config = config_lib.load(CONFIGS / "9M.toml")
    blocks, head = devices.non_embedding_params(config.model, config.output_size)
    total = count_params(param_shapes(config))
    embeddings = (1968 + 79) * 256
    assert blocks + head == total - embeddings  # every other parameter is counted once
    attention = 3 * 2 * 2 * 8 * 79 * 79 * 256
    assert devices.train_flops_per_example(config) == 6 * (blocks * 79 + head) + attention
    # About 4.1 GFLOP an example for the 9M; the 270M does ~32x the 9M's work.
    assert 4.0e9 < devices.train_flops_per_example(config) < 4.3e9
    big = config_lib.load(CONFIGS / "270M.toml")
    ratio = devices.train_flops_per_example(big) / devices.train_flops_per_example(config)
    assert 28 < ratio < 34


def test_a_large_model_on_cpu_gets_one_line_with_the_time_per_thousand_steps(monkeypatch):
    monkeypatch.setattr(devices, "platform", lambda: "cpu")
    config = config_lib.load(CONFIGS / "9M.toml")
    line = devices.cpu_warning(config, 8_954_240, cores=2)
    assert "\n" not in line and "9.0M-parameter model on CPU only (2 cores)" in line
    # 4,096 x 4.13 GFLOP x 1,000 steps at 35 GFLOP/s per core on 2 cores: ~67 hours.
    assert "about 67h" in line and "per 1,000 steps at batch 4096" in line
    assert "Train on a GPU" in line
    small = config_lib.load(CONFIGS / "small.toml")
    assert devices.cpu_warning(small, 400_000, cores=2) is None
    monkeypatch.setattr(devices, "platform", lambda: "gpu")
    assert devices.cpu_warning(config, 8_954_240, cores=2) is None
