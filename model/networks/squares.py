"""The square-token transformer: a transformer over the 64 squares of a board, seen from the
side to move, whose policy gives each legal move a logit from its origin and target squares
(after Chessformer, Monroe & Chalmers 2024).

The paper's transformer (model/networks/transformer.py) reads 77 character tokens and learns a
1,968-way softmax over the whole action space: at the few hundred thousand boards two cores
label, it never learns to play. This network reads the same boards as the gateau backbone
(model/networks/gateau.py: the tokens and the padded move and attack edges of
model/networks/board_graph.py) and is trained and served by the same loaders, loss, predictor and
checkpoints.

- Tokens: the 64 squares, in the side to move's orientation (a pawn of the side to move
  always moves up the board). A square's input is its piece (13 classes, mine/theirs), a
  learned embedding of the square, whether it is the en-passant target, and a projection of
  the board's globals (side to move, castling rights as mine/theirs, the two counters).
- Attention: L blocks of pre-LayerNorm multi-head attention and SwiGLU MLP. Every head adds a
  learned bias for each (query square, key square) pair, a 2-D position prior that the
  squares' geometry needs and content attention alone is slow to find; with
  `model.attack_bias` also a learned bias per head for what the board says of the pair: the
  key's piece moves to or attacks the query's square (a fact of the board read off its
  attack edges, no move played).
- Policy (BC): a move's logit is the scaled dot product of a query of its origin square and a
  key of its target square, the key shifted by embeddings of the promotion piece and of the
  move facts its config names (`model.move_checks`, `move_exchanges`, `move_threats`,
  `move_flights`, `move_hanging`, `move_king_danger`: model/networks/move_facts.py);
  log-softmax over the board's legal moves only.
- Value (SV): attention pooling of the squares, then an MLP to the value bins. AV: per move,
  an MLP of its origin and target squares' features and the board's vector to the bins.

Outputs are those of model/networks/gateau.py: AV (B, E, K), SV (B, K), BC (B, E) log-probabilities,
with -inf on attack and padding edges for BC.
"""

from __future__ import annotations

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np

from core.targets import target_kind
from model.config import ModelConfig
from model.networks import board_graph, board_net
from model.networks.board_net import (
    edge_arrays,
    embed_squares,
    gather_nodes,
    layer_norm,
    mlp,
    small_embed,
)

# What the board says of a (query, key) pair of squares, for the attention bias: nothing, the
# key's piece (of the side to move) has a legal move to the query's square, it attacks the
# square without a move there, or the key's piece is the opponent's and attacks it.
RELATIONS = 1 + len(board_graph.EDGE_TYPES)


def relations(senders: jax.Array, receivers: jax.Array, kinds: jax.Array) -> jax.Array:
    """(B, 64, 64) int32: the relation of each (receiver, sender) pair from a board's edges,
    0 where no edge joins them. A pair has at most one edge: a square holds one piece, and
    the side to move's attack edges leave out the attacks that are already moves, so the
    one-hot product (board_net.one_hot_lookups) has one term per pair and is exact."""
    _, _, edge_type = board_graph.unpack_kind(jnp.maximum(kinds, 0))
    value = jnp.where(kinds >= 0, edge_type + 1, 0)  # padding: 0
    squares = board_graph.NUM_SQUARES
    if not board_net.one_hot_lookups():
        rows = jnp.broadcast_to(jnp.arange(kinds.shape[0])[:, None], kinds.shape)
        table = jnp.zeros((kinds.shape[0], squares, squares), jnp.int32)
        return table.at[rows, receivers, senders].max(value)
    to = jax.nn.one_hot(receivers, squares, dtype=jnp.float32) * value[..., None]
    of = jax.nn.one_hot(senders, squares, dtype=jnp.float32)
    table = jnp.einsum("beq,bek->bqk", to, of, precision=jax.lax.Precision.HIGHEST)
    return table.astype(jnp.int32)


def _attention(x: jax.Array, bias: jax.Array, num_heads: int) -> jax.Array:
    """Multi-head attention of every square over all, with a (B or 1, H, 64, 64) bias."""
    batch, length, width = x.shape
    head_dim = width // num_heads

    def project(name: str) -> jax.Array:
        y = hk.Linear(width, with_bias=False, name=name)(x)
        return y.reshape(batch, length, num_heads, head_dim)

    q, k, v = project("query"), project("key"), project("value")
    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(head_dim).astype(x.dtype)
    scores = scores.astype(jnp.float32) + bias
    weights = jax.nn.softmax(scores, axis=-1).astype(x.dtype)
    mixed = jnp.einsum("bhqk,bkhd->bqhd", weights, v).reshape(batch, length, width)
    return hk.Linear(width, with_bias=False, name="output")(mixed)


def _swiglu(x: jax.Array, hidden: int) -> jax.Array:
    gate = hk.Linear(hidden, with_bias=False, name="gate")(x)
    up = hk.Linear(hidden, with_bias=False, name="up")(x)
    return hk.Linear(x.shape[-1], with_bias=False, name="down")(jax.nn.silu(gate) * up)


def _attention_bias(senders, receivers, kinds, model: ModelConfig) -> jax.Array:
    """(B or 1, H, 64, 64) float32: the learned square-pair prior, plus the board's relations."""
    squares = board_graph.NUM_SQUARES
    position = hk.get_parameter(
        "position_bias", (model.num_heads, squares, squares), init=jnp.zeros
    )
    bias = position[None]
    if model.attack_bias:
        table = hk.get_parameter("relation_bias", (RELATIONS, model.num_heads), init=jnp.zeros)
        pairs = relations(senders, receivers, kinds)  # (B, 64, 64)
        bias = bias + jnp.moveaxis(board_net.table_rows(table, pairs), -1, 1)
    return bias.astype(jnp.float32)


def _forward(states, senders, receivers, kinds, model: ModelConfig, target: str, num_bins: int):
    width = model.embedding_dim
    senders, receivers, kinds, valid = edge_arrays(senders, receivers, kinds)

    h = embed_squares(states, width)
    bias = _attention_bias(senders, receivers, kinds, model)
    for i in range(model.num_layers):
        with hk.name_scope(f"block_{i}"):
            h = h + _attention(layer_norm(h, "attention_norm"), bias, model.num_heads)
            h = h + _swiglu(layer_norm(h, "mlp_norm"), model.widening_factor * width)
    hn = layer_norm(h, "final_norm")

    kind = target_kind(target)
    pool = jax.nn.softmax(hk.Linear(1, name="pool_logit")(hn)[..., 0], axis=-1)  # (B, 64)
    board = jnp.einsum("bn,bnd->bd", pool, hk.Linear(width, name="pool_value")(hn))
    if not kind.per_edge_output:  # one value per board
        return board_net.value_log_probs(board, width, num_bins)

    packed = jnp.maximum(kinds, 0)  # padding's -1 would unpack to garbage indices
    _, promotion, edge_type = board_graph.unpack_kind(packed)
    origin = gather_nodes(hk.Linear(width, name="move_origin")(hn), senders)  # (B, E, d)
    target_ = gather_nodes(hk.Linear(width, name="move_target")(hn), receivers)
    target_ = target_ + small_embed(board_graph.PROMOTIONS, width, "promotion_embed")(promotion)
    target_ = board_net.add_move_facts(target_, packed, model, width)
    if kind.value_head:  # a value per move edge
        edges = origin + target_ + hk.Linear(width, name="board_to_edges")(board)[:, None, :]
        logits = mlp(
            layer_norm(edges, "edge_norm"), 2 * width, num_bins, "action_value_head", zero_out=True
        )
        return jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    logits = (origin * target_).sum(-1).astype(jnp.float32) / np.sqrt(width)
    moves = valid & (edge_type == board_graph.MOVE)
    logits = jnp.where(moves, logits, -jnp.inf)
    policy = jax.nn.log_softmax(logits, axis=-1, where=moves)
    if model.policy_value:  # and the board's value from the same pooled trunk
        return policy, board_net.value_log_probs(board, width, num_bins)
    return policy


# build(config), init_params(config, seed=None), param_shapes(config): model/networks/board_net.py.
build, init_params, param_shapes = board_net.functions(_forward)
