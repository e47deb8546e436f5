"""Win probability <-> K value bins, the targets of the action- and state-value models.

Edges are linspace(0, 1, K+1). The bin of p is searchsorted(interior_edges, p, side='left'),
so a value exactly on an edge goes to the lower bin, p=0 to bin 0 and p=1 to bin K-1.
Bin centres are (i + 0.5) / K; the value a prediction stands for is the expectation of the
centres under its distribution.
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtr

DEFAULT_NUM_BINS = 128


def _check(num_bins: int) -> None:
    if not isinstance(num_bins, int | np.integer) or num_bins < 2:
        raise ValueError(f"num_bins must be an integer >= 2, got {num_bins!r}")


def bin_edges(num_bins: int = DEFAULT_NUM_BINS) -> np.ndarray:
    _check(num_bins)
    return np.linspace(0.0, 1.0, num_bins + 1)


def bin_centers(num_bins: int = DEFAULT_NUM_BINS) -> np.ndarray:
    _check(num_bins)
    return (np.arange(num_bins) + 0.5) / num_bins


def to_bins(win_prob: np.ndarray | float, num_bins: int = DEFAULT_NUM_BINS) -> np.ndarray:
    """Bin index of each win probability in [0, 1] (int32, same shape)."""
    p = np.asarray(win_prob, dtype=np.float64)
    if np.isnan(p).any() or (p < 0).any() or (p > 1).any():
        raise ValueError("win probabilities must lie in [0, 1]")
    interior = bin_edges(num_bins)[1:-1]
    return np.searchsorted(interior, p, side="left").astype(np.int32)


def expected_value(log_probs, num_bins: int | None = None):
    """sum(softmax(logits) * centres) over the last axis, for log-probabilities or logits.

    Works on numpy and JAX arrays alike (it only uses exp, sum and broadcasting); the
    normalisation makes it correct for unnormalised logits too.
    """
    k = log_probs.shape[-1] if num_bins is None else num_bins
    centers = bin_centers(k).astype(np.float32)
    shifted = log_probs - log_probs.max(axis=-1, keepdims=True)
    weights = np.exp(shifted) if isinstance(log_probs, np.ndarray) else _jax_exp(shifted)
    return (weights * centers).sum(axis=-1) / weights.sum(axis=-1)


def _jax_exp(x):
    import jax.numpy as jnp

    return jnp.exp(x)


def hl_gauss_targets(
    win_prob: np.ndarray, num_bins: int = DEFAULT_NUM_BINS, sigma_ratio: float = 0.75
) -> np.ndarray:
    """HL-Gauss soft targets (Imani & White 2018; Farebrother et al. 2024): the mass a
    Normal(p, sigma) puts in each bin, renormalised to [0, 1]; sigma = sigma_ratio * bin width.

    Returns float32 of shape win_prob.shape + (num_bins,), each row summing to 1.
    """
    p = np.asarray(win_prob, dtype=np.float64)[..., None]
    edges = bin_edges(num_bins)
    sigma = sigma_ratio / num_bins
    cdf = ndtr((edges - p) / sigma)
    mass = np.diff(cdf, axis=-1)
    return (mass / mass.sum(axis=-1, keepdims=True)).astype(np.float32)
