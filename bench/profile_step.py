"""Where a train step's time goes on one device: XLA's cost analysis against the device's
roofline, and a profiler trace of a few steps summed by kernel.

    python -m bench.profile_step --size 9M --batch 2048 --out /tmp/profile
    python -m bench.profile_step --size tiny --batch 32 --variant cudnn_attention

Prints one JSON object (and writes it to `<out>/profile-<size>-<batch>[-<variant>].json`,
beside the step's optimised HLO and the trace, when `--out` is given):

- `step_ms`: the median step over the profiled steps (wall, from the host);
- `cost`: XLA's own count of the step's FLOPs and bytes accessed beside the model's FLOPs
  (the MFU numerator, model/devices.py), the time each would take at the device's peak
  (`compute_ms` at its dense bf16 peak, `memory_ms` at its HBM bandwidth) and `bound`, the
  larger;
- `trace`: from `jax.profiler` (perfetto JSON): per step the device's busy time (the union of
  its kernels' intervals), the kernels launched, `idle_ms` (wall minus busy: the host or
  launch gaps), the time per kernel category (matmul, attention, reduction, elementwise
  fusion, copy, other) and the kernels that take the most time.

`--variant` measures the step with one change (bench-only, the model is unchanged):
`cudnn_attention` swaps the attention's two einsums and softmax for
`jax.nn.dot_product_attention(implementation="cudnn")`.
"""

from __future__ import annotations

import argparse
import collections
import glob
import gzip
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

# HBM bandwidth in GB/s per device, by jax `device_kind` prefix (the vendors' figures).
HBM_GBPS = {
    "NVIDIA H100 PCIe": 2000.0,
    "NVIDIA H100": 3350.0,
    "NVIDIA H200": 4800.0,
    "NVIDIA GH200": 4000.0,
    "NVIDIA A100": 2039.0,
    "NVIDIA L4": 300.0,
    "TPU v4": 1200.0,
    "TPU v5 lite": 819.0,
    "TPU v5e": 819.0,
    "TPU v5p": 2765.0,
    "TPU v6": 1640.0,
}
CATEGORIES = (
    ("attention", re.compile(r"fmha|flash|cudnn|attention|softmax", re.I)),
    ("matmul", re.compile(r"gemm|cutlass|xmma|nvjet|cublas|gemv|dot|triton|custom-call", re.I)),
    ("copy", re.compile(r"memcpy|memset|copy|transpose", re.I)),
    ("reduction", re.compile(r"reduce|reduction", re.I)),
    ("elementwise", re.compile(r"fusion|loop_|input_|wrapped|convert|multiply|add", re.I)),
)
TOP_KERNELS = 15


def category(name: str) -> str:
    return next((label for label, pattern in CATEGORIES if pattern.search(name)), "other")


def bandwidth_of(device_kind: str) -> float | None:
    return next((v for k, v in HBM_GBPS.items() if device_kind.startswith(k)), None)


def cudnn_attention(x, num_heads, last_query_only=False, one_board=False):
    """model.networks.transformer._attention through jax.nn.dot_product_attention (training only).

    cuDNN's fused kernel refuses odd sequence lengths in training (the AV model's 79
    positions; the last block's one query), so queries, keys and values are padded to an
    even length: the padded keys are masked out by their length, the padded queries'
    outputs dropped. The result is the model's attention (a test holds the two together)."""
    import haiku as hk
    import jax
    import jax.numpy as jnp

    batch, length, width = x.shape
    head_dim = width // num_heads

    def project(name, inputs):
        y = hk.Linear(width, with_bias=False, name=name)(inputs)
        return y.reshape(batch, inputs.shape[1], num_heads, head_dim)

    def even(t):
        return jnp.pad(t, ((0, 0), (0, t.shape[1] % 2), (0, 0), (0, 0)))

    q = project("query", x[:, -1:] if last_query_only else x)
    k, v = project("key", x), project("value", x)
    # cuDNN's fused attention exists on GPUs only; elsewhere (the dry run) XLA's.
    implementation = "cudnn" if jax.default_backend() == "gpu" else None
    # cuDNN's kernel takes 16-bit (or fp8) inputs only: where the projections come out in
    # float32, it is given them in bfloat16, as a bf16 model would compute them.
    kernel_dtype = jnp.bfloat16 if implementation == "cudnn" else q.dtype
    q, k, v = (t.astype(kernel_dtype) for t in (q, k, v))
    mixed = jax.nn.dot_product_attention(
        even(q),
        even(k),
        even(v),
        key_value_seq_lengths=jnp.full((batch,), length, jnp.int32),
        implementation=implementation,
    )[:, : q.shape[1]].astype(x.dtype)
    return hk.Linear(width, with_bias=False, name="output")(mixed.reshape(batch, -1, width))


VARIANTS = {"cudnn_attention": ("model.networks.transformer", "_attention", cudnn_attention)}


def device_events(trace: dict) -> tuple[list[dict], str]:
    """The kernels of the trace's device streams (or, where there are none, as on a CPU, the
    XLA ops the host ran), and which of the two."""
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    processes = {
        e["pid"]: e["args"]["name"]
        for e in events
        if e.get("ph") == "M" and e.get("name") == "process_name"
    }
    threads = {
        (e["pid"], e.get("tid")): e["args"]["name"]
        for e in events
        if e.get("ph") == "M" and e.get("name") == "thread_name"
    }
    complete = [e for e in events if e.get("ph") == "X" and "dur" in e]
    on_device = [
        e
        for e in complete
        if processes.get(e["pid"], "").startswith("/device:")
        and threads.get((e["pid"], e.get("tid")), "").startswith("Stream")
    ]
    if on_device:
        return on_device, "device streams"
    host_ops = [
        e for e in complete if threads.get((e["pid"], e.get("tid")), "").startswith("tf_XLAEigen")
    ]
    return host_ops, "host XLA threads (no device streams in the trace)"


def busy_us(events: list[dict]) -> float:
    """The union of the events' intervals, in microseconds."""
    total, end = 0.0, float("-inf")
    for start, stop in sorted((e["ts"], e["ts"] + e["dur"]) for e in events):
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total


def summarise_trace(trace: dict, steps: int, wall_ms: float) -> dict:
    events, source = device_events(trace)
    per_step = 1e-3 / steps  # microseconds over all steps -> milliseconds per step
    by_name: dict[str, float] = collections.Counter()
    counts: dict[str, int] = collections.Counter()
    examples: dict[str, str] = {}
    for e in events:
        name = e["name"]
        by_name[name] += e["dur"]
        counts[name] += 1
        if name not in examples:
            args = e.get("args") or {}
            # The HLO op (and its text, where the trace has it) says what a kernel is for.
            examples[name] = " ".join(
                str(args[k])[:200] for k in ("hlo_op", "long_name", "hlo_module") if k in args
            )
    total = sum(by_name.values()) or 1.0
    categories: dict[str, float] = collections.Counter()
    for name, us in by_name.items():
        categories[category(name + " " + examples.get(name, ""))] += us
    busy = busy_us(events) * per_step
    return {
        "source": source,
        "busy_ms": round(busy, 3),
        "idle_ms": round(max(wall_ms - busy, 0.0), 3),
        "busy_share": round(busy / wall_ms, 4) if wall_ms else None,
        "kernels_per_step": round(len(events) / steps, 1),
        "categories_ms": {k: round(v * per_step, 3) for k, v in categories.most_common()},
        "categories_share": {k: round(v / total, 4) for k, v in categories.most_common()},
        "top": [
            {
                "name": name[:160],
                "category": category(name + " " + examples.get(name, "")),
                "ms": round(us * per_step, 3),
                "share": round(us / total, 4),
                "calls_per_step": round(counts[name] / steps, 1),
                "args": examples.get(name, ""),
            }
            for name, us in collections.Counter(by_name).most_common(TOP_KERNELS)
        ],
    }


def cost_of(compiled) -> dict:
    cost = compiled.cost_analysis()
    if isinstance(cost, list | tuple):  # older JAX: one dict per program
        cost = cost[0] if cost else {}
    return {"flops": float(cost.get("flops", 0.0)), "bytes": float(cost.get("bytes accessed", 0.0))}


def roofline(cost: dict, model_flops: float, device_kind: str, num_devices: int) -> dict:
    """The step's time at the device's peak compute and at its HBM bandwidth. XLA's count
    leaves out the FLOPs of library calls (cuBLAS products on a GPU), so the compute side is
    the larger of its count and the model's FLOPs; its bytes are a lower bound likewise."""
    from bench.train_speed import peak_tflops_of

    out = {"model_flops": model_flops, "xla_flops": cost["flops"], "xla_bytes": cost["bytes"]}
    peak, bandwidth = peak_tflops_of(device_kind), bandwidth_of(device_kind)
    if peak and bandwidth:
        flops = max(cost["flops"], model_flops)
        compute = flops / (peak * 1e12 * num_devices) * 1e3
        memory = cost["bytes"] / (bandwidth * 1e9 * num_devices) * 1e3
        out.update(
            peak_tflops=peak,
            hbm_gbps=bandwidth,
            compute_ms=round(compute, 3),
            memory_ms=round(memory, 3),
            bound="memory" if memory > compute else "compute",
            flops_per_byte=round(flops / max(cost["bytes"], 1.0), 1),
        )
    return out


def _keep_trace(out: str, name: str, trace_path: str, hlo: str) -> None:
    """The trace (unless too large to keep) and the compiled HLO, in `out`."""
    Path(out).mkdir(parents=True, exist_ok=True)
    if os.path.getsize(trace_path) < 20 * 2**20:
        Path(out, name + ".perfetto.json.gz").write_bytes(Path(trace_path).read_bytes())
    with gzip.open(Path(out, name + ".hlo.txt.gz"), "wt") as f:
        f.write(hlo)


def profile_train_step(
    size: str,
    batch_size: int,
    steps: int = 5,
    variant: str | None = None,
    out: str | None = None,
    dtype: str = "auto",
) -> dict:
    """Compiles the train step of `size` at `batch_size` (with `variant`), runs two untimed
    steps, then `steps` steps under the profiler."""
    import importlib

    import jax
    import numpy as np

    from bench.train_speed import write_bench_shards
    from model import config as config_lib
    from model.data.loader import Batches, load_boards
    from model.data.loader_settings import LoaderSettings
    from model.devices import resolve_dtype, train_flops_per_example
    from model.networks import transformer
    from model.training import step as train_step_lib

    patched = None
    if variant:
        module_name, attribute, replacement = VARIANTS[variant]
        module = importlib.import_module(module_name)
        patched = (module, attribute, getattr(module, attribute))
        setattr(module, attribute, replacement)
    # Cached traces of the unpatched model must not be reused.
    transformer._transformed.cache_clear()
    train_step_lib.jitted.cache_clear()
    try:
        config = config_lib.from_dict(
            {
                "model": {"size": size},
                "train": {"batch_size": batch_size, "learning_rate": 1e-4, "dtype": dtype},
                "data": {"train": ""},
            }
        )
        placement = train_step_lib.Placement.over_all_devices()
        state = train_step_lib.init_state(config, placement)
        step = train_step_lib.compile_train_step(config, placement)
        with tempfile.TemporaryDirectory() as data:
            write_bench_shards(data, max(64, batch_size // 16))
            settings = LoaderSettings("av", config.num_bins, batch_size, seed=0)
            loader = Batches(load_boards(data), settings)
            batches = [placement.global_batch(next(loader)) for _ in range(steps + 2)]
            loader.close()
        start = time.perf_counter()
        compiled = step.lower(state, batches[0]).compile()
        compile_s = time.perf_counter() - start
        # The compiled step itself runs: calling `step` would compile a second time.
        step = compiled
        for batch in batches[:2]:
            state, metrics = step(state, batch)
        jax.block_until_ready(metrics)
        with tempfile.TemporaryDirectory() as trace_dir:
            times = []
            with jax.profiler.trace(trace_dir, create_perfetto_trace=True):
                for batch in batches[2:]:
                    start = time.perf_counter()
                    state, metrics = step(state, batch)
                    jax.block_until_ready(metrics)
                    times.append(time.perf_counter() - start)
            trace_path = glob.glob(f"{trace_dir}/**/perfetto_trace.json.gz", recursive=True)[0]
            with gzip.open(trace_path) as f:
                trace = json.load(f)
            name = f"profile-{size}-{batch_size}" + (f"-{variant}" if variant else "")
            if out:
                _keep_trace(out, name, trace_path, compiled.as_text())
        step_ms = statistics.median(times) * 1e3
        device = jax.devices()[0]
        model_flops = train_flops_per_example(config) * batch_size
        result = {
            "size": size,
            "batch_size": batch_size,
            "variant": variant,
            "dtype": resolve_dtype(config.train.dtype),
            "device_kind": device.device_kind,
            "platform": device.platform,
            "steps": steps,
            "step_ms": round(step_ms, 3),
            "step_ms_all": [round(t * 1e3, 3) for t in times],
            "examples_per_s": round(batch_size / (step_ms / 1e3), 1),
            "compile_s": round(compile_s, 1),
            "loss": float(np.asarray(metrics["loss"])),
            "cost": roofline(
                cost_of(compiled), model_flops, device.device_kind, len(jax.devices())
            ),
            "trace": summarise_trace(trace, steps, step_ms),
        }
        if out:
            Path(out, name + ".json").write_text(json.dumps(result, indent=1) + "\n")
        return result
    finally:
        if patched:
            setattr(*patched)
            transformer._transformed.cache_clear()
            train_step_lib.jitted.cache_clear()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.profile_step", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--size", default="9M")
    parser.add_argument("--batch", type=int, default=2048)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--variant", choices=sorted(VARIANTS))
    parser.add_argument("--dtype", default="auto", choices=("auto", "float32", "bfloat16"))
    parser.add_argument("--out", help="folder for the JSON, the optimised HLO and the trace")
    args = parser.parse_args(argv)
    result = profile_train_step(
        args.size, args.batch, args.steps, args.variant, args.out, args.dtype
    )
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
