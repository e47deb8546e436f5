"""ChessBench `.bag`/`.bagz` files: reading, writing, and the Beam-coded records inside them.

File layout (that of DeepMind's `bagz` library, which wrote ChessBench):

    records ‖ end[0] ‖ end[1] ‖ … ‖ end[n-1]          (each end a little-endian uint64)

Record i spans bytes [end[i-1], end[i]) with end[-1] taken as 0, so end[n-1] is where the
records stop and the index starts. The file's last 8 bytes are therefore both the last index
entry and the index's start offset: n = (file size - index start) / 8. There is no separate
trailer; a reader that assumed one would silently drop every file's last record. A file of
zero bytes is a valid bag with no records (what the reference writer makes for no records);
one of 1 to 7 bytes is not.

In a `.bagz` each record is compressed on its own as one zstd frame, and the index counts
compressed bytes. An empty record is stored as zero bytes, not as a frame of nothing, exactly
as the reference writer does, and reads back as b"" without going through zstd.

A sharded name like `dir/action_value@2148_data.bag` stands for 2148 files, from
`dir/action_value-00000-of-02148_data.bag` to `…-02147-of-02148_data.bag`; see `expand_pattern`.

The records inside are decoded by pipeline/chessbench/records.py.
"""

from __future__ import annotations

import glob
import mmap
import operator
import os
import re
import struct
import sys
from array import array
from collections.abc import Iterator
from types import TracebackType
from typing import NamedTuple, Protocol, SupportsIndex

import numpy as np
import zstandard

# zstd's own default level: what the reference writer uses (it asks for level 0, which zstd
# maps to 3). Output is byte-identical for identical input and libzstd version.
ZSTD_LEVEL = 3
_CHUNK = 65_536  # records per read when iterating or validating a whole file
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_SHARD_SPEC = re.compile(r"@(\d+)")
_GLOB_CHARS = re.compile(r"[*?\[]")


class BagFormatError(ValueError):
    """A bag file, or a record in one, does not follow the format. The message names both."""


# --- Paths -----------------------------------------------------------------------------------


def _is_remote(path: str) -> bool:
    return _SCHEME.match(path) is not None


def expand_pattern(pattern: str) -> list[str]:
    """The files named by `pattern`, in order.

    `pattern` is a comma-separated list of: sharded names (`x@N_data.bag` -> `x-00000-of-
    0000N_data.bag` … in shard order; the `@N` must be in the file name, not a directory),
    globs (`*`, `?`, `[` -> the matches, sorted) and plain paths. Paths with a scheme (`gs://`)
    go through Beam's FileSystems.

    Raises FileNotFoundError naming the part of the pattern that matched nothing. Local shard
    sets are checked for completeness, naming the first missing shard, so that a half-finished
    download fails here and not hours into a run; remote shard names are returned unchecked
    (one request per shard would be slow) and a missing one fails when it is opened.
    """
    paths: list[str] = []
    for part in pattern.split(","):
        part = part.strip()
        if not part:
            raise ValueError(f"empty path in pattern {pattern!r}")
        paths.extend(_expand_one(part))
    return paths


def shard_names(part: str) -> list[str] | None:
    """The shard names a `x@N_data.bag` name stands for, unchecked; None without `@N`."""
    directory, name = os.path.split(part)
    specs = _SHARD_SPEC.findall(name)
    if len(specs) > 1:
        raise ValueError(f"{part!r}: more than one @N shard count")
    if not specs:
        return None
    count = int(specs[0])
    if not 1 <= count <= 99_999:
        raise ValueError(f"{part!r}: shard count must be 1 to 99999, not {count}")
    return [
        os.path.join(directory, _SHARD_SPEC.sub(f"-{i:05d}-of-{count:05d}", name))
        for i in range(count)
    ]


def _expand_one(part: str) -> list[str]:
    paths = shard_names(part)
    if paths is not None:
        count = len(paths)
        if not _is_remote(part):
            missing = [p for p in paths if not os.path.exists(p)]
            if missing:
                raise FileNotFoundError(
                    f"{part}: {len(missing)} of {count} shards missing, e.g. {missing[0]}"
                )
        return paths
    if _GLOB_CHARS.search(part):
        if _is_remote(part):
            from apache_beam.io.filesystems import FileSystems

            (result,) = FileSystems.match([part])
            matches = sorted(m.path for m in result.metadata_list)
        else:
            matches = sorted(glob.glob(part))
        if not matches:
            raise FileNotFoundError(f"no files match {part}")
        return matches
    if _is_remote(part):
        from apache_beam.io.filesystems import FileSystems

        exists = FileSystems.exists(part)
    else:
        exists = os.path.exists(part)
    if not exists:
        raise FileNotFoundError(f"no such file: {part}")
    return [part]


# --- Reading ---------------------------------------------------------------------------------


class _Source(Protocol):
    size: int

    def read(self, offset: int, length: int) -> bytes: ...

    def index(self, offset: int, count: int) -> np.ndarray: ...

    def close(self) -> None: ...


class _LocalSource:
    """A memory-mapped local file: the index stays in the page cache, not in our heap, which
    matters when a loader keeps thousands of shards open (their indexes total ~5% of the data).
    """

    def __init__(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            self.size = os.fstat(fd).st_size
            # mmap refuses empty files; an empty file is a valid empty bag.
            self._map = mmap.mmap(fd, 0, access=mmap.ACCESS_READ) if self.size else None
        finally:
            os.close(fd)

    def read(self, offset: int, length: int) -> bytes:
        return self._map[offset : offset + length] if length else b""

    def index(self, offset: int, count: int) -> np.ndarray:
        if not count:
            return np.zeros(0, dtype="<u8")
        return np.frombuffer(self._map, dtype="<u8", count=count, offset=offset)

    def close(self) -> None:
        if self._map is not None:
            try:
                self._map.close()
            except BufferError:  # someone still holds a view of the index; GC will close it
                pass
            self._map = None


class _BeamSource:
    """A file on any Beam filesystem (gs://, s3://, …), read by seeking."""

    def __init__(self, path: str) -> None:
        from apache_beam.io.filesystem import CompressionTypes
        from apache_beam.io.filesystems import FileSystems

        (result,) = FileSystems.match([path])
        if not result.metadata_list:
            raise FileNotFoundError(f"no such file: {path}")
        self.size = result.metadata_list[0].size_in_bytes
        self._handle = FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)

    def read(self, offset: int, length: int) -> bytes:
        self._handle.seek(offset)
        parts, wanted = [], length
        while wanted:
            part = self._handle.read(wanted)
            if not part:
                break
            parts.append(part)
            wanted -= len(part)
        return b"".join(parts)

    def index(self, offset: int, count: int) -> np.ndarray:
        return np.frombuffer(self.read(offset, 8 * count), dtype="<u8")

    def close(self) -> None:
        self._handle.close()


class Chunk(NamedTuple):
    """Consecutive records: `data[offsets[k]:offsets[k+1]]` is record `first_index + k`."""

    first_index: int
    data: bytes
    offsets: np.ndarray


class BagReader:
    """Random and chunked access to the records of one `.bag` or `.bagz` file.

    `compressed` defaults to whether the name ends in `.bagz`. Paths with a scheme (`gs://…`)
    are read through Beam's FileSystems, local ones through mmap. Opening checks the file's
    size and trailer; index entries are checked whenever they are used (and all of them by
    `validate()`), so that opening thousands of shards does not read thousands of indexes.
    """

    def __init__(self, path: str | os.PathLike[str], *, compressed: bool | None = None) -> None:
        self.path = os.fspath(path)
        self.compressed = self.path.endswith(".bagz") if compressed is None else compressed
        self._source: _Source = (
            _BeamSource(self.path) if _is_remote(self.path) else _LocalSource(self.path)
        )
        self._decompressor = zstandard.ZstdDecompressor()
        try:
            self._index_start, self._len = self._read_trailer()
            self._ends = self._source.index(self._index_start, self._len)
        except BaseException:
            self._source.close()
            raise

    def _read_trailer(self) -> tuple[int, int]:
        size = self._source.size
        if size == 0:
            return 0, 0
        if size < 8:
            raise BagFormatError(f"{self.path}: truncated file: {size} bytes, fewer than 8")
        (index_start,) = struct.unpack("<Q", self._source.read(size - 8, 8))
        if index_start > size - 8:
            raise BagFormatError(
                f"{self.path}: truncated file or bad index: index start {index_start} is past "
                f"the last index entry at {size - 8} (file size {size})"
            )
        if (size - index_start) % 8:
            raise BagFormatError(
                f"{self.path}: truncated file or bad index: {size - index_start} bytes from the "
                f"index start {index_start} to the end, not a whole number of 8-byte entries"
            )
        return index_start, (size - index_start) // 8

    def __len__(self) -> int:
        return self._len

    @property
    def size(self) -> int:
        """The file's size in bytes (0 for an empty bag)."""
        return self._source.size

    def __getitem__(self, i: SupportsIndex) -> bytes:
        i, n = operator.index(i), self._len
        if not -n <= i < n:
            raise IndexError(f"{self.path}: record {i} out of range for {n} records")
        record, _ = self.read_range(i % n, i % n + 1)
        return record

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self.chunks():
            data, offsets = chunk.data, chunk.offsets.tolist()
            for a, b in zip(offsets[:-1], offsets[1:], strict=True):
                yield data[a:b]

    def chunks(self, size: int = _CHUNK) -> Iterator[Chunk]:
        """All records in order, `size` records at a time."""
        for start in range(0, self._len, size):
            data, offsets = self.read_range(start, min(start + size, self._len))
            yield Chunk(start, data, offsets)

    def read_range(self, start: int, stop: int) -> tuple[bytes, np.ndarray]:
        """Records `start` to `stop - 1` concatenated (decompressed if compressed), and their
        boundaries: int64 offsets of length `stop - start + 1`, starting at 0.
        """
        if not 0 <= start <= stop <= self._len:
            raise IndexError(f"{self.path}: range {start}:{stop} out of range for {self._len}")
        ends = self._checked_ends(start, stop)
        stored = self._source.read(int(ends[0]), int(ends[-1] - ends[0]))
        offsets = ends - ends[0]
        if not self.compressed:
            return stored, offsets
        view = memoryview(stored)
        bounds = offsets.tolist()
        records = [
            self._decompress(view[a:b], start + k) if b > a else b""
            for k, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True))
        ]
        lengths = np.fromiter(map(len, records), dtype=np.int64, count=len(records))
        out = np.zeros(len(records) + 1, dtype=np.int64)
        np.cumsum(lengths, out=out[1:])
        return b"".join(records), out

    def _checked_ends(self, start: int, stop: int) -> np.ndarray:
        """Byte offsets of the boundaries of records start..stop, from the index, each checked
        to lie within the records and not before the one preceding it.
        """
        first = 0 if start == 0 else int(self._ends[start - 1])
        if first > self._index_start:
            self._bad_end(start - 1, first)
        raw = self._ends[start:stop]
        past = raw > self._index_start  # compared as uint64: a huge entry must not wrap
        if past.any():
            k = int(np.argmax(past))
            # A decrease before it is the first fault; report that one.
            self._check_order(first, raw[:k].astype(np.int64), start)
            self._bad_end(start + k, int(raw[k]))
        ends = np.empty(stop - start + 1, dtype=np.int64)
        ends[0] = first
        ends[1:] = raw
        self._check_order(first, ends[1:], start)
        return ends

    def _check_order(self, first: int, ends: np.ndarray, start: int) -> None:
        steps = np.diff(ends, prepend=first)
        if (steps < 0).any():
            k = int(np.argmax(steps < 0))
            previous = first if k == 0 else int(ends[k - 1])
            raise BagFormatError(
                f"{self.path}: bad index: record {start + k} ends at {int(ends[k])}, before it "
                f"starts at {previous}"
            )

    def _bad_end(self, i: int, end: int) -> None:
        raise BagFormatError(
            f"{self.path}: bad index: record {i} ends at {end}, past the index start "
            f"{self._index_start}"
        )

    def _decompress(self, frame: memoryview, i: int) -> bytes:
        try:
            return self._decompressor.decompress(frame)
        except zstandard.ZstdError as error:
            failure = error
        # Frames from a streaming compressor need not record their size, which one-shot
        # decompression insists on; stream those, and insist that the frame is complete.
        stream = self._decompressor.decompressobj()
        try:
            record = stream.decompress(frame)
        except zstandard.ZstdError:
            record = None
        if record is None or not stream.eof:
            raise BagFormatError(f"{self.path}: record {i}: bad zstd frame: {failure}")
        return record

    def validate(self) -> None:
        """Checks every index entry (not the records' contents); raises BagFormatError."""
        for start in range(0, self._len, _CHUNK):
            self._checked_ends(start, min(start + _CHUNK, self._len))

    def close(self) -> None:
        self._ends = np.zeros(0, dtype="<u8")  # release the view of the mapping first
        self._source.close()

    def __enter__(self) -> BagReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"BagReader({self.path!r}, {self._len} records)"


# --- Writing ---------------------------------------------------------------------------------


class BagWriter:
    """Writes records to a new `.bag`/`.bagz` file, readable by this module and by `bagz`.

    Records go to `<path>.tmp`; `close()` appends the index, syncs, and renames the file to
    `path`, so `path` only ever holds a complete bag. Leaving the `with` block by an exception
    deletes the temporary file instead. Local paths only. `compress` defaults to whether the
    name ends in `.bagz`; records are then compressed at `level` (default ZSTD_LEVEL). The
    index is kept in memory until the end: 8 bytes per record.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        compress: bool | None = None,
        level: int = ZSTD_LEVEL,
    ) -> None:
        self.path = os.fspath(path)
        self._temporary = f"{self.path}.tmp"
        compress = self.path.endswith(".bagz") if compress is None else compress
        self._compressor = zstandard.ZstdCompressor(level=level) if compress else None
        self._ends = array("Q")
        self._size = 0
        self._file = open(self._temporary, "wb")

    def write(self, record: bytes) -> None:
        if self._file.closed:
            raise ValueError(f"{self.path}: write to a closed BagWriter")
        if record and self._compressor is not None:
            record = self._compressor.compress(record)
        self._file.write(record)
        self._size += len(record)
        self._ends.append(self._size)

    def close(self) -> None:
        """Finishes the file. Closing twice is harmless."""
        if self._file.closed:
            return
        ends = self._ends
        if sys.byteorder != "little":
            ends = array("Q", ends)
            ends.byteswap()
        self._file.write(ends.tobytes())
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        os.replace(self._temporary, self.path)

    def abort(self) -> None:
        """Abandons the file: deletes the temporary file and leaves `path` untouched."""
        if not self._file.closed:
            self._file.close()
        if os.path.exists(self._temporary):
            os.remove(self._temporary)

    def __enter__(self) -> BagWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()
