"""A digest of the files under a folder: what a model is on disk, so that one rewritten in
place (retrained, shipped over) is told from the one before it."""

from __future__ import annotations

import pathlib


def add_files(digest, folder: pathlib.Path, base: pathlib.Path | None = None) -> int:
    """Feeds `digest` (a hashlib object) every file under `folder` in path order, each as its
    path relative to `base` (default: `folder`) and its bytes; returns how many files."""
    base = folder if base is None else base
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    for path in files:
        digest.update(str(path.relative_to(base)).encode())
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
    return len(files)
