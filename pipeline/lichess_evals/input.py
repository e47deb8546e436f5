"""Reading the Lichess evaluation database (import_lichess_evals.py beside it): its bytes,
plain or zstd-compressed, in chunks, and the lines of those chunks, skipping the lines that
earlier parts already imported."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import BinaryIO

from pipeline.zstd_blocks import ZstdDamage, decompressed_chunks
from runtime.text_files import InputError

_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_CHUNK_BYTES = 1 << 20


class JsonlInput:
    """The input's decompressed bytes in chunks; `position` is how far into the file
    (compressed bytes) the reading is, for the ETA."""

    def __init__(self, path: str):
        self.path = path
        try:
            self.size = os.path.getsize(path)
            self._raw: BinaryIO = open(path, "rb")  # noqa: SIM115 - closed by close()
        except OSError as e:
            raise InputError(path, f"cannot open: {e.strerror or e}") from e
        self.compressed = self._raw.read(4) == _ZSTD_MAGIC
        self._raw.seek(0)

    @property
    def position(self) -> int:
        return self._raw.tell()

    def close(self) -> None:
        self._raw.close()

    def chunks(self) -> Iterator[bytes]:
        if not self.compressed:
            while data := self._read():
                yield data
            return
        # Block by block (pipeline.zstd_blocks): a corrupt file keeps every line before the
        # damage, and one cut short is an error rather than silently partial data.
        try:
            yield from decompressed_chunks(self._read)
        except ZstdDamage as e:
            raise InputError(self.path, str(e)) from e

    def _read(self) -> bytes:
        try:
            return self._raw.read(_CHUNK_BYTES)
        except OSError as e:
            raise InputError(self.path, f"unreadable: {e}") from e


def split_lines(chunks: Iterable[bytes], skip: int = 0) -> Iterator[bytes]:
    """The lines of a byte stream (no `\\n`, no trailing `\\r`), after the first `skip`.

    Skipped lines are only counted, never split out, so resuming past completed parts costs
    little more than the decompression. A last line without `\\n` counts if it is not empty.
    """
    pending = b""
    for chunk in chunks:
        if skip:
            newlines = chunk.count(b"\n")
            if newlines < skip:
                skip -= newlines
                continue
            end = -1
            for _ in range(skip):
                end = chunk.index(b"\n", end + 1)
            chunk, skip, pending = chunk[end + 1 :], 0, b""
        lines = (pending + chunk).split(b"\n")
        pending = lines.pop()
        for line in lines:
            yield line[:-1] if line.endswith(b"\r") else line
    if skip:
        raise ValueError(f"the input ended with {skip:,} of the lines to skip still unread")
    if pending:
        yield pending[:-1] if pending.endswith(b"\r") else pending
