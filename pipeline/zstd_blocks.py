"""Streaming zstd decompression that loses nothing decoded before damage.

The zstandard library's decompressor hands back the output of a `decompress(data)` call only
when the whole call succeeds: given a megabyte of compressed input, an error in its last block
throws away the text of every good block before it. So the compressed stream is cut into
pieces that never hold the end of one block and anything after it (the zstd format, RFC 8878:
frame headers, 3-byte block headers with their sizes, optional 4-byte checksums, skippable
frames). Each `decompress` call then finishes at most one block, and a damaged block costs only
its own text. The cutting never changes what is decoded (the decoder sees the same bytes in
the same order), only where an error can strike; a header too damaged to parse just ends the
cutting, and the decoder reports the damage.

No Apache Beam here: the single-process importers use this too.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import zstandard

_FRAME_MAGIC = 0xFD2FB528
_SKIPPABLE_MAGIC = 0x184D2A50  # ... to 0x184D2A5F
_BLOCK_HEADER = 3
_CHECKSUM = 4
_RLE_BLOCK = 1


class ZstdDamage(ValueError):
    """The stream is corrupt or ends mid-frame; the message says where."""


def _frame_header_size(descriptor: int) -> int:
    """Bytes of a zstd frame header (magic included) from its descriptor byte."""
    content_size_flag, single_segment = descriptor >> 6, (descriptor >> 5) & 1
    dictionary_id_size = (0, 1, 2, 4)[descriptor & 3]
    content_size_size = (single_segment, 2, 4, 8)[content_size_flag]
    return 4 + 1 + (0 if single_segment else 1) + dictionary_id_size + content_size_size


class _Pieces:
    """The compressed stream as (offset, bytes) pieces, each ending at or before the next
    boundary (the end of a frame header, block, checksum or skippable frame)."""

    def __init__(self, read: Callable[[], bytes]):
        self._read = read
        self._buffer = b""
        self._start = 0  # index in _buffer of the next byte to hand out
        self.offset = 0  # its position in the stream
        self._eof = False
        self._boundary = 0  # stream position where the current piece must end
        self._state = "frame"  # what starts at the boundary: frame | block | checksum
        self._checksum = False  # whether the current frame ends with a checksum

    def _available(self, size: int) -> bytes:
        """Up to `size` bytes from the next one on, reading more input while needed."""
        while len(self._buffer) - self._start < size and not self._eof:
            data = self._read()
            if not data:
                self._eof = True
            else:
                self._buffer = self._buffer[self._start :] + data
                self._start = 0
        return self._buffer[self._start : self._start + size]

    def _next_boundary(self) -> float:
        """Parses the header at the current boundary: where the next piece must end."""
        if self._state == "checksum":
            self._state = "frame"
            return self.offset + _CHECKSUM
        if self._state == "block":
            header = self._available(_BLOCK_HEADER)
            if len(header) < _BLOCK_HEADER:
                return math.inf
            value = int.from_bytes(header, "little")
            last, kind, size = value & 1, (value >> 1) & 3, value >> 3
            if last:
                self._state = "checksum" if self._checksum else "frame"
            return self.offset + _BLOCK_HEADER + (1 if kind == _RLE_BLOCK else size)
        head = self._available(8)
        if len(head) < 5:
            return math.inf
        magic = int.from_bytes(head[:4], "little")
        if magic == _FRAME_MAGIC:
            self._state, self._checksum = "block", bool(head[4] & 4)
            return self.offset + _frame_header_size(head[4])
        if magic & ~0xF == _SKIPPABLE_MAGIC and len(head) == 8:
            return self.offset + 8 + int.from_bytes(head[4:], "little")
        return math.inf  # not zstd: the decoder says so

    def __iter__(self) -> Iterator[tuple[int, bytes]]:
        while True:
            if self.offset >= self._boundary:
                self._boundary = self._next_boundary()
            room = self._boundary - self.offset
            data = self._available(1)
            if not data:
                return
            end = (
                len(self._buffer)
                if room == math.inf
                else min(len(self._buffer), self._start + room)
            )
            piece = self._buffer[self._start : end]
            offset = self.offset
            self._start = end
            self.offset += len(piece)
            yield offset, piece


def decompressed_chunks(read: Callable[[], bytes]) -> Iterator[bytes]:
    """The decompressed bytes of a (possibly multi-frame) zstd stream, block by block.

    `read()` returns the next compressed bytes, b"" at the end. Raises ZstdDamage after
    yielding the text of every block before the damage, or if the stream ends mid-frame
    (the zstandard stream reader would silently return the partial data instead).
    """
    decompressor = zstandard.ZstdDecompressor()
    frame = decompressor.decompressobj()
    frame_has_input = False
    pieces = _Pieces(read)
    for offset, piece in pieces:
        data = piece
        while data:
            try:
                out = frame.decompress(data)
            except zstandard.ZstdError as e:
                raise ZstdDamage(f"corrupt zstd data near byte {offset:,}: {e}") from e
            frame_has_input = True
            if out:
                yield out
            if not frame.eof:
                break
            # The frame ended inside this piece (e.g. after a skippable frame): the rest, if
            # any, starts the next frame.
            data = frame.unused_data
            frame = decompressor.decompressobj()
            frame_has_input = False
    if frame_has_input and not frame.eof:
        raise ZstdDamage(f"truncated zstd stream: it ends mid-frame after {pieces.offset:,} bytes")
