"""The edge backbone: GATEAU graph attention over a board's squares, moves and attacks
(after AlphaGateau, Rigaux & Kashima 2024), giving every legal move its value in one pass.

Inputs: the 77 board tokens (B, 77) and the board's edges (model/graph.py) padded to (B, E):
`senders`, `receivers` (node indices 0..63, in the side to move's orientation) and `kinds`
(packed static edge features, -1 for padding).

- Nodes: the 64 squares. h0 = piece (13 classes, mine/theirs) + square + en-passant target
  embeddings + a projection of the board's globals (side to move, the four castling rights
  as mine/theirs, halfmove clock, fullmove number), all read from the tokens.
- Edges: e0 = embeddings of the edge's geometry, promotion and type (move / attack), with
  `model.move_checks` of whether the move gives check, and with `model.move_exchanges` of
  its static exchange's sign.
- L GATEAU layers. As in AlphaGateau, an edge's feature is updated from its sender and
  receiver (e += A h[sender] + B h[receiver]), the attention coefficient of an edge is a
  function of its feature (leaky ReLU, then one logit per head), normalised over the edges
  entering each square, and a square gathers the attended messages of its incoming edges,
  followed by a node MLP. Every layer is pre-LayerNorm and residual. For the CPU the edge
  update has no per-edge matrix product: A and B project the 64 nodes and the results are
  gathered, so an edge costs gathers and adds, and the matrix products run on 64 rows per
  board whatever the number of edges.
- Heads: a board vector g = attention pooling over the nodes. AV: per edge, an MLP of
  LN(e) + W g -> value-bin log-probabilities; SV: an MLP of g -> bins; BC: per edge, the
  same MLP shape -> one logit, log-softmax over the board's move edges only.

Outputs (log-probabilities, float32): AV (B, E, K), SV (B, K), BC (B, E) with -inf on
attack and padding edges. Only the move edges of AV's output mean anything.
"""

from __future__ import annotations

import functools

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np

from core.targets import target_kind
from model import graph
from model.config import Config, ModelConfig

NUM_PIECE_CLASSES = 13
NUM_GLOBALS = 7
_NODE_TOKENS = graph.node_token_positions()


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
    of token rows, in the side to move's orientation (model/graph.py): classes 1-6 are the
    side to move's P N B R Q K, 7-12 the opponent's, 0 empty."""
    states = states.astype(jnp.int32)
    black = states[:, 0] == graph.BLACK_TO_MOVE_TOKEN
    positions = jnp.asarray(_NODE_TOKENS)[black.astype(jnp.int32)]  # (B, 64)
    tokens = jnp.take_along_axis(states, positions, axis=1)
    classes = jnp.asarray(graph.PIECE_CLASSES)[tokens]
    classes = jnp.where(black[:, None], jnp.asarray(graph.SWAP_COLOURS)[classes], classes)

    castling = states[:, 65:69]
    white_rights = jnp.stack([(castling == 28).any(1), (castling == 27).any(1)], axis=1)  # K Q
    black_rights = jnp.stack([(castling == 21).any(1), (castling == 22).any(1)], axis=1)  # k q
    mine = jnp.where(black[:, None], black_rights, white_rights)
    theirs = jnp.where(black[:, None], white_rights, black_rights)

    file, rank = states[:, 69], states[:, 70]  # 'a'-'h' are ids 10-17; rank '3'/'6' is 3/6
    has_ep = file != 30
    square = (file - 10) + 8 * (rank - 1)
    node = jnp.where(black, square ^ graph.MIRROR, square)
    en_passant = has_ep[:, None] & (jnp.arange(graph.NUM_SQUARES)[None, :] == node[:, None])

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


# --- graph operations on padded (B, E) edges --------------------------------------------------


def gather_nodes(nodes: jax.Array, index: jax.Array) -> jax.Array:
    """(B, N, d) node rows at (B, E) indices -> (B, E, d)."""
    return jnp.take_along_axis(nodes, index[..., None], axis=1)


def scatter_sum(values: jax.Array, receivers: jax.Array, num_nodes: int) -> jax.Array:
    """Sums (B, E, ...) edge values into their receivers: (B, num_nodes, ...)."""
    batch = values.shape[0]
    flat = receivers + num_nodes * jnp.arange(batch)[:, None]
    summed = jax.ops.segment_sum(
        values.reshape(-1, *values.shape[2:]), flat.reshape(-1), num_segments=batch * num_nodes
    )
    return summed.reshape(batch, num_nodes, *values.shape[2:])


def segment_softmax(
    logits: jax.Array, receivers: jax.Array, valid: jax.Array, num_nodes: int
) -> jax.Array:
    """Softmax of (B, E, H) edge logits over the valid edges entering each node; 0 for
    padding. Shifted by each node's own maximum, so no node's weights underflow."""
    batch = logits.shape[0]
    flat = (receivers + num_nodes * jnp.arange(batch)[:, None]).reshape(-1)
    masked = jnp.where(valid[..., None], logits, -jnp.inf)
    peak = jax.ops.segment_max(
        masked.reshape(-1, logits.shape[-1]), flat, num_segments=batch * num_nodes
    )
    peak = jax.lax.stop_gradient(jnp.where(jnp.isfinite(peak), peak, 0.0))
    shifted = masked.reshape(-1, logits.shape[-1]) - peak[flat]
    weights = jnp.where(valid.reshape(-1)[:, None], jnp.exp(shifted), 0.0)
    total = jax.ops.segment_sum(weights, flat, num_segments=batch * num_nodes)
    return (weights / jnp.maximum(total[flat], 1e-30)).reshape(logits.shape)


# --- the network ----------------------------------------------------------------------------


def _layer_norm(x: jax.Array, name: str) -> jax.Array:
    return hk.LayerNorm(axis=-1, create_scale=True, create_offset=True, name=name)(x)


def _mlp(x: jax.Array, hidden: int, out: int, name: str, zero_out: bool = False) -> jax.Array:
    with hk.name_scope(name):
        y = jax.nn.gelu(hk.Linear(hidden, name="hidden")(x))
        w_init = hk.initializers.Constant(0.0) if zero_out else None
        return hk.Linear(out, w_init=w_init, name="out")(y)


def _gateau_layer(h, e, senders, receivers, valid, num_heads: int, widening: int):
    batch, nodes, width = h.shape
    head_dim = width // num_heads
    hn = _layer_norm(h, "node_norm")
    # Edge update from both ends; the projections run on the nodes, the edges only gather.
    e = e + gather_nodes(hk.Linear(width, name="sender")(hn), senders)
    e = e + gather_nodes(hk.Linear(width, with_bias=False, name="receiver")(hn), receivers)
    en = _layer_norm(e, "edge_norm")
    logits = hk.Linear(num_heads, name="attention")(jax.nn.leaky_relu(en, 0.2))
    weights = segment_softmax(logits, receivers, valid, nodes)  # (B, E, H)
    message = gather_nodes(hk.Linear(width, name="value")(hn), senders) + en
    message = message.reshape(batch, -1, num_heads, head_dim) * weights[..., None]
    gathered = scatter_sum(message.reshape(batch, -1, width), receivers, nodes)
    h = h + hk.Linear(width, name="output")(gathered)
    h = h + _mlp(_layer_norm(h, "mlp_norm"), widening * width, width, "mlp")
    return h, e


def _forward(states, senders, receivers, kinds, model: ModelConfig, target: str, num_bins: int):
    width = model.embedding_dim
    senders = senders.astype(jnp.int32)
    receivers = receivers.astype(jnp.int32)
    kinds = kinds.astype(jnp.int32)
    valid = kinds >= 0
    classes, en_passant, globals_ = node_inputs(states)

    embed = functools.partial(hk.Embed, embed_dim=width)
    h = embed(NUM_PIECE_CLASSES, name="piece_embed")(classes)
    h = h + hk.get_parameter(
        "square_embed", (graph.NUM_SQUARES, width), init=hk.initializers.TruncatedNormal(1.0)
    )
    h = h + embed(2, name="en_passant_embed")(en_passant.astype(jnp.int32))
    h = h + hk.Linear(width, name="globals")(globals_)[:, None, :]

    packed = jnp.maximum(kinds, 0)  # padding's -1 would unpack to garbage indices
    geometry, promotion, edge_type = graph.unpack_kind(packed)
    e = embed(graph.GEOMETRIES, name="geometry_embed")(geometry)
    e = e + embed(graph.PROMOTIONS, name="promotion_embed")(promotion)
    e = e + embed(len(graph.EDGE_TYPES), name="edge_type_embed")(edge_type)
    if model.move_checks:
        e = e + embed(2, name="check_embed")(graph.kind_gives_check(packed))
    if model.move_exchanges:
        e = e + embed(graph.EXCHANGE_CLASSES, name="exchange_embed")(graph.kind_exchange(packed))
    e = jnp.where(valid[..., None], e, 0.0)

    for i in range(model.num_layers):
        with hk.name_scope(f"layer_{i}"):
            h, e = _gateau_layer(
                h, e, senders, receivers, valid, model.num_heads, model.widening_factor
            )

    hn = _layer_norm(h, "final_node_norm")
    pool = jax.nn.softmax(hk.Linear(1, name="pool_logit")(hn)[..., 0], axis=-1)  # (B, 64)
    board = jnp.einsum("bn,bnd->bd", pool, hk.Linear(width, name="pool_value")(hn))
    kind = target_kind(target)
    if not kind.per_edge_output:  # one value per board
        logits = _mlp(board, 2 * width, num_bins, "value_head", zero_out=True)
        return jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)

    edges = (
        _layer_norm(e, "final_edge_norm")
        + hk.Linear(width, name="board_to_edges")(board)[:, None, :]
    )
    if kind.value_head:  # a value per move edge
        logits = _mlp(edges, 2 * width, num_bins, "action_value_head", zero_out=True)
        return jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    logits = _mlp(edges, 2 * width, 1, "policy_head", zero_out=True)[..., 0].astype(jnp.float32)
    moves = valid & (edge_type == graph.MOVE)
    logits = jnp.where(moves, logits, -jnp.inf)
    return jax.nn.log_softmax(logits, axis=-1, where=moves)


def build(config: Config) -> hk.Transformed:
    """init(rng, states, senders, receivers, kinds) and apply(params, same): see the module
    docstring for shapes."""
    return _transformed(config.model, config.train.target, config.train.num_bins)


@functools.cache
def _transformed(model: ModelConfig, target: str, num_bins: int) -> hk.Transformed:
    def forward(states, senders, receivers, kinds):
        return _forward(states, senders, receivers, kinds, model, target, num_bins)

    return hk.without_apply_rng(hk.transform(forward))


def example_inputs(batch: int = 1, edges: int = 64) -> tuple[np.ndarray, ...]:
    """Zero inputs of the right shapes for init and shape inference (one move edge each)."""
    kinds = np.full((batch, edges), graph.PAD_KIND, np.int32)
    kinds[:, 0] = 0
    zeros = np.zeros((batch, edges), np.int32)
    return np.zeros((batch, 77), np.int32), zeros, zeros, kinds


def init_params(config: Config, seed: int | None = None) -> hk.Params:
    seed = config.train.seed if seed is None else seed
    init = _jitted_init(config.model, config.train.target, config.train.num_bins)
    return init(jax.random.PRNGKey(seed), *example_inputs())


@functools.cache
def _jitted_init(model: ModelConfig, target: str, num_bins: int):
    return jax.jit(_transformed(model, target, num_bins).init)


def param_shapes(config: Config) -> hk.Params:
    return jax.eval_shape(build(config).init, jax.random.PRNGKey(0), *example_inputs())
