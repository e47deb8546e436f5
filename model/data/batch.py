"""One batch of examples as the losses read it (model/training/step.py): a typed record whose
fields are arrays, numpy as the loaders make them (model/data/loader.py, model/data/stream.py) and
jax.Array once placed over the devices. A NamedTuple, so it is a JAX pytree (its None fields,
the ones a backbone or target does not use, are empty subtrees) and jit takes it as it is."""

from __future__ import annotations

from typing import Any, NamedTuple

Array = Any  # np.ndarray on the host, jax.Array on the devices


class Batch(NamedTuple):
    """b = this process's rows. `targets`: the bin or action per row, (b,) int32, or per
    move edge (gateau AV, (b, E)); with HL-Gauss, a distribution over the bins in a last
    axis of float32."""

    states: Array  # (b, 77) uint8 tokens
    targets: Array
    actions: Array | None = None  # (b,) int32: the move each row values (transformer AV)
    # gateau's graphs, padded to E edges (model/networks/board_graph.py): (b, E) int32 each
    senders: Array | None = None
    receivers: Array | None = None
    kinds: Array | None = None
    target_mask: Array | None = None  # (b, E) bool: the valued move edges (gateau AV)
    # (b,) int32: the board's state value bin for a value head beside the policy, -1 where
    # the board has none (model.policy_value).
    value_targets: Array | None = None

    def arrays(self) -> dict[str, Array]:
        """The fields in use, by name."""
        return {
            name: value for name, value in zip(self._fields, self, strict=True) if value is not None
        }
