"""The annotated-boards Parquet schema: the contract between pipeline/ and model/.

One row per unique board (deduplicated on the full FEN). `moves` holds the legal moves in
action-space order; `win_probs`, `cp` and `mate` are parallel to it, from the view of the
side to move. Raw `cp`/`mate` are kept next to the probabilities so other conversions stay
possible. The schema is versioned in the file's metadata; readers refuse what they don't know.

Files live at `<out>/<split>/boards-SSSSS-of-NNNNN.parquet`, failures beside them at
`<out>/<split>/failures-SSSSS-of-NNNNN.parquet`, and the run's statistics in `stats.json`.
While a run is unfinished, `<out>/<split>/_journal/` holds its settings (`run.json`) and the
board rows annotated so far (`part-<writer>-<seq>.parquet`, this schema), so that a rerun
resumes; the directory is deleted once the run's outputs are written.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable, Mapping, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

SCHEMA_VERSION = 1
KNOWN_VERSIONS = frozenset({1})
_VERSION_KEY = b"searchless_chess.schema_version"
_KIND_KEY = b"searchless_chess.kind"

BOARDS_PREFIX = "boards"
FAILURES_PREFIX = "failures"
STATS_FILE = "stats.json"

# The journal of an unfinished run (pipeline/annotate.py): every name it uses is here.
JOURNAL_DIR = "_journal"
JOURNAL_RUN_FILE = "run.json"
JOURNAL_PART_PREFIX = "part"
JOURNAL_PART_SUFFIX = ".parquet"
JOURNAL_PART_PATTERN = f"{JOURNAL_PART_PREFIX}-*{JOURNAL_PART_SUFFIX}"

# Small row groups keep random access cheap: a reader decodes one group to reach a row.
ROW_GROUP_SIZE = 1024

BOARD_FIELDS = [
    pa.field("fen", pa.string(), nullable=False),
    pa.field("count", pa.int64(), nullable=False),
    pa.field("moves", pa.list_(pa.string()), nullable=False),
    pa.field("win_probs", pa.list_(pa.float32()), nullable=False),
    pa.field("cp", pa.list_(pa.int32())),  # entries null where the score is a mate
    pa.field("mate", pa.list_(pa.int32())),  # entries null where the score is centipawns
    pa.field("best_move", pa.string(), nullable=False),
    pa.field("state_win_prob", pa.float32(), nullable=False),
    pa.field("state_cp", pa.int32()),
    pa.field("state_mate", pa.int32()),
    pa.field("engine", pa.string(), nullable=False),
    pa.field("limit", pa.string(), nullable=False),
]

FAILURE_FIELDS = [
    pa.field("fen", pa.string(), nullable=False),
    pa.field("count", pa.int64(), nullable=False),
    pa.field("error", pa.string(), nullable=False),
    pa.field("engine", pa.string()),
    pa.field("limit", pa.string()),
]


def _with_metadata(fields: list[pa.Field], kind: str) -> pa.Schema:
    return pa.schema(
        fields, metadata={_VERSION_KEY: str(SCHEMA_VERSION).encode(), _KIND_KEY: kind.encode()}
    )


BOARD_SCHEMA = _with_metadata(BOARD_FIELDS, "boards")
FAILURE_SCHEMA = _with_metadata(FAILURE_FIELDS, "failures")


class SchemaError(ValueError):
    """A Parquet file whose schema this version of the code does not know."""


def check_schema(schema: pa.Schema, source: str, expected: pa.Schema = BOARD_SCHEMA) -> None:
    """Raises SchemaError naming `source` unless `schema` is a known version of `expected`."""
    metadata = schema.metadata or {}
    raw_version = metadata.get(_VERSION_KEY)
    if raw_version is None:
        raise SchemaError(
            f"{source}: not an annotated-boards file (no {_VERSION_KEY.decode()} metadata)"
        )
    try:
        version = int(raw_version)
    except ValueError:
        raise SchemaError(f"{source}: unreadable schema version {raw_version!r}") from None
    if version not in KNOWN_VERSIONS:
        raise SchemaError(
            f"{source}: schema version {version} is not one this code reads "
            f"({sorted(KNOWN_VERSIONS)}); upgrade searchless-chess"
        )
    expected_kind = (expected.metadata or {}).get(_KIND_KEY)
    if metadata.get(_KIND_KEY) != expected_kind:
        raise SchemaError(
            f"{source}: holds {metadata.get(_KIND_KEY, b'?').decode()!r} rows, "
            f"expected {expected_kind.decode()!r}"
        )
    for field in expected:
        if field.name not in schema.names:
            raise SchemaError(f"{source}: missing column {field.name!r}")
        actual = schema.field(field.name).type
        if actual != field.type:
            raise SchemaError(
                f"{source}: column {field.name!r} has type {actual}, expected {field.type}"
            )


def shard_name(prefix: str, index: int, num_shards: int) -> str:
    return f"{prefix}-{index:05d}-of-{num_shards:05d}.parquet"


def journal_part_name(writer: str, sequence: int) -> str:
    """A journal part's file name: unique per writer (a uuid4 hex) and its flush number."""
    return f"{JOURNAL_PART_PREFIX}-{writer}-{sequence:06d}{JOURNAL_PART_SUFFIX}"


def board_files(path: str) -> list[str]:
    """The board shards at `path`: a file, a directory of shards, or a glob."""
    if os.path.isdir(path):
        files = sorted(glob.glob(os.path.join(path, f"{BOARDS_PREFIX}-*.parquet")))
    elif any(c in path for c in "*?["):
        files = sorted(glob.glob(path))
    else:
        files = [path] if os.path.exists(path) else []
    if not files:
        raise FileNotFoundError(f"no annotated board shards at {path!r}")
    return files


def read_boards(path: str, columns: Sequence[str] | None = None) -> pa.Table:
    """All board rows at `path` (file, shard directory or glob), schema-checked."""
    tables = []
    for file in board_files(path):
        check_schema(pq.read_schema(file), file)
        tables.append(pq.read_table(file, columns=columns))
    return pa.concat_tables(tables)


def boards_table(rows: Iterable[Mapping]) -> pa.Table:
    """Rows as dicts (the columns of BOARD_SCHEMA) -> a schema-carrying Arrow table."""
    return pa.Table.from_pylist(list(rows), schema=BOARD_SCHEMA)


def write_boards(rows: Iterable[Mapping], path: str) -> None:
    """Writes one board file (used by tests and small tools; the pipeline writes through Beam)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    pq.write_table(boards_table(rows), path, row_group_size=ROW_GROUP_SIZE)
