"""Where PGN text comes from: paths, globs and URLs on any Beam filesystem, streamed as lines.

`.pgn.zst` is decompressed on the fly (never to disk) block by block (pipeline.zstd_blocks), so
a truncated file is noticed and a corrupt one keeps the text of every block before the damage.
`.gz`/`.bz2` go through Beam's own decompression. `http(s)://` URLs are streamed with urllib
(Beam has no HTTP filesystem); everything else (local, gs://, s3://, ...) through
`apache_beam.io.filesystems.FileSystems`.
"""

from __future__ import annotations

import bz2
import gzip
import os
import sys
import urllib.request
from collections.abc import Callable, Iterator
from typing import BinaryIO

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from pipeline.zstd_blocks import ZstdDamage, decompressed_chunks
from runtime.text_files import InputError

_CHUNK_BYTES = 1 << 20
# A real PGN line is a tag or a game's movetext (under 300 bytes; a few KB with clock and eval
# comments); one longer than this is damage, and buffering it whole could take gigabytes.
MAX_LINE_BYTES = 1 << 20
_GLOB_CHARS = "*?["
_PGN_SUFFIXES = (".pgn", ".pgn.zst", ".pgn.gz", ".pgn.bz2")


class NoInputError(FileNotFoundError):
    """A pattern that names no input at all."""


def is_url(path: str) -> bool:
    return path.startswith(("http://", "https://"))


def expand_inputs(patterns: list[str]) -> list[str]:
    """Paths, globs, directories and URLs -> the sorted, de-duplicated list of inputs.

    A pattern matching nothing is an error naming it: a typo must not silently shrink a run.
    A local directory stands for the PGN files directly inside it. A pattern that names an
    existing file is that file, even with glob characters in its name.
    """
    found: list[str] = []
    for pattern in patterns:
        if is_url(pattern):
            found.append(pattern)
            continue
        if os.path.isdir(pattern):
            names = sorted(n for n in os.listdir(pattern) if n.endswith(_PGN_SUFFIXES))
            matches = [os.path.join(pattern, n) for n in names]
        elif FileSystems.exists(pattern):  # an existing name wins: `game [1].pgn` is a file
            matches = [pattern]
        elif any(c in pattern for c in _GLOB_CHARS):
            result = FileSystems.match([pattern])[0]
            matches = sorted(m.path for m in result.metadata_list)
        else:
            matches = []
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
    """Decompressed bytes of a (possibly multi-frame) zstd stream, block by block; InputError
    (after every block before the damage) if it is corrupt or cut short."""
    try:
        yield from decompressed_chunks(lambda: raw.read(_CHUNK_BYTES))
    except ZstdDamage as e:
        raise InputError(path, str(e)) from e


def _raw_chunks(raw: BinaryIO, path: str) -> Iterator[bytes]:
    while True:
        try:
            data = raw.read(_CHUNK_BYTES)
        except (OSError, EOFError, ValueError) as e:  # gzip/bz2 corruption or truncation
            raise InputError(path, f"unreadable: {e}") from e
        if not data:
            return
        yield data


def read_lines(
    path: str, on_long_line: Callable[[InputError], None] | None = None
) -> Iterator[str]:
    """The lines of one PGN input (without line endings), decoded as UTF-8.

    Undecodable bytes become U+FFFD rather than failing the file. A line longer than
    MAX_LINE_BYTES is not PGN (a lost newline, a binary blob): it is yielded as an empty line
    (so the game it sat in ends there and line numbers stay right) and `on_long_line` gets an
    InputError naming the file and the line's line number and byte offset (by default it is
    printed as a warning). Memory stays under MAX_LINE_BYTES plus a chunk whatever the input,
    and each byte is copied a bounded number of times: reading is linear in the input.
    Raises InputError (after yielding every complete line before the damage) if the input is
    corrupt or cut short.
    """
    zst = path.endswith((".zst", ".zstd"))
    compression = CompressionTypes.UNCOMPRESSED if zst or is_url(path) else CompressionTypes.AUTO
    try:
        raw = _open_binary(path, compression)
    except OSError as e:
        raise InputError(path, f"cannot open: {e}") from e
    report = on_long_line or _warn_long_line
    # The line in progress as the chunks holding it (joined once, when its newline comes: a
    # string grown chunk by chunk would be copied again for every chunk).
    pending: list[bytes] = []
    pending_bytes = 0
    too_long = False  # the line in progress passed MAX_LINE_BYTES: its bytes are dropped
    line_number = 0  # of the line in progress, from 1
    line_start = 0  # its byte offset in the (decompressed) text
    offset = 0  # bytes before the current chunk

    def finish(last: bytes) -> str:
        nonlocal pending, pending_bytes, too_long
        if too_long:
            report(_long_line(path, line_number, line_start))
            text = ""
        else:
            text = b"".join((*pending, last)).decode("utf-8", "replace").rstrip("\r")
        pending, pending_bytes, too_long = [], 0, False
        return text

    with raw:
        chunks = _zstd_chunks(raw, path) if zst else _raw_chunks(raw, path)
        for chunk in chunks:
            parts = chunk.split(b"\n")
            position = offset
            for part in parts[:-1]:
                line_number += 1
                if pending or too_long or len(part) > MAX_LINE_BYTES:
                    too_long = too_long or pending_bytes + len(part) > MAX_LINE_BYTES
                    yield finish(part)
                else:  # the common case, a line wholly inside this chunk
                    yield part.decode("utf-8", "replace").rstrip("\r")
                position += len(part) + 1
                line_start = position
            tail = parts[-1]
            if tail and not too_long:
                pending.append(tail)
                pending_bytes += len(tail)
                if pending_bytes > MAX_LINE_BYTES:
                    pending, pending_bytes, too_long = [], 0, True
            offset += len(chunk)
    if pending or too_long:
        line_number += 1
        yield finish(b"")


def _long_line(path: str, line_number: int, offset: int) -> InputError:
    return InputError(
        path,
        f"line {line_number:,} (byte {offset:,}) is longer than {MAX_LINE_BYTES:,} bytes, "
        "not PGN: skipped",
    )


def _warn_long_line(error: InputError) -> None:
    print(f"WARNING: {error}", file=sys.stderr, flush=True)
