"""One engine per worker slot (pipeline/labels/engine_slots.py), and the engine the workers report
in stats.json when the launcher could not look (pipeline/beam/stats.py): the annotation DoFn driven
with real Stockfish the way Beam's DaskRunner drives it, one whole DoFn life per partition."""

from __future__ import annotations

import chess

from core.engine_path import find_engine
from core.engine_settings import EngineLimit
from pipeline.annotate import settings as annotate_settings
from pipeline.annotate.boards import AnnotateBoards
from pipeline.beam import stats
from pipeline.labels import engine_slots
from pipeline.labels.uci_client import UciEngine

FENS = [chess.STARTING_FEN, "4k3/8/8/8/8/8/4P3/4K3 w - - 0 1", "4k3/8/8/8/8/8/4P3/4K3 b - - 0 1"]


def run_partition(stockfish: str, fens: list[str]) -> dict:
    """What the DaskRunner does for each partition (apply_dofn_to_bundle): a DoFn
    deserialised anew, setup, the elements, finish_bundle, teardown. Returns the stats."""
    dofn = AnnotateBoards(
        annotate_settings.EngineConfig(stockfish), EngineLimit.parse("nodes=10"), 60, 1
    )
    dofn.setup()
    merged = stats.empty()
    for tag, value in dofn.process((0, [(fen, 1) for fen in fens], None)):
        if tag == stats.STATS_TAG:
            stats.merge(merged, value)
    dofn.finish_bundle()
    dofn.teardown()
    return merged


def test_a_worker_slot_keeps_one_engine_across_partitions(stockfish):
    engine_slots.close_idle()
    try:
        merged = stats.empty()
        for k in range(4):  # four partitions on one worker thread
            stats.merge(merged, run_partition(stockfish, FENS[k % 3 : k % 3 + 1]))
        (worker,) = merged["workers"].values()
        assert worker["boards"] == 4
        assert len(worker["engine_pids"]) == 1, worker["engine_pids"]
    finally:
        engine_slots.close_idle()


def test_stats_name_the_engine_the_workers_ran_when_the_launcher_could_not(stockfish):
    engine_slots.close_idle()
    try:
        merged = run_partition(stockfish, FENS[:1])
    finally:
        engine_slots.close_idle()
    # As on Dask: the launcher leaves the engine to the workers, so it knows neither.
    static = {"engine": {"path": None, "name": None, "threads": 1}}
    engine = stats.summarize(merged, static)["engine"]
    probe = UciEngine(find_engine(stockfish))
    try:
        name = probe.name
    finally:
        probe.close()
    # What the DirectRunner's launcher writes: the path found and the engine's UCI name.
    assert engine == {"path": find_engine(stockfish), "name": name, "threads": 1}
    # Given by the launcher, they stay.
    given = {"engine": {"path": "/x/sf", "name": "SF", "threads": 1}}
    assert stats.summarize(merged, given)["engine"] == given["engine"]
