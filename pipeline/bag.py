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

Records are tuples coded with Apache Beam's TupleCoder: every component but the last is
prefixed by its length as an unsigned LEB128 varint; the last runs to the record's end. A
FloatCoder component is 8 big-endian bytes of an IEEE double, so its length is implicit.
  action value       (fen, move, win_prob): varint ‖ fen ‖ varint ‖ move ‖ f64 BE
  state value        (fen, win_prob):       varint ‖ fen ‖ f64 BE
  behavioural clone  (fen, move):           varint ‖ fen ‖ move (to the record's end)
The decoders work on many records at once (`BagReader.read_range` gives the bytes and the
record boundaries) so that the per-record work left in Python is one string slice per field.
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
_F64 = struct.Struct(">d")


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


# --- Record codecs ---------------------------------------------------------------------------


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _prefixed(text: str) -> bytes:
    raw = text.encode("utf-8")
    return _varint(len(raw)) + raw


def encode_av(fen: str, move: str, win_prob: float) -> bytes:
    """An action-value record: Beam's TupleCoder([StrUtf8, StrUtf8, Float]) encoding."""
    return _prefixed(fen) + _prefixed(move) + _F64.pack(win_prob)


def encode_sv(fen: str, win_prob: float) -> bytes:
    """A state-value record: Beam's TupleCoder([StrUtf8, Float]) encoding."""
    return _prefixed(fen) + _F64.pack(win_prob)


def encode_bc(fen: str, move: str) -> bytes:
    """A behavioural-cloning record: Beam's TupleCoder([StrUtf8, StrUtf8]) encoding."""
    return _prefixed(fen) + move.encode("utf-8")


def decode_av(
    data: bytes, offsets: np.ndarray, *, source: str = "<bytes>", first_index: int = 0
) -> tuple[list[str], list[str], np.ndarray]:
    """Action-value records `data[offsets[k]:offsets[k+1]]` -> (fens, moves, win_probs).

    `data` is any bytes-like object and `offsets` need not start at 0 (any k+1 ascending
    offsets, e.g. a slice of those from `BagReader.read_range`). `source` and `first_index`
    only label errors: a malformed record raises BagFormatError naming `source` and record
    `first_index + k`.
    """
    (fens, moves), win_probs = _decode(data, offsets, ("FEN", "move"), True, source, first_index)
    return fens, moves, win_probs


def decode_sv(
    data: bytes, offsets: np.ndarray, *, source: str = "<bytes>", first_index: int = 0
) -> tuple[list[str], np.ndarray]:
    """State-value records -> (fens, win_probs); see decode_av."""
    (fens,), win_probs = _decode(data, offsets, ("FEN",), True, source, first_index)
    return fens, win_probs


def decode_bc(
    data: bytes, offsets: np.ndarray, *, source: str = "<bytes>", first_index: int = 0
) -> tuple[list[str], list[str]]:
    """Behavioural-cloning records -> (fens, moves); see decode_av."""
    (fens, moves), _ = _decode(data, offsets, ("FEN", "move"), False, source, first_index)
    return fens, moves


def _decode(
    data: bytes,
    offsets: np.ndarray,
    names: tuple[str, ...],
    has_float: bool,
    source: str,
    first_index: int,
) -> tuple[list[list[str]], np.ndarray]:
    """Decodes records made of strings (all but a final one length-prefixed) and, if
    `has_float`, a final big-endian float64. Returns the strings per field and the floats.
    """
    offsets = np.asarray(offsets)
    if offsets.ndim != 1 or offsets.size == 0 or offsets.dtype.kind not in "iu":
        raise ValueError("offsets must be a non-empty 1-D integer array")
    offsets = offsets.astype(np.int64, copy=False)
    buf = np.frombuffer(data, dtype=np.uint8)
    if offsets[0] < 0 or offsets[-1] > buf.size or (np.diff(offsets) < 0).any():
        raise ValueError(f"offsets do not describe records within {buf.size} bytes of data")
    starts, ends = offsets[:-1], offsets[1:]
    prefixed = len(names) if has_float else len(names) - 1
    fields = _locate_fields(buf, starts, ends, prefixed, has_float)
    fields = _fix_slow_records(data, starts, ends, fields, names, has_float, source, first_index)

    if has_float:
        float_bytes = buf[(ends - 8)[:, None] + np.arange(8)]
        win_probs = float_bytes.view(">f8").reshape(-1).astype(np.float64)
    else:
        float_bytes = np.zeros(0, dtype=np.uint8)
        win_probs = np.zeros(0, dtype=np.float64)

    # Every non-string byte is a length byte below 0x80 or a float byte, so if the only high
    # bytes are float bytes, the strings are ASCII: decode everything once as Latin-1 (one
    # char per byte, so offsets carry over) and slice. CPython gives ASCII-only slices the
    # same compact representation a UTF-8 decode would.
    lo, hi = int(offsets[0]), int(offsets[-1])
    if np.count_nonzero(buf[lo:hi] >= 0x80) == np.count_nonzero(float_bytes >= 0x80):
        text = str(memoryview(data)[lo:hi], "latin-1")
        strings = [
            [text[a:b] for a, b in zip((s - lo).tolist(), (e - lo).tolist(), strict=True)]
            for s, e in fields
        ]
    else:
        view = memoryview(data)
        strings = [
            _utf8_strings(view, s, e, name, source, first_index)
            for (s, e), name in zip(fields, names, strict=True)
        ]
    return strings, win_probs


def _locate_fields(
    buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, prefixed: int, has_float: bool
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Vectorised field bounds, assuming one-byte varints. Returns per field (starts, ends,
    ok); a record whose `ok` is False in the last field needs the slow path (long strings or
    malformed). Values for such records are meaningless but always in bounds to compute.
    """
    limit = ends - 8 if has_float else ends
    ok = limit >= starts
    pos = starts
    fields = []
    for _ in range(prefixed):
        readable = ok & (pos < limit)
        if buf.size:
            length = buf[np.where(readable, pos, 0)].astype(np.int64)
        else:
            length = np.zeros(pos.size, dtype=np.int64)
        field_start = pos + 1
        field_end = field_start + length
        ok = readable & (length < 0x80) & (field_end <= limit)
        fields.append((field_start, field_end))
        pos = field_end
    if has_float:
        ok &= pos == limit
    else:
        fields.append((pos.copy(), ends.copy()))
    return [(s, e, ok) for s, e in fields]


def _fix_slow_records(
    data: bytes,
    starts: np.ndarray,
    ends: np.ndarray,
    fields: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
    names: tuple[str, ...],
    has_float: bool,
    source: str,
    first_index: int,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Parses the records the vectorised pass could not, byte by byte, raising
    BagFormatError for the first malformed one; fills in their field bounds.
    """
    ok = fields[-1][2]
    bounds = [(s, e) for s, e, _ in fields]
    for k in np.flatnonzero(~ok).tolist():
        where = f"{source}: record {first_index + k}"
        parsed = _parse_record(data, int(starts[k]), int(ends[k]), names, has_float, where)
        for (s, e), (a, b) in zip(bounds, parsed, strict=True):
            s[k], e[k] = a, b
    return bounds


def _parse_record(
    data: bytes, start: int, end: int, names: tuple[str, ...], has_float: bool, where: str
) -> list[tuple[int, int]]:
    limit = end - 8 if has_float else end
    if limit < start:
        raise BagFormatError(f"{where}: {end - start} bytes, too short for an 8-byte float")
    prefixed = names if has_float else names[:-1]
    pos, bounds = start, []
    for name in prefixed:
        length, pos = _read_varint(data, pos, limit, f"{where}: {name} length")
        if pos + length > limit:
            raise BagFormatError(
                f"{where}: {name} length {length} runs past the end of the record "
                f"({limit - pos} bytes left{' before the float' if has_float else ''})"
            )
        bounds.append((pos, pos + length))
        pos += length
    if has_float:
        if pos != limit:
            raise BagFormatError(
                f"{where}: {end - pos} bytes after the strings where 8 (the float) belong"
            )
    else:
        bounds.append((pos, end))
    return bounds


def _read_varint(data: bytes, pos: int, limit: int, what: str) -> tuple[int, int]:
    value = 0
    for shift in range(0, 64, 7):
        if pos >= limit:
            raise BagFormatError(f"{what}: varint runs past the end of the record")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
    raise BagFormatError(f"{what}: varint longer than 10 bytes")


def _utf8_strings(
    view: memoryview,
    starts: np.ndarray,
    ends: np.ndarray,
    name: str,
    source: str,
    first_index: int,
) -> list[str]:
    spans = list(zip(starts.tolist(), ends.tolist(), strict=True))
    try:
        return [str(view[a:b], "utf-8") for a, b in spans]
    except UnicodeDecodeError:
        pass
    for k, (a, b) in enumerate(spans):  # find the culprit for the message
        try:
            str(view[a:b], "utf-8")
        except UnicodeDecodeError as error:
            raise BagFormatError(
                f"{source}: record {first_index + k}: {name} is not valid UTF-8: {error}"
            ) from None
    raise AssertionError("unreachable")
