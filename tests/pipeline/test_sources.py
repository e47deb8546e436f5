"""Reading inputs (pipeline.sources): zstd streamed frame by frame, damage noticed and named."""

from __future__ import annotations

import functools
import gzip
import http.server
import random
import threading

import pytest
import zstandard

from pipeline.sources import InputError, NoInputError, expand_inputs, read_lines

_RNG = random.Random(0)
# Random ids keep the text from compressing to almost nothing, so a cut lands mid-data.
TEXT = "".join(
    f'[Site "game{_RNG.getrandbits(64):x}"]\n\n1. e4 e5 {{ é {_RNG.random()} }} *\n\n'
    for _ in range(5000)
)


def test_zstd_gzip_and_plain_inputs_read_the_same_lines(tmp_path):
    (tmp_path / "a.pgn").write_text(TEXT)
    (tmp_path / "a.pgn.zst").write_bytes(zstandard.ZstdCompressor().compress(TEXT.encode()))
    (tmp_path / "a.pgn.gz").write_bytes(gzip.compress(TEXT.encode()))
    expected = TEXT.split("\n")[:-1]
    for name in ("a.pgn", "a.pgn.zst", "a.pgn.gz"):
        assert list(read_lines(str(tmp_path / name))) == expected, name


def test_a_multi_frame_zstd_file_is_read_whole(tmp_path):
    half = len(TEXT) // 2
    compressor = zstandard.ZstdCompressor()
    frames = compressor.compress(TEXT[:half].encode()) + compressor.compress(TEXT[half:].encode())
    (tmp_path / "multi.pgn.zst").write_bytes(frames)
    assert "\n".join(read_lines(str(tmp_path / "multi.pgn.zst"))) + "\n" == TEXT


def test_a_truncated_zstd_file_is_an_error_naming_it_after_the_lines_before_the_cut(tmp_path):
    data = zstandard.ZstdCompressor(level=1).compress(TEXT.encode())
    path = tmp_path / "cut.pgn.zst"
    path.write_bytes(data[: len(data) // 2])
    lines = []
    with pytest.raises(InputError, match=r"cut\.pgn\.zst: truncated zstd stream") as caught:
        for line in read_lines(str(path)):
            lines.append(line)
    assert caught.value.path == str(path)
    assert len(lines) > 1000 and lines[:8] == TEXT.split("\n")[:8]


def test_corrupt_zstd_data_is_an_error_naming_the_file(tmp_path):
    # The zstd command line (and so the Lichess dumps) writes a checksum with every frame.
    data = bytearray(zstandard.ZstdCompressor(write_checksum=True).compress(TEXT.encode()))
    data[len(data) // 2 : len(data) // 2 + 64] = b"\xff" * 64
    path = tmp_path / "bad.pgn.zst"
    path.write_bytes(bytes(data))
    with pytest.raises(InputError, match="bad.pgn.zst"):
        list(read_lines(str(path)))


def test_globs_and_directories_expand_and_a_pattern_matching_nothing_is_an_error(tmp_path):
    for name in ("b.pgn", "a.pgn.zst", "notes.txt"):
        (tmp_path / name).write_text("x")
    assert expand_inputs([str(tmp_path / "*.pgn*")]) == [
        str(tmp_path / "a.pgn.zst"),
        str(tmp_path / "b.pgn"),
    ]
    assert expand_inputs([str(tmp_path)]) == [str(tmp_path / "a.pgn.zst"), str(tmp_path / "b.pgn")]
    with pytest.raises(NoInputError, match="nothing"):
        expand_inputs([str(tmp_path / "b.pgn"), str(tmp_path / "nothing*.pgn")])
    with pytest.raises(NoInputError):
        expand_inputs([str(tmp_path / "missing.pgn")])


def test_http_urls_are_streamed_and_decompressed(tmp_path):
    (tmp_path / "a.pgn.zst").write_bytes(zstandard.ZstdCompressor().compress(TEXT.encode()))
    (tmp_path / "a.pgn.gz").write_bytes(gzip.compress(TEXT.encode()))
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}/"
        assert expand_inputs([base + "a.pgn.zst"]) == [base + "a.pgn.zst"]
        for name in ("a.pgn.zst", "a.pgn.gz"):
            assert "\n".join(read_lines(base + name)) + "\n" == TEXT, name
        with pytest.raises(InputError, match="missing.pgn"):
            list(read_lines(base + "missing.pgn"))
    finally:
        server.shutdown()
        server.server_close()
