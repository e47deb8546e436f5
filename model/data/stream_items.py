"""A streaming host's examples in compact form (model/data/stream.py): a block's items, the
shuffle window they are joined into, and the memory maps that hold them."""

from __future__ import annotations

import mmap
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from core.tokenizer import SEQUENCE_LENGTH


@dataclass(frozen=True)
class Items:
    """Examples in compact form: item i is board `board[i]` (tokens `states[board[i]]`),
    with `action[i]` (AV) and `target[i]` (int32 bin or action; float32 win probability for
    HL-Gauss targets)."""

    states: np.ndarray  # (boards, 77) uint8
    board: np.ndarray  # (n,) int32
    action: np.ndarray | None  # (n,) int32
    target: np.ndarray  # (n,)

    def __len__(self) -> int:
        return len(self.board)

    def take(self, index: np.ndarray) -> dict[str, np.ndarray]:
        """The items at `index` as arrays: `states`, `target` and, for AV, `actions`."""
        taken = {"states": self.states[self.board[index]], "target": self.target[index]}
        if self.action is not None:
            taken["actions"] = self.action[index]
        return taken


def mapped_empty(shape: int | tuple[int, ...], dtype) -> np.ndarray:
    """An uninitialised array in an anonymous memory map of its own, unmapped as soon as
    the array is dropped. A window's arrays live in these: from malloc, glibc would serve
    them from its heap once a large block has been freed (it raises its mmap threshold
    then), and windows freed and allocated in turn fragment a heap that never shrinks."""
    count = int(np.prod(shape))
    dtype = np.dtype(dtype)
    buffer = mmap.mmap(-1, max(1, count * dtype.itemsize))
    return np.frombuffer(buffer, dtype, count).reshape(shape)


def mapped_copy(array: np.ndarray) -> np.ndarray:
    out = mapped_empty(array.shape, array.dtype)
    out[...] = array
    return out


def concat_items(pieces: Sequence[Items], takes_action: bool, target_dtype) -> Items:
    """The pieces' items one after the other, board indices shifted to the joined states;
    written into mapped arrays allocated once (no per-piece temporaries)."""
    n = sum(len(p) for p in pieces)
    boards = sum(len(p.states) for p in pieces)
    states = mapped_empty((boards, SEQUENCE_LENGTH), np.uint8)
    board = mapped_empty(n, np.int32)
    action = mapped_empty(n, np.int32) if takes_action else None
    target = mapped_empty(n, target_dtype)
    at, first_board = 0, 0
    for piece in pieces:
        stop = at + len(piece)
        states[first_board : first_board + len(piece.states)] = piece.states
        board[at:stop] = piece.board
        board[at:stop] += first_board
        if action is not None:
            action[at:stop] = piece.action
        target[at:stop] = piece.target
        at, first_board = stop, first_board + len(piece.states)
    return Items(states, board, action, target)


@dataclass(frozen=True)
class Window:
    """A window's items and the order they are emitted in."""

    epoch: int
    index: int
    items: Items
    order: np.ndarray  # (n,) int64, a permutation

    def __len__(self) -> int:
        return len(self.order)

    def take(self, start: int, stop: int) -> dict[str, np.ndarray]:
        return self.items.take(self.order[start:stop])
