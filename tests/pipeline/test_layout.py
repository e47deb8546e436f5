"""A split folder opens as a dataset in pyarrow, polars, duckdb and Hugging Face `datasets` as
it is; its card describes it; splits of the layout before `.meta/` are still read."""

from __future__ import annotations

import json
import pathlib
import random
import shutil

import chess
import pyarrow.parquet as pq
import pytest

from core.actions import legal_actions
from core.schema import meta_dir, read_boards, stats_path
from model.data.loader import load_boards
from pipeline.card import MARKER, write_card
from pipeline.chessbench.bag import BagWriter
from pipeline.chessbench.import_chessbench import ChessBenchConfig, run_config
from pipeline.chessbench.records import encode_av

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> pathlib.Path:  # two Beam jobs: ~40 s of the module's time
    """`<out>` with a train split (two shards, one failure) and a test split, imported."""
    root = tmp_path_factory.mktemp("layout")
    rng = random.Random(11)
    for split, plies in (("train", 24), ("test", 8)):
        board, records = chess.Board(), [encode_av("not a fen", "e2e4", 0.5)]
        for _ in range(plies):
            records += [encode_av(board.fen(), m, rng.random()) for m in legal_actions(board)]
            board.push(rng.choice(list(board.legal_moves)))
        bag = root / f"{split}.bag"
        with BagWriter(str(bag)) as writer:
            for record in records:
                writer.write(record)
        config = ChessBenchConfig(str(bag), "av", str(root / "out"), split=split, num_shards=2)
        run_config(config, ["--runner=DirectRunner"])
    return root / "out"


def test_the_split_folder_holds_only_boards_and_the_rest_is_beside_it(dataset):
    train = dataset / "train"
    assert sorted(p.name for p in train.iterdir()) == [
        "boards-00000-of-00002.parquet",
        "boards-00001-of-00002.parquet",
    ]
    meta = pathlib.Path(meta_dir(str(train)))
    assert sorted(p.name for p in meta.iterdir()) == [
        "failures-00000-of-00001.parquet",
        "stats.json",
    ]
    assert pq.read_table(meta / "failures-00000-of-00001.parquet").num_rows == 1


def test_pyarrow_polars_and_duckdb_read_the_split_folder_as_it_is(dataset):
    polars = pytest.importorskip("polars")
    duckdb = pytest.importorskip("duckdb")
    train = dataset / "train"
    expected = read_boards(str(train)).num_rows
    assert expected == 24
    assert pq.read_table(train).num_rows == expected
    assert polars.read_parquet(train).height == expected
    assert polars.scan_parquet(train).select("fen").collect().height == expected
    count = duckdb.sql(f"SELECT count(*) FROM read_parquet('{train}')").fetchall()
    assert count == [(expected,)]
    fens = duckdb.sql(f"SELECT fen FROM '{train}/*.parquet'").fetchall()
    assert sorted(f for (f,) in fens) == sorted(read_boards(str(train))["fen"].to_pylist())


def test_hugging_face_datasets_reads_a_split_folder_and_the_card_names_the_splits(
    dataset, tmp_path, monkeypatch
):
    datasets = pytest.importorskip("datasets")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    datasets.disable_progress_bars()
    cache = str(tmp_path / "hf")
    one = datasets.load_dataset("parquet", data_dir=str(dataset / "train"), cache_dir=cache)
    assert one["train"].num_rows == 24
    both = datasets.load_dataset(str(dataset), cache_dir=cache)  # through the card's configs
    assert {name: split.num_rows for name, split in both.items()} == {"train": 24, "test": 8}
    assert set(both["train"].column_names) >= {"fen", "moves", "win_probs", "best_move"}


def test_the_card_has_the_schema_and_each_splits_provenance(dataset):
    card = (dataset / "README.md").read_text()
    assert card.startswith("---\nconfigs:") and MARKER in card
    assert "path: train/boards-*.parquet" in card and "path: test/boards-*.parquet" in card
    assert "rows: 24 boards in 2 shard(s)" in card and "rows: 8 boards in 2 shard(s)" in card
    assert "train.bag`" in card and "Stockfish 16 (ChessBench" in card
    assert "| `win_probs` | `list<item: double>` |" in card
    stats = json.loads(pathlib.Path(stats_path(str(dataset / "train"))).read_text())
    assert f"{stats['action_values']:,}" in card


def test_a_readme_not_written_by_us_is_left_alone(tmp_path, capsys):
    (tmp_path / "README.md").write_text("my own notes\n")
    assert write_card(str(tmp_path)) is None
    assert (tmp_path / "README.md").read_text() == "my own notes\n"
    assert "not written by searchless-chess" in capsys.readouterr().err


def test_a_split_of_the_old_layout_is_still_read_and_described(dataset, tmp_path):
    old = tmp_path / "old"
    shutil.copytree(dataset / "train", old / "train")
    meta = pathlib.Path(meta_dir(str(dataset / "train")))
    for name in ("stats.json", "failures-00000-of-00001.parquet"):  # beside the boards
        shutil.copy(meta / name, old / "train" / name)
    assert load_boards(str(old / "train")).fens.shape == (24,)  # the trainer's loader
    assert read_boards(str(old / "train")).num_rows == 24
    write_card(str(old))
    assert "rows: 24 boards in 2 shard(s)" in (old / "README.md").read_text()
