"""Tests for pipeline.chessbench.bag: bag files built here, by BagWriter and by hand, and Beam's
coders."""

from __future__ import annotations

import math
import os
import struct

import numpy as np
import pytest
import zstandard
from apache_beam import coders

from pipeline.chessbench import bag
from pipeline.chessbench.bag import (
    BagFormatError,
    BagReader,
    BagWriter,
    expand_pattern,
)
from pipeline.chessbench.records import (
    decode_av,
    decode_bc,
    decode_sv,
    encode_av,
    encode_bc,
    encode_sv,
)

AV = coders.TupleCoder([coders.StrUtf8Coder(), coders.StrUtf8Coder(), coders.FloatCoder()])
SV = coders.TupleCoder([coders.StrUtf8Coder(), coders.FloatCoder()])
BC = coders.TupleCoder([coders.StrUtf8Coder(), coders.StrUtf8Coder()])

START = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1"
AFTER_E4 = "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1"
LONG = "8/" * 100 + "k6K w - - 0 1"  # 213 bytes: a two-byte varint
HUGE = "x" * 20_000  # a three-byte varint
ODD = "é♞ ünïcödé"  # non-ASCII, so the decoders' UTF-8 path runs

AV_SAMPLES = [
    (START, "e2e4", 0.53),
    (AFTER_E4, "e7e8q", 0.0),
    (LONG, "h1h2", 1.0),
    (ODD, "ü", -0.0),
    (HUGE, "", 0.125),
    ("", "a7a8n", 1e-300),
]


def _offsets(records: list[bytes]) -> np.ndarray:
    return np.concatenate([[0], np.cumsum([len(r) for r in records])]).astype(np.int64)


def _hand_built(records: list[bytes]) -> bytes:
    """A bag straight from the format: records, then each one's end as a uint64 LE."""
    ends, total = [], 0
    for record in records:
        total += len(record)
        ends.append(total)
    return b"".join(records) + b"".join(struct.pack("<Q", end) for end in ends)


def _write(path, records: list[bytes], **kwargs) -> str:
    with BagWriter(path, **kwargs) as writer:
        for record in records:
            writer.write(record)
    return str(path)


# --- Codecs against Beam ---------------------------------------------------------------------


def test_beam_coders_are_what_the_format_says():
    # Guards our reading of Beam: prefixed strings, a bare last component, big-endian double.
    assert AV.encode(("ab", "e2e4", 0.5)) == b"\x02ab\x04e2e4" + struct.pack(">d", 0.5)
    assert SV.encode(("ab", 0.5)) == b"\x02ab" + struct.pack(">d", 0.5)
    assert BC.encode(("ab", "e2e4")) == b"\x02abe2e4"
    assert AV.encode((LONG, "a", 1.0))[:2] == bytes([0x80 | (213 & 0x7F), 213 >> 7])


@pytest.mark.parametrize("fen, move, win_prob", AV_SAMPLES)
def test_encoders_match_beam(fen, move, win_prob):
    assert encode_av(fen, move, win_prob) == AV.encode((fen, move, win_prob))
    assert encode_sv(fen, win_prob) == SV.encode((fen, win_prob))
    assert encode_bc(fen, move) == BC.encode((fen, move))


def test_decoders_invert_beam():
    records = [AV.encode(sample) for sample in AV_SAMPLES]
    fens, moves, win_probs = decode_av(b"".join(records), _offsets(records))
    assert fens == [s[0] for s in AV_SAMPLES]
    assert moves == [s[1] for s in AV_SAMPLES]
    assert win_probs.dtype == np.float64
    assert win_probs.tolist() == [s[2] for s in AV_SAMPLES]
    assert math.copysign(1.0, win_probs[3]) == -1.0  # -0.0 kept, bits and all

    records = [SV.encode((fen, p)) for fen, _, p in AV_SAMPLES]
    fens, win_probs = decode_sv(b"".join(records), _offsets(records))
    assert fens == [s[0] for s in AV_SAMPLES]
    assert win_probs.tolist() == [s[2] for s in AV_SAMPLES]

    records = [BC.encode((fen, move)) for fen, move, _ in AV_SAMPLES]
    fens, moves = decode_bc(b"".join(records), _offsets(records))
    assert fens == [s[0] for s in AV_SAMPLES]
    assert moves == [s[1] for s in AV_SAMPLES]


def test_ascii_fast_path_and_slices_of_a_larger_buffer():
    samples = [(START, "e2e4", 0.25), (AFTER_E4, "d7d5", 0.75), (START, "g1f3", 0.5)]
    records = [AV.encode(s) for s in samples]
    data = b"junk" + b"".join(records) + b"\xff\xfe"
    offsets = _offsets(records) + 4
    fens, moves, win_probs = decode_av(data, offsets[1:])  # records 1 and 2 only
    assert (fens, moves, win_probs.tolist()) == ([AFTER_E4, START], ["d7d5", "g1f3"], [0.75, 0.5])
    assert all(fen.isascii() for fen in fens)
    assert decode_av(b"", np.zeros(1, dtype=np.int64))[0] == []


@pytest.mark.parametrize(
    "record, problem",
    [
        (b"\x40abc" + bytes(8), "FEN length 64 runs past"),  # the length overruns
        (b"\x03abc\x04e2e4" + bytes(7), "move length 4 runs past"),  # a 7-byte float
        (b"\x03abc\x04e2e4" + bytes(9), "9 bytes after the strings where 8"),  # a 9-byte one
        (b"\x03abc\x02e2e4" + bytes(8), "10 bytes after the strings"),  # move too short
        (b"\x03a\xffc\x04e2e4" + bytes(8), "FEN is not valid UTF-8"),
        (b"\x80\x80" + bytes(8), "FEN length: varint runs past"),
        (b"", "0 bytes, too short"),
    ],
)
def test_malformed_av_records_are_named(record, problem):
    good = AV.encode((START, "e2e4", 0.5))
    records = [good, good, record, good]
    with pytest.raises(BagFormatError) as caught:
        decode_av(b"".join(records), _offsets(records), source="x.bag", first_index=100)
    assert str(caught.value).startswith("x.bag: record 102: ")
    assert problem in str(caught.value)


def test_malformed_sv_and_bc_records():
    with pytest.raises(BagFormatError, match=r"f\.bag: record 7: .*8 \(the float\)"):
        decode_sv(b"\x01a" + bytes(9), np.array([0, 11]), source="f.bag", first_index=7)
    with pytest.raises(BagFormatError, match=r"record 0: FEN length 5 runs past"):
        decode_bc(b"\x05ab", np.array([0, 3]))
    assert decode_bc(b"\x01a", np.array([0, 2])) == (["a"], [""])


# --- Files -----------------------------------------------------------------------------------


RECORDS = [encode_av(fen, move, p) for fen, move, p in AV_SAMPLES] + [b"", b"tail"]


@pytest.mark.parametrize("suffix", [".bag", ".bagz"])
def test_round_trip(tmp_path, suffix):
    path = _write(tmp_path / f"data{suffix}", RECORDS)
    with BagReader(path) as reader:
        assert reader.compressed == (suffix == ".bagz")
        assert len(reader) == len(RECORDS)
        assert [reader[i] for i in range(len(reader))] == RECORDS
        assert reader[-1] == b"tail" and reader[-2] == b""
        with pytest.raises(IndexError):
            reader[len(RECORDS)]
        assert list(reader) == RECORDS
        for start in range(len(RECORDS)):
            for stop in range(start, len(RECORDS) + 1):
                data, offsets = reader.read_range(start, stop)
                assert offsets.dtype == np.int64 and offsets[0] == 0
                assert [
                    data[a:b] for a, b in zip(offsets[:-1], offsets[1:], strict=True)
                ] == RECORDS[start:stop]
        chunks = list(reader.chunks(size=3))
        assert [c.first_index for c in chunks] == [0, 3, 6]
        assert b"".join(c.data for c in chunks) == b"".join(RECORDS)
        fens, _, _ = decode_av(chunks[1].data, chunks[1].offsets)  # records 3, 4, 5
        assert fens == [ODD, HUGE, ""]
        reader.validate()
    assert not os.path.exists(f"{path}.tmp")


def test_plain_bag_is_exactly_the_format(tmp_path):
    path = _write(tmp_path / "data.bag", RECORDS)
    assert open(path, "rb").read() == _hand_built(RECORDS)


def test_bagz_stores_empty_records_as_nothing(tmp_path):
    # As the reference writer does; a zero-length stored record reads back as b"".
    path = _write(tmp_path / "data.bagz", [b"abc", b"", b"abc"])
    raw = open(path, "rb").read()
    ends = struct.unpack("<3Q", raw[-24:])
    assert ends[0] == ends[1] < ends[2]
    frame = raw[: ends[0]]
    assert zstandard.ZstdDecompressor().decompress(frame) == b"abc"
    again = _write(tmp_path / "again.bagz", [b"abc", b"", b"abc"])
    assert open(again, "rb").read() == raw  # deterministic


def test_reads_a_hand_built_file(tmp_path):
    records = [b"first", b"", b"x" * 300, b"\x00\xff"]
    path = tmp_path / "hand.bag"
    path.write_bytes(_hand_built(records))
    assert list(BagReader(path)) == records

    # A .bagz whose frames come from a streaming compressor (no content size in the header).
    frames = []
    for record in records:
        stream = zstandard.ZstdCompressor().compressobj()
        frames.append(stream.compress(record) + stream.flush() if record else b"")
    assert zstandard.frame_content_size(frames[0]) == -1
    path = tmp_path / "hand.bagz"
    path.write_bytes(_hand_built(frames))
    reader = BagReader(path)
    assert [reader[i] for i in range(4)] == records
    assert list(reader) == records


def test_empty_bag(tmp_path):
    path = _write(tmp_path / "empty.bag", [])
    assert os.path.getsize(path) == 0
    reader = BagReader(path)
    assert len(reader) == 0 and list(reader) == []
    data, offsets = reader.read_range(0, 0)
    assert data == b"" and offsets.tolist() == [0]


def test_writer_never_leaves_a_partial_file(tmp_path):
    path = tmp_path / "data.bag"
    writer = BagWriter(path)
    writer.write(b"abc")
    assert not path.exists() and (tmp_path / "data.bag.tmp").exists()
    writer.close()
    writer.close()
    assert path.exists() and not (tmp_path / "data.bag.tmp").exists()
    with pytest.raises(ValueError, match="closed"):
        writer.write(b"more")

    with pytest.raises(RuntimeError), BagWriter(tmp_path / "crash.bag") as writer:
        writer.write(b"abc")
        raise RuntimeError("crash")
    assert os.listdir(tmp_path) == ["data.bag"]


def test_reads_through_beam_filesystems(tmp_path, monkeypatch):
    path = _write(tmp_path / "data.bagz", RECORDS)
    monkeypatch.setattr(bag, "_is_remote", lambda _: True)
    reader = BagReader(path)
    assert isinstance(reader._source, bag._BeamSource)
    assert list(reader) == RECORDS


# --- Damaged files ---------------------------------------------------------------------------


def _damaged(tmp_path, name: str, content: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(content)
    return str(path)


def test_truncated_files(tmp_path):
    whole = _hand_built([encode_av(START, "e2e4", 0.5)] * 4)
    cut = _damaged(tmp_path, "cut.bag", whole[: len(whole) // 2])
    with pytest.raises(BagFormatError, match=r"cut\.bag: truncated file"):
        BagReader(cut)
    # The index would start at byte 3, leaving 11 bytes: not a whole number of entries.
    misaligned = _damaged(tmp_path, "misaligned.bag", b"abcdef" + struct.pack("<Q", 3))
    with pytest.raises(BagFormatError, match=r"misaligned\.bag: truncated file or bad index"):
        BagReader(misaligned)
    tiny = _damaged(tmp_path, "tiny.bag", b"\x01\x02\x03\x04\x05")
    with pytest.raises(BagFormatError, match=r"tiny\.bag: truncated file: 5 bytes"):
        BagReader(tiny)


def test_index_start_past_the_end(tmp_path):
    path = _damaged(tmp_path, "far.bag", b"abcdefgh" + struct.pack("<Q", 1000))
    with pytest.raises(BagFormatError, match=r"far\.bag: .*index start 1000 is past"):
        BagReader(path)


def test_decreasing_end_offsets(tmp_path):
    ends = [4, 2, 10]
    path = _damaged(tmp_path, "down.bag", b"x" * 10 + struct.pack("<3Q", *ends))
    reader = BagReader(path)  # opening does not read the index...
    assert reader[0] == b"xxxx"
    for attempt in (lambda: reader[1], lambda: list(reader), reader.validate):
        with pytest.raises(BagFormatError, match=r"down\.bag: bad index: record 1 ends at 2"):
            attempt()  # ...but every use of a bad entry fails


def test_end_offset_past_the_index_start(tmp_path):
    ends = [4, 99, 10]
    path = _damaged(tmp_path, "past.bag", b"x" * 10 + struct.pack("<3Q", *ends))
    reader = BagReader(path)
    for attempt in (lambda: reader[1], lambda: reader[2], reader.validate):
        with pytest.raises(BagFormatError, match=r"past\.bag: bad index: record 1 ends at 99"):
            attempt()
    huge = _damaged(tmp_path, "huge.bag", b"x" * 10 + struct.pack("<3Q", 4, 2**64 - 1, 10))
    with pytest.raises(BagFormatError, match=r"record 1 ends at 18446744073709551615, past"):
        BagReader(huge).validate()


def test_corrupt_zstd_record(tmp_path):
    path = _write(tmp_path / "data.bagz", [b"a" * 100, b"b" * 100, b"c" * 100])
    raw = bytearray(open(path, "rb").read())
    second = struct.unpack("<Q", raw[-24:-16])[0]
    raw[second : second + 4] = b"\x00\x00\x00\x00"  # the second frame's magic number
    path = _damaged(tmp_path, "bad.bagz", bytes(raw))
    reader = BagReader(path)
    assert reader[0] == b"a" * 100
    for attempt in (lambda: reader[1], lambda: reader.read_range(0, 3)):
        with pytest.raises(BagFormatError, match=r"bad\.bagz: record 1: bad zstd frame"):
            attempt()


def test_malformed_record_in_a_file_names_file_and_record(tmp_path):
    records = [encode_av(START, "e2e4", 0.5)] * 3 + [b"\x70" + b"z" * 20]
    path = _write(tmp_path / "av.bag", records)
    reader = BagReader(path)
    (chunk,) = [c for c in reader.chunks(size=2) if c.first_index == 2]
    with pytest.raises(BagFormatError, match=r"av\.bag: record 3: FEN length 112 runs past"):
        decode_av(chunk.data, chunk.offsets, source=reader.path, first_index=chunk.first_index)


# --- Patterns --------------------------------------------------------------------------------


def test_expand_pattern(tmp_path):
    names = [f"action_value-{i:05d}-of-00003_data.bag" for i in range(3)]
    for name in names:
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "other.txt").write_bytes(b"")
    expected = [str(tmp_path / name) for name in names]

    assert expand_pattern(str(tmp_path / "action_value@3_data.bag")) == expected
    assert expand_pattern(str(tmp_path / "action_value-*.bag")) == expected
    assert expand_pattern(expected[1]) == [expected[1]]
    assert expand_pattern(f"{expected[2]},{expected[0]}") == [expected[2], expected[0]]

    with pytest.raises(FileNotFoundError, match=r"4 of 4 shards missing, e\.g\. .*-00000-of-00004"):
        expand_pattern(str(tmp_path / "action_value@4_data.bag"))
    (tmp_path / names[1]).unlink()
    with pytest.raises(FileNotFoundError, match=r"1 of 3 shards missing, .*-00001-of-00003_data"):
        expand_pattern(str(tmp_path / "action_value@3_data.bag"))
    with pytest.raises(FileNotFoundError, match=r"no files match .*nothing\*\.bag"):
        expand_pattern(str(tmp_path / "nothing*.bag"))
    with pytest.raises(FileNotFoundError, match=r"no such file: .*absent\.bag"):
        expand_pattern(str(tmp_path / "absent.bag"))
    with pytest.raises(ValueError, match="shard count"):
        expand_pattern(str(tmp_path / "x@0.bag"))


def test_expand_remote_shards_without_checking():
    assert expand_pattern("gs://bucket/dir/sv@2_data.bag") == [
        "gs://bucket/dir/sv-00000-of-00002_data.bag",
        "gs://bucket/dir/sv-00001-of-00002_data.bag",
    ]
