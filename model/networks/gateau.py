"""The edge backbone: GATEAU graph attention over a board's squares, moves and attacks
(after AlphaGateau, Rigaux & Kashima 2024), giving every legal move its value in one pass.

Inputs: the 77 board tokens (B, 77) and the board's edges (model/networks/board_graph.py) padded to
(B, E): `senders`, `receivers` (node indices 0..63, in the side to move's orientation) and `kinds`
(packed static edge features, -1 for padding).

- Nodes: the 64 squares. h0 = piece (13 classes, mine/theirs) + square + en-passant target
  embeddings + a projection of the board's globals (side to move, the four castling rights
  as mine/theirs, halfmove clock, fullmove number), all read from the tokens.
- Edges: e0 = embeddings of the edge's geometry, promotion and type (move / attack), with
  `model.move_checks` of whether the move gives check, with `model.move_exchanges` of
  its static exchange's sign, with `model.move_threats` of what it newly attacks with gain, and
  with `model.move_flights` of how many squares the enemy king has once it is played, and
  with `model.move_hanging` of the most valuable of its own pieces it leaves en prise, and
  with `model.move_king_danger` of the checks it leaves the opponent against its own king.
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

import haiku as hk
import jax
import jax.numpy as jnp

from core.targets import target_kind
from model.config import ModelConfig
from model.networks import board_graph, board_net
from model.networks.board_net import (
    add_move_facts,
    edge_arrays,
    embed_squares,
    gather_nodes,
    layer_norm,
    mlp,
    small_embed,
)

# --- graph operations on padded (B, E) edges --------------------------------------------------


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


def _gateau_layer(h, e, senders, receivers, valid, num_heads: int, widening: int):
    batch, nodes, width = h.shape
    head_dim = width // num_heads
    hn = layer_norm(h, "node_norm")
    # Edge update from both ends; the projections run on the nodes, the edges only gather.
    e = e + gather_nodes(hk.Linear(width, name="sender")(hn), senders)
    e = e + gather_nodes(hk.Linear(width, with_bias=False, name="receiver")(hn), receivers)
    en = layer_norm(e, "edge_norm")
    logits = hk.Linear(num_heads, name="attention")(jax.nn.leaky_relu(en, 0.2))
    weights = segment_softmax(logits, receivers, valid, nodes)  # (B, E, H)
    message = gather_nodes(hk.Linear(width, name="value")(hn), senders) + en
    message = message.reshape(batch, -1, num_heads, head_dim) * weights[..., None]
    gathered = scatter_sum(message.reshape(batch, -1, width), receivers, nodes)
    h = h + hk.Linear(width, name="output")(gathered)
    h = h + mlp(layer_norm(h, "mlp_norm"), widening * width, width, "mlp")
    return h, e


def _forward(states, senders, receivers, kinds, model: ModelConfig, target: str, num_bins: int):
    width = model.embedding_dim
    senders, receivers, kinds, valid = edge_arrays(senders, receivers, kinds)
    h = embed_squares(states, width)

    packed = jnp.maximum(kinds, 0)  # padding's -1 would unpack to garbage indices
    geometry, promotion, edge_type = board_graph.unpack_kind(packed)
    e = small_embed(board_graph.GEOMETRIES, width, "geometry_embed")(geometry)
    e = e + small_embed(board_graph.PROMOTIONS, width, "promotion_embed")(promotion)
    e = e + small_embed(len(board_graph.EDGE_TYPES), width, "edge_type_embed")(edge_type)
    e = add_move_facts(e, packed, model, width)
    e = jnp.where(valid[..., None], e, 0.0)

    for i in range(model.num_layers):
        with hk.name_scope(f"layer_{i}"):
            h, e = _gateau_layer(
                h, e, senders, receivers, valid, model.num_heads, model.widening_factor
            )

    hn = layer_norm(h, "final_node_norm")
    pool = jax.nn.softmax(hk.Linear(1, name="pool_logit")(hn)[..., 0], axis=-1)  # (B, 64)
    board = jnp.einsum("bn,bnd->bd", pool, hk.Linear(width, name="pool_value")(hn))
    kind = target_kind(target)
    if not kind.per_edge_output:  # one value per board
        return board_net.value_log_probs(board, width, num_bins)

    edges = (
        layer_norm(e, "final_edge_norm")
        + hk.Linear(width, name="board_to_edges")(board)[:, None, :]
    )
    if kind.value_head:  # a value per move edge
        logits = mlp(edges, 2 * width, num_bins, "action_value_head", zero_out=True)
        return jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    logits = mlp(edges, 2 * width, 1, "policy_head", zero_out=True)[..., 0].astype(jnp.float32)
    moves = valid & (edge_type == board_graph.MOVE)
    logits = jnp.where(moves, logits, -jnp.inf)
    policy = jax.nn.log_softmax(logits, axis=-1, where=moves)
    if model.policy_value:  # and the board's value from the same pooled trunk
        return policy, board_net.value_log_probs(board, width, num_bins)
    return policy


# build(config), init_params(config, seed=None), param_shapes(config): model/networks/board_net.py.
build, init_params, param_shapes = board_net.functions(_forward)
