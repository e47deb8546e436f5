import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from core.schema import (
    BOARD_SCHEMA,
    FAILURE_SCHEMA,
    BoardRow,
    SchemaError,
    boards_table,
    check_schema,
    make_board_row,
    read_board_file,
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
    "partial": False,
    "source": "annotate",
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


def test_a_comma_list_reads_the_union_of_its_parts_each_file_once(tmp_path):
    for split, fen in (("a", ROW["fen"]), ("b", "8/8/8/8/8/8/8/K5k1 w - - 0 1")):
        (tmp_path / split).mkdir()
        write_boards([{**ROW, "fen": fen}], str(tmp_path / split / "boards-00000-of-00001.parquet"))
    both = f"{tmp_path}/a,{tmp_path}/*/boards-*.parquet"
    assert sorted(read_boards(both)["fen"].to_pylist()) == sorted(
        [ROW["fen"], "8/8/8/8/8/8/8/K5k1 w - - 0 1"]
    )
    with pytest.raises(FileNotFoundError, match="nowhere"):
        read_boards(f"{tmp_path}/a,/nowhere")


def test_missing_path():
    with pytest.raises(FileNotFoundError, match="nowhere"):
        read_boards("/nowhere/at/all")


def _write_version_1(rows: list[dict], path) -> None:
    """A file as the version 1 code wrote it: float32 values, no partial/source columns."""
    fields = [
        pa.field("win_probs", pa.list_(pa.float32()), nullable=False)
        if f.name == "win_probs"
        else pa.field("state_win_prob", pa.float32(), nullable=False)
        if f.name == "state_win_prob"
        else f
        for f in BOARD_SCHEMA
        if f.name not in ("partial", "source")
    ]
    metadata = dict(BOARD_SCHEMA.metadata)
    metadata[b"searchless_chess.schema_version"] = b"1"
    schema = pa.schema(fields, metadata=metadata)
    v1_rows = [{k: v for k, v in row.items() if k in schema.names} for row in rows]
    pq.write_table(pa.Table.from_pylist(v1_rows, schema=schema), path)


def test_a_version_1_file_is_read_as_a_complete_annotated_board(tmp_path):
    path = tmp_path / "boards-00000-of-00001.parquet"
    row = dict(ROW, win_probs=[0.25, 0.5, 0.6], state_win_prob=0.6)
    _write_version_1([row], path)
    table = read_board_file(str(path))
    assert table.schema.equals(BOARD_SCHEMA, check_metadata=False)
    (got,) = table.to_pylist()
    # float32 -> float64 keeps the stored float32 value exactly, not the decimal one.
    assert got["win_probs"] == [0.25, 0.5, float(np.float32(0.6))]
    assert got["state_win_prob"] == float(np.float32(0.6))
    assert got["partial"] is False and got["source"] == "annotate"
    assert {k: v for k, v in got.items() if "win_prob" not in k} == {
        k: v for k, v in ROW.items() if "win_prob" not in k
    }
    # Asking for some columns, in an order of our choosing, includes the added ones.
    some = read_boards(str(tmp_path), columns=["source", "fen", "win_probs"])
    assert some.column_names == ["source", "fen", "win_probs"]
    assert some.to_pylist()[0]["source"] == "annotate"


def test_a_version_1_file_with_version_2_types_is_refused(tmp_path):
    # Version 1 wrote float32: a "version 1" file with float64 values is not one we wrote.
    metadata = dict(BOARD_SCHEMA.metadata)
    metadata[b"searchless_chess.schema_version"] = b"1"
    schema = BOARD_SCHEMA.remove(BOARD_SCHEMA.get_field_index("partial")).with_metadata(metadata)
    with pytest.raises(SchemaError, match="win_probs"):
        check_schema(schema, "old.parquet")


def test_version_2_needs_the_partial_and_source_columns():
    schema = BOARD_SCHEMA.remove(BOARD_SCHEMA.get_field_index("source"))
    with pytest.raises(SchemaError, match="source"):
        check_schema(schema, "x.parquet")


def test_hand_made_rows_default_to_complete_annotated_boards(tmp_path):
    row = {k: v for k, v in ROW.items() if k not in ("partial", "source")}
    path = tmp_path / "boards-00000-of-00001.parquet"
    write_boards([row, dict(row, fen="8/8/8/8/8/8/8/K5k1 w - - 0 1", partial=True)], str(path))
    got = read_boards(str(path)).to_pylist()
    assert [(r["partial"], r["source"]) for r in got] == [(False, "annotate"), (True, "annotate")]


def test_an_unknown_column_is_a_clear_error(tmp_path):
    path = tmp_path / "boards-00000-of-00001.parquet"
    write_boards([ROW], str(path))
    with pytest.raises(ValueError, match="nonsense"):
        read_board_file(str(path), columns=["fen", "nonsense"])


def test_board_row_type_has_the_schema_columns_in_order():
    assert list(BoardRow.__annotations__) == BOARD_SCHEMA.names


def test_make_board_row_fills_nulls_and_survives_a_table():
    row = make_board_row(
        "8/8/8/8/8/8/8/K6k w - - 0 1", engine="e", limit="nodes=1", moves=["a1a2"], win_probs=[0.5]
    )
    assert (row["cp"], row["mate"], row["partial"], row["source"]) == (
        [None],
        [None],
        False,
        "annotate",
    )
    assert boards_table([row]).to_pylist() == [row]


def test_make_board_row_refuses_lists_that_are_not_parallel():
    with pytest.raises(ValueError, match="1 moves but 2 win_probs"):
        make_board_row("f", engine="e", limit="l", moves=["a1a2"], win_probs=[0.1, 0.2])
    with pytest.raises(ValueError, match="source 'x'"):
        make_board_row("f", engine="e", limit="l", source="x")
