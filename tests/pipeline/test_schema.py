import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.schema import (
    BOARD_SCHEMA,
    FAILURE_SCHEMA,
    SchemaError,
    check_schema,
    read_boards,
    write_boards,
)

ROW = {
    "fen": "8/8/8/8/8/8/8/K6k w - - 0 1",
    "count": 3,
    "moves": ["a1a2", "a1b1", "a1b2"],
    "win_probs": [0.5, 0.5, 0.5],
    "cp": [0, 0, 0],
    "mate": [None, None, None],
    "best_move": "a1a2",
    "state_win_prob": 0.5,
    "state_cp": 0,
    "state_mate": None,
    "engine": "Stockfish 15.1",
    "limit": "nodes=2000",
}


def test_round_trip(tmp_path):
    path = tmp_path / "boards-00000-of-00001.parquet"
    write_boards([ROW], str(path))
    table = read_boards(str(tmp_path))
    assert table.to_pylist() == [ROW]


def test_a_file_without_our_metadata_is_refused_by_name(tmp_path):
    path = tmp_path / "boards-00000-of-00001.parquet"
    pq.write_table(pa.table({"fen": ["x"]}), path)
    with pytest.raises(SchemaError, match=str(path)):
        read_boards(str(path))


def test_an_unknown_version_is_refused(tmp_path):
    metadata = dict(BOARD_SCHEMA.metadata)
    metadata[b"searchless_chess.schema_version"] = b"99"
    with pytest.raises(SchemaError, match="version 99"):
        check_schema(BOARD_SCHEMA.with_metadata(metadata), "x.parquet")


def test_a_wrong_column_type_is_refused():
    schema = BOARD_SCHEMA.set(1, pa.field("count", pa.string()))
    with pytest.raises(SchemaError, match="count"):
        check_schema(schema, "x.parquet")


def test_failures_are_not_boards():
    with pytest.raises(SchemaError, match="failures"):
        check_schema(FAILURE_SCHEMA, "failures.parquet")
    check_schema(FAILURE_SCHEMA, "failures.parquet", expected=FAILURE_SCHEMA)


def test_missing_path():
    with pytest.raises(FileNotFoundError, match="nowhere"):
        read_boards("/nowhere/at/all")
