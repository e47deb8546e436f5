import jax.numpy as jnp
import numpy as np
import pytest

from core.bins import bin_centers, bin_edges, expected_value, hl_gauss_targets, to_bins


@pytest.mark.parametrize("k", [2, 32, 128])
def test_edges_and_centres(k):
    edges = bin_edges(k)
    assert edges.shape == (k + 1,) and edges[0] == 0 and edges[-1] == 1
    np.testing.assert_allclose(bin_centers(k), (edges[:-1] + edges[1:]) / 2)


def test_extremes():
    assert to_bins(0.0).item() == 0
    assert to_bins(1.0).item() == 127
    assert to_bins([0.0, 1.0], 32).tolist() == [0, 31]


def test_a_value_on_an_edge_goes_to_the_lower_bin():
    k = 128
    edges = bin_edges(k)
    for i in range(1, k):
        assert to_bins(edges[i], k).item() == i - 1
        assert to_bins(np.nextafter(edges[i], 2.0), k).item() == i


def test_simple_values():
    assert to_bins([0.1, 0.25, 0.26, 0.5, 0.75, 0.99], 4).tolist() == [0, 0, 1, 1, 2, 3]


def test_centres_map_to_their_own_bin():
    for k in (2, 32, 128):
        assert to_bins(bin_centers(k), k).tolist() == list(range(k))


@pytest.mark.parametrize("bad", [-0.01, 1.01, float("nan")])
def test_out_of_range_is_an_error(bad):
    with pytest.raises(ValueError):
        to_bins([0.5, bad])


@pytest.mark.parametrize("k", [1, 0, -3, 2.5])
def test_bad_bin_counts(k):
    with pytest.raises(ValueError, match="num_bins"):
        bin_edges(k)


def test_expected_value_numpy_and_jax():
    k = 8
    one_hot = np.full((2, k), -1e9, dtype=np.float32)
    one_hot[0, 3] = 0.0
    one_hot[1, 7] = 0.0
    np.testing.assert_allclose(expected_value(one_hot), [3.5 / 8, 7.5 / 8], rtol=1e-6)
    uniform = np.log(np.full((k,), 1 / k, dtype=np.float32))
    assert expected_value(uniform) == pytest.approx(0.5)
    logits = np.random.default_rng(0).normal(size=(5, k)).astype(np.float32)
    np.testing.assert_allclose(
        np.asarray(expected_value(jnp.asarray(logits))), expected_value(logits), rtol=1e-5
    )


def test_hl_gauss_targets_are_distributions_centred_on_the_value():
    k = 32
    targets = hl_gauss_targets(np.array([0.0, 0.3, 0.5, 1.0]), k)
    assert targets.shape == (4, k)
    np.testing.assert_allclose(targets.sum(-1), 1.0, rtol=1e-6)
    assert targets.argmax(-1).tolist() == to_bins([0.0, 0.3, 0.5, 1.0], k).tolist()
    np.testing.assert_allclose(expected_value(np.log(targets[2:3] + 1e-30)), [0.5], atol=1e-6)
