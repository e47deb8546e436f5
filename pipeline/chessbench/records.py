"""ChessBench bag records: Beam-coded tuples, encoded one by one and decoded many at once.

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

import struct

import numpy as np

from core.targets import TARGETS
from pipeline.chessbench.bag import BagFormatError

# The three record kinds: action value, state value, behavioural cloning.
KINDS = TARGETS  # ChessBench keeps one target's records per bag

_F64 = struct.Struct(">d")


def check_kind(kind: str) -> None:
    """ValueError unless `kind` is one of KINDS."""
    if kind not in KINDS:
        raise ValueError(f"--kind must be one of {', '.join(KINDS)}, got {kind!r}")


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
