"""Command-line arguments into a typed config: the one place main()s turn argparse's
namespace into their frozen dataclass."""

from __future__ import annotations

import argparse
import dataclasses
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
