"""Command-line arguments into a typed config: the one place main()s turn argparse's
namespace into their frozen dataclass, and the argument types that refuse a bad value while
parsing (argparse's usage and one error line, exit 2) rather than deep in the run."""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
from collections.abc import Callable
from typing import Any, TypeVar

C = TypeVar("C")


def config_from_args(cls: type[C], args: argparse.Namespace, **given: Any) -> C:
    """`cls` (a dataclass) with each field that has an argument of the same name (argparse's
    `dest`: `--max-plies` is `max_plies`) taken from `args`; `given` sets or converts the
    others (`inputs=tuple(args.inputs)`, a nested config, a renamed option). Fields with
    neither keep their defaults, and the dataclass's own checks run as usual."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")
    taken = {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(cls)
        if f.init and f.name not in given and hasattr(args, f.name)
    }
    return cls(**taken, **given)


# --- argument types: a bad number or name is refused while parsing, before any work ---------


def _number(text: str, kind: type, what: str):
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None


def int_at_least(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    """An argparse `type`: an integer >= `minimum` (and <= `maximum` when given)."""
    what = f"an integer >= {minimum}" + (f" and <= {maximum:,}" if maximum is not None else "")

    def parse(text: str) -> int:
        value = _number(text, int, "an integer")
        if value < minimum or (maximum is not None and value > maximum):
            raise argparse.ArgumentTypeError(f"expected {what}, got {value}")
        return value

    parse.__name__ = "integer"  # argparse names the type in some of its messages
    return parse


positive_int = int_at_least(1)
non_negative_int = int_at_least(0)


def positive_float(text: str) -> float:
    """An argparse `type`: a finite number > 0."""
    value = _number(text, float, "a number")
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text}")
    return value


def plain_name(text: str) -> str:
    """An argparse `type` for a name that becomes one directory under an output (a split):
    no path separator, not `.` or `..`, not empty, so that it cannot point outside it."""
    if not text or text in (".", "..") or "/" in text or os.sep in text or "\\" in text:
        raise argparse.ArgumentTypeError(
            f"expected a plain name (no '/', not '.' or '..'), got {text!r}"
        )
    return text
