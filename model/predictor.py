"""Batched, jit-compiled predictions of a trained model: the interface eval/ builds on.

    from model.predictor import Predictor
    p = Predictor.from_checkpoint("runs/small")          # latest checkpoint, EMA params
    p.config.target                                      # "av", "sv" or "bc" (core.targets)
    p.action_values(fens, moves)   # AV: list of (len(moves[i]),) win probabilities
    p.state_values(fens)           # SV: (N,) win probability of the side to move
    p.move_log_probs(fens)         # BC: (N, 1968) log-probabilities over the action space
    p.move_values(boards)          # any target: [(legal UCI moves, scores)], higher = better
    p.best_moves(boards)           # any target: the top-scoring legal move per board
    p.log_probs(states, actions)   # the raw output for token rows (bins, or actions for BC)
    p.log_probs_and_values(states, actions)  # AV/SV: that output and its expected values
    p.warm_up(max_boards=1)        # compile now every batch shape move_values can need
    p.fix_shapes(max_boards=8)     # only a few shapes from now on, all compiled now
    legal_move_probs(row, moves)   # BC: one move_log_probs row as move_values scores it

All win probabilities are from the view of the side to move of the board given. Rows from
all boards go through the network together in chunks of at most `max_batch`, each padded
to a power-of-two bucket so that a handful of shapes are ever compiled; on a CPU they go in
passes of at most `rows_per_pass` rows instead (`pass_sizes`: no padding, 4 shapes), several
in flight at once, and an AV board's moves never share a pass with another board's (its first
block then projects the board once: `build(config, one_board=True)`). A
model of the gateau backbone (model/networks/gateau.py) takes whole boards instead,
`max_batch // 16` a call (model/graph_predictor.py): a board's move values are one network pass.

A board whose halfmove clock or fullmove number exceeds the tokenizer's three digits (a game
past move 999, or a FEN that says so) is read with that counter clamped to 999: every FEN
is tokenized by core.tokenizer.model_tokens, the one place that clamps.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Literal

import chess
import haiku as hk
import jax
import numpy as np

from core import bins
from core.actions import NUM_ACTIONS, legal_actions, moves_to_indices
from core.targets import AV, BC, SV, TargetKind
from core.tokenizer import SEQUENCE_LENGTH, model_tokens
from model.config import Config, ModelConfig, TrainConfig
from model.devices import compute_dtype, resolve_dtype
from model.graph_predictor import GraphRunner
from model.networks.network import is_graph
from model.networks.transformer import build, cast

_MIN_BUCKET = 16
# A CPU computes the network fastest a few rows at a time, with several passes in flight:
# on 2 cores, one board's moves (~29 rows, 20 real boards) in passes of 8 rows from 4 host
# threads ran at 1.11x (9M) and 1.13x (small) the rows/s of passes of 2 (9M) or 8 (small,
# the last pass padded) from 2 threads; passes of 16 at 1.08x (9M) and 1.06x (small), 32 at
# 0.98x (small) (interleaved board by board in one process); for 136M passes of
# 2 ran at 0.90x and of 4 at 0.98x the rows/s of passes of 8.
_MAX_ROWS_PER_PASS = 8
# Passes are shared out between host threads: the CPU runtime leaves a core idle in the
# serial parts of one call (attention, norms), which another call in flight fills. Twice the
# cores: 3-4 threads on 2 cores beat 2 by 0-6% in the same runs.
_CPUS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
_PASS_THREADS = 2 * (_CPUS or 1)


def pass_sizes(rows: int, step: int) -> list[int]:
    """The rows of each pass over `rows` rows at most `step` at a time: full passes, then
    the remainder in descending powers of two (13 rows, step 8: [8, 4, 1]), so that no row is
    padding and the shapes are few: `step` and the powers of two below it."""
    rest = rows % step
    powers = [1 << bit for bit in reversed(range(rest.bit_length())) if rest >> bit & 1]
    return [step] * (rows // step) + powers


def default_rows_per_pass() -> int | None:
    """Row passes on a CPU (the largest pass); None (the whole padded batch at once) on
    accelerators."""
    return _MAX_ROWS_PER_PASS if jax.default_backend() == "cpu" else None


@functools.cache
def _compiled(model: ModelConfig, target: str, num_bins: int, dtype: str):
    """Jitted (log_probs, values, both, board_values) shared by every Predictor of one
    architecture, so a second checkpoint of the same model (or the trainer's evaluation)
    reuses the compilations. `both` returns log-probabilities and expected values of one
    network pass; `board_values` (AV) the values of rows that are all one board's moves."""
    config = Config(model=model, train=TrainConfig(target=target, num_bins=num_bins))
    compute = compute_dtype(dtype)

    def log_probs_of(network: hk.Transformed):
        return lambda params, states, actions: network.apply(cast(params, compute), states, actions)

    log_probs = log_probs_of(build(config))
    one_board = log_probs_of(build(config, one_board=True))

    def values(params, states, actions):
        return bins.expected_value(log_probs(params, states, actions))

    def both(params, states, actions):
        out = log_probs(params, states, actions)
        return out, bins.expected_value(out)

    def board_values(params, states, actions):
        return bins.expected_value(one_board(params, states, actions))

    return jax.jit(log_probs), jax.jit(values), jax.jit(both), jax.jit(board_values)


class TargetError(ValueError):
    """A prediction the model's target cannot make (e.g. action values from a BC model)."""


class Predictor:
    """Predictions of one parameter set. Build with `from_checkpoint` or `Predictor(params,
    config)` (in-memory parameters, as the trainer's evaluation does)."""

    def __init__(
        self,
        params,
        config: Config,
        max_batch: int = 1024,
        rows_per_pass: int | None | Literal["auto"] = "auto",
    ):
        if max_batch < _MIN_BUCKET or max_batch & (max_batch - 1):
            raise ValueError(f"max_batch must be a power of two >= {_MIN_BUCKET}")
        if rows_per_pass == "auto":
            rows_per_pass = default_rows_per_pass()
        if rows_per_pass is not None and rows_per_pass < 1:
            raise ValueError(f"rows_per_pass must be >= 1 (or None), got {rows_per_pass}")
        self.config = config
        self.max_batch = max_batch
        self.rows_per_pass = rows_per_pass
        self.step: int | None = None  # the training step, when loaded from a checkpoint
        self.params = jax.device_put(params, jax.local_devices()[0])
        self._graph = GraphRunner(config, max_batch // _MIN_BUCKET) if is_graph(config) else None
        if self._graph is None:
            self._log_probs, self._values, self._both, self._board_values = _compiled(
                config.model,
                config.train.target,
                config.train.num_bins,
                resolve_dtype(config.train.dtype),
            )

    @classmethod
    def from_checkpoint(
        cls,
        path: str,
        use_ema: bool = True,
        step: int | None = None,
        max_batch: int = 1024,
        rows_per_pass: int | None | Literal["auto"] = "auto",
    ) -> Predictor:
        """Loads a run dir (its latest checkpoint, or `step`) or one checkpoint's dir."""
        from model.checkpoint import load_params

        params, config, meta = load_params(path, use_ema=use_ema, step=step)
        predictor = cls(params, config, max_batch=max_batch, rows_per_pass=rows_per_pass)
        predictor.step = meta["step"]
        return predictor

    # --- the network, in padded chunks -------------------------------------------------

    def _bucket(self, rows: int) -> int:
        return max(_MIN_BUCKET, 1 << max(0, rows - 1).bit_length())

    def _padded_size(self, rows: int) -> int:
        """The batch shape a chunk of `rows` rows (1..max_batch) is padded to (no passes)."""
        return min(self._bucket(rows), self.max_batch)

    def batch_shapes(self, max_rows: int) -> list[int]:
        """The batch shapes (rows per network call) that calls of 1..max_rows rows use:
        with row passes `pass_sizes`' (rows_per_pass and the powers of two below it), else
        the padded chunk sizes."""
        if self.rows_per_pass is not None:
            step = self.rows_per_pass
            enough = range(1, min(max_rows, 2 * step - 1) + 1)  # one full pass, any remainder
            return sorted({size for rows in enough for size in pass_sizes(rows, step)})
        return sorted({self._padded_size(n) for n in range(1, min(max_rows, self.max_batch) + 1)})

    def warm_up(
        self, max_boards: int | None = None, stop: threading.Event | None = None
    ) -> list[int]:
        """Compiles now every batch shape that a move_values call on at most `max_boards`
        boards can need (default: any call), so that no later call waits for XLA; returns
        those shapes, ascending. An engine that scores one board per move passes 1: up to
        MAX_LEGAL_MOVES rows for AV (one per move) and SV (one per successor), one row for
        BC. The shapes come from `batch_shapes`, which follows `_run`. Once `stop` is set,
        the shapes not yet begun are skipped (a background compile ended early)."""
        if self._graph is not None:  # gateau: one row per board, shapes of (boards, edges)
            size = max_boards or self._graph.max_boards
            return self._graph.warm_up(self.params, size, stop=stop)
        kind = self.config.target_kind
        rows = self.max_batch if max_boards is None else max(1, max_boards) * kind.rows_per_board
        shapes = self.batch_shapes(rows)
        fn = self._scoring_fn()
        with_actions = kind.takes_action

        def compile_shape(size: int) -> None:
            if stop is not None and stop.is_set():
                return
            states = np.zeros((size, SEQUENCE_LENGTH), np.int32)
            self._run(fn, states, np.zeros(size, np.int32) if with_actions else None)

        # XLA compiles one shape on one core: the pass threads compile them side by side.
        list(_pass_pool().map(compile_shape, shapes))
        return shapes

    def fix_shapes(
        self, max_boards: int, compile_now: bool = True, stop: threading.Event | None = None
    ) -> list:
        """From now on, calls on at most `max_boards` boards use only a few batch shapes,
        and (with `compile_now`) all are compiled now: a search then never waits for XLA.
        The row passes of a CPU are such a set already; the gateau backbone pads its boards
        to them (GraphRunner.fixed_shapes). Returns the shapes. `stop`: as `warm_up`'s."""
        if self._graph is None:
            return self.warm_up(max_boards, stop) if compile_now else []
        shapes = self._graph.fixed_shapes(max_boards)
        if compile_now:
            self._graph.compile(self.params, shapes, stop)
        return shapes

    def _scoring_fn(self):
        """The network function move_values calls: AV's one-board values in row passes
        (every pass is one board's moves), else values (AV, SV) or log-probs (BC)."""
        kind = self.config.target_kind
        if kind is AV and self.rows_per_pass is not None:
            return self._board_values
        return self._values if kind.value_head else self._log_probs

    def _run(
        self,
        fn,
        states: np.ndarray,
        actions: np.ndarray | None,
        board_rows: Sequence[int] | None = None,
    ):
        """fn over `states` (and `actions`) in padded chunks; an array, or a tuple of arrays
        when fn returns a tuple. `board_rows` (the rows of each board, in order) keeps every
        row pass within one board, as `_board_values` needs."""
        if self.rows_per_pass is not None:
            return self._run_in_passes(fn, states, actions, board_rows)
        outputs = []
        for start in range(0, len(states), self.max_batch):
            chunk = states[start : start + self.max_batch]
            rows = len(chunk)
            size = self._padded_size(rows)
            padded = np.zeros((size, chunk.shape[1]), np.int32)
            padded[:rows] = chunk
            padded_actions = None
            if actions is not None:
                padded_actions = np.zeros(size, np.int32)
                padded_actions[:rows] = actions[start : start + rows]
            outputs.append(fn(self.params, padded, padded_actions))
        return _gathered(outputs, len(states))

    def _run_in_passes(
        self,
        fn,
        states: np.ndarray,
        actions: np.ndarray | None,
        board_rows: Sequence[int] | None = None,
    ):
        """fn over passes of at most `rows_per_pass` rows (`pass_sizes`: no padding, a few
        shapes; per board with `board_rows`), all in flight together on the pass threads,
        each thread reading its own."""
        states = np.asarray(states, np.int32)
        actions = None if actions is None else np.asarray(actions, np.int32)
        step = self.rows_per_pass
        groups = [len(states)] if board_rows is None else board_rows
        sizes = [size for rows in groups for size in pass_sizes(int(rows), step)]
        starts = np.cumsum([0, *sizes[:-1]]).tolist()

        def one_pass(start: int, size: int):
            stop = start + size
            return jax.device_get(
                fn(
                    self.params,
                    states[start:stop],
                    None if actions is None else actions[start:stop],
                )
            )

        if len(sizes) == 1:
            return _gathered([one_pass(0, sizes[0])], len(states))
        return _gathered(list(_pass_pool().map(one_pass, starts, sizes)), len(states))

    def _require(self, kind: TargetKind, what: str) -> None:
        if self.config.target_kind is not kind:
            raise TargetError(
                f"{what} needs a model trained for target {kind.name!r}; "
                f"this one was trained for {self.config.target!r}"
            )

    def log_probs(self, states: np.ndarray, actions: np.ndarray | None = None) -> np.ndarray:
        """The network's raw output for tokenized rows (core.tokenizer.tokenize_batch):
        (N, num_bins) log-probabilities over value bins for AV (`actions`: (N,) action
        indices) and SV, (N, 1968) over actions for BC. Padded and jitted like the rest."""
        states, actions = self._token_rows(states, actions)
        if len(states) == 0:
            return np.zeros((0, self.config.output_size), np.float32)
        if self._graph is not None:
            return self._graph.token_rows(self.params, states, actions, both=False)
        return self._run(self._log_probs, states, actions)

    def log_probs_and_values(
        self, states: np.ndarray, actions: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """AV/SV: `log_probs` and the expected win probability of each row from the same
        network pass (the values are action_values'/state_values' up to float32 rounding:
        another compiled program, which XLA may fuse differently)."""
        if not self.config.target_kind.value_head:
            raise TargetError(f"values need an AV or SV model, not {self.config.target!r}")
        states, actions = self._token_rows(states, actions)
        if len(states) == 0:
            return np.zeros((0, self.config.output_size), np.float32), np.zeros(0, np.float32)
        if self._graph is not None:
            return self._graph.token_rows(self.params, states, actions, both=True)
        return self._run(self._both, states, actions)

    def _token_rows(self, states, actions) -> tuple[np.ndarray, np.ndarray | None]:
        if (actions is None) == self.config.target_kind.takes_action:
            raise ValueError("pass actions exactly when the model's target is 'av'")
        return np.asarray(states), None if actions is None else np.asarray(actions)

    # --- the three targets -------------------------------------------------------------

    def action_values(
        self, fens: Sequence[str], moves: Sequence[Sequence[str]]
    ) -> list[np.ndarray]:
        """AV: for board i, the predicted win probability of each move in moves[i]."""
        self._require(AV, "action_values")
        if len(fens) != len(moves):
            raise ValueError(f"{len(fens)} FENs but {len(moves)} move lists")
        lengths = np.array([len(m) for m in moves], dtype=np.int64)
        if lengths.sum() == 0:
            return [np.zeros(0, np.float32) for _ in fens]
        if self._graph is not None:
            return self._graph.action_values(self.params, list(fens), moves)
        states = np.repeat(model_tokens(list(fens)), lengths, axis=0)
        actions = moves_to_indices(np.concatenate([np.asarray(m, dtype=str) for m in moves]))
        values = self._run(self._scoring_fn(), states, actions, board_rows=lengths)
        return np.split(values, np.cumsum(lengths)[:-1])

    @property
    def values_boards(self) -> bool:
        """Whether `state_values` answers: an SV model, or a BC policy with a value head beside
        it (model.policy_value)."""
        kind = self.config.target_kind
        return kind is SV or (kind is BC and self.config.model.policy_value)

    def state_values(self, fens: Sequence[str]) -> np.ndarray:
        """SV, or BC with a value head beside the policy: (N,) predicted win probability of
        the side to move."""
        if self.config.target_kind is BC and not self.values_boards:
            raise TargetError(
                "state_values needs an SV model or a BC policy with a value head beside it "
                "(model.policy_value); this one is a BC policy without one"
            )
        if not self.values_boards:
            self._require(SV, "state_values")
        if len(fens) == 0:
            return np.zeros(0, np.float32)
        if self._graph is not None:
            return self._graph.state_values(self.params, list(fens))
        return self._run(self._values, model_tokens(list(fens)), None)

    def move_log_probs(self, fens: Sequence[str]) -> np.ndarray:
        """BC: (N, 1968) log-probabilities over the whole action space (legal or not)."""
        self._require(BC, "move_log_probs")
        if len(fens) == 0:
            return np.zeros((0, NUM_ACTIONS), np.float32)
        if self._graph is not None:
            return self._graph.move_log_probs(self.params, list(fens))
        return self._run(self._log_probs, model_tokens(list(fens)), None)

    # --- any target: a score per legal move --------------------------------------------

    def move_values(self, boards: Sequence[chess.Board]) -> list[tuple[list[str], np.ndarray]]:
        """For each board, its legal moves in action-space order and a score per move,
        higher being better for the side to move:

        - AV: the move's predicted win probability;
        - SV: 1 - the predicted state value of the successor board, for the opponent. A
          successor that is checkmate scores 1 and stalemate or insufficient material 0.5
          (rules of the game, not search: such boards never appear in the training data);
        - BC: the move's probability, renormalised over the legal moves.

        A board without legal moves gets ([], an empty array).
        """
        score = self.config.target_kind.move_score
        if self._graph is not None and score == "move_value":
            return self._graph.move_values(self.params, boards)  # one pass per board
        legal = [legal_actions(board) for board in boards]
        if score == "move_value":
            scores = self.action_values([b.fen() for b in boards], legal)
        elif score == "successor_value":
            scores = self._successor_scores(boards, legal)
        else:
            scores = self._policy_scores(boards, legal)
        return [(moves, np.asarray(s, np.float32)) for moves, s in zip(legal, scores, strict=True)]

    def policies_and_values(
        self, boards: Sequence[chess.Board]
    ) -> tuple[list[tuple[list[str], np.ndarray]], np.ndarray]:
        """A BC policy with a value head beside it: `move_values` (each board's legal moves
        and their probabilities) and `state_values` of the boards, from one network pass."""
        if not (self.config.target_kind is BC and self.values_boards):
            raise TargetError("policies_and_values needs a BC policy with a value head beside it")
        legal = [legal_actions(board) for board in boards]
        if not boards:
            return [], np.zeros(0, np.float32)
        log_probs, values = self._graph.move_log_probs_and_values(
            self.params, [b.fen() for b in boards]
        )
        policies = [
            (moves, legal_move_probs(row, moves).astype(np.float32))
            for row, moves in zip(log_probs, legal, strict=True)
        ]
        return policies, values

    def successor_values(self, board: chess.Board, moves: Sequence[str]) -> np.ndarray:
        """A model that values boards (`values_boards`): each move's win probability for the
        side to move, 1 - the predicted value of the board after it (a checkmate 1, a
        stalemate or insufficient material 0.5)."""
        return self._successor_scores([board], [list(moves)])[0]

    def best_moves(self, boards: Sequence[chess.Board]) -> list[str | None]:
        """The top-scoring legal move of each board (first in action order on ties)."""
        return [
            moves[int(np.argmax(s))] if moves else None for moves, s in self.move_values(boards)
        ]

    def _successor_scores(self, boards, legal) -> list[np.ndarray]:
        fens, where, fixed = [], [], []
        for i, (board, moves) in enumerate(zip(boards, legal, strict=True)):
            scores = np.zeros(len(moves), np.float32)
            for j, uci in enumerate(moves):
                after = board.copy(stack=False)
                after.push_uci(uci)
                if after.is_checkmate():
                    scores[j] = 1.0
                elif after.is_stalemate() or after.is_insufficient_material():
                    scores[j] = 0.5
                else:
                    fens.append(after.fen())
                    where.append((i, j))
            fixed.append(scores)
        if fens:
            opponent = self.state_values(fens)
            for (i, j), value in zip(where, opponent, strict=True):
                fixed[i][j] = 1.0 - value
        return fixed

    def _policy_scores(self, boards, legal) -> list[np.ndarray]:
        log_probs = self.move_log_probs([b.fen() for b in boards])
        return [legal_move_probs(row, moves) for row, moves in zip(log_probs, legal, strict=True)]


@functools.cache
def _pass_pool() -> ThreadPoolExecutor:
    """The host threads of the pass streams, one pool for the process."""
    return ThreadPoolExecutor(_PASS_THREADS, thread_name_prefix="predictor-passes")


def _gathered(outputs: list, rows: int):
    """The first `rows` rows of the concatenated per-call outputs (arrays, or tuples of
    arrays), fetched from the device in one transfer."""
    if not outputs:
        return np.zeros((0,), np.float32)
    outputs = jax.device_get(outputs)
    if isinstance(outputs[0], tuple):
        return tuple(np.concatenate(parts)[:rows] for parts in zip(*outputs, strict=True))
    return np.concatenate(outputs)[:rows]


def legal_move_probs(log_probs: np.ndarray, moves: Sequence[str]) -> np.ndarray:
    """BC: one board's (1968,) log-probabilities renormalised over its legal `moves` (UCI),
    as move_values scores them; empty for no moves."""
    if not moves:
        return np.zeros(0, np.float32)
    logits = log_probs[moves_to_indices(moves)].astype(np.float64)
    weights = np.exp(logits - logits.max())
    return weights / weights.sum()
