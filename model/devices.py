"""Where a model runs: the devices JAX sees, the compute dtype a config resolves to there, and
the model FLOPs of a training example (the MFU of bench/ and the CPU warning of the trainer).

    describe_devices()            -> "1 gpu device(s) (NVIDIA H100 80GB HBM3)"
    compute_dtype("auto")         -> jnp.bfloat16 on a GPU or TPU, jnp.float32 on a CPU
    cpu_warning(config, params)   -> one line when a 9M-or-larger model is about to train on CPU
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp

from model.config import MAX_SEQUENCE_LENGTH, Config, ModelConfig
from runtime.progress import format_duration

# `train.dtype`: "auto" is bfloat16 compute on accelerators (parameters and optimiser state
# stay float32 everywhere) and float32 on a CPU, whose bfloat16 matrix products are emulated.
AUTO_DTYPE = "auto"
ACCELERATOR_DTYPE = "bfloat16"
CPU_DTYPE = "float32"

# From this many parameters on, a CPU is the wrong place to train: the paper's smallest
# released model (9M, 8,954,240 parameters) takes days per thousand steps at its batch.
CPU_WARNING_PARAMS = 8_000_000
# What a CPU core sustains in the train step's matrix products: the 9M ran 17 examples/s
# (4.13 GFLOP each, `train_flops_per_example`) on the 2 cores of this project's CI machine.
CPU_TRAIN_GFLOPS_PER_CORE = 35.0


def platform() -> str:
    """The platform of the devices training runs on: "cpu", "gpu" or "tpu"."""
    return jax.default_backend()


def describe_devices(devices: list | None = None) -> str:
    """`2 cpu device(s)`, or `1 gpu device(s) (NVIDIA H100 80GB HBM3)` where the device
    kind says more than the platform (several kinds are listed with their counts)."""
    devices = jax.devices() if devices is None else devices
    kinds: dict[str, int] = {}
    for device in devices:
        kinds[device.device_kind] = kinds.get(device.device_kind, 0) + 1
    platforms = sorted({device.platform for device in devices})
    text = f"{len(devices)} {'/'.join(platforms)} device(s)"
    named = [kind for kind in kinds if kind.lower() != "cpu"]
    if named:
        text += " (" + ", ".join(k if len(kinds) == 1 else f"{kinds[k]}x {k}" for k in named) + ")"
    return text


def resolve_dtype(name: str, on: str | None = None) -> str:
    """The dtype name `name` (`train.dtype`) stands for on platform `on` (default: here)."""
    if name != AUTO_DTYPE:
        return name
    return CPU_DTYPE if (on or platform()) == "cpu" else ACCELERATOR_DTYPE


def compute_dtype(name: str, on: str | None = None) -> jnp.dtype:
    """The jnp dtype the network computes in (parameters are cast to it inside the step)."""
    return jnp.bfloat16 if resolve_dtype(name, on) == "bfloat16" else jnp.float32


def non_embedding_params(model: ModelConfig, output_size: int) -> tuple[int, int]:
    """(parameters applied at every position: the blocks; parameters applied once per
    example: the final norm and the head). Embeddings are lookups, not FLOPs."""
    d, hidden = model.embedding_dim, model.widening_factor * model.embedding_dim
    per_block = 4 * d * d + 3 * d * hidden + 4 * d  # attention, SwiGLU, two layer norms
    return model.num_layers * per_block, 2 * d + d * output_size + output_size


def train_flops_per_example(config: Config, length: int = MAX_SEQUENCE_LENGTH) -> float:
    """Model FLOPs of one training example (forward and backward) of the transformer:
    6 x the block parameters x the sequence's tokens, 6 x the head's parameters (read at one
    position), plus attention's two (T x T x d) products per layer, x3 for the backward pass.
    The work the implementation saves (the last block computes one position) is not
    subtracted: MFU counts the model's FLOPs, not the kernels'."""
    blocks, head = non_embedding_params(config.model, config.output_size)
    attention = 3 * 2 * 2 * config.model.num_layers * length * length * config.model.embedding_dim
    return 6.0 * (blocks * length + head) + attention


def cpu_warning(config: Config, params: int, cores: int | None = None) -> str | None:
    """One line when a model of 9M parameters or more is about to train on CPUs only, with
    the estimated time per 1,000 steps at its batch; None otherwise."""
    if platform() != "cpu" or params < CPU_WARNING_PARAMS:
        return None
    cores = cores or len(os.sched_getaffinity(0))
    flops = train_flops_per_example(config) * config.train.batch_size * 1000
    seconds = flops / (CPU_TRAIN_GFLOPS_PER_CORE * 1e9 * cores)
    return (
        f"warning: training a {params / 1e6:.1f}M-parameter model on CPU only ({cores} cores): "
        f"about {format_duration(seconds)} per 1,000 steps at batch {config.train.batch_size}; "
        "install JAX for your accelerator (docs/training.md, 'Train on a GPU')"
    )


if __name__ == "__main__":  # `python -m model.devices`: what JAX sees here (make setup ACCEL=...)
    auto = resolve_dtype(AUTO_DTYPE)
    print(f"JAX {jax.__version__} sees {describe_devices()}; train.dtype auto -> {auto}")
