"""The portable building blocks: runner names, worker paths, rows counted end to end."""

from __future__ import annotations

import os

import apache_beam as beam
import pytest
from apache_beam.testing import test_pipeline
from apache_beam.testing.util import assert_that, equal_to

from pipeline.beam import stats
from pipeline.beam.portable import DASK_RUNNER, GroupInto, for_workers, runner_args
from pipeline.beam.shards import DuplicateRows, check_unique


def test_runner_names_are_resolved():
    assert runner_args(["--foo=1"]) == ["--foo=1", "--runner=DirectRunner"]
    assert runner_args(["--runner", "DaskRunner", "--x"]) == ["--x", f"--runner={DASK_RUNNER}"]
    assert runner_args(["--runner=FlinkRunner"]) == ["--runner=FlinkRunner"]


def test_local_paths_are_made_absolute_for_workers_and_urls_kept():
    assert for_workers("data/x.pgn") == os.path.join(os.getcwd(), "data", "x.pgn")
    assert for_workers("gs://bucket/x.pgn") == "gs://bucket/x.pgn"


def test_rows_written_must_be_the_rows_counted():
    merged = stats.empty()
    for rows in (3, 4):
        stats.merge(merged, stats.written("boards", rows))
    stats.check_written(merged, {"boards": (7, 2)}, "stats.json")
    with pytest.raises(stats.RowsLost, match="7 rows counted in 3 shard"):
        stats.check_written(merged, {"boards": (7, 3)}, "stats.json")  # a shard never written
    with pytest.raises(stats.RowsLost, match="8 rows counted"):
        stats.check_written(merged, {"boards": (8, 2)}, "stats.json")  # rows lost
    with pytest.raises(DuplicateRows, match="repeat a FEN"):
        check_unique([{"fen": "a"}, {"fen": "a"}], "boards-00000-of-00001.parquet")


def test_group_into_gives_every_element_once_with_the_context():
    with test_pipeline.TestPipeline(argv=["--runner=DirectRunner"]) as p:
        items = p | "Items" >> beam.Create([str(i) for i in range(50)])
        context = p | "Context" >> beam.Create(["ctx"])
        groups = items | GroupInto(8, lambda x: x, context)
        flat = groups | beam.FlatMap(lambda g: [(x, g[2]) for x in g[1]])
        assert_that(flat, equal_to([(str(i), "ctx") for i in range(50)]))
