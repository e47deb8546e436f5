"""What the board-at-once networks (model/networks/gateau.py, model/networks/squares.py) share: the
squares' inputs read from the 77 tokens in the side to move's orientation, the gather of square
features onto edges, their small layers, and the pure functions built from a forward pass.

A board-at-once network is a forward function
`forward(states, senders, receivers, kinds, model, target, num_bins)` over the tokens and
model/networks/board_graph.py's padded edges; `functions` turns it into the module's `build`,
`init_params` and `param_shapes`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np

from model.config import Config, ModelConfig
from model.networks import board_graph

NUM_PIECE_CLASSES = 13
NUM_GLOBALS = 7
_NODE_TOKENS = board_graph.node_token_positions()


# --- inputs ---------------------------------------------------------------------------------


def _number(digit_tokens: jax.Array) -> jax.Array:
    """A right-padded decimal field of tokens ('0'-'9' are ids 0-9, '.' pads) as float32."""
    value = jnp.zeros(digit_tokens.shape[:-1], jnp.float32)
    for j in range(digit_tokens.shape[-1]):
        digit = digit_tokens[..., j]
        value = jnp.where(digit < 10, value * 10 + digit, value)
    return value


def node_inputs(states: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(piece classes (B, 64) int32, en-passant target (B, 64) bool, globals (B, 7) float32)
    of token rows, in the side to move's orientation (model/networks/board_graph.py): classes 1-6
    are the side to move's P N B R Q K, 7-12 the opponent's, 0 empty."""
    states = states.astype(jnp.int32)
    black = states[:, 0] == board_graph.BLACK_TO_MOVE_TOKEN
    positions = jnp.asarray(_NODE_TOKENS)[black.astype(jnp.int32)]  # (B, 64)
    tokens = jnp.take_along_axis(states, positions, axis=1)
    classes = jnp.asarray(board_graph.PIECE_CLASSES)[tokens]
    classes = jnp.where(black[:, None], jnp.asarray(board_graph.SWAP_COLOURS)[classes], classes)

    castling = states[:, 65:69]
    white_rights = jnp.stack([(castling == 28).any(1), (castling == 27).any(1)], axis=1)  # K Q
    black_rights = jnp.stack([(castling == 21).any(1), (castling == 22).any(1)], axis=1)  # k q
    mine = jnp.where(black[:, None], black_rights, white_rights)
    theirs = jnp.where(black[:, None], white_rights, black_rights)

    file, rank = states[:, 69], states[:, 70]  # 'a'-'h' are ids 10-17; rank '3'/'6' is 3/6
    has_ep = file != 30
    square = (file - 10) + 8 * (rank - 1)
    node = jnp.where(black, square ^ board_graph.MIRROR, square)
    en_passant = has_ep[:, None] & (jnp.arange(board_graph.NUM_SQUARES)[None, :] == node[:, None])

    halfmove = _number(states[:, 71:74])
    fullmove = _number(states[:, 74:77])
    globals_ = jnp.concatenate(
        [
            black[:, None].astype(jnp.float32),
            mine.astype(jnp.float32),
            theirs.astype(jnp.float32),
            jnp.minimum(halfmove, 100.0)[:, None] / 100.0,
            jnp.minimum(fullmove, 200.0)[:, None] / 200.0,
        ],
        axis=1,
    )
    return classes, en_passant, globals_


def one_hot_lookups() -> bool:
    """Whether the board-at-once networks look rows up as one-hot matrix products (on an
    accelerator) or by index (on the CPU). The gradient of an indexed lookup is a scatter-add
    of every row of the batch into the few rows of a table: on a GPU, in bfloat16, those
    additions contend for the same addresses, and the square network's step took 35 s at a
    batch of 1,024 boards on an H200. The product's gradient is a matrix product; on two CPU
    cores it costs 10-20% more a step than the index, so the CPU keeps the index. Both give
    the same values (one term per row), to float rounding."""
    return jax.default_backend() != "cpu"


def table_rows(table: jax.Array, ids: jax.Array) -> jax.Array:
    """Rows of a small parameter table at integer `ids`: ids.shape + table.shape[1:]
    (`one_hot_lookups` says how)."""
    if one_hot_lookups():
        picks = jax.nn.one_hot(ids, table.shape[0], dtype=table.dtype)
        return jnp.tensordot(picks, table, axes=1, precision=jax.lax.Precision.HIGHEST)
    return table[ids]


def small_embed(vocab_size: int, width: int, name: str) -> hk.Embed:
    """An embedding of a few classes (`one_hot_lookups` says how it is looked up)."""
    style = hk.EmbedLookupStyle.ONE_HOT if one_hot_lookups() else hk.EmbedLookupStyle.ARRAY_INDEX
    return hk.Embed(vocab_size, width, lookup_style=style, name=name)


# Per move fact of the config (model.config.MOVE_FACTS' order): its classes, the name of its
# embedding and how a packed edge kind holds it (model/networks/board_graph.py).
_MOVE_FACT_EMBEDS = (
    ("move_checks", 2, "check_embed", board_graph.kind_gives_check),
    ("move_exchanges", board_graph.EXCHANGE_CLASSES, "exchange_embed", board_graph.kind_exchange),
    ("move_threats", board_graph.THREAT_CLASSES, "threat_embed", board_graph.kind_threat),
    ("move_flights", board_graph.FLIGHT_CLASSES, "flights_embed", board_graph.kind_flights),
    ("move_hanging", board_graph.HANGING_CLASSES, "hanging_embed", board_graph.kind_hanging),
    ("move_king_danger", board_graph.DANGER_CLASSES, "danger_embed", board_graph.kind_danger),
)


def add_move_facts(x: jax.Array, packed: jax.Array, model: ModelConfig, width: int) -> jax.Array:
    """`x` (B, E, width) plus an embedding of each move fact `model` names, read off the
    edges' packed kinds (`packed`, padding already clipped to 0), added one after another in
    one order for every network."""
    for flag, classes, name, read in _MOVE_FACT_EMBEDS:
        if getattr(model, flag):
            x = x + small_embed(classes, width, name)(read(packed))
    return x


def embed_squares(states: jax.Array, width: int) -> jax.Array:
    """(B, 64, width): each square's input from the tokens: its piece (mine or theirs), a
    learned square embedding, whether it is the en-passant target, and a projection of the
    board's globals."""
    classes, en_passant, globals_ = node_inputs(states)
    h = small_embed(NUM_PIECE_CLASSES, width, "piece_embed")(classes)
    h = h + hk.get_parameter(
        "square_embed", (board_graph.NUM_SQUARES, width), init=hk.initializers.TruncatedNormal(1.0)
    )
    h = h + small_embed(2, width, "en_passant_embed")(en_passant.astype(jnp.int32))
    return h + hk.Linear(width, name="globals")(globals_)[:, None, :]


def edge_arrays(
    senders: jax.Array, receivers: jax.Array, kinds: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """The padded edges as int32 indices, and which of them are real (padding's kind is -1)."""
    kinds = kinds.astype(jnp.int32)
    return senders.astype(jnp.int32), receivers.astype(jnp.int32), kinds, kinds >= 0


def gather_nodes(nodes: jax.Array, index: jax.Array) -> jax.Array:
    """(B, N, d) node rows at (B, E) indices -> (B, E, d) (`one_hot_lookups` says how)."""
    if one_hot_lookups():
        picks = jax.nn.one_hot(index, nodes.shape[1], dtype=nodes.dtype)
        return jnp.einsum("ben,bnd->bed", picks, nodes, precision=jax.lax.Precision.HIGHEST)
    return jnp.take_along_axis(nodes, index[..., None], axis=1)


def layer_norm(x: jax.Array, name: str) -> jax.Array:
    return hk.LayerNorm(axis=-1, create_scale=True, create_offset=True, name=name)(x)


def mlp(x: jax.Array, hidden: int, out: int, name: str, zero_out: bool = False) -> jax.Array:
    with hk.name_scope(name):
        y = jax.nn.gelu(hk.Linear(hidden, name="hidden")(x))
        w_init = hk.initializers.Constant(0.0) if zero_out else None
        return hk.Linear(out, w_init=w_init, name="out")(y)


def value_log_probs(board: jax.Array, width: int, num_bins: int) -> jax.Array:
    """(B, num_bins) log-probabilities of the board's win probability bins from its pooled
    (B, width) vector: the value head of an SV network, or the one beside a policy."""
    logits = mlp(board, 2 * width, num_bins, "value_head", zero_out=True)
    return jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)


def example_inputs(batch: int = 1, edges: int = 64) -> tuple[np.ndarray, ...]:
    """Zero inputs of the right shapes for init and shape inference (one move edge each)."""
    kinds = np.full((batch, edges), board_graph.PAD_KIND, np.int32)
    kinds[:, 0] = 0
    zeros = np.zeros((batch, edges), np.int32)
    return np.zeros((batch, 77), np.int32), zeros, zeros, kinds


class Functions(NamedTuple):
    """A board-at-once network as pure functions.

    build(config): init(rng, states, senders, receivers, kinds) and apply(params, same);
    init_params(config, seed=None): parameters (the config's seed by default), jitted;
    param_shapes(config): their shapes and dtypes, nothing computed."""

    build: Callable[[Config], hk.Transformed]
    init_params: Callable[..., hk.Params]
    param_shapes: Callable[[Config], hk.Params]


def functions(forward: Callable) -> Functions:
    """The pure functions of the network whose forward pass is `forward`; compiled once per
    architecture (model config, target, bins) and shared by every caller."""

    @functools.cache
    def transformed(model: ModelConfig, target: str, num_bins: int) -> hk.Transformed:
        def apply(states, senders, receivers, kinds):
            return forward(states, senders, receivers, kinds, model, target, num_bins)

        return hk.without_apply_rng(hk.transform(apply))

    @functools.cache
    def jitted_init(model: ModelConfig, target: str, num_bins: int):
        return jax.jit(transformed(model, target, num_bins).init)

    def build(config: Config) -> hk.Transformed:
        return transformed(config.model, config.train.target, config.train.num_bins)

    def init_params(config: Config, seed: int | None = None) -> hk.Params:
        seed = config.train.seed if seed is None else seed
        init = jitted_init(config.model, config.train.target, config.train.num_bins)
        return init(jax.random.PRNGKey(seed), *example_inputs())

    def param_shapes(config: Config) -> hk.Params:
        return jax.eval_shape(build(config).init, jax.random.PRNGKey(0), *example_inputs())

    return Functions(build, init_params, param_shapes)
