"""The annotated-boards Parquet schema: the contract between pipeline/ and model/.

One row per unique board (deduplicated on the full FEN). `moves` holds the legal moves in
action-space order; `win_probs`, `cp` and `mate` are parallel to it, from the view of the
side to move. Raw `cp`/`mate` are kept next to the probabilities so other conversions stay
possible. The schema is versioned in the file's metadata; readers refuse what they don't know.

Version 2 (this code writes it) added, so that data made elsewhere fits the same table:
- `partial`: True when `moves` is only some of the legal moves (the Lichess evaluation
  database values only its principal variations' first moves). The AV loader leaves such
  boards out unless asked, because a model that only ever sees good moves learns that every
  move is good.
- `source`: where the values come from (SOURCES below), next to `engine` and `limit`.
  `limit` is the search behind the values: `nodes=2000` or `time=0.05` per move searched
  (every legal move valued alone); `search:nodes=20000,multipv=4` for the annotator's cheap
  mode, one unrestricted search whose K best lines give K values (a partial row unless they
  are all the legal moves); `depth=D,knodes=K` for Lichess evaluations.
- `win_probs` and `state_win_prob` became float64, so imported values (ChessBench stores
  float64) are kept exactly and export back unchanged; `state_win_prob` became nullable for
  boards that only have a best move (ChessBench behavioural-cloning records).
Version 1 files are still read: `read_board_file` upgrades them (float32 -> float64,
`partial` False, `source` "annotate").

The layout (every name is here): a split folder, `<out>/<split>/`, holds its board shards,
`boards-SSSSS-of-NNNNN.parquet`, and nothing else, so that pyarrow, polars, duckdb and
Hugging Face `datasets` open the folder as a dataset as it is (polars reads every file under
a folder, whatever its name, so nothing else can live even in a subfolder). Everything else
about the split is in its sibling `<out>/<split>.meta/` (`meta_dir`): the run's statistics
(`stats.json`), the boards that could not be made (`failures-SSSSS-of-NNNNN.parquet`), and,
while a run is unfinished, its journal (`journal/`: the settings in `run.json` and the rows
made so far as `part-<writer>-<seq>.parquet`, this schema), deleted once the outputs are
written. `<out>/README.md` is the dataset card of the splits in `<out>` (pipeline/card.py).

Splits written before this layout (stats.json and failures-*.parquet beside the boards) are
still read: `board_files` takes only the boards, `stats_file` finds either place.
"""

from __future__ import annotations

import contextlib
import glob
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TypedDict

import pyarrow as pa
import pyarrow.parquet as pq

SCHEMA_VERSION = 2
KNOWN_VERSIONS = frozenset({1, 2})
_VERSION_KEY = b"searchless_chess.schema_version"
_KIND_KEY = b"searchless_chess.kind"

BOARDS_PREFIX = "boards"
FAILURES_PREFIX = "failures"
STATS_FILE = "stats.json"
META_SUFFIX = ".meta"  # <out>/<split>.meta/: all but the boards
CARD_FILE = "README.md"  # <out>/README.md: the dataset card

# The journal of an unfinished run (pipeline/annotate/annotate.py), in the meta folder.
JOURNAL_DIR = "journal"
LEGACY_JOURNAL_DIR = "_journal"  # where it was, inside the split folder
# The completed parts of an unfinished import (pipeline/lichess_evals/import_lichess_evals.py),
# likewise.
IMPORT_DIR = "import"
LEGACY_IMPORT_DIR = "_import"
JOURNAL_RUN_FILE = "run.json"
JOURNAL_PART_PREFIX = "part"
JOURNAL_PART_SUFFIX = ".parquet"
JOURNAL_PART_PATTERN = f"{JOURNAL_PART_PREFIX}-*{JOURNAL_PART_SUFFIX}"
# Held (flock) by the run writing a split (pipeline/beam/split_lock.py), in the meta folder;
# deleted when it ends.
LOCK_FILE = "lock"

# The most shards a command splits a split's boards into: a mistyped count (100000 for 100)
# must not fill a folder with empty files. 10,000 shards of a million boards each are ten
# billion boards.
MAX_SHARDS = 10_000

# Small row groups keep random access cheap: a reader decodes one group to reach a row.
ROW_GROUP_SIZE = 1024

# Values of the `source` column.
SOURCE_ANNOTATE = (
    "annotate"  # this pipeline: Lichess games annotated by pipeline/annotate/annotate.py
)
SOURCE_CHESSBENCH = (
    "chessbench"  # the paper's released data (pipeline/chessbench/import_chessbench.py)
)
SOURCE_LICHESS_EVALS = (
    "lichess-evals"  # lichess_db_eval (pipeline/lichess_evals/import_lichess_evals.py)
)
SOURCES = (SOURCE_ANNOTATE, SOURCE_CHESSBENCH, SOURCE_LICHESS_EVALS)

BOARD_FIELDS = [
    pa.field("fen", pa.string(), nullable=False),
    pa.field("count", pa.int64(), nullable=False),
    pa.field("moves", pa.list_(pa.string()), nullable=False),
    pa.field("win_probs", pa.list_(pa.float64()), nullable=False),
    pa.field("cp", pa.list_(pa.int32())),  # entries null where the score is a mate
    pa.field("mate", pa.list_(pa.int32())),  # entries null where the score is centipawns
    pa.field("best_move", pa.string(), nullable=False),  # "" when the board has none
    pa.field("state_win_prob", pa.float64()),  # null when only a best move is known
    pa.field("state_cp", pa.int32()),
    pa.field("state_mate", pa.int32()),
    pa.field("partial", pa.bool_(), nullable=False),
    pa.field("source", pa.string(), nullable=False),
    pa.field("engine", pa.string(), nullable=False),
    pa.field("limit", pa.string(), nullable=False),
]


class BoardRow(TypedDict):
    """One row of BOARD_FIELDS as Python values (pyarrow's from_pylist and Beam's Parquet
    sink take it as it is). Build it with `make_board_row`. Per-move lists are parallel to
    `moves`; values are from the view of the side to move."""

    fen: str
    """The board, as a full FEN (move counters included): the row's key."""
    count: int
    """How often the board occurs in the source; the `weighted` sampler's weight."""
    moves: list[str]
    """Moves valued (UCI), in action-space order; all legal moves unless `partial`."""
    win_probs: list[float]
    """Each move's win probability for the side to move, in [0, 1]."""
    cp: list[int | None] | None
    """Each move's centipawn score (None where it is a mate); None: no engine scores at all."""
    mate: list[int | None] | None
    """Each move's mate distance (None where it is centipawns); None as for `cp`."""
    best_move: str
    """The highest-valued move (UCI); "" when the board has none."""
    state_win_prob: float | None
    """The board's value: its best move's win probability; None when only a move is known."""
    state_cp: int | None
    """The best move's centipawns (None: a mate, or unknown)."""
    state_mate: int | None
    """The best move's mate distance (None: centipawns, or unknown)."""
    partial: bool
    """True when `moves` are only some of the legal moves (e.g. Lichess evaluations)."""
    source: str
    """Where the values come from: one of SOURCES."""
    engine: str
    """The engine's name and version."""
    limit: str
    """The search behind the values: `nodes=N`, `time=S`, `search:...` or `depth=D,knodes=K`."""


def make_board_row(
    fen: str,
    *,
    engine: str,
    limit: str,
    count: int = 1,
    moves: Sequence[str] = (),
    win_probs: Sequence[float] = (),
    cp: Sequence[int | None] | None = None,
    mate: Sequence[int | None] | None = None,
    best_move: str = "",
    state_win_prob: float | None = None,
    state_cp: int | None = None,
    state_mate: int | None = None,
    partial: bool = False,
    source: str = SOURCE_ANNOTATE,
) -> BoardRow:
    """A BoardRow; `cp` and `mate` default to nulls beside each move. ValueError when the
    per-move lists are not parallel to `moves` or `source` is not one of SOURCES."""
    n = len(moves)
    cp = [None] * n if cp is None else list(cp)
    mate = [None] * n if mate is None else list(mate)
    if not len(win_probs) == len(cp) == len(mate) == n:
        raise ValueError(
            f"board {fen!r}: {n} moves but {len(win_probs)} win_probs, {len(cp)} cp, "
            f"{len(mate)} mate"
        )
    if source not in SOURCES:
        raise ValueError(f"board {fen!r}: source {source!r} is not one of {list(SOURCES)}")
    return BoardRow(
        fen=fen,
        count=count,
        moves=list(moves),
        win_probs=list(win_probs),
        cp=cp,
        mate=mate,
        best_move=best_move,
        state_win_prob=state_win_prob,
        state_cp=state_cp,
        state_mate=state_mate,
        partial=partial,
        source=source,
        engine=engine,
        limit=limit,
    )


# What each column means, for the dataset card (pipeline/card.py).
COLUMN_DOCS = {
    "fen": "the board (full FEN, move counters included)",
    "count": "how often the board occurs in the source",
    "moves": "moves valued (UCI), in action-space order; all legal moves unless `partial`",
    "win_probs": "win probability of each move for the side to move",
    "cp": "each move's centipawn score (null where it is a mate)",
    "mate": "each move's mate distance (null where it is centipawns)",
    "best_move": 'the highest-valued move ("" when the board has none)',
    "state_win_prob": "the board's value: its best move's win probability (null if unknown)",
    "state_cp": "the best move's centipawns",
    "state_mate": "the best move's mate distance",
    "partial": "true when `moves` are only some of the legal moves",
    "source": "where the values come from: " + ", ".join(SOURCES),
    "engine": "the engine's name and version",
    "limit": "the search limit per move (nodes=N, time=S, depth=D)",
}

# What version 1 files differ in: read_board_file upgrades them to the fields above.
_V1_TYPES = {"win_probs": pa.list_(pa.float32()), "state_win_prob": pa.float32()}
_ADDED_IN_V2 = {"partial": False, "source": SOURCE_ANNOTATE}

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


class UnreadableShardError(SchemaError):
    """A Parquet file that cannot be read at all (truncated, corrupt, not Parquet); the
    message names it. A SchemaError, so that every reader refusing a file refuses this too."""


@contextlib.contextmanager
def reading_shard(file: str) -> Iterator[None]:
    """Turns Arrow's errors while `file` is opened or read (a truncated footer's "Parquet
    magic bytes not found", a corrupt page) into one UnreadableShardError naming it. A missing
    file stays a FileNotFoundError."""
    try:
        yield
    except (SchemaError, FileNotFoundError):
        raise
    except (pa.ArrowException, OSError) as e:  # ArrowInvalid is also a ValueError
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UnreadableShardError(f"{file}: not a readable Parquet file ({reason})") from None


def read_metadata(file: str) -> pq.FileMetaData:
    """A Parquet file's footer, or UnreadableShardError naming it."""
    with reading_shard(file):
        return pq.read_metadata(file)


def check_schema(schema: pa.Schema, source: str, expected: pa.Schema = BOARD_SCHEMA) -> int:
    """The schema version of a file, or SchemaError naming `source` unless `schema` is a
    known version of `expected` (a version 1 board file has version 1's column types)."""
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
    old_boards = version == 1 and expected_kind == b"boards"
    for field in expected:
        if old_boards and field.name in _ADDED_IN_V2:
            continue
        if field.name not in schema.names:
            raise SchemaError(f"{source}: missing column {field.name!r}")
        actual = schema.field(field.name).type
        wanted = _V1_TYPES.get(field.name, field.type) if old_boards else field.type
        if actual != wanted:
            raise SchemaError(
                f"{source}: column {field.name!r} has type {actual}, expected {wanted}"
            )
    return version


def read_board_file(file: str, columns: Sequence[str] | None = None) -> pa.Table:
    """One board file's rows (all columns, or `columns` in that order), schema-checked and
    in the current version's types whatever version the file was written with."""
    with reading_shard(file):
        version = check_schema(pq.read_schema(file), file)
        return _read_upgraded(version, columns, lambda names: pq.read_table(file, columns=names))


class BoardFile:
    """One board file opened for reading a row group at a time (a streaming reader's unit):
    the schema is checked on opening as `read_board_file` checks it, and every row group
    read comes in the current version's types."""

    def __init__(self, file: str):
        self.file = file
        with reading_shard(file):
            self._parquet = pq.ParquetFile(file)
            self.version = check_schema(self._parquet.schema_arrow, file)

    @property
    def metadata(self) -> pq.FileMetaData:
        return self._parquet.metadata

    def read_row_group(self, index: int, columns: Sequence[str] | None = None) -> pa.Table:
        """Row group `index`'s rows (all columns, or `columns` in that order), decoded in the
        calling thread: a row group is small, and every Arrow pool thread that decodes one
        keeps memory in an allocator heap of its own (MBs each)."""
        with reading_shard(self.file):
            return _read_upgraded(
                self.version,
                columns,
                lambda names: self._parquet.read_row_group(index, columns=names, use_threads=False),
            )

    def close(self) -> None:
        self._parquet.close()

    def __enter__(self) -> BoardFile:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _read_upgraded(
    version: int, columns: Sequence[str] | None, read: Callable[[list[str]], pa.Table]
) -> pa.Table:
    """`read(stored column names)` of a file of schema `version`, as `columns` (all if None)
    of the current version: columns added since are filled with their defaults."""
    wanted = list(columns) if columns is not None else BOARD_SCHEMA.names
    unknown = [name for name in wanted if name not in BOARD_SCHEMA.names]
    if unknown:
        raise ValueError(f"no board columns {unknown}; the columns are {BOARD_SCHEMA.names}")
    if version == SCHEMA_VERSION:
        return read(wanted)
    table = read([name for name in wanted if name not in _ADDED_IN_V2])
    arrays = []
    for name in wanted:
        field = BOARD_SCHEMA.field(name)
        if name in _ADDED_IN_V2:
            arrays.append(pa.repeat(pa.scalar(_ADDED_IN_V2[name], field.type), len(table)))
        else:
            arrays.append(table[name].cast(field.type))
    return pa.Table.from_arrays(arrays, schema=pa.schema([BOARD_SCHEMA.field(n) for n in wanted]))


def shard_name(prefix: str, index: int, num_shards: int) -> str:
    return f"{prefix}-{index:05d}-of-{num_shards:05d}.parquet"


def journal_part_name(writer: str, sequence: int) -> str:
    """A journal part's file name: unique per writer (a uuid4 hex) and its flush number."""
    return f"{JOURNAL_PART_PREFIX}-{writer}-{sequence:06d}{JOURNAL_PART_SUFFIX}"


def meta_dir(split_dir: str) -> str:
    """The folder beside a split that holds everything but its boards (any filesystem's
    path: local, gs://, s3://)."""
    return split_dir.rstrip("/") + META_SUFFIX


def _join(directory: str, name: str) -> str:
    return f"{directory.rstrip('/')}/{name}"


def stats_path(split_dir: str) -> str:
    """Where a run writes a split's stats.json."""
    return _join(meta_dir(split_dir), STATS_FILE)


def failures_dir(split_dir: str) -> str:
    """Where a run writes a split's failure shards."""
    return meta_dir(split_dir)


def journal_path(split_dir: str) -> str:
    """Where an unfinished annotate run keeps its journal."""
    return _join(meta_dir(split_dir), JOURNAL_DIR)


def lock_path(split_dir: str) -> str:
    """The file a run writing the split holds locked (a local split's)."""
    return _join(meta_dir(split_dir), LOCK_FILE)


def import_path(split_dir: str) -> str:
    """Where an unfinished Lichess-evaluations import keeps its completed parts."""
    return _join(meta_dir(split_dir), IMPORT_DIR)


def legacy_outputs(split_dir: str) -> list[str]:
    """Files of the layout before `.meta/` (stats.json, failure shards, an old journal's or
    import's folder) inside a local split folder: read where needed, replaced by a new run."""
    if not os.path.isdir(split_dir):
        return []
    names = sorted(os.listdir(split_dir))
    ours = [n for n in names if n == STATS_FILE or n.startswith(FAILURES_PREFIX + "-")]
    ours += [n for n in names if n in (LEGACY_JOURNAL_DIR, LEGACY_IMPORT_DIR)]
    return [os.path.join(split_dir, n) for n in ours]


def local_outputs(split_dir: str) -> list[str]:
    """A local split's finished outputs in either layout: its board shards, and the failure
    shards and stats.json of its meta folder or (the old layout) beside the boards."""
    found = []
    for directory, prefixes in (
        (split_dir, (BOARDS_PREFIX + "-",)),
        (meta_dir(split_dir), (FAILURES_PREFIX + "-", STATS_FILE)),
    ):
        if os.path.isdir(directory):
            names = sorted(n for n in os.listdir(directory) if n.startswith(prefixes))
            found += [os.path.join(directory, n) for n in names]
    return found + legacy_outputs(split_dir)


def find_stats(split_dir: str) -> str | None:
    """A local split's stats.json in either layout (the `.meta/` one first), or None."""
    for path in (stats_path(split_dir), os.path.join(split_dir, STATS_FILE)):
        if os.path.isfile(path):
            return path
    return None


def board_files(path: str) -> list[str]:
    """The board shards at `path`: a file, a directory of shards, a glob, or a comma list of
    these (the union, each file once; a path that exists is never split at its commas)."""
    if "," in path and not os.path.exists(path):
        files = [file for part in path.split(",") if part for file in board_files(part)]
        return list(dict.fromkeys(files))
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
    return pa.concat_tables([read_board_file(file, columns) for file in board_files(path)])


def boards_table(rows: Iterable[Mapping]) -> pa.Table:
    """Rows as dicts (the columns of BOARD_SCHEMA) -> a schema-carrying Arrow table.

    A row without `partial` or `source` is a complete board annotated by this pipeline, so
    hand-made rows (tests, small tools) need not spell them out."""
    return pa.Table.from_pylist([{**_ADDED_IN_V2, **row} for row in rows], schema=BOARD_SCHEMA)


def write_boards(rows: Iterable[Mapping], path: str) -> None:
    """Writes one board file (used by tests and small tools; the pipeline writes through Beam)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    pq.write_table(boards_table(rows), path, row_group_size=ROW_GROUP_SIZE)
