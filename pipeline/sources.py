"""Where PGN text comes from: paths, globs and URLs on any Beam filesystem, streamed as lines.

`.pgn.zst` is decompressed on the fly (never to disk) frame by frame, so a truncated file is
noticed: the zstandard stream reader would silently return the partial data instead.
`.gz`/`.bz2` go through Beam's own decompression. `http(s)://` URLs are streamed with urllib
(Beam has no HTTP filesystem); everything else (local, gs://, s3://, ...) through
`apache_beam.io.filesystems.FileSystems`.
"""

from __future__ import annotations

import bz2
import codecs
import gzip
import os
import urllib.request
from collections.abc import Iterator
from typing import BinaryIO

import zstandard
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

_CHUNK_BYTES = 1 << 20
_GLOB_CHARS = "*?["
_PGN_SUFFIXES = (".pgn", ".pgn.zst", ".pgn.gz", ".pgn.bz2")


class InputError(IOError):
    """An input that could not be read to its end; `path` names it."""

    def __init__(self, path: str, message: str):
        super().__init__(f"{path}: {message}")
        self.path = path


class NoInputError(FileNotFoundError):
    """A pattern that names no input at all."""


def is_url(path: str) -> bool:
    return path.startswith(("http://", "https://"))


def expand_inputs(patterns: list[str]) -> list[str]:
    """Paths, globs, directories and URLs -> the sorted, de-duplicated list of inputs.

    A pattern matching nothing is an error naming it: a typo must not silently shrink a run.
    A local directory stands for the PGN files directly inside it.
    """
    found: list[str] = []
    for pattern in patterns:
        if is_url(pattern):
            found.append(pattern)
            continue
        if os.path.isdir(pattern):
            names = sorted(n for n in os.listdir(pattern) if n.endswith(_PGN_SUFFIXES))
            matches = [os.path.join(pattern, n) for n in names]
        elif any(c in pattern for c in _GLOB_CHARS):
            result = FileSystems.match([pattern])[0]
            matches = sorted(m.path for m in result.metadata_list)
        else:
            matches = [pattern] if FileSystems.exists(pattern) else []
        if not matches:
            raise NoInputError(f"no input matches {pattern!r}")
        found.extend(matches)
    return sorted(dict.fromkeys(found))


def _open_binary(path: str, compression: str) -> BinaryIO:
    if not is_url(path):
        return FileSystems.open(path, compression_type=compression)
    response = urllib.request.urlopen(path, timeout=60)  # noqa: S310 (the user's own URL)
    if path.endswith(".gz"):
        return gzip.GzipFile(fileobj=response)
    if path.endswith(".bz2"):
        return bz2.BZ2File(response)
    return response


def _zstd_chunks(raw: BinaryIO, path: str) -> Iterator[bytes]:
    """Decompressed bytes of a (possibly multi-frame) zstd stream; InputError if cut short."""
    decompressor = zstandard.ZstdDecompressor()
    frame = decompressor.decompressobj()
    frame_has_input = False
    consumed = 0
    while True:
        data = raw.read(_CHUNK_BYTES)
        if not data:
            break
        consumed += len(data)
        while data:
            try:
                out = frame.decompress(data)
            except zstandard.ZstdError as e:
                raise InputError(path, f"corrupt zstd data near byte {consumed:,}: {e}") from e
            frame_has_input = True
            if out:
                yield out
            if not frame.eof:
                break
            # The frame ended inside this chunk: the rest (if any) starts the next frame.
            data = frame.unused_data
            frame = decompressor.decompressobj()
            frame_has_input = False
    if frame_has_input and not frame.eof:
        raise InputError(path, f"truncated zstd stream: it ends mid-frame after {consumed:,} bytes")


def _raw_chunks(raw: BinaryIO, path: str) -> Iterator[bytes]:
    while True:
        try:
            data = raw.read(_CHUNK_BYTES)
        except (OSError, EOFError, ValueError) as e:  # gzip/bz2 corruption or truncation
            raise InputError(path, f"unreadable: {e}") from e
        if not data:
            return
        yield data


def read_lines(path: str) -> Iterator[str]:
    """The lines of one PGN input (without line endings), decoded as UTF-8.

    Undecodable bytes become U+FFFD rather than failing the file. Raises InputError (after
    yielding every complete line before the damage) if the input is corrupt or cut short.
    """
    zst = path.endswith((".zst", ".zstd"))
    compression = CompressionTypes.UNCOMPRESSED if zst or is_url(path) else CompressionTypes.AUTO
    try:
        raw = _open_binary(path, compression)
    except OSError as e:
        raise InputError(path, f"cannot open: {e}") from e
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pending = ""
    with raw:
        chunks = _zstd_chunks(raw, path) if zst else _raw_chunks(raw, path)
        for chunk in chunks:
            text = pending + decoder.decode(chunk)
            lines = text.split("\n")
            pending = lines.pop()
            for line in lines:
                yield line.rstrip("\r")
    pending += decoder.decode(b"", final=True)
    if pending:
        yield pending.rstrip("\r")
