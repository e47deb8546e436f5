"""Packs training shards into what travels to a lent accelerator (docs/training.md, "The
accelerator window"): the whole tree that a device call carries is at most 64 MiB.

    python -m jobs.pack_data --data data/cpu-model/annotated/train-lichess --out gpu-carry/data

Each annotated Parquet shard is rewritten with zstd at a high level (`--level`, 19: the
shards are written once and read once, so the slow compression is paid here, not there),
schema and rows unchanged, as `boards-NNNNN-of-MMMMM.parquet` (so that shards of several
splits with the same names do not collide). Whole shards are taken in order while they fit
the budget (a shard too large is skipped for the next); `pack.json` beside them names the
source of each and the boards packed. The budget (`--budget-mib`) is by default what the
64 MiB leave after the repository's tracked files and the other folders carried beside the
pack (`--beside`, e.g. gpu-carry/wheels), less a margin.

`--policy-only` empties (nulls) the columns that training on moves never reads, the
centipawn and mate scores (`cp`, `mate`, `state_cp`, `state_mate`: the win probabilities hold
the values) and the board's own value (`state_win_prob`, an SV target's), which are ~a
quarter of a best-move board's bytes; BC and AV train on the pack as before, SV and a
value head beside the policy cannot (training refuses a value head over boards with no value).
`--policy-value` nulls the same but the board's value, which a BC policy with a value head
beside it (`[model] policy_value`) trains its head on.

`--measure CONFIG` then times the training loader on the packed shards, on this machine:
reading them, building every board's graph (python-chess, one core) and serving batches of
the config's size (model/data/train_data.py), in boards/s, to set beside the GPU step's appetite.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from core.schema import (
    ROW_GROUP_SIZE,
    SchemaError,
    board_files,
    check_schema,
    read_board_file,
    reading_shard,
    shard_name,
)
from pipeline.game_pack import MANIFEST
from runtime.outputs import OutputError, check_dir, folder_bytes

CARRY_LIMIT = 64 * 2**20  # what one device call may carry, the working tree included
MARGIN = 2 * 2**20  # files made between packing and the call (logs, caches)
# What --policy-only nulls: read by no BC or AV training (core.schema: all nullable).
POLICY_UNUSED = ("cp", "mate", "state_win_prob", "state_cp", "state_mate")
# What --policy-value nulls: a BC policy's value head (model.policy_value) reads the board's
# win probability too.
POLICY_VALUE_UNUSED = tuple(name for name in POLICY_UNUSED if name != "state_win_prob")


@dataclass(frozen=True)
class Packed:
    source: str
    name: str
    boards: int
    bytes_before: int
    bytes_after: int


def tracked_bytes(root: str = ".") -> int:
    """The bytes of the files git tracks under `root` (what a device call sends besides the
    carried folders); 0 where `root` is no git checkout."""
    try:
        listed = subprocess.run(
            ["git", "-C", root, "ls-files", "-z"], capture_output=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return 0
    names = [n for n in listed.decode().split("\0") if n]
    return sum(
        os.path.getsize(os.path.join(root, n))
        for n in names
        if os.path.isfile(os.path.join(root, n))
    )


def default_budget(beside: Sequence[str], root: str = ".") -> int:
    return CARRY_LIMIT - tracked_bytes(root) - sum(map(folder_bytes, beside)) - MARGIN


def check_replaceable(out: str) -> None:
    """Only an earlier pack (of either packer) is replaced: --out naming a folder of other
    files is a slip."""
    if os.path.isdir(out) and os.listdir(out) and not os.path.exists(os.path.join(out, MANIFEST)):
        raise OutputError(f"{out} is not empty and holds no {MANIFEST}: not replaced")


def clear_pack(out: str) -> None:
    """An earlier pack at `out` is removed (see check_replaceable)."""
    check_replaceable(out)
    if os.path.isdir(out):
        shutil.rmtree(out)


def recompress(source: str, target: str, level: int, nulled: Sequence[str] = ()) -> int:
    """`source` rewritten to `target` with zstd at `level`, schema (and its metadata) kept,
    the `nulled` columns emptied; returns its rows."""
    with reading_shard(source):
        table = pq.read_table(source)
    if nulled:
        for name in nulled:
            index = table.schema.get_field_index(name)
            field = table.schema.field(index)
            table = table.set_column(index, field, pa.nulls(table.num_rows, field.type))
    pq.write_table(
        table,
        target,
        compression="zstd",
        compression_level=level,
        row_group_size=ROW_GROUP_SIZE,
    )
    return table.num_rows


def pack(
    data: str, out: str, budget: int, level: int = 19, nulled: Sequence[str] = ()
) -> list[Packed]:
    """Whole shards of `data` recompressed into `out` (emptied first) while they fit `budget`
    bytes, the `nulled` columns emptied (POLICY_UNUSED, POLICY_VALUE_UNUSED); each packed shard
    is read back through the loader's schema check."""
    sources = board_files(data)
    for file in sources:  # a file of the wrong schema stops the packing before any work
        with reading_shard(file):
            check_schema(pq.read_schema(file), file)
    clear_pack(out)
    os.makedirs(out, exist_ok=True)
    packed: list[Packed] = []
    used = 0
    with tempfile.TemporaryDirectory(dir=out) as scratch:
        for source in sources:
            trial = os.path.join(scratch, "shard.parquet")
            boards = recompress(source, trial, level, nulled)
            size = os.path.getsize(trial)
            if used + size > budget:
                continue
            name = f"pending-{len(packed):05d}.parquet"
            os.replace(trial, os.path.join(out, name))
            used += size
            packed.append(Packed(source, name, boards, os.path.getsize(source), size))
    total = len(packed)
    final = []
    for index, shard in enumerate(packed):
        name = shard_name("boards", index, total)
        os.replace(os.path.join(out, shard.name), os.path.join(out, name))
        read_board_file(os.path.join(out, name), columns=["fen"])
        final.append(
            Packed(shard.source, name, shard.boards, shard.bytes_before, shard.bytes_after)
        )
    return final


def write_manifest(
    out: str, packed: list[Packed], sources: int, budget: int, level: int, nulled: Sequence[str]
) -> dict:
    document = {
        "boards": sum(p.boards for p in packed),
        "policy_only": tuple(nulled) == POLICY_UNUSED,
        "nulled": list(nulled),
        "bytes": sum(p.bytes_after for p in packed),
        "budget_bytes": budget,
        "zstd_level": level,
        "shards_packed": len(packed),
        "shards_in_source": sources,
        "shards": [asdict(p) for p in packed],
    }
    with open(os.path.join(out, MANIFEST), "w") as f:
        json.dump(document, f, indent=2)
        f.write("\n")
    return document


def measure_loader(config_path: str, data: str, num_batches: int = 20) -> dict:
    """Seconds and boards/s of the training loader of `config_path` over `data`: the load
    (Parquet to arrays), the graphs (board-at-once backbones) and `num_batches` batches."""
    import time

    from model import config as config_lib
    from model.data.train_data import load_data

    config = config_lib.load(config_path, [f"data.train={json.dumps(data)}", 'data.test=""'])
    began = time.perf_counter()
    train_data, _ = load_data(config, None, lambda line: None)
    loaded = time.perf_counter()
    batches = train_data.batches(config, 0)
    ready = time.perf_counter()
    try:
        for _ in range(num_batches):
            next(batches)
    finally:
        batches.close()
    served = time.perf_counter()
    boards = train_data.boards.num_boards
    size = config.train.batch_size
    return {
        "boards": boards,
        "load_s": round(loaded - began, 2),
        "load_boards_per_s": round(boards / (loaded - began)),
        "graphs_s": round(ready - loaded, 2),
        "graphs_boards_per_s": round(boards / (ready - loaded)),
        "batch_size": size,
        "batches_boards_per_s": round(num_batches * size / (served - ready)),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m jobs.pack_data", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--data", required=True, help="annotated shards (dir, file, glob, a,b)")
    parser.add_argument("--out", default="gpu-carry/data", help="the packed folder (replaced)")
    parser.add_argument("--budget-mib", type=float, help="default: what the 64 MiB leave")
    parser.add_argument("--beside", action="append", default=[], help="carried with it")
    parser.add_argument("--level", type=int, default=19, help="zstd level (1-22)")
    nulling = parser.add_mutually_exclusive_group()
    nulling.add_argument(
        "--policy-only", action="store_true", help="null the columns BC and AV never read"
    )
    nulling.add_argument(
        "--policy-value",
        action="store_true",
        help="null those but the board's value, which a policy's value head reads",
    )
    parser.add_argument("--measure", metavar="CONFIG", help="then time this config's loader")
    args = parser.parse_args(argv)
    budget = (
        int(args.budget_mib * 2**20) if args.budget_mib is not None else default_budget(args.beside)
    )
    try:
        if budget <= 0:
            raise OutputError(f"no room left to pack: the budget is {budget / 2**20:.1f} MiB")
        check_dir(args.out)
        sources = len(board_files(args.data))
        nulled = (
            POLICY_UNUSED if args.policy_only else POLICY_VALUE_UNUSED if args.policy_value else ()
        )
        packed = pack(args.data, args.out, budget, args.level, nulled)
        document = write_manifest(args.out, packed, sources, budget, args.level, nulled)
    except (FileNotFoundError, SchemaError, OutputError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(
        f"packed {document['boards']:,} boards in {len(packed)} of {sources} shard(s), "
        f"{document['bytes'] / 2**20:.1f} MiB of a {budget / 2**20:.1f} MiB budget "
        f"(zstd {args.level}) -> {args.out}"
    )
    if packed and args.measure:
        m = measure_loader(args.measure, args.out)
        print(
            f"loader ({args.measure}, this machine): {m['boards']:,} boards read in "
            f"{m['load_s']}s ({m['load_boards_per_s']:,}/s), graphs in {m['graphs_s']}s "
            f"({m['graphs_boards_per_s']:,}/s), batches of {m['batch_size']} at "
            f"{m['batches_boards_per_s']:,} boards/s"
        )
    return 0 if packed else 1


if __name__ == "__main__":
    sys.exit(main())
