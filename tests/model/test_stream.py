"""The streaming loader: every item once per epoch, hosts on their own shards, shuffled
order, exact resume, memory within the budget, and refusal of bad input."""

from __future__ import annotations

import json
import pathlib
import random
import shutil
import subprocess
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest

from core import bins, schema
from core.actions import move_to_index
from core.schema import SchemaError, board_files, boards_table
from core.tokenizer import tokenize_batch
from model.data import stream, stream_plan
from model.data.loader import DataError, load_boards
from model.data.loader_settings import LoaderSettings
from model.data.stream import StreamBatches
from model.data.stream_plan import (
    estimate_in_memory_bytes,
    host_files,
    should_stream,
    stream_fingerprint,
)
from tests.model.test_data import illegal_action

ROOT = pathlib.Path(__file__).resolve().parents[2]
NUM_BINS = 32
GROUP_ROWS = 4  # small row groups, so that a shard is several blocks


def write_grouped(shard_writer, rows, directory, num_shards, group_rows=GROUP_ROWS):
    """shard_writer's shards, written with `group_rows` rows per row group."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(schema, "ROW_GROUP_SIZE", group_rows)
        return shard_writer(rows, directory, num_shards)


@pytest.fixture(scope="module")
def rows(make_rows):
    """Rows as the importers make them, shuffled across the shards: complete boards,
    partial boards (two moves valued), boards with only a state value, boards with only a
    best move."""
    base = make_rows(48, seed=11)
    complete = [dict(r) for r in base[:24]]
    partial = [
        dict(r, moves=r["moves"][:2], win_probs=r["win_probs"][:2], cp=None, mate=None)
        for r in base[24:32]
    ]
    partial = [dict(r, partial=True, best_move=r["moves"][0]) for r in partial]
    state_only = [
        dict(r, moves=[], win_probs=[], cp=None, mate=None, best_move="", partial=True)
        for r in base[32:40]
    ]
    best_only = [
        dict(r, moves=[], win_probs=[], cp=None, mate=None, state_win_prob=None, partial=True)
        for r in base[40:48]
    ]
    mixed = complete + partial + state_only + best_only
    random.Random(0).shuffle(mixed)
    return mixed


@pytest.fixture(scope="module")
def files(rows, tmp_path_factory, shard_writer):
    directory = write_grouped(shard_writer, rows, tmp_path_factory.mktemp("stream"), 4)
    return board_files(str(directory))


def truth(rows, target, av_partial=False) -> dict:
    """Item key -> win probability (AV, SV) or action (BC), as make_view defines the items."""
    if target == "av":
        return {
            (r["fen"], move_to_index(m)): p
            for r in rows
            if av_partial or not r.get("partial")
            for m, p in zip(r["moves"], r["win_probs"], strict=True)
        }
    if target == "sv":
        return {r["fen"]: r["state_win_prob"] for r in rows if r["state_win_prob"] is not None}
    return {r["fen"]: move_to_index(r["best_move"]) for r in rows if r["best_move"]}


def make(files, target="av", position=0, shuffle_buffer=100, memory_budget_gb=1.0, **kwargs):
    settings = LoaderSettings(
        target, NUM_BINS, **(dict(batch_size=24, seed=1, prefetch=0) | kwargs)
    )
    return StreamBatches(
        files, settings, position, shuffle_buffer=shuffle_buffer, memory_budget_gb=memory_budget_gb
    )


def take(loader, n: int) -> dict[str, np.ndarray]:
    """The next n items of a loader, its batches joined (the last one cut)."""
    batches = []
    while sum(len(b.targets) for b in batches) < n:
        batches.append(next(loader))
    return {
        key: np.concatenate([b.arrays()[key] for b in batches])[:n] for key in batches[0].arrays()
    }


def keys(rows, items, target) -> list:
    states = tokenize_batch([r["fen"] for r in rows])
    fen_of = {bytes(s): r["fen"] for s, r in zip(states, rows, strict=True)}
    fens = [fen_of[bytes(s)] for s in items["states"].astype(np.int32)]
    if target == "av":
        return list(zip(fens, items["actions"].tolist(), strict=True))
    return fens


@pytest.mark.parametrize(
    "target,hl_gauss,av_partial",
    [
        ("av", False, False),
        ("av", True, False),
        ("av", False, True),
        ("av", True, True),
        ("sv", False, False),
        ("sv", True, False),
        ("bc", False, False),
    ],
)
def test_an_epoch_holds_every_item_once_with_its_target(rows, files, target, hl_gauss, av_partial):
    expected = truth(rows, target, av_partial)
    loader = make(files, target, hl_gauss=hl_gauss, av_partial=av_partial)
    assert loader.items_per_epoch == len(expected)
    items = take(loader, len(expected))
    got = keys(rows, items, target)
    assert sorted(got) == sorted(expected)  # each item exactly once
    assert items["states"].dtype == np.uint8 and items["states"].shape[1] == 77
    assert ("actions" in items) == (target == "av")
    wanted = [expected[key] for key in got]
    if target == "bc":
        np.testing.assert_array_equal(items["targets"], wanted)
    elif hl_gauss:
        soft = bins.hl_gauss_targets(np.float32(wanted), NUM_BINS)
        np.testing.assert_allclose(items["targets"], soft, rtol=1e-6)
    else:
        np.testing.assert_array_equal(items["targets"], bins.to_bins(np.float32(wanted), NUM_BINS))
    assert items["targets"].dtype == (np.float32 if hl_gauss else np.int32)
    assert loader.epoch == pytest.approx(loader.position / len(expected))


def test_two_hosts_cover_the_epoch_and_read_disjoint_shards(rows, files, monkeypatch):
    opened: dict[int, set] = {0: set(), 1: set()}
    host = {"index": 0}

    class RecordingBoardFile(schema.BoardFile):
        def __init__(self, file):
            opened[host["index"]].add(file)
            super().__init__(file)

    monkeypatch.setattr(stream, "BoardFile", RecordingBoardFile)
    seen = []
    for p in (0, 1):
        host["index"] = p
        loader = make(files, batch_size=24, process_index=p, process_count=2)
        assert loader.local_batch == 12
        assert loader.files == host_files(files, 1, p, 2)
        seen += keys(rows, take(loader, loader.items_per_epoch), "av")
    assert sorted(seen) == sorted(truth(rows, "av"))  # together: every item once
    assert opened[0] and opened[1] and not opened[0] & opened[1]
    assert opened[0] | opened[1] == set(files)


def file_order(rows, files, target="av") -> list:
    """The items in the order the files hold them."""
    by_fen = {r["fen"]: r for r in rows}
    ordered = [r["fen"] for f in files for r in pq.read_table(f, columns=["fen"]).to_pylist()]
    return [key for key in truth([by_fen[f] for f in ordered], target)]


def test_the_order_is_shuffled_and_a_function_of_the_settings(rows, files):
    n = len(truth(rows, "av"))
    first = keys(rows, take(make(files), 2 * n), "av")
    epoch0, epoch1 = first[:n], first[n:]
    assert epoch0 != file_order(rows, files)
    assert sorted(epoch0) == sorted(epoch1) and epoch0 != epoch1  # epochs differ
    assert keys(rows, take(make(files), 2 * n), "av") == first  # same settings, same order
    assert keys(rows, take(make(files, seed=2), n), "av") != epoch0
    # A window mixes the items of its blocks: in file order a board's moves come one after
    # the other; here few neighbours share a board.
    same = np.mean([a[0] == b[0] for a, b in zip(epoch0, epoch0[1:], strict=False)])
    assert same < 0.4


def positions_to_try(loader) -> dict[str, int]:
    """Local offsets: in a window, at a window's start, mid-epoch, in the second epoch."""
    n = loader.items_per_epoch
    boundary = next(k for k in range(1, n) if loader.locate(k)[2:] == (1, 0))
    return {
        "mid-window": 37,
        "window boundary": boundary,
        "a batch's start": 5 * loader.local_batch,
        "mid-epoch": n // 2 + 5,
        "second epoch": n + n // 3,
    }


@pytest.mark.parametrize("prefetch", [0, 3])
@pytest.mark.parametrize("process_count", [1, 2])
def test_a_resumed_loader_continues_exactly(files, prefetch, process_count):
    for p in range(process_count):
        settings = dict(process_index=p, process_count=process_count, prefetch=prefetch)
        with make(files, **settings) as straight:
            n = straight.items_per_epoch
            expected = take(straight, 3 * n)
        for name, k in positions_to_try(straight).items():
            with make(files, position=k * process_count, **settings) as resumed:
                assert resumed.epoch == pytest.approx(k / n), name
                got = take(resumed, 60)
                assert resumed.position == (k + 60 + (-60 % resumed.local_batch)) * process_count
            for key in got:
                np.testing.assert_array_equal(got[key], expected[key][k : k + 60], err_msg=name)


@pytest.mark.parametrize("prefetch", [0, 3])
def test_close_then_iterate_continues_from_position(files, prefetch):
    expected = take(make(files, prefetch=prefetch), 24 * 50)
    loader = make(files, prefetch=prefetch)
    head = take(loader, 24 * 17)
    loader.close()
    tail = take(loader, 24 * 33)
    loader.close()
    for key in expected:
        np.testing.assert_array_equal(expected[key], np.concatenate([head[key], tail[key]]))


def test_footer_estimates(files):
    data = load_boards(",".join(files))
    estimate = estimate_in_memory_bytes(files)
    exact = (
        stream_plan.BYTES_PER_BOARD * data.num_boards
        + stream_plan.BYTES_PER_ACTION_VALUE * data.num_pairs
    )
    assert estimate == exact  # the footers' statistics count the action values exactly
    assert stream_fingerprint(files) == {"boards": data.num_boards, "files": len(files)}
    assert should_stream(files, memory_budget_gb=estimate / 1e9)  # Batches needs more
    assert not should_stream(files, memory_budget_gb=1.0)


def test_window_items_follow_the_budget(files):
    sizes = [make(files, shuffle_buffer=None, memory_budget_gb=b).window_items for b in (1, 2, 4)]
    assert sizes[0] > 10_000_000
    assert sizes[1] / sizes[0] == pytest.approx(2, rel=0.01)
    assert sizes[2] / sizes[1] == pytest.approx(2, rel=0.01)
    with pytest.raises(ValueError, match="memory budget .* at least"):
        make(files, shuffle_buffer=None, memory_budget_gb=1e-5)


MEMORY_SCRIPT = """
import gc, json, sys
from core.schema import board_files
from model.data.loader_settings import LoaderSettings
from model.data.stream import StreamBatches
from model.data.stream_plan import estimate_in_memory_bytes


def status(field):  # kB; VmHWM is this process's peak: unlike ru_maxrss, not the parent's
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":")) * 1024


directory, budget = sys.argv[1], float(sys.argv[2])
files = board_files(directory)
# Warm up on one block, so that first-use costs (pyarrow's pandas import, ...) are not
# charged to the loader.
warm = StreamBatches(files[:1], LoaderSettings("av", 128, 64, seed=0, prefetch=0),
                     shuffle_buffer=1, memory_budget_gb=budget)
next(warm)
del warm
gc.collect()
before = status("VmRSS")
loader = StreamBatches(files, LoaderSettings("av", 128, 256, seed=0, prefetch=4),
                       memory_budget_gb=budget)
n = loader.items_per_epoch
while loader.position < n:
    next(loader)
loader.close()
growth = status("VmHWM") - before
estimate = estimate_in_memory_bytes(files)
print(json.dumps({"growth": growth, "items": n, "window_items": loader.window_items,
                  "estimate": estimate}))
"""


def test_memory_stays_within_the_budget(make_rows, shard_writer, tmp_path):
    # 40 copies of one shard of 9216 boards (64 distinct ones, repeated; row groups of 256):
    # ~10M action values, an in-memory estimate of 13 budgets.
    budget_gb = 0.016
    rows = make_rows(64, seed=5) * 144
    one = write_grouped(shard_writer, rows, tmp_path / "one", 1, group_rows=256)
    copies = tmp_path / "copies"
    copies.mkdir()
    source = board_files(str(one))[0]
    for i in range(40):
        shutil.copy(source, copies / schema.shard_name("boards", i, 40))
    done = subprocess.run(
        [sys.executable, "-c", MEMORY_SCRIPT, str(copies), str(budget_gb)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(done.stdout)
    budget = budget_gb * 1e9
    assert result["estimate"] > 10 * budget
    assert result["window_items"] < result["items"] / 10  # many windows an epoch
    # The loader's peak resident memory (VmHWM) above the resident memory after the imports
    # and a warm-up: within the budget, no tolerance (measured: 8.3 MB of the 16).
    assert result["growth"] < budget, result


@pytest.mark.parametrize("prefetch", [0, 2])
def test_a_bad_row_is_named(rows, tmp_path, shard_writer, prefetch):
    bad = [dict(r) for r in rows[:10]]
    bad[6]["win_probs"] = [1.5] * len(bad[6]["moves"])
    bad[6]["partial"] = False
    files = board_files(str(write_grouped(shard_writer, bad, tmp_path, 1)))
    loader = make(files, "av", av_partial=True, prefetch=prefetch)
    # Row 6 of the file is row 2 of its second row group.
    with pytest.raises(DataError, match=r"boards-00000-of-00001.parquet: row 6 .*outside"):
        take(loader, 1000)
    loader.close()


def test_a_move_illegal_on_its_board_is_named(rows, tmp_path, shard_writer):
    bad = [dict(r) for r in rows[:10]]
    move = illegal_action(bad[6]["fen"])
    bad[6]["moves"] = [move, *bad[6]["moves"][1:]]
    files = board_files(str(write_grouped(shard_writer, bad, tmp_path, 1)))
    loader = make(files, "av", av_partial=True, prefetch=0)
    # Row 6 of the file is row 2 of its second row group.
    with pytest.raises(DataError, match=rf"parquet: row 6 .*move {move!r} is not legal"):
        take(loader, 1000)
    loader.close()


def test_refuses_a_file_without_the_schema(tmp_path, rows):
    path = tmp_path / "boards-00000-of-00001.parquet"
    pq.write_table(boards_table(rows[:3]).replace_schema_metadata(None), path)
    with pytest.raises(SchemaError, match="boards-00000-of-00001.parquet"):
        make([str(path)])


def test_refuses_fewer_shards_than_hosts(files):
    with pytest.raises(DataError, match="1 shards for 2 hosts"):
        make(files[:1], process_count=2)


def test_refuses_weighted_sampling_and_an_empty_view(rows, files, tmp_path, shard_writer):
    with pytest.raises(ValueError, match="'weighted'"):
        make(files, sampler="weighted")
    only_partial = [dict(r, partial=True) for r in rows[:8]]
    loader = make(board_files(str(shard_writer(only_partial, tmp_path, 1))))
    with pytest.raises(DataError, match="no av examples.*av_partial"):
        next(loader)
