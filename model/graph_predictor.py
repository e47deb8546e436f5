"""Predictions of the board-at-once backbones (gateau, squares): one network pass per board
gives every move's output.

model.predictor.Predictor delegates here when its config's backbone reads whole boards, so eval/
(agents, metrics, puzzles, suites, UCI, tournaments) use it unchanged. Boards go through the
network in chunks of at most `max_boards`, each padded to a power-of-two number of boards
and to a multiple of 64 edges (at least MIN_EDGES), so a handful of shapes are ever
compiled. Parameters are passed to every call (the Predictor owns them; the trainer's
evaluation swaps them).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import chess
import jax
import numpy as np

from core import bins
from core.actions import NUM_ACTIONS, indices_to_moves, moves_to_indices
from core.targets import target_kind
from core.tokenizer import SEQUENCE_LENGTH, fen_from_tokens, model_tokens
from model.config import Config, ModelConfig, TrainConfig
from model.devices import compute_dtype, resolve_dtype
from model.networks import board_graph, network
from model.networks.transformer import cast

EDGE_STEP = 64
# Boards are padded to at least this many edges: nearly every position of a real game has
# fewer (the most in 13,671 Lichess positions was 151), so a game is played with one or two
# compiled shapes and the compilation happens at the first move (or the UCI `isready`).
MIN_EDGES = 128
# The edge widths a real game's boards are padded to (~30 move and ~70 attack edges; 13,671
# Lichess positions had at most 151), compiled ahead by warm_up.
WARM_WIDTHS = (MIN_EDGES, MIN_EDGES + 64)
# No legal position has more edges: at most 218 legal moves, and each side attacks at most
# 321 (piece, square) pairs (nine queens of 27, two rooks of 14, two bishops of 13, two
# knights of 8 and a king of 8). With fixed shapes a board wider than WARM_WIDTHS goes
# through the network alone at this width, so that no board needs a shape of its own.
MAX_EDGES = 218 + 2 * (9 * 27 + 2 * 14 + 2 * 13 + 2 * 8 + 8)


@functools.cache
def _compiled(model: ModelConfig, target: str, num_bins: int, dtype: str):
    """Jitted (log_probs, both) shared by every predictor of one architecture; `both`
    returns log-probabilities and, for AV/SV, expected values from one pass."""
    config = Config(model=model, train=TrainConfig(target=target, num_bins=num_bins))
    net = network.graph_module(config).build(config)
    compute = compute_dtype(dtype)

    def log_probs(params, states, senders, receivers, kinds):
        out = net.apply(cast(params, compute), states, senders, receivers, kinds)
        return out[0] if isinstance(out, tuple) else out  # the policy of a policy-value net

    def both(params, *inputs):
        out = net.apply(cast(params, compute), *inputs)
        if isinstance(out, tuple):  # a policy and, beside it, the board's value bins
            policy, board_value = out
            return policy, bins.expected_value(board_value)
        return out, (bins.expected_value(out) if target_kind(target).value_head else out)

    return jax.jit(log_probs), jax.jit(both)


class GraphRunner:
    """A board-at-once network over boards, in padded chunks."""

    def __init__(self, config: Config, max_boards: int):
        self.config = config
        self.max_boards = max_boards
        # (boards per call, edge widths) every call is padded to, once fix_shapes set them.
        self.fixed: tuple[tuple[int, ...], tuple[int, ...]] | None = None
        t = config.train
        self._log_probs, self._both = _compiled(
            config.model, t.target, t.num_bins, resolve_dtype(t.dtype)
        )

    def run(
        self,
        params,
        fens: Sequence[str],
        graphs: board_graph.Graphs | None = None,
        both: bool = False,
    ) -> list:
        """Per board, the network's output cut to the board's edges: AV (edges, K) log-probs
        (with `both`, a pair of that and (edges,) values), SV (K,) (and the value), BC
        (edges,) log-probs over its move edges (-inf elsewhere; with `both`, a pair of that and
        the board's value where the model has a value head beside its policy, else twice the
        log-probs)."""
        if graphs is None:
            graphs = board_graph.encode_fens(fens)
        # A policy with a value head runs one program for both (the value costs one small
        # MLP a board), so that each shape compiles once whichever is asked.
        joint = self.config.model.policy_value
        fn: Callable = self._both if both or joint else self._log_probs
        states = model_tokens(list(fens))
        counts = graphs.edge_counts()
        results: list = [None] * len(fens)
        for index, size, width in self._calls(counts):
            edges = board_graph.pad_edges(graphs, index, width)
            padded = {"states": np.zeros((size, states.shape[1]), np.int32)}
            padded["states"][: len(index)] = states[index]
            for key in ("senders", "receivers", "kinds"):
                fill = board_graph.PAD_KIND if key == "kinds" else 0
                padded[key] = np.full((size, width), fill, np.int32)
                padded[key][: len(index)] = edges[key]
            out = fn(
                params, padded["states"], padded["senders"], padded["receivers"], padded["kinds"]
            )
            if joint and not both:
                out = out[0]
            outputs = tuple(np.asarray(o) for o in out) if both else (np.asarray(out),)
            for row, board in enumerate(index):
                n = int(counts[board])
                cut = [o[row, :n] if o.ndim >= 2 and self._per_edge else o[row] for o in outputs]
                results[board] = tuple(cut) if both else cut[0]
        return results

    def _calls(self, counts: np.ndarray) -> list[tuple[np.ndarray, int, int]]:
        """(the boards, boards padded to, edge width) of each network call over boards with
        `counts` edges: power-of-two chunks of at most max_boards boards, each as wide as its
        widest board needs; with fixed shapes, only the shapes fixed_shapes named."""
        if self.fixed is None:
            calls = []
            for start in range(0, len(counts), self.max_boards):
                index = np.arange(start, min(len(counts), start + self.max_boards))
                size = min(self.max_boards, 1 << max(0, len(index) - 1).bit_length())
                width = max(MIN_EDGES, board_graph.edge_bucket(int(counts[index].max())))
                calls.append((index, size, width))
            return calls
        sizes, widths = self.fixed
        wide = counts > widths[-1]
        calls = [(np.array([board]), 1, self.widest) for board in np.flatnonzero(wide)]
        narrow = np.flatnonzero(~wide)
        for start in range(0, len(narrow), sizes[-1]):
            index = narrow[start : start + sizes[-1]]
            size = next(s for s in sizes if s >= len(index))
            width = next(w for w in widths if w >= counts[index].max())
            calls.append((index, size, width))
        return calls

    @property
    def widest(self) -> int:
        return board_graph.edge_bucket(MAX_EDGES)

    def fixed_shapes(self, boards: int) -> list[tuple[int, int]]:
        """Pads every later call to one of a few shapes for calls of up to `boards` boards
        (1 or `boards` boards, WARM_WIDTHS edges, a wider board alone at the widest) and
        returns them: a search then uses only shapes compiled before it starts."""
        sizes = (1,) if boards <= 1 else (1, boards)
        self.fixed = (sizes, WARM_WIDTHS)
        return [(s, w) for s in sizes for w in WARM_WIDTHS] + [(1, self.widest)]

    def warm_up(
        self,
        params,
        max_boards: int,
        widths: Sequence[int] = WARM_WIDTHS,
        stop: threading.Event | None = None,
    ) -> list:
        """Compiles now the (boards, edges) shapes that calls on at most `max_boards` boards
        of real games use (the edge widths `widths`), so no move of a game waits for XLA;
        returns them. `stop`: as `compile`'s."""
        sizes = sorted(
            {
                min(self.max_boards, 1 << max(0, n - 1).bit_length())
                for n in range(1, max_boards + 1)
            }
        )
        shapes = [(size, width) for size in sizes for width in widths]
        self.compile(params, shapes, stop)
        return shapes

    def compile(
        self, params, shapes: Sequence[tuple[int, int]], stop: threading.Event | None = None
    ) -> None:
        """Compiles the network for each (boards, edges) shape, two at a time (XLA compiles
        one shape on one core). Once `stop` is set the shapes not yet begun are skipped (they
        compile when first called), so a thread compiling in the background can be ended
        within a shape's compile."""
        # A policy's moves; a value model's values, or a policy's and its value head's.
        joint = self.config.target != "bc" or self.config.model.policy_value
        fns = [self._both] if joint else [self._log_probs]

        def one(shape: tuple[int, int]) -> None:
            size, width = shape
            states = np.zeros((size, SEQUENCE_LENGTH), np.int32)
            edges = np.zeros((size, width), np.int32)
            kinds = np.full((size, width), board_graph.PAD_KIND, np.int32)
            for fn in fns:
                if stop is not None and stop.is_set():
                    return
                jax.block_until_ready(fn(params, states, edges, edges, kinds))

        with ThreadPoolExecutor(2, thread_name_prefix="graph-compile") as pool:
            list(pool.map(one, shapes))

    @property
    def _per_edge(self) -> bool:
        return self.config.target_kind.per_edge_output

    # --- what Predictor asks for ----------------------------------------------------------

    def action_values(self, params, fens: Sequence[str], moves: Sequence[Sequence[str]]):
        """AV: per board, the value of each given move (which must be legal there)."""
        graphs = board_graph.encode_fens(fens)
        results = self.run(params, fens, graphs, both=True)
        out = []
        for board, (requested, (_, values)) in enumerate(zip(moves, results, strict=True)):
            positions = move_edge_positions(graphs, board, fens[board], requested)
            out.append(values[positions].astype(np.float32))
        return out

    def state_values(self, params, fens: Sequence[str]) -> np.ndarray:
        results = self.run(params, fens, both=True)
        return np.array([value for _, value in results], np.float32)

    def move_log_probs(self, params, fens: Sequence[str]) -> np.ndarray:
        """BC: (N, 1968) log-probabilities, -inf for the moves that are not legal."""
        graphs = board_graph.encode_fens(fens)
        return _action_space(graphs, self.run(params, fens, graphs))

    def move_log_probs_and_values(
        self, params, fens: Sequence[str]
    ) -> tuple[np.ndarray, np.ndarray]:
        """BC with a value head beside the policy: `move_log_probs` and (N,) the boards'
        values, from one pass."""
        graphs = board_graph.encode_fens(fens)
        results = self.run(params, fens, graphs, both=True)
        values = np.array([value for _, value in results], np.float32)
        return _action_space(graphs, [log_probs for log_probs, _ in results]), values

    def token_rows(self, params, states: np.ndarray, actions: np.ndarray | None, both: bool):
        """The transformer-shaped output for token rows: (N, K) per (board, move) row for AV,
        per board for SV, (N, 1968) for BC; each distinct board runs through the network once."""
        unique, inverse = np.unique(np.asarray(states), axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        fens = [fen_from_tokens(row) for row in unique]
        kind = self.config.target_kind
        if not kind.value_head:  # a policy: the action space per board
            log_probs = self.move_log_probs(params, fens)[inverse]
            return (log_probs, log_probs) if both else log_probs
        graphs = board_graph.encode_fens(fens)
        results = self.run(params, fens, graphs, both=True)
        if not kind.per_edge_output:  # a value per board
            log_probs = np.stack([r[0] for r in results])[inverse]
            values = np.array([r[1] for r in results], np.float32)[inverse]
            return (log_probs, values) if both else log_probs
        edge = np.empty(len(inverse), np.int64)
        for board in range(len(fens)):
            rows = np.flatnonzero(inverse == board)
            moves = indices_to_moves(np.asarray(actions)[rows])
            edge[rows] = move_edge_positions(graphs, board, fens[board], moves)
        log_probs = np.stack([results[b][0][e] for b, e in zip(inverse, edge, strict=True)])
        values = np.array([results[b][1][e] for b, e in zip(inverse, edge, strict=True)])
        return (log_probs, values.astype(np.float32)) if both else log_probs

    def move_values(self, params, boards: Sequence[chess.Board]):
        """AV: per board, its legal moves (action-space order) and their values, one pass."""
        graphs = board_graph.encode_boards(boards)
        fens = [board.fen() for board in boards]
        results = self.run(params, fens, graphs, both=True)
        out = []
        for board, (_, values) in enumerate(results):
            start, moves = graphs.offsets[board], int(graphs.num_moves[board])
            legal = [str(m) for m in indices_to_moves(graphs.actions[start : start + moves])]
            out.append((legal, values[:moves].astype(np.float32)))
        return out


def _action_space(graphs: board_graph.Graphs, log_probs: Sequence[np.ndarray]) -> np.ndarray:
    """Each board's move-edge log-probabilities as a (N, 1968) row, -inf off its legal moves."""
    out = np.full((len(log_probs), NUM_ACTIONS), -np.inf, np.float32)
    for board, row in enumerate(log_probs):
        start = graphs.offsets[board]
        moves = int(graphs.num_moves[board])
        out[board, graphs.actions[start : start + moves]] = row[:moves]
    return out


def move_edge_positions(
    graphs: board_graph.Graphs, board: int, fen: str, moves: Sequence[str]
) -> np.ndarray:
    """Positions among board `board`'s edges of its move edges for `moves` (UCI);
    ValueError naming the move and board for a move that is not legal there."""
    moves = list(moves)
    start, count = graphs.offsets[board], int(graphs.num_moves[board])
    legal = graphs.actions[start : start + count].astype(np.int64)  # ascending
    wanted = moves_to_indices(moves) if moves else np.zeros(0, np.int64)
    at = np.minimum(np.searchsorted(legal, wanted), max(count - 1, 0))
    bad = np.flatnonzero(legal[at] != wanted) if count else np.arange(len(wanted))
    if bad.size:
        raise ValueError(
            f"move {moves[bad[0]]!r} is not legal on {fen!r}: the board-at-once backbones value "
            "legal moves only"
        )
    return at
