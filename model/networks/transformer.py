"""The Haiku transformer of docs/design.md: a board (and, for action values, a move) -> log-probs.

Input sequence: a start token, the 77 board tokens and, for the AV target, the move's action
index (79 positions); SV and BC read the first 78. Tokens and actions share one embedding
table of 1968 rows (board tokens are ids 0..30), scaled by sqrt(d), plus a learned positional
embedding of 79 rows. Then L blocks of pre-LayerNorm non-causal multi-head attention and
pre-LayerNorm SwiGLU MLP (hidden 4d), all projections without biases; a final LayerNorm; a
linear head with bias (zero-initialised) read at the last position; log-softmax. With 8
layers, d=256 and 128 bins this is 8,954,240 parameters, the paper's 9M model.
"""

from __future__ import annotations

import functools

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np

from model.config import EMBEDDING_VOCAB_SIZE, MAX_SEQUENCE_LENGTH, Config, ModelConfig

START_TOKEN = 0


def _layer_norm(x: jax.Array, name: str) -> jax.Array:
    return hk.LayerNorm(axis=-1, create_scale=True, create_offset=True, name=name)(x)


def _attention(
    x: jax.Array, num_heads: int, last_query_only: bool = False, one_board: bool = False
) -> jax.Array:
    """Multi-head attention of every position over all; with `last_query_only`, only the
    last position's output (B, 1, width), which is all the last block must produce. With
    `one_board` every row's positions but the last are taken to be row 0's (one board's
    moves): they are projected once, not once per row."""
    batch, _, width = x.shape
    head_dim = width // num_heads

    def project(name: str, inputs: jax.Array) -> jax.Array:
        linear = hk.Linear(width, with_bias=False, name=name)
        if one_board:
            shape = (batch, inputs.shape[1] - 1, width)
            shared = jnp.broadcast_to(linear(inputs[:1, :-1]), shape)
            y = jnp.concatenate([shared, linear(inputs[:, -1:])], axis=1)
        else:
            y = linear(inputs)
        return y.reshape(batch, inputs.shape[1], num_heads, head_dim)

    q = project("query", x[:, -1:] if last_query_only else x)
    k, v = project("key", x), project("value", x)
    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(head_dim).astype(x.dtype)
    # Softmax in float32 even under bf16 compute: it is the numerically fragile step.
    weights = jax.nn.softmax(scores.astype(jnp.float32), axis=-1).astype(x.dtype)
    mixed = jnp.einsum("bhqk,bkhd->bqhd", weights, v).reshape(batch, q.shape[1], width)
    return hk.Linear(width, with_bias=False, name="output")(mixed)


def _swiglu(x: jax.Array, hidden: int) -> jax.Array:
    gate = hk.Linear(hidden, with_bias=False, name="gate")(x)
    up = hk.Linear(hidden, with_bias=False, name="up")(x)
    return hk.Linear(x.shape[-1], with_bias=False, name="down")(jax.nn.silu(gate) * up)


@jax.custom_vjp
def _lookup_by_matmul(table: jax.Array, ids: jax.Array) -> jax.Array:
    return jnp.take(table, ids, axis=0)


def _lookup_forward(table, ids):
    return jnp.take(table, ids, axis=0), (ids, table.shape[0])


def _lookup_backward(saved, grad):
    ids, vocab = saved
    one_hot = jax.nn.one_hot(ids.reshape(-1), vocab, dtype=grad.dtype)
    flat = grad.reshape(-1, grad.shape[-1])
    table_grad = jnp.einsum("nv,nd->vd", one_hot, flat, preferred_element_type=jnp.float32)
    return table_grad.astype(grad.dtype), None


_lookup_by_matmul.defvjp(_lookup_forward, _lookup_backward)


def lookup(table: jax.Array, ids: jax.Array) -> jax.Array:
    """table[ids]. A float32 table's gradient is the usual scatter-add; a bfloat16 table's is
    a one-hot matrix product accumulated in float32. Every board token is one of 31 ids, so the
    scatter-add's updates pile onto a few rows: on a GPU its bfloat16 atomics took ~70% of the
    9M's train step; the product is exact in its products, ~0.3 ms, and its sums are float32."""
    if table.dtype == jnp.bfloat16:
        return _lookup_by_matmul(table, ids)
    return jnp.take(table, ids, axis=0)


def sequences(states: jax.Array, actions: jax.Array | None) -> jax.Array:
    """[start, 77 board tokens(, action)] as int32, shape (B, 78) or (B, 79)."""
    states = states.astype(jnp.int32)
    parts = [jnp.full((states.shape[0], 1), START_TOKEN, jnp.int32), states]
    if actions is not None:
        parts.append(actions.astype(jnp.int32)[:, None])
    return jnp.concatenate(parts, axis=1)


def _forward(
    states: jax.Array,
    actions: jax.Array | None,
    model: ModelConfig,
    output_size: int,
    one_board: bool = False,
) -> jax.Array:
    if one_board and actions is None:
        raise ValueError("one_board needs a move per row (the AV target)")
    tokens = sequences(states, actions)
    width = model.embedding_dim
    embed = hk.Embed(
        vocab_size=EMBEDDING_VOCAB_SIZE,
        embed_dim=width,
        w_init=hk.initializers.TruncatedNormal(stddev=model.embedding_init_scale),
        name="embed",
    )
    positions = hk.get_parameter(
        "positional_embeddings",
        (MAX_SEQUENCE_LENGTH, width),
        init=hk.initializers.TruncatedNormal(stddev=model.positional_init_scale),
    )
    # A Python float, weakly typed: numpy's float64 would promote bfloat16 activations to
    # float32, and every matrix product after it with them (tf32 on a GPU, not bf16).
    h = lookup(embed.embeddings, tokens) * float(np.sqrt(width)) + positions[: tokens.shape[1]]
    for i in range(model.num_layers):
        # Only the last position is read, and in the last block nothing else depends on the
        # other positions' outputs: it computes the last position alone (keys and values
        # still from all). The same function, about one block's MLP cheaper.
        # Before the first block the rows of one board differ only in the move's position.
        last_block, shared = i == model.num_layers - 1, one_board and i == 0
        with hk.name_scope(f"block_{i}"):
            x = _layer_norm(h, "attention_norm")
            attended = _attention(x, model.num_heads, last_block, one_board=shared)
            h = (h[:, -1:] if last_block else h) + attended
            h = h + _swiglu(_layer_norm(h, "mlp_norm"), model.widening_factor * width)
    last = _layer_norm(h[:, -1], "final_norm")
    # A zero head starts training at the uniform prediction (loss = log K) rather than at
    # random logits the first steps would have to unlearn.
    head = hk.Linear(output_size, w_init=hk.initializers.Constant(0.0), name="head")
    logits = head(last).astype(jnp.float32)
    return jax.nn.log_softmax(logits, axis=-1)


def build(config: Config, one_board: bool = False) -> hk.Transformed:
    """The model as pure functions: init(rng, states, actions) and apply(params, states, actions).

    `states` is (B, 77) board tokens; `actions` is (B,) action indices for the AV target and
    None for SV and BC. apply returns float32 log-probabilities of shape (B, output_size):
    over value bins for AV/SV, over the 1968 actions for BC.

    `one_board` (AV, inference): every row's board is row 0's, as for one board's legal
    moves, and the first block projects that board once instead of once per row. The same
    parameters and function on such rows; rows of other boards get wrong values.
    """

    return _transformed(config.model, config.output_size, one_board)


@functools.cache
def _transformed(model: ModelConfig, output_size: int, one_board: bool = False) -> hk.Transformed:
    def forward(states, actions=None):
        return _forward(states, actions, model, output_size, one_board)

    return hk.without_apply_rng(hk.transform(forward))


def example_inputs(config: Config, batch: int = 1) -> tuple[np.ndarray, np.ndarray | None]:
    """Zero inputs of the right shapes for init and shape inference."""
    states = np.zeros((batch, MAX_SEQUENCE_LENGTH - 2), np.int32)
    actions = np.zeros((batch,), np.int32) if config.target_kind.takes_action else None
    return states, actions


def init_params(config: Config, seed: int | None = None) -> hk.Params:
    seed = config.train.seed if seed is None else seed
    states, actions = example_inputs(config)
    init = _jitted_init(config.model, config.output_size)
    return init(jax.random.PRNGKey(seed), states, actions)


@functools.cache
def _jitted_init(model: ModelConfig, output_size: int):
    # Jitted: Haiku's init run eagerly dispatches (and compiles) every op on its own; cached
    # so that every model of one architecture shares the compilation (AV's `actions` and
    # SV/BC's None trace separately under the one jit).
    return jax.jit(_transformed(model, output_size).init)


def param_shapes(config: Config) -> hk.Params:
    """Parameter shapes and dtypes without computing anything (jax.ShapeDtypeStruct leaves)."""
    states, actions = example_inputs(config)
    return jax.eval_shape(build(config).init, jax.random.PRNGKey(0), states, actions)


def count_params(params) -> int:
    return int(sum(np.prod(leaf.shape) for leaf in jax.tree_util.tree_leaves(params)))


def cast(params, dtype) -> hk.Params:
    """Floating-point leaves cast to `dtype` (bf16 compute keeps a float32 master copy)."""
    return jax.tree_util.tree_map(
        lambda p: p.astype(dtype) if jnp.issubdtype(p.dtype, jnp.floating) else p, params
    )
