"""A truncated board shard (a copy cut short, a full disk): every reader says which file in
one line (core.schema.reading_shard), and every command exits 1 with that line alone."""

from __future__ import annotations

import pathlib

import pytest

from core.schema import (
    BoardFile,
    UnreadableShardError,
    make_board_row,
    read_board_file,
    read_metadata,
    shard_name,
    write_boards,
)
from model.training.train import main as train_main
from pipeline import overlap, select_boards
from pipeline.chessbench import export_chessbench

ROWS = [
    make_board_row(
        "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1",
        count=1,
        moves=["e7e5", "d7d5"],
        win_probs=[0.5, 0.45],
        cp=[0, -10],
        mate=[None, None],
        best_move="e7e5",
        state_win_prob=0.5,
        state_cp=0,
        state_mate=None,
        engine="test",
        limit="nodes=1",
    )
]


@pytest.fixture
def shards(tmp_path) -> tuple[pathlib.Path, pathlib.Path]:
    """(a directory with one good shard, a directory with a shard cut in half)."""
    good = tmp_path / "good" / shard_name("boards", 0, 1)
    write_boards(ROWS * 50, str(good))
    cut = tmp_path / "cut" / shard_name("boards", 0, 1)
    cut.parent.mkdir()
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    return good.parent, cut


def test_every_reader_names_the_file(shards):
    _, cut = shards
    message = rf"{cut}: not a readable Parquet file \(.*\)$"
    for read in (read_board_file, read_metadata, BoardFile):
        with pytest.raises(UnreadableShardError, match=message):
            read(str(cut))
    with pytest.raises(FileNotFoundError):
        read_metadata(str(cut.parent / "missing.parquet"))


def test_every_command_is_one_line_naming_the_file(shards, tmp_path, capsys):
    good, cut = shards
    config = tmp_path / "config.toml"
    config.write_text("[model]\nnum_layers = 1\nembedding_dim = 16\nnum_heads = 2\n")
    commands = {
        "select_boards": lambda: select_boards.main(
            [str(cut.parent), "--out", str(tmp_path / "out"), "--split", "s"]
        ),
        "overlap": lambda: overlap.main([str(good), str(cut.parent)]),
        "export_chessbench": lambda: export_chessbench.main(
            ["--input", str(cut.parent), "--kind", "av", "--output", str(tmp_path / "x.bag")]
        ),
        "train": lambda: train_main(
            ["--config", str(config), "--data", str(cut.parent), "--out", str(tmp_path / "run")]
        ),
    }
    for name, command in commands.items():
        code = command()
        [line] = capsys.readouterr().err.strip().splitlines()
        assert code == 1, name
        assert f"{cut}: not a readable Parquet file (" in line, (name, line)
