"""Annotate on Beam's DaskRunner (a scheduler and two single-thread worker processes on this
machine) against the DirectRunner with two worker processes, on the same games.

    python -m bench.dask_runner [--games 4] [--limit nodes=2000] [--repeats 1]

Prints one JSON object: for each runner the whole run's wall time and action values/s, and
the annotation stage's rate (action values over the span from the first board started to
the last finished, across workers, from stats.json's `workers`), the ratios Dask / Direct,
and whether the shards of the two runs are byte for byte the same. The cluster's start is
not timed. Runs alternate (`--repeats`), best of each kept. `load_average` at the start and
the end tells a disturbed run apart.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import tempfile
import time

import chess.pgn
import zstandard

from core.schema import meta_dir
from pipeline.annotate import annotate
from pipeline.beam.dask_cluster import local_cluster

SAMPLE = os.path.join(os.path.dirname(__file__), "..", "data", "sample", "selfplay.pgn.zst")


def _games(count: int) -> str:
    raw = open(SAMPLE, "rb").read()
    text = zstandard.ZstdDecompressor().decompressobj().decompress(raw).decode()
    stream, games = io.StringIO(text), []
    while len(games) < count and (game := chess.pgn.read_game(stream)) is not None:
        games.append(str(game))
    return "\n\n".join(games) + "\n"


def _stage_rate(document: dict) -> float:
    workers = document["workers"]
    span = max(w["last_board_at"] for w in workers) - min(w["first_board_at"] for w in workers)
    return document["action_values"] / span if span > 0 else 0.0


def _shards(split: str) -> dict[str, bytes]:
    files = {}
    for directory in (split, meta_dir(split)):
        for name in sorted(os.listdir(directory)):
            if name.endswith(".parquet"):
                files[name] = open(os.path.join(directory, name), "rb").read()
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.dask_runner", description=__doc__)
    parser.add_argument("--games", type=int, default=4, help="self-play games of the sample")
    parser.add_argument("--limit", default="nodes=2000")
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args(argv)
    work = tempfile.mkdtemp(prefix="bench-dask-")
    load_start = os.getloadavg()
    try:
        games = os.path.join(work, "games.pgn")
        with open(games, "w") as f:
            f.write(_games(args.games))
        common = [games, "--limit", args.limit, "--num-shards", "2", "--progress-seconds", "600"]
        best: dict[str, dict] = {}
        with local_cluster(workers=2, cwd=work, log_dir=work) as address:
            runners = {
                "direct": ["--direct_num_workers=2", "--direct_running_mode=multi_processing"],
                "dask": ["--runner=DaskRunner", f"--dask_client_address={address}"],
            }
            for _ in range(args.repeats):
                for name, flags in runners.items():
                    out = os.path.join(work, name)
                    began = time.monotonic()
                    document = annotate.run([*common, "--out", out, "--overwrite", *flags])
                    wall = time.monotonic() - began
                    result = {
                        "wall_s": round(wall, 2),
                        "values_per_s_wall": round(document["action_values"] / wall, 1),
                        "annotation_stage_values_per_s": round(_stage_rate(document), 1),
                        "workers_that_annotated": len(document["workers"]),
                        "action_values": document["action_values"],
                        "boards": document["boards"]["annotated"],
                    }
                    if name not in best or result["wall_s"] < best[name]["wall_s"]:
                        best[name] = result
        same = _shards(os.path.join(work, "direct", "train")) == _shards(
            os.path.join(work, "dask", "train")
        )
        report = {
            "games": args.games,
            "limit": args.limit,
            **best,
            "dask_over_direct_wall": round(best["direct"]["wall_s"] / best["dask"]["wall_s"], 3),
            "dask_over_direct_annotation_stage": round(
                best["dask"]["annotation_stage_values_per_s"]
                / best["direct"]["annotation_stage_values_per_s"],
                3,
            ),
            "shards_identical": same,
            "load_average": {"start": load_start, "end": os.getloadavg()},
        }
        print(json.dumps(report, indent=2))
        return 0 if same else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
