"""bench/profile_step.py's reading of a profiler trace: the device's busy time is the union of
its kernels' intervals, and only the device's stream threads count."""

from __future__ import annotations

import pytest

from bench.profile_step import busy_us, category, summarise_trace


def kernel(ts: float, dur: float, name: str = "loop_add_fusion", tid: int = 7) -> dict:
    return {"ph": "X", "pid": 2, "tid": tid, "ts": ts, "dur": dur, "name": name}


def trace(*events: dict) -> dict:
    names = [
        {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/host:CPU"}},
        {"ph": "M", "pid": 2, "name": "process_name", "args": {"name": "/device:GPU:0"}},
        {"ph": "M", "pid": 2, "tid": 7, "name": "thread_name", "args": {"name": "Stream #7"}},
        {"ph": "M", "pid": 2, "tid": 8, "name": "thread_name", "args": {"name": "XLA Ops"}},
    ]
    return {"traceEvents": names + list(events)}


def test_overlapping_kernels_are_counted_once():
    events = [kernel(0, 10), kernel(5, 10), kernel(30, 5), kernel(31, 1)]
    assert busy_us(events) == pytest.approx(20.0)


def test_only_device_streams_count_and_idle_is_the_rest_of_the_step():
    summary = summarise_trace(
        trace(
            kernel(0, 1000, "sm90_xmma_gemm_bf16"),
            kernel(1000, 500, "loop_multiply_fusion"),
            kernel(0, 4000, "fusion.3", tid=8),  # the derived "XLA Ops" line: not a kernel
            {"ph": "X", "pid": 1, "tid": 1, "ts": 0, "dur": 9000, "name": "PjitFunction"},
        ),
        steps=1,
        wall_ms=3.0,
    )
    assert summary["source"] == "device streams"
    assert summary["busy_ms"] == pytest.approx(1.5) and summary["idle_ms"] == pytest.approx(1.5)
    assert summary["kernels_per_step"] == 2
    assert summary["categories_ms"] == {"matmul": 1.0, "elementwise": 0.5}
    assert summary["top"][0]["name"] == "sm90_xmma_gemm_bf16"


@pytest.mark.parametrize(
    "name, expected",
    [
        ("nvjet_tst_128x64_64x8_1x1_v_bz_coopB_TNN", "matmul"),
        ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop", "attention"),
        ("input_reduce_fusion_3", "reduction"),
        ("loop_convert_fusion_12", "elementwise"),
        ("Memcpy HtoD", "copy"),
    ],
)
def test_kernels_are_sorted_into_categories(name, expected):
    assert category(name) == expected


def test_the_roofline_counts_the_model_flops_that_xla_leaves_to_libraries():
    from bench.profile_step import roofline

    # XLA counted 0.5 TFLOP (cuBLAS products not among them) of a step of 8.5 model TFLOP.
    cost = roofline({"flops": 0.5e12, "bytes": 110e9}, 8.5e12, "NVIDIA H200", 1)
    assert cost["compute_ms"] == pytest.approx(8.5e12 / 989e12 * 1e3, rel=1e-3)
    assert cost["memory_ms"] == pytest.approx(110e9 / 4800e9 * 1e3, rel=1e-3)
    assert cost["bound"] == "memory"
    assert "compute_ms" not in roofline({"flops": 1.0, "bytes": 1.0}, 1.0, "cpu", 1)


@pytest.mark.parametrize("length", [78, 79])
@pytest.mark.parametrize("last_query_only", [False, True])
def test_the_fused_attention_variant_computes_the_model_s_attention(length, last_query_only):
    """The variant pads to an even length for cuDNN; on the CPU it runs XLA's kernel, and
    must give the model's attention (float32, 1e-5), or its profile measures another model."""
    import haiku as hk
    import jax
    import numpy as np

    from bench.profile_step import cudnn_attention
    from model.networks.transformer import _attention

    def run(attention):
        return hk.without_apply_rng(hk.transform(lambda x: attention(x, 4, last_query_only)))

    x = jax.random.normal(jax.random.PRNGKey(0), (3, length, 32))
    params = run(_attention).init(jax.random.PRNGKey(1), x)
    expected = run(_attention).apply(params, x)
    got = run(cudnn_attention).apply(params, x)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=1e-5)
