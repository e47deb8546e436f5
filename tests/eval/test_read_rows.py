"""eval.metrics.read_rows: the schema-checked test rows the metrics CLI and the demo read."""

import math
import re

import chess
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from core.actions import ACTIONS
from core.schema import SchemaError, read_boards, write_boards
from eval.metrics import main as metrics_main
from eval.metrics import read_rows
from model.data.loader import DataError


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


def _damaged(annotated, tmp_path, name: str, change) -> str:
    """The test split's rows with one changed by `change(row)`, as one shard."""
    rows = read_boards(str(annotated / "test")).to_pylist()
    change(rows[4])
    path = tmp_path / name / "boards-00000-of-00001.parquet"
    write_boards(rows, str(path))
    return str(path)


def _illegal_first_move(row: dict) -> None:
    possible = {m.uci() for m in chess.Board(row["fen"]).pseudo_legal_moves}
    row["moves"][0] = next(a for a in ACTIONS if a not in possible and a[:4] not in possible)


CHANGES = {
    "nan": (lambda row: row["win_probs"].__setitem__(0, math.nan), r"row 4 .*win probability"),
    "range": (lambda row: row.__setitem__("state_win_prob", 1.5), r"row 4 .*state_win_prob 1.5"),
    "fen": (lambda row: row.__setitem__("fen", "not a fen"), r"'not a fen'"),
    "illegal": (_illegal_first_move, r"row 4 .*is not legal on this board"),
    # A complete board missing a move (its value with it).
    "missing": (lambda row: (row["moves"].pop(), row["win_probs"].pop()), r"row 4 .*not its legal"),
}


@pytest.mark.parametrize("name", CHANGES)
def test_a_bad_row_is_one_line_naming_file_and_row(annotated, tmp_path, capsys, name):
    change, message = CHANGES[name]
    path = _damaged(annotated, tmp_path, name, change)
    with pytest.raises(DataError, match=message):
        read_rows(path)
    assert metrics_main(["--checkpoint", str(tmp_path / "unused"), "--data", path]) == 1
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"error: {path}: ") and re.search(message, line)


def test_a_truncated_shard_is_one_line_naming_it(annotated, tmp_path, capsys):
    source = next((annotated / "test").glob("*.parquet"))
    path = tmp_path / "boards-00000-of-00001.parquet"
    path.write_bytes(source.read_bytes()[: source.stat().st_size // 2])
    with pytest.raises(SchemaError, match=rf"{path}: not a readable Parquet file"):
        read_rows(str(path))
    assert metrics_main(["--checkpoint", str(tmp_path / "unused"), "--data", str(path)]) == 1
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"error: {path}: not a readable Parquet file (")
