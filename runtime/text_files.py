"""The text files evaluation reads (puzzle CSVs, EPD suites): opened plain or `.zst`, and a
file whose bytes are not text refused in one line naming it (not a bare codec error)."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from typing import TextIO

import zstandard


class InputError(OSError):
    """An input that cannot be opened or read to its end; `path` names it. (Raised by the
    pipeline's readers; here, below them all, so that a reader without Apache Beam need not
    load pipeline.sources to raise it.)"""

    def __init__(self, path: str, message: str):
        super().__init__(f"{path}: {message}")
        self.path = path


class NotTextError(ValueError):
    """The file is not UTF-8 text (or not the zstd stream its name promises)."""


def open_text(path: str) -> TextIO:
    """A text stream over `path`, decompressing `.zst` on the fly."""
    if path.endswith(".zst"):
        raw = open(path, "rb")  # noqa: SIM115 - closed with the stream
        stream = zstandard.ZstdDecompressor().stream_reader(raw, closefd=True)
        return io.TextIOWrapper(stream, encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")


@contextlib.contextmanager
def reading(path: str) -> Iterator[None]:
    """Turns decoding errors while `path` is read into one NotTextError naming it."""
    try:
        yield
    except UnicodeDecodeError as e:
        raise NotTextError(f"{path} is not a text file (not UTF-8: {e.reason})") from None
    except zstandard.ZstdError as e:
        raise NotTextError(f"{path} is not a readable .zst file ({e})") from None
