"""Interop with DeepMind's `bagz` package (the paper's bag format's maintained library): it
reads the `.bag`/`.bagz` files the exporter writes, and the importer reads files it writes."""

from __future__ import annotations

import collections
import random

import chess
import pytest

from core.actions import legal_actions
from core.schema import read_boards
from pipeline.chessbench.bag import BagReader
from pipeline.chessbench.export_chessbench import ExportConfig, export
from pipeline.chessbench.import_chessbench import ChessBenchConfig, run_config
from pipeline.chessbench.records import encode_av, encode_bc, encode_sv

bagz = pytest.importorskip("bagz", reason="the bagz extra is not installed")


def _av_records(seed: int) -> tuple[list[bytes], int]:
    """The records of every legal move of the boards of a random game, and the boards."""
    rng, board, records, boards = random.Random(seed), chess.Board(), [], 0
    for _ in range(12):
        records += [encode_av(board.fen(), m, rng.random()) for m in legal_actions(board)]
        boards += 1
        board.push(rng.choice(list(board.legal_moves)))
    return records, boards


@pytest.mark.slow  # a Beam import per suffix
@pytest.mark.parametrize("suffix", [".bag", ".bagz"])
def test_the_importer_reads_bagz_files_and_bagz_reads_the_exporters(tmp_path, suffix):
    records, boards = _av_records(1)
    written = tmp_path / f"written{suffix}"
    with bagz.Writer(str(written)) as writer:
        for record in records:
            writer.write(record)
    run_config(
        ChessBenchConfig(str(written), "av", str(tmp_path / "out")), ["--runner=DirectRunner"]
    )
    assert read_boards(str(tmp_path / "out" / "train")).num_rows == boards  # importer reads bagz's
    exported = tmp_path / f"exported{suffix}"
    export(ExportConfig(str(tmp_path / "out" / "train"), "av", str(exported)), False)
    theirs = list(bagz.Reader(str(exported)))
    assert collections.Counter(theirs) == collections.Counter(records)  # bagz reads ours


@pytest.mark.parametrize("suffix", [".bag", ".bagz"])
def test_both_readers_see_the_same_records_of_every_kind_and_an_empty_one(tmp_path, suffix):
    fen = chess.STARTING_FEN
    records = [encode_av(fen, "e2e4", 0.5), encode_sv(fen, 0.25), encode_bc(fen, "d2d4"), b""]
    path = tmp_path / f"mixed{suffix}"
    with bagz.Writer(str(path)) as writer:
        for record in records:
            writer.write(record)
    with BagReader(str(path)) as reader:
        assert list(reader) == records
        assert len(reader) == len(bagz.Reader(str(path)))
