"""eval.metrics.read_rows: the schema-checked test rows the metrics CLI and the demo read."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from core.schema import SchemaError, read_boards
from eval.metrics import read_rows


def test_rows_hold_the_columns_the_metrics_need(annotated):
    rows = read_rows(str(annotated / "test"))
    table = read_boards(str(annotated / "test"))
    assert len(rows) == table.num_rows == 20
    assert set(rows[0]) == {"fen", "moves", "win_probs", "best_move", "state_win_prob", "partial"}
    assert [row["fen"] for row in rows] == table.column("fen").to_pylist()
    assert rows[3]["moves"] == table.column("moves")[3].as_py()


def test_first_boards_only(annotated):
    everything = read_rows(str(annotated / "test"))
    assert read_rows(str(annotated / "test"), max_boards=5) == everything[:5]
    assert read_rows(str(annotated / "test"), max_boards=500) == everything
    assert read_rows(str(annotated / "test"), max_boards=0) == []
    with pytest.raises(ValueError, match="max_boards"):
        read_rows(str(annotated / "test"), max_boards=-1)


def test_a_file_of_another_schema_is_refused_by_name(tmp_path):
    path = tmp_path / "other.parquet"
    pq.write_table(pa.table({"fen": ["8/8/8/8/8/8/8/8 w - - 0 1"]}), path)
    with pytest.raises(SchemaError, match="other.parquet"):
        read_rows(str(path))
    with pytest.raises(FileNotFoundError):
        read_rows(str(tmp_path / "missing"))
