"""Import throughput on one core: ChessBench bag records/s and Lichess evaluation lines/s.

Run as `python -m bench.chessbench_import` (`make bench`). Prints one JSON object:

- `bag.decode_records_per_s`: action-value records read from a `.bag` and decoded
  (pipeline/chessbench/bag.py), against `bag.beam_coder_records_per_s`, the same records decoded one
  at a time by Beam's own TupleCoder (the reference code's way), measured in the same run.
- `bag.bagz`: DeepMind's `bagz` reader (when installed) on the same file: records/s read one
  by one by each reader (`bagz_iterate_records_per_s`, `ours_iterate_records_per_s`), and
  read and decoded, bagz's records joined into the buffer the decoder takes
  (`bagz_decode_records_per_s`, against `decode_records_per_s`).
- `bag.import_records_per_s`: the whole `pipeline.chessbench.import_chessbench` job (Beam
  DirectRunner, one worker) from the bag to Parquet shards: decode, group by board, check
  the moves against python-chess's legal moves, write.
- `evals.import_lines_per_s`: `pipeline.lichess_evals.import_lichess_evals` from a
  `.jsonl.zst` to Parquet, against `evals.json_only_lines_per_s`, just decompressing and
  `json.loads` of each line.

Inputs are made here from random legal games with made-up values (the real files are
~1 GB per shard and cannot be downloaded on a machine without internet).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import tempfile
import time

import chess
import numpy as np
import zstandard

from bench.tokenizer_speed import random_game_fens
from core.actions import legal_actions
from pipeline.chessbench.bag import BagReader, BagWriter
from pipeline.chessbench.import_chessbench import ChessBenchConfig, run_config
from pipeline.chessbench.records import decode_av, encode_av
from pipeline.lichess_evals.import_lichess_evals import import_lichess_evals
from pipeline.lichess_evals.settings import LichessEvalsConfig

TARGET_RECORDS_PER_S = 200_000


def write_av_bag(path: str, fens: list[str], seed: int) -> int:
    """Every legal move of every board, with a made-up win probability; returns records."""
    rng = random.Random(seed)
    n = 0
    with BagWriter(path) as writer:
        for fen in fens:
            for move in legal_actions(chess.Board(fen)):
                writer.write(encode_av(fen, move, rng.random()))
                n += 1
    return n


def eval_line(fen: str, rng: random.Random) -> str:
    """A line like the Lichess evaluation database's: 4-field FEN, 1-3 evaluations of 1-5
    principal variations each, scores from White's view."""
    board = chess.Board(fen)
    moves = [m.uci() for m in board.legal_moves]
    evals = []
    for depth in rng.sample(range(20, 50), rng.randint(1, 3)):
        first = rng.sample(moves, min(len(moves), rng.randint(1, 5)))
        pvs = [{"cp": rng.randint(-400, 400), "line": f"{m} {m} {m}"} for m in first]
        evals.append({"pvs": pvs, "knodes": rng.randint(1000, 900_000), "depth": depth})
    return json.dumps({"fen": " ".join(fen.split()[:4]), "evals": evals})


def decode_rate(path: str) -> float:
    with BagReader(path) as reader:
        began = time.perf_counter()
        n = 0
        for chunk in reader.chunks():
            fens, _, _ = decode_av(chunk.data, chunk.offsets)
            n += len(fens)
    return n / (time.perf_counter() - began)


def beam_coder_rate(path: str, limit: int) -> float:
    from apache_beam import coders

    coder = coders.TupleCoder([coders.StrUtf8Coder(), coders.StrUtf8Coder(), coders.FloatCoder()])
    with BagReader(path) as reader:
        began = time.perf_counter()
        for i in range(min(limit, len(reader))):
            coder.decode(reader[i])
        n = min(limit, len(reader))
    return n / (time.perf_counter() - began)


def iterate_rate(records) -> float:
    began = time.perf_counter()
    n = sum(1 for _ in records)
    return n / (time.perf_counter() - began)


def bagz_rates(path: str) -> dict:
    """DeepMind's reader on the same file, against ours (best of 3 each)."""
    try:
        import bagz  # the optional [bagz] extra
    except ImportError:
        return {"installed": False}

    def bagz_decode() -> float:
        began = time.perf_counter()
        reader = bagz.Reader(path)
        n, chunk = 0, 65_536
        for start in range(0, len(reader), chunk):
            records = [reader[i] for i in range(start, min(start + chunk, len(reader)))]
            offsets = np.cumsum([0] + [len(r) for r in records], dtype=np.int64)
            fens, _, _ = decode_av(b"".join(records), offsets)
            n += len(fens)
        return n / (time.perf_counter() - began)

    def ours_iterate() -> float:
        with BagReader(path) as reader:
            return iterate_rate(reader)

    theirs = max(iterate_rate(bagz.Reader(path)) for _ in range(3))
    ours = max(ours_iterate() for _ in range(3))
    return {
        "installed": True,
        "bagz_iterate_records_per_s": round(theirs),
        "ours_iterate_records_per_s": round(ours),
        "bagz_decode_records_per_s": round(max(bagz_decode() for _ in range(3))),
    }


def bench_bag(directory: str, boards: int) -> dict:
    path = os.path.join(directory, "action_value_data.bag")
    fens = list(dict.fromkeys(random_game_fens(boards * 2, seed=1)))[:boards]  # distinct
    records = write_av_bag(path, fens, seed=2)
    decode = max(decode_rate(path) for _ in range(3))
    baseline = beam_coder_rate(path, 200_000)
    began = time.perf_counter()
    config = ChessBenchConfig(path, "av", os.path.join(directory, "chessbench"), num_shards=4)
    document = run_config(config, ["--runner=DirectRunner", "--direct_num_workers=1"])
    wall = time.perf_counter() - began
    return {
        "records": records,
        "boards": boards,
        "file_mb": round(os.path.getsize(path) / 1e6, 1),
        "decode_records_per_s": round(decode),
        "beam_coder_records_per_s": round(baseline),
        "decode_vs_beam_coder": round(decode / baseline, 1),
        "bagz": bagz_rates(path),
        "import_records_per_s": round(records / wall),
        "import_wall_s": round(wall, 2),
        "import_boards_written": document["boards"]["written"],
        "target_records_per_s": TARGET_RECORDS_PER_S,
        "decode_meets_target": decode >= TARGET_RECORDS_PER_S,
        "import_meets_target": records / wall >= TARGET_RECORDS_PER_S,
    }


def bench_evals(directory: str, lines: int) -> dict:
    rng = random.Random(3)
    fens = list(dict.fromkeys(random_game_fens(lines * 2, seed=4)))[:lines]
    text = "\n".join(eval_line(fen, rng) for fen in fens) + "\n"
    path = os.path.join(directory, "lichess_db_eval.jsonl.zst")
    with open(path, "wb") as handle:
        handle.write(zstandard.ZstdCompressor().compress(text.encode()))
    began = time.perf_counter()
    with open(path, "rb") as handle:
        stream = io.TextIOWrapper(zstandard.ZstdDecompressor().stream_reader(handle))
        parsed = sum(1 for line in stream if json.loads(line))
    json_only = parsed / (time.perf_counter() - began)
    began = time.perf_counter()
    config = LichessEvalsConfig(progress_seconds=3600)
    document = import_lichess_evals(path, os.path.join(directory, "evals"), config)
    wall = time.perf_counter() - began
    return {
        "lines": lines,
        "file_mb": round(os.path.getsize(path) / 1e6, 2),
        "import_lines_per_s": round(lines / wall),
        "json_only_lines_per_s": round(json_only),
        "import_vs_json_only": round(lines / wall / json_only, 3),
        "boards_written": document["boards"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--boards", type=int, default=30_000, help="boards in the AV bag")
    parser.add_argument("--lines", type=int, default=30_000, help="lines of evaluations")
    args = parser.parse_args()
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
    with tempfile.TemporaryDirectory() as directory:
        result = {
            "bench": "import",
            "cores": 1,
            "bag": bench_bag(directory, args.boards),
            "evals": bench_evals(directory, args.lines),
        }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
