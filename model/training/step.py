"""The training step as pure JAX: the learning-rate schedule, the optimizer, the loss of each
backbone and target, and the jitted step placed over all devices. model/training/train.py runs
it."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from model.config import Config, ModelConfig, TrainConfig
from model.data.batch import Batch
from model.devices import compute_dtype
from model.networks import network
from model.networks.network import init_params
from model.networks.transformer import build, cast

DATA_AXIS = "data"


class TrainState(NamedTuple):
    params: Any
    ema_params: Any
    opt_state: Any


# --- pure pieces: schedule, optimiser, loss, step -------------------------------------


def learning_rate(t: TrainConfig) -> optax.Schedule:
    """Linear warm-up from 0 over `warmup_steps`, then constant or cosine to final_lr_ratio."""
    peak = t.learning_rate
    if t.lr_schedule == "cosine":
        return optax.warmup_cosine_decay_schedule(
            init_value=0.0,
            peak_value=peak,
            warmup_steps=t.warmup_steps,
            decay_steps=max(t.num_steps, t.warmup_steps + 1),
            end_value=peak * t.final_lr_ratio,
        )
    if t.warmup_steps:
        return optax.join_schedules(
            [optax.linear_schedule(0.0, peak, t.warmup_steps), optax.constant_schedule(peak)],
            [t.warmup_steps],
        )
    return optax.constant_schedule(peak)


def make_optimizer(t: TrainConfig) -> optax.GradientTransformation:
    """Adam after global-norm clipping (the paper's optimiser)."""
    return optax.chain(optax.clip_by_global_norm(t.grad_clip_norm), optax.adam(learning_rate(t)))


def make_loss(config: Config) -> Callable:
    """loss(params, batch) -> (mean cross-entropy, metrics). Hard targets are int indices;
    soft (HL-Gauss) targets are distributions over the bins (last axis)."""
    if network.is_graph(config):
        return _make_graph_loss(config)
    model = build(config)
    dtype = compute_dtype(config.train.dtype)

    def loss(params, batch: Batch):
        log_probs = model.apply(cast(params, dtype), batch.states, batch.actions)
        nll, hard = _cross_entropy(log_probs, batch.targets)
        mean = nll.mean()
        accuracy = (jnp.argmax(log_probs, axis=-1) == hard).mean()
        return mean, {"loss": mean, "accuracy": accuracy}

    return loss


def _cross_entropy(log_probs: jax.Array, targets: jax.Array) -> tuple[jax.Array, jax.Array]:
    """-log p(target) and the hard target, for int targets or soft targets (last axis)."""
    if targets.ndim == log_probs.ndim:
        # A BC policy is -inf off the move edges, where a soft target is 0: 0 there, not NaN.
        terms = jnp.where(targets > 0, targets * log_probs, 0.0)
        return -terms.sum(axis=-1), jnp.argmax(targets, axis=-1)
    nll = -jnp.take_along_axis(log_probs, targets[..., None], axis=-1)[..., 0]
    return nll, targets


def _make_graph_loss(config: Config) -> Callable:
    """A board-at-once backbone's loss on whole boards (model.data.board_view.BoardBatches): AV
    averages over the valued move edges of the batch (every action value is one term, as in the
    transformer's AV), SV over boards, BC over boards with the log-softmax over each
    board's move edges. `values_per_board` is the number of labels a board carried."""
    model = network.graph_module(config).build(config)
    dtype = compute_dtype(config.train.dtype)
    value_weight = config.train.value_weight

    def loss(params, batch: Batch):
        log_probs = model.apply(
            cast(params, dtype),
            batch.states,
            batch.senders,
            batch.receivers,
            batch.kinds,
        )
        value_metrics = {}
        if isinstance(log_probs, tuple):  # a policy with a value head beside it
            log_probs, value_log_probs = log_probs
            value_nll, value_metrics = _board_value_loss(value_log_probs, batch.value_targets)
        nll, hard = _cross_entropy(log_probs, batch.targets)
        right = jnp.argmax(log_probs, axis=-1) == hard
        if batch.target_mask is not None:
            mask = batch.target_mask
            count = mask.sum()
            mean = jnp.where(mask, nll, 0.0).sum() / jnp.maximum(count, 1)
            accuracy = jnp.where(mask, right, False).sum() / jnp.maximum(count, 1)
            per_board = count / mask.shape[0]
        else:
            mean, accuracy, per_board = nll.mean(), right.mean(), jnp.float32(1.0)
        metrics = {"loss": mean, "accuracy": accuracy, "values_per_board": per_board}
        if value_metrics:
            metrics["policy_loss"] = mean
            mean = mean + value_weight * value_nll
            metrics["loss"] = mean
        return mean, {**metrics, **value_metrics}

    return loss


def _board_value_loss(log_probs: jax.Array, targets: jax.Array) -> tuple[jax.Array, dict]:
    """The value head's mean cross-entropy over the boards with a state value (bin >= 0),
    and its metrics: `value_loss` and `value_accuracy` (the right bin)."""
    has = targets >= 0
    count = jnp.maximum(has.sum(), 1)
    nll, _ = _cross_entropy(log_probs, jnp.maximum(targets, 0))
    mean = jnp.where(has, nll, 0.0).sum() / count
    right = (jnp.argmax(log_probs, axis=-1) == targets) & has
    return mean, {"value_loss": mean, "value_accuracy": right.sum() / count}


def make_train_step(config: Config, optimizer: optax.GradientTransformation) -> Callable:
    """step(state, batch) -> (state, metrics): one Adam update and the EMA update."""
    loss = make_loss(config)
    decay = config.train.ema_decay

    def step(state: TrainState, batch: Batch) -> tuple[TrainState, dict]:
        grads, metrics = jax.grad(loss, has_aux=True)(state.params, batch)
        updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        ema = jax.tree_util.tree_map(
            lambda e, p: decay * e + (1.0 - decay) * p, state.ema_params, params
        )
        metrics["grad_norm"] = optax.tree.norm(grads)
        return TrainState(params, ema, opt_state), metrics

    return step


def make_eval_step(config: Config) -> Callable:
    loss = make_loss(config)
    return lambda params, batch: loss(params, batch)[1]


# --- devices --------------------------------------------------------------------------


def maybe_initialize_distributed(force: bool = False) -> None:
    """jax.distributed.initialize when launched as one process of many (env-var triggered)."""
    env = os.environ
    if not (force or env.get("JAX_COORDINATOR_ADDRESS")):
        return
    kwargs = {}
    if env.get("JAX_NUM_PROCESSES"):
        kwargs["num_processes"] = int(env["JAX_NUM_PROCESSES"])
    if env.get("JAX_PROCESS_ID"):
        kwargs["process_id"] = int(env["JAX_PROCESS_ID"])
    jax.distributed.initialize(**kwargs)


@dataclass(frozen=True)
class Placement:
    """The mesh and the two shardings the loop uses."""

    mesh: Mesh
    replicated: NamedSharding
    batch: NamedSharding
    # XLA's CPU runtime can deadlock when a step's all-reduce starts on one device while the
    # previous step still holds the thread pool on another (reproduced with two forced host
    # devices on one or two cores: the rendezvous aborts after 40 s). On CPU with several
    # devices the loop therefore waits for each step before dispatching the next; accelerators
    # keep the asynchronous dispatch that hides the host's work.
    wait_each_step: bool = False

    @classmethod
    def over_all_devices(cls) -> Placement:
        devices = jax.devices()
        mesh = Mesh(np.asarray(devices), (DATA_AXIS,))
        wait = devices[0].platform == "cpu" and len(devices) > 1
        return cls(mesh, NamedSharding(mesh, P()), NamedSharding(mesh, P(DATA_AXIS)), wait)

    def global_batch(self, local: Batch) -> Batch:
        """This process's rows -> arrays sharded over the data axis of all processes."""
        return jax.tree.map(lambda v: jax.make_array_from_process_local_data(self.batch, v), local)


def init_state(config: Config, placement: Placement) -> TrainState:
    params = jax.device_put(init_params(config), placement.replicated)
    # A host round trip gives the EMA its own buffers (the step donates the state).
    ema = jax.device_put(jax.device_get(params), placement.replicated)
    opt_state = jitted(config.model, config.train, placement).optimizer_init(params)
    return TrainState(params, ema, opt_state)


def compile_train_step(config: Config, placement: Placement) -> Callable:
    """The jitted step(state, batch): state replicated, batch split over the data axis."""
    return jitted(config.model, config.train, placement).step


class Jitted(NamedTuple):
    step: Callable
    optimizer_init: Callable
    evaluate: Callable


@functools.cache
def jitted(model: ModelConfig, t: TrainConfig, placement: Placement) -> Jitted:
    """The loop's jitted functions, shared by runs of one config in a process (tests, or a
    notebook training twice) so that each compiles once."""
    config = Config(model=model, train=t)
    optimizer = make_optimizer(t)
    return Jitted(
        step=jax.jit(
            make_train_step(config, optimizer),
            in_shardings=(placement.replicated, placement.batch),
            out_shardings=(placement.replicated, placement.replicated),
            donate_argnums=0,
        ),
        optimizer_init=jax.jit(optimizer.init, out_shardings=placement.replicated),
        evaluate=jax.jit(
            make_eval_step(config),
            in_shardings=(placement.replicated, placement.batch),
            out_shardings=placement.replicated,
        ),
    )
