"""Trainer throughput: the AV loader on one core, and the train step of the small and 9M models.

Run as `python -m bench.train_speed` (`make bench`). Prints one JSON object:

- `loader`: AV examples/s of `model.data.loader.Batches` on one core (target >= 100,000, so the
  loader never starves an accelerator), against a baseline measured in the same run: the
  per-example path (tokenize the FEN, look up the move, bin the value, one example at a time).
- `loader.streaming`: the same for `model.data.stream.StreamBatches` on the same shards
  (`examples_per_s`, one core, with the decoding of every block), and the peak resident
  memory of a process that loads the in-memory loader (`in_memory_peak_rss_mb`) or the
  streaming one under `memory_budget_gb` (`peak_rss_mb`), each then cutting one epoch of AV
  batches from --stream-copies copies of the shards; `rss_ratio` = in-memory / streaming.
  Peaks are VmHWM (ru_maxrss would report the parent's peak where the parent was bigger);
  `baseline_rss_mb` is a process's resident memory after its imports and one block decoded,
  in both peaks; `growth_mb` and `in_memory_growth_mb` are the peaks above it.
- `train_step`: examples/s of the jitted train step at batch 256 for each model size, on all
  local devices (the median step, after one untimed step past the compiling one), with
  compile time; `mfu` (model FLOPs utilisation) when an accelerator is
  present and its peak is known (or given with --peak-tflops). Where ../shared/reference is
  there, the reference's jitted `update_parameters` runs on the same initial parameters and
  batches, step for step in turns with ours: `reference_step_s` and `vs_reference` (ours /
  theirs in steps per second); elsewhere `reference` says why it was not measured.

The boards are real positions from seeded random games with all their legal moves; their
values are random numbers, which the loader's and the step's speed do not depend on.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

import chess
import numpy as np

from bench.tokenizer_speed import random_game_fens
from core import bins
from core.actions import legal_actions, move_to_index
from core.schema import board_files, make_board_row, shard_name, write_boards
from core.tokenizer import tokenize
from model.data.batch import Batch
from model.data.loader import Batches, load_boards
from model.data.loader_settings import LoaderSettings
from model.data.stream import StreamBatches
from model.data.stream_plan import estimate_in_memory_bytes

BATCH = 256
# Untimed steps after the compiling one, for each side: the first runs after a compilation
# are slower (buffers being allocated) and would be charged to whichever ran first.
WARM_STEPS = 1
# Dense bf16 peak TFLOP/s per device, by jax `device_kind` prefix.
PEAK_TFLOPS = {
    "TPU v4": 275.0,
    "TPU v5 lite": 197.0,
    "TPU v5e": 197.0,
    "TPU v5p": 459.0,
    "TPU v6": 918.0,
    "NVIDIA A100": 312.0,
    "NVIDIA H100": 989.0,
    "NVIDIA H200": 989.0,
    "NVIDIA GH200": 989.0,
    "NVIDIA L4": 121.0,
}


def write_bench_shards(directory: str, num_boards: int, num_shards: int = 4) -> None:
    rng = random.Random(0)
    rows = []
    for fen in dict.fromkeys(random_game_fens(num_boards, seed=1)):
        moves = legal_actions(chess.Board(fen))
        probs = [rng.random() for _ in moves]
        best = int(np.argmax(probs))
        rows.append(
            make_board_row(
                fen,
                moves=moves,
                win_probs=probs,
                best_move=moves[best],
                state_win_prob=probs[best],
                engine="bench",
                limit="none",
            )
        )
    per_shard = -(-len(rows) // num_shards)
    for i in range(num_shards):
        chunk = rows[i * per_shard : (i + 1) * per_shard]
        write_boards(chunk, os.path.join(directory, shard_name("boards", i, num_shards)))


def bench_loader(directory: str, batches: int) -> dict:
    """Both loaders on one core (the caller pins the process)."""
    start = time.perf_counter()
    data = load_boards(directory)
    load_seconds = time.perf_counter() - start
    loader = Batches(data, LoaderSettings("av", bins.DEFAULT_NUM_BINS, BATCH, seed=0, prefetch=0))
    next(loader)  # the first epoch's permutation
    start = time.perf_counter()
    for _ in range(batches):
        next(loader)
    rate = batches * BATCH / (time.perf_counter() - start)

    # Baseline: what a loader without pre-tokenized, flattened arrays does per example.
    order = np.random.default_rng(0).permutation(data.num_pairs)[: 20 * BATCH]
    moves = np.concatenate([data.legal_moves(i) for i in range(data.num_boards)])
    start = time.perf_counter()
    for p in order:
        board = data.pair_board[p]
        tokenize(data.fens[board])
        move_to_index(str(moves[p]))
        bins.to_bins(data.pair_win_probs[p])
    naive = len(order) / (time.perf_counter() - start)
    return {
        "boards": data.num_boards,
        "action_values": data.num_pairs,
        "load_boards_per_s": round(data.num_boards / load_seconds),
        "batch_size": BATCH,
        "av_examples_per_s": round(rate),
        "per_example_baseline_per_s": round(naive),
        "vs_baseline": round(rate / naive, 1),
        "target_examples_per_s": 100_000,
        "meets_target": rate >= 100_000,
    }


def bench_stream(directory: str, memory_budget_gb: float) -> float:
    """AV examples/s of StreamBatches over one epoch on one core (the caller pins the
    process), every block's decoding included (prefetch 0: no second core to decode on)."""
    loader = StreamBatches(
        board_files(directory),
        LoaderSettings("av", bins.DEFAULT_NUM_BINS, BATCH, seed=0, prefetch=0),
        memory_budget_gb=memory_budget_gb,
    )
    items = loader.items_per_epoch  # counted before the clock: what a resume costs, once
    start = time.perf_counter()
    while loader.position < items:
        next(loader)
    return loader.position / (time.perf_counter() - start)


# Run in a fresh process per loader: load (or open) the shards, cut one epoch of AV batches,
# print the peak and the baseline resident memory.
_PEAK_SCRIPT = """
import json, sys
from core import bins
from core.schema import board_files
from model.data.loader import Batches, load_boards
from model.data.loader_settings import LoaderSettings
from model.data.stream import StreamBatches
from model.data.stream_plan import estimate_in_memory_bytes


def status(field):  # bytes
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":")) * 1024


kind, directory, budget, batch = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
# One block decoded first, so that the libraries' first-use costs (pyarrow imports pandas)
# are in the baseline of both loaders.
warm = StreamBatches(board_files(directory)[:1],
                     LoaderSettings("av", bins.DEFAULT_NUM_BINS, 64, seed=0, prefetch=0),
                     shuffle_buffer=1, memory_budget_gb=budget)
next(warm)
del warm
baseline = status("VmRSS")
if kind == "in_memory":
    settings = LoaderSettings("av", bins.DEFAULT_NUM_BINS, batch, seed=0)
    loader = Batches(load_boards(directory), settings)
    items = len(loader.view)
else:
    loader = StreamBatches(board_files(directory),
                           LoaderSettings("av", bins.DEFAULT_NUM_BINS, batch, seed=0),
                           memory_budget_gb=budget)
    items = loader.items_per_epoch
while loader.position < items:
    next(loader)
loader.close()
print(json.dumps({"peak": status("VmHWM"), "baseline": baseline}))
"""


def peak_rss(kind: str, directory: str, memory_budget_gb: float) -> dict:
    """Peak and baseline resident bytes of a fresh process running one loader (above)."""
    done = subprocess.run(
        [sys.executable, "-c", _PEAK_SCRIPT, kind, directory, str(memory_budget_gb), str(BATCH)],
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


def copy_shards(directory: str, copies: int, into: str) -> None:
    """`copies` copies of the shards at `directory`, as one split at `into`."""
    files = board_files(directory)
    total = copies * len(files)
    for i in range(total):
        shutil.copy(files[i % len(files)], os.path.join(into, shard_name("boards", i, total)))


def bench_stream_memory(directory: str, copies: int, memory_budget_gb: float) -> dict:
    """Peak resident memory of the in-memory and the streaming loader on `copies` copies of
    the shards at `directory`."""
    with tempfile.TemporaryDirectory() as copied:
        copy_shards(directory, copies, copied)
        in_memory = peak_rss("in_memory", copied, memory_budget_gb)
        streaming = peak_rss("streaming", copied, memory_budget_gb)
        estimate = estimate_in_memory_bytes(board_files(copied))
    growth = {
        name: run["peak"] - run["baseline"]
        for name, run in (("in_memory", in_memory), ("streaming", streaming))
    }
    return {
        "peak_rss_mb": round(streaming["peak"] / 1e6, 1),
        "in_memory_peak_rss_mb": round(in_memory["peak"] / 1e6, 1),
        "rss_ratio": round(in_memory["peak"] / streaming["peak"], 2),
        "baseline_rss_mb": round(streaming["baseline"] / 1e6, 1),
        "growth_mb": round(growth["streaming"] / 1e6, 1),
        "in_memory_growth_mb": round(growth["in_memory"] / 1e6, 1),
        "copies": copies,
        "load_boards_estimate_mb": round(estimate / 1e6, 1),
    }


def reference_sequences(batch: Batch) -> tuple[np.ndarray, np.ndarray]:
    """The reference trainer's (sequences, loss mask) of an AV batch of this project's."""
    sequences = np.concatenate(
        [batch.states, batch.actions[:, None], batch.targets[:, None]], axis=1
    ).astype(np.uint32)
    mask = np.ones(sequences.shape, bool)
    mask[:, -1] = False  # their loaders train on the last token (the value bin) only
    return sequences, mask


def reference_trainer(ref, config):
    """(their initial parameters, step(params, ema, opt_state, batch)) of the reference's
    update_parameters with their optimiser (Adam after clipping at norm 1)."""
    import jax
    import optax

    from bench import oracle

    m = config.model
    their_config = oracle.transformer_config(
        ref, m.num_layers, m.embedding_dim, config.output_size, num_heads=m.num_heads
    )
    predictor = ref.transformer.build_transformer_predictor(their_config)
    optimizer = optax.chain(
        optax.clip_by_global_norm(config.train.grad_clip_norm),
        optax.adam(config.train.learning_rate),
    )
    grad_fn = jax.value_and_grad(ref.training_utils.make_loss_fn(predictor))

    def step(state, batch):
        params, ema, opt_state, loss, _ = ref.training_utils.update_parameters(
            *state, *reference_sequences(batch), grad_fn=grad_fn, optimizer=optimizer
        )
        return (params, ema, opt_state), loss

    params = oracle.init_params(predictor)
    return params, optimizer.init(params), step


def peak_tflops_of(device_kind: str) -> float | None:
    """The dense bf16 peak of one device of this kind (PEAK_TFLOPS), None when unknown."""
    return next((v for k, v in PEAK_TFLOPS.items() if device_kind.startswith(k)), None)


def _time_in_turns(steppers: dict[str, list], batches: list) -> tuple[dict, dict, dict]:
    """Runs each [step, state] of `steppers` over `batches` in turns, the first batch
    compiling: (compile seconds, the times of the steps after WARM_STEPS, the last losses) by
    name. The states in `steppers` end updated."""
    import jax

    compile_seconds, times, losses = {}, {name: [] for name in steppers}, {}
    for name, entry in steppers.items():
        start = time.perf_counter()
        entry[1], loss = entry[0](entry[1], batches[0])
        jax.block_until_ready(loss)
        compile_seconds[name] = time.perf_counter() - start
    for i, batch in enumerate(batches[1:]):
        for name, entry in steppers.items():
            start = time.perf_counter()
            entry[1], loss = entry[0](entry[1], batch)
            losses[name] = float(jax.block_until_ready(loss))
            if i >= WARM_STEPS:
                times[name].append(time.perf_counter() - start)
    return compile_seconds, times, losses


def _from_reference(ref, config, placement) -> tuple:
    """Our train state and the reference's stepper, both from the reference's initial
    parameters (ours and their EMA copy on the devices as separate buffers)."""
    import jax

    from model.import_reference import to_project
    from model.training.step import TrainState, make_optimizer

    their_params, their_opt_state, their_step = reference_trainer(ref, config)

    def ours():
        return jax.device_put(
            to_project(their_params, config.model.num_layers), placement.replicated
        )

    params = ours()
    state = TrainState(params, ours(), jax.jit(make_optimizer(config.train).init)(params))
    return state, [their_step, (their_params, their_params, their_opt_state)]


def bench_train_step(
    directory: str,
    size: str,
    steps: int,
    peak_tflops: float | None,
    ref,
    reason: str | None,
    batch_size: int = BATCH,
    dtype: str = "auto",
) -> dict:
    """Our jitted step (computing in `dtype`, model/devices.py), and the reference's (float32,
    as published) on the same initial parameters and batches, in turns (a machine shared with
    other jobs slows both alike)."""
    import jax

    from model import config as config_lib
    from model.devices import resolve_dtype, train_flops_per_example
    from model.networks.transformer import count_params
    from model.training.step import Placement, compile_train_step, init_state

    config = config_lib.from_dict(
        {
            "model": {"size": size},
            "train": {"batch_size": batch_size, "learning_rate": 1e-4, "dtype": dtype},
            "data": {"train": directory},
        }
    )
    placement = Placement.over_all_devices()
    steppers = {}
    if ref is not None:
        state, steppers["reference"] = _from_reference(ref, config, placement)
    else:
        state = init_state(config, placement)
    step = compile_train_step(config, placement)

    def our_step(state, batch):
        state, metrics = step(state, placement.global_batch(batch))
        return state, metrics["loss"]

    steppers = {"ours": [our_step, state]} | steppers
    settings = LoaderSettings("av", config.num_bins, batch_size, seed=0, prefetch=2)
    loader = Batches(load_boards(directory), settings)
    batches = [next(loader) for _ in range(steps + 1 + WARM_STEPS)]
    loader.close()
    compile_seconds, times, losses = _time_in_turns(steppers, batches)
    state = steppers["ours"][1]
    # The median step: one slow step (the allocator, a page fault, another process) must not
    # decide a ratio of a few steps.
    seconds = {name: float(np.median(t)) * steps for name, t in times.items()}
    per_step = seconds["ours"] / steps
    computed = resolve_dtype(config.train.dtype)
    achieved = train_flops_per_example(config) * batch_size / per_step
    result = {
        "params": count_params(state.params),
        "batch_size": batch_size,
        "dtype": computed,
        "steps": steps,
        "step_s": round(per_step, 4),
        "step_ms": round(per_step * 1e3, 2),
        "examples_per_s": round(batch_size / per_step, 1),
        "model_tflops_per_s": round(achieved / 1e12, 2),
        "compile_s": round(compile_seconds["ours"], 1),
    }
    if ref is not None:
        result["reference_step_s"] = round(seconds["reference"] / steps, 4)
        result["reference_step_ms"] = round(seconds["reference"] / steps * 1e3, 2)
        result["reference_dtype"] = "float32"
        result["vs_reference"] = round(seconds["reference"] / seconds["ours"], 2)
        # Same parameters, same batches: the last losses agree (the exactness tests check
        # parameters to 1e-6; this only guards the benchmark's own setup). bfloat16 compute
        # moves the loss by up to ~1%.
        tolerance = 1e-4 if computed == "float32" else 2e-2
        gap = abs(losses["ours"] - losses["reference"])
        result["loss_gap"] = round(gap, 6)
        result["same_loss"] = gap <= tolerance * losses["ours"]
    else:
        result["reference"] = f"not measured: {reason}"
    if jax.default_backend() != "cpu":
        kind = jax.devices()[0].device_kind
        peak = peak_tflops or peak_tflops_of(kind)
        result["device_kind"] = kind
        if peak:
            result["peak_tflops"] = peak
            result["mfu"] = round(achieved / (peak * 1e12 * len(jax.devices())), 4)
        else:
            result["mfu"] = None  # unknown peak: pass --peak-tflops
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--boards", type=int, default=20_000, help="boards in the bench data")
    parser.add_argument("--loader-batches", type=int, default=400)
    parser.add_argument("--stream-copies", type=int, default=8, help="shard copies, memory")
    parser.add_argument("--stream-budget-gb", type=float, default=0.1)
    parser.add_argument("--sizes", default="small,9M", help="model sizes; '' for none")
    parser.add_argument("--steps", type=int, default=5, help="timed steps per size")
    parser.add_argument("--steps-9m", type=int, default=2, help="timed steps for 9M and up")
    parser.add_argument("--peak-tflops", type=float, help="accelerator peak, for the MFU")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        write_bench_shards(directory, args.boards)
        # One core for the loader; JAX is imported only afterwards, with every core back.
        cores = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {min(cores)})
        loader = bench_loader(directory, args.loader_batches)
        stream_rate = bench_stream(directory, args.stream_budget_gb)
        os.sched_setaffinity(0, cores)
        loader["streaming"] = {
            "examples_per_s": round(stream_rate),
            **bench_stream_memory(directory, args.stream_copies, args.stream_budget_gb),
            "memory_budget_gb": args.stream_budget_gb,
        }
        from bench import oracle  # imports JAX: only now, with every core back

        try:
            ref, reason = oracle.load(), None
        except oracle.OracleUnavailable as e:
            ref, reason = None, str(e)
        steps = {}
        for size in filter(None, args.sizes.split(",")):
            count = args.steps if size == "small" else args.steps_9m
            steps[size] = bench_train_step(directory, size, count, args.peak_tflops, ref, reason)
    import jax

    print(
        json.dumps(
            {
                "bench": "train",
                "cores": len(os.sched_getaffinity(0)),
                "backend": jax.default_backend(),
                "devices": len(jax.devices()),
                "reference": f"searchless_chess {ref.commit}" if ref else f"absent: {reason}",
                "loader": loader,
                "train_step": steps,
            }
        )
    )


if __name__ == "__main__":
    main()
