"""The paper's own code (../shared/reference) as an oracle for tests and benchmarks.

Nothing here is used by the product: `tests/reference/` compares this project's network,
loss, update and agents with it, `bench/inference.py` and `bench/train_speed.py` time it on the
same parameters. Where the reference or one of its packages is absent, `load()` raises
OracleUnavailable with the reason (tests skip with it, benchmarks print it).

    ref = load()
    config = transformer_config(ref, num_layers=2, embedding_dim=32, output_size=128)
    predictor = ref.transformer.build_transformer_predictor(config)
    params = init_params(predictor)
    save_released(directory, step, params, params_ema)   # the released checkpoint layout
"""

from __future__ import annotations

import os
import pathlib
import sys
import types

import jax
import numpy as np
import orbax.checkpoint as ocp

from core.actions import NUM_ACTIONS
from core.tokenizer import SEQUENCE_LENGTH

# The repository's parent holds shared/ beside the worktrees; SEARCHLESS_REFERENCE overrides.
DEFAULT_DIR = pathlib.Path(__file__).resolve().parents[2] / "shared" / "reference"
RELEASED_NUM_HEADS = 8


class OracleUnavailable(RuntimeError):
    """The reference code cannot be imported here; the message says why."""


def reference_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("SEARCHLESS_REFERENCE", DEFAULT_DIR))


def load() -> types.SimpleNamespace:
    """Their modules (reference.py's namespace), or OracleUnavailable."""
    directory = reference_dir()
    if not (directory / "reference.py").is_file():
        raise OracleUnavailable(f"{directory} is absent: the reference checks run where it exists")
    if str(directory) not in sys.path:
        sys.path.insert(0, str(directory))
    placeholders = _stand_in_for_data_loaders()
    try:
        import reference

        ref = reference.load()
    except ImportError as e:
        raise OracleUnavailable(f"the reference code needs a missing package: {e}") from None
    ref.placeholders = placeholders
    return ref


# Their constants.py and training_utils.py import Beam's coders and Grain for their data
# loaders only (bag coders, the data iterator's checkpoint handler), which nothing here calls.
# Where those packages are absent (the device image has neither), inert modules stand in, so
# that the network, the loss and update_parameters, which need neither, still load.
_DATA_LOADER_MODULES = {"apache_beam": ("coders",), "grain": ("python",)}


class _Inert(types.ModuleType):
    """A module whose every attribute is a callable that returns another inert object."""

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Inert(f"{self.__name__}.{name}")

    def __call__(self, *args, **kwargs):
        return _Inert(f"{self.__name__}()")


def _stand_in_for_data_loaders() -> list[str]:
    """Installs an inert module for each data-loader package that cannot be imported; returns
    their names (empty where both are installed, as after `make setup`)."""
    import importlib.util

    missing = []
    for name, submodules in _DATA_LOADER_MODULES.items():
        if name in sys.modules or importlib.util.find_spec(name) is not None:
            continue
        sys.modules[name] = module = _Inert(name)
        for sub in submodules:
            sys.modules[f"{name}.{sub}"] = child = _Inert(f"{name}.{sub}")
            setattr(module, sub, child)
        missing.append(name)
    return missing


def transformer_config(
    ref,
    num_layers: int,
    embedding_dim: int,
    output_size: int,
    num_heads: int = RELEASED_NUM_HEADS,
):
    """Their TransformerConfig with the released models' settings (their
    engines/constants.py) at the given size."""
    return ref.transformer.TransformerConfig(
        vocab_size=NUM_ACTIONS,
        output_size=output_size,
        pos_encodings=ref.transformer.PositionalEncodings.LEARNED,
        max_sequence_length=SEQUENCE_LENGTH + 2,
        num_heads=num_heads,
        num_layers=num_layers,
        embedding_dim=embedding_dim,
        apply_post_ln=True,
        apply_qk_layernorm=False,
        use_causal_mask=False,
    )


def init_params(predictor, seed: int = 1):
    """Their parameter initialisation, as their engines and trainer call it (jitted: eager
    Haiku init compiles every op on its own)."""
    init = jax.jit(lambda rng, targets: predictor.initial_params(rng=rng, targets=targets))
    return jax.device_get(init(jax.random.PRNGKey(seed), np.ones((1, 1), dtype=np.uint32)))


def perturbed(params, scale: float, seed: int):
    """params plus Gaussian noise on every leaf, so that no array keeps an initial value
    (layer norms start at exactly 1 and 0, which would hide a swapped mapping)."""
    rng = np.random.default_rng(seed)
    return jax.tree_util.tree_map(
        lambda a: np.asarray(a + scale * rng.standard_normal(a.shape), np.float32), params
    )


def save_released(directory: str, step: int, params, params_ema) -> None:
    """`directory/<step>/params` and `params_ema`: orbax PyTree checkpoints, the layout their
    `training_utils.load_parameters` reads and the released downloads have."""
    for name, tree in (("params", params), ("params_ema", params_ema)):
        checkpointer = ocp.Checkpointer(ocp.PyTreeCheckpointHandler())
        checkpointer.save(os.path.join(directory, str(step), name), args=ocp.args.PyTreeSave(tree))
        checkpointer.close()


_JITTED: dict[int, tuple[object, object]] = {}


def predict_fn(predictor, params, batch_size: int = 64):
    """What their `neural_engines.wrap_predict_fn` returns (sequences -> log-probs, padded to
    whole batches of `batch_size`), but with one jitted predict per predictor, shared by
    every parameter set: theirs jits anew on each call, so each one recompiles."""
    entry = _JITTED.get(id(predictor))
    if entry is None or entry[0] is not predictor:
        entry = (predictor, jax.jit(predictor.predict))
        _JITTED[id(predictor)] = entry
    jitted = entry[1]

    def predict(sequences: np.ndarray) -> np.ndarray:
        rows = len(sequences)
        padded = np.pad(sequences, ((0, -rows % batch_size), (0, 0)))
        outputs = [
            np.asarray(jitted(params=params, targets=padded[i : i + batch_size], rng=None))
            for i in range(0, len(padded), batch_size)
        ]
        return np.concatenate(outputs)[:rows]

    return predict


def bucket_values(ref, num_buckets: int) -> np.ndarray:
    return ref.utils.get_uniform_buckets_edges_values(num_buckets)[1]
