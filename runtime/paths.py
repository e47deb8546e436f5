"""Where a path a user typed points: the directory a program was started from, then the
project's source checkout.

A chess GUI or lichess-bot starts an engine from its own directory, so a relative path such as
`runs/9m` or the default `models/cpu` means nothing there; it is looked for in the start
directory first (what the user typed it against, if anything) and then in the checkout this
package runs from. The checkout is known for a plain clone and an editable install (`pip
install -e`, as `make setup` does), where the package's modules are the checkout's files. An
installed wheel has no checkout: `project_root()` is None and only the start directory (and
absolute paths) count.
"""

from __future__ import annotations

import os
import pathlib
import tomllib
from dataclasses import dataclass

PROJECT_NAME = "searchless-chess"


def project_root() -> pathlib.Path | None:
    """The source checkout holding this package (the directory of its pyproject.toml), or None
    when the package was installed from a wheel (its modules then live in site-packages)."""
    candidate = pathlib.Path(__file__).resolve().parent.parent
    try:
        with open(candidate / "pyproject.toml", "rb") as f:
            name = tomllib.load(f).get("project", {}).get("name")
    except (OSError, tomllib.TOMLDecodeError):
        return None
    return candidate if name == PROJECT_NAME else None


@dataclass(frozen=True)
class Resolved:
    """A user's path and where it was looked for; `path` is None when it is nowhere."""

    given: str
    path: str | None
    tried: tuple[str, ...]

    def describe_missing(self) -> str:
        return f"{self.given!r} not found (looked for {', '.join(self.tried)})"


def resolve_path(given: str, start_dir: str) -> Resolved:
    """`given` (with `~` expanded) as an absolute path: itself if absolute, else the first of
    start_dir/given and project_root()/given that exists."""
    expanded = os.path.expanduser(given)
    if os.path.isabs(expanded):
        bases: list[str | pathlib.Path] = [""]
    else:
        bases = [start_dir]
        root = project_root()
        if root is not None and os.path.abspath(root) != os.path.abspath(start_dir):
            bases.append(root)
    tried = tuple(os.path.abspath(os.path.join(base, expanded)) for base in bases)
    found = next((p for p in tried if os.path.exists(p)), None)
    return Resolved(given=given, path=found, tried=tried)
