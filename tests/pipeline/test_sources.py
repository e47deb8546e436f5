"""Reading inputs (pipeline.sources): zstd streamed frame by frame, damage noticed and named."""

from __future__ import annotations

import functools
import gzip
import http.server
import itertools
import pathlib
import random
import re
import threading
import tracemalloc

import pytest
import zstandard

from pipeline import pgn
from pipeline.annotate.games import GAMES_TAG, ReadGames
from pipeline.beam import stats
from pipeline.sources import (
    MAX_LINE_BYTES,
    InputError,
    NoInputError,
    expand_inputs,
    read_lines,
)

SAMPLE = pathlib.Path(__file__).resolve().parents[2] / "data" / "sample"

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


def test_zstd_frames_of_every_header_layout_and_skippable_frames_are_read_whole(tmp_path):
    # Frames with and without checksum and content size, an RLE block (a long run of one
    # byte), and a skippable frame between them: the block cutting must follow every layout.
    parts = [TEXT[:40_000], "\n" * 300_000, TEXT[40_000:]]
    skippable = (0x184D2A53).to_bytes(4, "little") + (5).to_bytes(4, "little") + b"12345"
    data = b""
    for i, part in enumerate(parts):
        compressor = zstandard.ZstdCompressor(write_checksum=i != 1, write_content_size=i != 2)
        data += compressor.compress(part.encode()) + skippable
    (tmp_path / "layouts.pgn.zst").write_bytes(data)
    assert "\n".join(read_lines(str(tmp_path / "layouts.pgn.zst"))) + "\n" == "".join(parts)


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


def lichess_like_games(count: int, seed: int) -> list[bytes]:
    """`count` games in the Lichess dump's layout (tags, then the moves on one line with a
    clock comment after each), their moves those of the bundled sample's real games."""
    movetexts = []
    for name in ("games.pgn.zst", "selfplay.pgn.zst", "mismatch.pgn.zst"):
        raw = (SAMPLE / name).read_bytes()
        text = zstandard.ZstdDecompressor().decompressobj().decompress(raw).decode()
        for block in text.split("\n\n")[1::2]:  # tags, moves, tags, moves, ...
            tokens = block.split()
            movetexts.append((tokens[:-1], tokens[-1]))
    rng = random.Random(seed)
    games = []
    for number in range(count):
        moves, result = movetexts[number % len(movetexts)]
        clock = rng.randint(60, 600)
        line = []
        for token in moves:
            line.append(token)
            if not token.endswith("."):
                clock = max(0, clock - rng.randint(0, 9))
                line.append(f"{{ [%clk 0:{clock // 60:02d}:{clock % 60:02d}] }}")
        games.append(
            f'[Event "Rated Blitz game"]\n[Site "https://lichess.org/{rng.getrandbits(48):012x}"]\n'
            f'[Result "{result}"]\n[WhiteElo "{rng.randint(800, 2800)}"]\n'
            f'[BlackElo "{rng.randint(800, 2800)}"]\n[TimeControl "180+0"]\n\n'
            f"{' '.join(line)} {result}\n\n".encode()
        )
    return games


def recoverable_prefix(data: bytes, damage_at: int) -> bytes:
    """The most text any decoder gets from `data` before its damage (a separate count): the
    library fed one byte at a time from well before the damage, so that each call completes
    at most one block and an error loses nothing else."""
    decompressor = zstandard.ZstdDecompressor().decompressobj(read_across_frames=True)
    start = max(0, damage_at - 300_000)  # more than the largest compressed block before it
    out = [decompressor.decompress(data[:start])]
    for position in range(start, len(data)):
        try:
            out.append(decompressor.decompress(data[position : position + 1]))
        except zstandard.ZstdError:
            return b"".join(out)
    raise AssertionError("the damage was not noticed")


@pytest.fixture(scope="module")
def many_games() -> list[bytes]:
    return lichess_like_games(12000, seed=5)  # ~22 MB of text, ~2.4 MB compressed


@pytest.mark.parametrize("frames", [1, 7])
def test_a_corrupt_zstd_file_of_many_blocks_keeps_every_game_before_the_damage(
    tmp_path, many_games, frames
):
    """Several MB compressed (many 1 MiB reads, hundreds of 128 KB blocks; one frame as the
    zstd command writes, or several), damaged in the middle: every game whose text lies
    before the damaged block is read whole, and the one it cuts counts as truncated."""
    games = many_games
    text = b"".join(games)
    compressor = zstandard.ZstdCompressor(level=3, write_checksum=True)
    cuts = [len(text) * i // frames for i in range(frames + 1)]  # frames end mid-game
    data = bytearray(b"".join(compressor.compress(text[a:b]) for a, b in itertools.pairwise(cuts)))
    assert len(data) > 2 * (1 << 20)
    damage_at = len(data) // 2
    data[damage_at : damage_at + 64] = b"\xff" * 64
    path = tmp_path / "damaged.pgn.zst"
    path.write_bytes(bytes(data))

    prefix = recoverable_prefix(bytes(data), damage_at)
    assert text.startswith(prefix) and 0.3 * len(text) < len(prefix) < 0.7 * len(text)
    ends = [match.end() for match in re.finditer(rb" (?:1-0|0-1|1/2-1/2|\*)\n", text)]
    assert len(ends) == len(games)
    whole = sum(end <= len(prefix) for end in ends)
    # The next game was cut if any of its lines made it whole into the prefix.
    cut = b"\n" in prefix[ends[whole - 1] + 1 :]

    read: list[pgn.GameText] = []
    with pytest.raises(InputError, match=r"damaged\.pgn\.zst: corrupt zstd data"):
        for item in pgn.split_games(read_lines(str(path))):
            read.append(item)
    complete = [game for game in read if not game.truncated]
    assert len(complete) == whole and whole > 2000
    assert [game.truncated for game in read[whole:]] == [True] * cut
    assert [game.text.encode() for game in complete[-3:]] == [
        g.removesuffix(b"\n") for g in games[whole - 3 : whole]
    ]


def test_an_existing_input_whose_name_looks_like_a_glob_is_read_as_that_file(tmp_path):
    (tmp_path / "game [1].pgn").write_text(TEXT)
    (tmp_path / "game 1.pgn").write_text("the glob [1] would match this one")
    [path] = expand_inputs([str(tmp_path / "game [1].pgn")])
    assert path == str(tmp_path / "game [1].pgn")
    assert "\n".join(read_lines(path)) + "\n" == TEXT
    # A pattern that is not an existing name is still a glob.
    assert expand_inputs([str(tmp_path / "game [1-9].pgn")]) == [str(tmp_path / "game 1.pgn")]


def _game(site: str) -> str:
    return f'[Site "{site}"]\n[Result "*"]\n\n1. e4 e5 2. Nf3 Nc6 *\n\n'


def test_a_line_too_long_for_pgn_is_skipped_named_and_read_in_bounded_memory(tmp_path):
    # About 20 MB with no newline between valid games (a lost newline, a binary blob): the
    # games on both sides are read, the line is named by file, line and byte offset, and the
    # reading never holds the line whole (linear: no re-copying of a growing pending line).
    before, after = _game("before"), _game("after")
    long_line = "1. e4 e5 " * (20_000_000 // 9)
    path = tmp_path / "long.pgn.zst"
    compressor = zstandard.ZstdCompressor(level=1)
    path.write_bytes(compressor.compress((before + long_line + "\n" + after).encode()))
    del long_line
    errors: list[InputError] = []
    tracemalloc.start()
    try:
        games = [
            item
            for item in pgn.split_games(read_lines(str(path), on_long_line=errors.append))
            if isinstance(item, pgn.GameText)
        ]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [game.headers["Site"] for game in games] == ["before", "after"]
    assert not any(game.truncated for game in games)
    assert len(errors) == 1 and errors[0].path == str(path)
    line, offset = before.count("\n") + 1, len(before.encode())
    assert f"line {line:,} (byte {offset:,}) is longer than {MAX_LINE_BYTES:,} bytes" in str(
        errors[0]
    )
    assert peak < 4 * MAX_LINE_BYTES, peak


def test_a_line_of_exactly_the_limit_is_kept_and_one_byte_more_is_not(tmp_path):
    path = tmp_path / "edge.pgn"
    path.write_bytes(b"a\r\n" + b"x" * MAX_LINE_BYTES + b"\n" + b"y" * (MAX_LINE_BYTES + 1))
    errors: list[InputError] = []
    lines = list(read_lines(str(path), on_long_line=errors.append))
    assert lines == ["a", "x" * MAX_LINE_BYTES, ""]
    assert len(errors) == 1 and f"byte {MAX_LINE_BYTES + 4:,}" in str(errors[0])


def test_annotate_reading_counts_a_too_long_line_as_an_input_error_and_reads_on(tmp_path, capsys):
    path = tmp_path / "long.pgn"
    path.write_text(_game("before") + "x" * (2 * MAX_LINE_BYTES) + "\n" + _game("after"))
    outputs = list(ReadGames(sample_rate=1.0, seed=0, fail_on_input_error=False).process(str(path)))
    games = [game for tag, batch in outputs if tag == GAMES_TAG for _, game in batch]
    assert [game.headers["Site"] for game in games] == ["before", "after"]
    [counts] = [value for tag, value in outputs if tag == stats.STATS_TAG]
    [error] = counts["input_errors"]
    assert error["file"] == str(path) and "line 6 (byte " in error["error"]
    assert capsys.readouterr().err.count("WARNING:") == 1
    with pytest.raises(InputError, match="long.pgn: line 6"):
        list(ReadGames(sample_rate=1.0, seed=0, fail_on_input_error=True).process(str(path)))
