"""`.pgn.zst` decompression throughput: block by block (pipeline.zstd_blocks, which keeps the
text before any damage) against the baseline in the same run, 1 MiB of compressed input per
call to one zstandard decompressor (which loses a whole call's text to an error).

Run as `python -m bench.zstd_read` (`make bench`). Prints one JSON object. The input is made
here: the moves of the bundled sample's games in the Lichess dump's layout, with a random
clock comment after every move (as the dumps have), compressed by zstd at level 3.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import pathlib
import random
import time

import zstandard

from pipeline.zstd_blocks import decompressed_chunks

SAMPLE = pathlib.Path(__file__).resolve().parent.parent / "data" / "sample"
_READ = 1 << 20


def lichess_like_text(megabytes: float, seed: int = 0) -> bytes:
    movetexts = []
    for name in ("games.pgn.zst", "selfplay.pgn.zst", "mismatch.pgn.zst"):
        text = zstandard.ZstdDecompressor().decompressobj().decompress((SAMPLE / name).read_bytes())
        movetexts += [block.split() for block in text.decode().split("\n\n")[1::2]]
    rng = random.Random(seed)
    games, size = [], 0
    while size < megabytes * 1e6:
        *moves, result = movetexts[rng.randrange(len(movetexts))]
        line = " ".join(
            f"{m} {{ [%clk 0:{rng.randint(0, 9):02d}:{rng.randint(0, 59):02d}] }}"
            if not m.endswith(".")
            else m
            for m in moves
        )
        game = (
            f'[Event "Rated Blitz game"]\n[Site "https://lichess.org/{rng.getrandbits(48):012x}"]\n'
            f'[Result "{result}"]\n[WhiteElo "{rng.randint(800, 2800)}"]\n\n{line} {result}\n\n'
        )
        games.append(game)
        size += len(game)
    return "".join(games).encode()


def blockwise(data: bytes) -> int:
    stream = io.BytesIO(data)
    return sum(len(c) for c in decompressed_chunks(lambda: stream.read(_READ)))


def chunkwise(data: bytes) -> int:
    stream, decompressor, total = io.BytesIO(data), zstandard.ZstdDecompressor(), 0
    frame = decompressor.decompressobj()
    while chunk := stream.read(_READ):
        total += len(frame.decompress(chunk))
    return total


def best_seconds(fn, data: bytes, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn(data)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--megabytes", type=float, default=50.0, help="of PGN text")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
    text = lichess_like_text(args.megabytes)
    data = zstandard.ZstdCompressor(level=3, write_checksum=True).compress(text)
    assert blockwise(data) == chunkwise(data) == len(text)
    blocks = best_seconds(blockwise, data, args.repeats)
    chunks = best_seconds(chunkwise, data, args.repeats)
    print(
        json.dumps(
            {
                "bench": "zstd_read",
                "cores": 1,
                "text_mb": round(len(text) / 1e6, 1),
                "compressed_mb": round(len(data) / 1e6, 2),
                "blockwise_text_mb_per_s": round(len(text) / 1e6 / blocks, 1),
                "baseline_1mib_chunks_text_mb_per_s": round(len(text) / 1e6 / chunks, 1),
                "blockwise_over_baseline": round(chunks / blocks, 3),
            }
        )
    )


if __name__ == "__main__":
    main()
