"""Annotated boards carried as the games they come from: each game's moves once, and a board
as its place in a game and its label (docs/training.md, "The accelerator window").

A row of one search a board (`annotate --mode search`: the best move and its score) costs
~40 bytes of zstd'd Parquet, most of them the FEN. But the boards of a split come from games,
and a board of a game is the board before it and one move: a game's moves, two bytes each,
say every FEN of it. So a pack is a folder of

- `games.parquet`: a row a game, `start` (the FEN before its first move) and `moves` (its
  moves as `move_code`s, up to the last one a board needs);
- `boards.parquet`: a row a board, `split` (its index in the manifest's splits), `game`,
  `ply` (the board before the game's move number `ply`, from 0), `after` (the code of one more
  move played from there, for the boards one move past a game's, as `annotate --random-move`
  makes them; 0 for none), `best` (the best move's code), `cp` and `mate` (its score, one of
  them null), `count` and `partial` (whether the board has other legal moves);
- `loose/`: the rows a game cannot say, in the board schema and unchanged: rows of another
  shape (every move valued, a value that is not its score's win probability, columns that
  differ from the split's) and boards found in none of the games;
- `pack.json`: the splits, each with the columns its rows share (`source`, `engine`,
  `limit`: a row with others is loose), and the counts.

`unpack` writes the rows back as board shards, every column equal to the annotator's (the
board's value is recomputed from its score by `core.values.win_probability`, as the annotator
computed it, and a row whose value is not that is loose).
"""

from __future__ import annotations

import collections
import itertools
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field

import chess
import pyarrow as pa
import pyarrow.parquet as pq

from core.schema import (
    BOARD_SCHEMA,
    ROW_GROUP_SIZE,
    SchemaError,
    board_files,
    read_board_file,
    shard_name,
)
from core.values import win_probability
from runtime.outputs import folder_bytes
from runtime.workers import SPAWN, worker_start

FORMAT = "games"
VERSION = 1
MANIFEST = "pack.json"
GAMES_FILE = "games.parquet"
BOARDS_FILE = "boards.parquet"
LOOSE_DIR = "loose"
NO_MOVE = 0  # no legal move is a1a1, so code 0 says "none"
ROWS_PER_SHARD = 100_000
MAX_SPLITS = 255  # a board's split is a uint8
ZSTD_LEVEL = 19
# The columns every row of a split shares, kept once in the manifest.
SHARED = ("source", "engine", "limit")

GAMES_SCHEMA = pa.schema(
    [pa.field("start", pa.string(), nullable=False), pa.field("moves", pa.list_(pa.uint16()))]
)
BOARDS_SCHEMA = pa.schema(
    [
        pa.field("split", pa.uint8(), nullable=False),
        pa.field("game", pa.int32(), nullable=False),
        pa.field("ply", pa.uint16(), nullable=False),
        pa.field("after", pa.uint16(), nullable=False),
        pa.field("best", pa.uint16(), nullable=False),
        pa.field("cp", pa.int32()),
        pa.field("mate", pa.int32()),
        pa.field("count", pa.int64(), nullable=False),
        pa.field("partial", pa.bool_(), nullable=False),
    ]
)


class PackError(ValueError):
    """A pack that cannot be read: a missing file, another format, a board out of its game."""


def move_code(move: chess.Move) -> int:
    """A move in 15 bits: origin, target, promotion piece type (0: none)."""
    return move.from_square | move.to_square << 6 | (move.promotion or 0) << 12


def code_move(code: int) -> chess.Move:
    return chess.Move(code & 63, code >> 6 & 63, code >> 12 or None)


@dataclass(frozen=True)
class Game:
    """A game as packing reads it: the FEN before its first move, and its moves."""

    start: str
    moves: tuple[chess.Move, ...]


@dataclass
class SplitCount:
    """One split's place in a pack (the manifest's `splits`)."""

    name: str
    path: str
    after_move: bool
    rows: int = 0
    in_games: int = 0
    loose: int = 0
    shared: dict = field(default_factory=dict)


@dataclass(frozen=True)
class _Label:
    split: int
    best: int
    cp: int | None
    mate: int | None
    count: int
    partial: bool
    file: int  # where the row is (the packer's `files`), should no game say it
    row: int


def _shared(row: dict) -> tuple:
    return tuple(row[name] for name in SHARED)


def _compact(row: dict) -> bool:
    """Whether a row is one search's: one move, the best, valued by its score's win
    probability, as the board's value."""
    best, cp, mate = row["best_move"], row["state_cp"], row["state_mate"]
    if not best or row["moves"] != [best] or (cp is None) == (mate is None):
        return False
    if row["cp"] != [cp] or row["mate"] != [mate]:
        return False
    value = win_probability(cp=cp) if mate is None else win_probability(mate=mate)
    return row["state_win_prob"] == value and row["win_probs"] == [value]


def _most_shared(files: Sequence[str]) -> tuple:
    """The values of the SHARED columns most rows of the files have (None: no rows)."""
    counts: collections.Counter[tuple] = collections.Counter()
    for file in files:
        table = read_board_file(file, list(SHARED))
        counts.update(zip(*(table.column(name).to_pylist() for name in SHARED), strict=True))
    return counts.most_common(1)[0][0] if counts else None


class _Packer:
    def __init__(self, splits: Sequence[SplitCount]):
        self.splits = list(splits)
        self.direct: dict[str, list[_Label]] = {}
        self.children: dict[str, list[_Label]] = {}
        self.loose: list[list[dict]] = [[] for _ in splits]
        self.files: list[str] = []
        self.scanned: set[str] = set()  # boards whose children were looked up
        self.games: list[tuple[str, list[int]]] = []
        self.boards: list[tuple[int, int, int, _Label]] = []  # game, ply, after, label

    def read(self) -> None:
        for index, split in enumerate(self.splits):
            files = board_files(split.path)
            shared = _most_shared(files)
            if shared is None:
                raise PackError(f"{split.path}: no rows to pack")
            split.shared = dict(zip(SHARED, shared, strict=True))
            wanted = self.children if split.after_move else self.direct
            for file in files:
                self.files.append(file)
                for number, row in enumerate(read_board_file(file).to_pylist()):
                    split.rows += 1
                    if _shared(row) != shared or not _compact(row):
                        self.loose[index].append(row)
                        continue
                    label = _Label(
                        index,
                        move_code(chess.Move.from_uci(row["best_move"])),
                        row["state_cp"],
                        row["state_mate"],
                        row["count"],
                        row["partial"],
                        len(self.files) - 1,
                        number,
                    )
                    wanted.setdefault(row["fen"], []).append(label)

    def add_game(self, game: Game) -> None:
        if not self.direct and not self.children:
            return
        board = chess.Board(game.start)
        found: list[tuple[int, int, _Label]] = []
        last = -1
        for ply in range(len(game.moves) + 1):
            fen = board.fen()
            for label in self.direct.pop(fen, ()):
                found.append((ply, NO_MOVE, label))
                last = ply
            if self.children and fen not in self.scanned:
                self.scanned.add(fen)
                for move in board.legal_moves:
                    board.push(move)
                    labels = self.children.pop(board.fen(), ())
                    board.pop()
                    for label in labels:
                        found.append((ply, move_code(move), label))
                        last = ply
            if ply < len(game.moves):
                board.push(game.moves[ply])
        if last < 0:
            return
        number = len(self.games)
        self.games.append((game.start, [move_code(m) for m in game.moves[:last]]))
        self.boards.extend((number, ply, after, label) for ply, after, label in found)

    def leftovers(self) -> None:
        """The rows no game said become loose, unchanged (read again from their files)."""
        unsaid = sorted(
            (label.file, label.row, label.split)
            for wanted in (self.direct, self.children)
            for labels in wanted.values()
            for label in labels
        )
        self.direct.clear()
        self.children.clear()
        for file, group in itertools.groupby(unsaid, key=lambda x: x[0]):
            group = list(group)
            rows = read_board_file(self.files[file]).take([row for _, row, _ in group])
            for (_, _, split), row in zip(group, rows.to_pylist(), strict=True):
                self.loose[split].append(row)


def pack(
    splits: Sequence[SplitCount], games: Iterable[Game], out: str, level: int = ZSTD_LEVEL
) -> dict:
    """Writes the pack of `splits` (their rows found in `games`) to `out`, which must be
    empty or absent; returns the manifest."""
    if os.path.isdir(out) and os.listdir(out):
        raise PackError(f"{out} is not empty: a pack is written into an empty folder")
    if len(splits) > MAX_SPLITS:
        raise PackError(f"{len(splits)} splits: a pack holds at most {MAX_SPLITS}")
    packer = _Packer(splits)
    packer.read()
    for game in games:
        packer.add_game(game)
    packer.leftovers()
    os.makedirs(out, exist_ok=True)
    boards = sorted(packer.boards, key=lambda b: (b[0], b[1], b[2], b[3].split))
    labels = [b[3] for b in boards]
    games_table = pa.table(
        [
            pa.array([start for start, _ in packer.games], pa.string()),
            pa.array([moves for _, moves in packer.games], pa.list_(pa.uint16())),
        ],
        schema=GAMES_SCHEMA,
    )
    boards_table = pa.table(
        [
            pa.array([x.split for x in labels], pa.uint8()),
            pa.array([b[0] for b in boards], pa.int32()),
            pa.array([b[1] for b in boards], pa.uint16()),
            pa.array([b[2] for b in boards], pa.uint16()),
            pa.array([x.best for x in labels], pa.uint16()),
            pa.array([x.cp for x in labels], pa.int32()),
            pa.array([x.mate for x in labels], pa.int32()),
            pa.array([x.count for x in labels], pa.int64()),
            pa.array([x.partial for x in labels], pa.bool_()),
        ],
        schema=BOARDS_SCHEMA,
    )
    for table, name in ((games_table, GAMES_FILE), (boards_table, BOARDS_FILE)):
        pq.write_table(table, os.path.join(out, name), compression="zstd", compression_level=level)
    for index, split in enumerate(splits):
        split.loose = len(packer.loose[index])
        split.in_games = split.rows - split.loose
        if split.loose:
            path = os.path.join(out, LOOSE_DIR, _loose_name(index))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            pq.write_table(
                pa.Table.from_pylist(packer.loose[index], schema=BOARD_SCHEMA),
                path,
                compression="zstd",
                compression_level=level,
                row_group_size=ROW_GROUP_SIZE,
            )
    manifest = {
        "format": FORMAT,
        "version": VERSION,
        "games": games_table.num_rows,
        "plies": sum(len(m) for _, m in packer.games),
        "boards": sum(s.rows for s in splits),
        "in_games": sum(s.in_games for s in splits),
        "loose": sum(s.loose for s in splits),
        "bytes": folder_bytes(out),
        "splits": [asdict(s) for s in splits],
    }
    with open(os.path.join(out, MANIFEST), "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    return manifest


def is_pack(path: str) -> bool:
    """Whether `path` is a folder holding a games pack."""
    try:
        with open(os.path.join(path, MANIFEST)) as f:
            return json.load(f).get("format") == FORMAT
    except (OSError, ValueError, AttributeError):
        return False


def read_manifest(path: str) -> dict:
    try:
        with open(os.path.join(path, MANIFEST)) as f:
            manifest = json.load(f)
    except (OSError, ValueError) as e:
        raise PackError(f"{path}: no readable {MANIFEST} ({e})") from e
    if manifest.get("format") != FORMAT or manifest.get("version") != VERSION:
        raise PackError(
            f"{path}/{MANIFEST}: format {manifest.get('format')!r} version "
            f"{manifest.get('version')!r}, not {FORMAT!r} version {VERSION}"
        )
    return manifest


def _replay(task: tuple[str, list[int], list[tuple[int, int]]]) -> list[str]:
    """The FENs of one game's boards: `(ply, after)` in increasing order."""
    start, moves, wanted = task
    board = chess.Board(start)
    fens = []
    played = 0
    for ply, after in wanted:
        if ply > len(moves):
            raise PackError(f"a board at ply {ply} of a game of {len(moves)} moves")
        if ply < played:
            raise PackError(f"a board at ply {ply} after one at ply {played}: not in order")
        while played < ply:
            board.push(code_move(moves[played]))
            played += 1
        if after == NO_MOVE:
            fens.append(board.fen())
        else:
            board.push(code_move(after))
            fens.append(board.fen())
            board.pop()
    return fens


def _replay_all(tasks: list) -> list[list[str]]:
    return [_replay(task) for task in tasks]


def _fens(games: pa.Table, boards: pa.Table, workers: int) -> list[str]:
    """Each board's FEN, in the boards' order (which is by game, then ply)."""
    starts = games.column("start").to_pylist()
    moves = games.column("moves").to_pylist()
    number = boards.column("game").to_pylist()
    place = list(
        zip(boards.column("ply").to_pylist(), boards.column("after").to_pylist(), strict=True)
    )
    if any(b < a for a, b in zip(number, number[1:], strict=False)):
        raise PackError("the boards are not in their games' order")
    tasks = []
    for game, group in itertools.groupby(zip(number, place, strict=True), key=lambda x: x[0]):
        if not 0 <= game < len(starts):
            raise PackError(f"a board of game {game}, of {len(starts)} games")
        tasks.append((starts[game], moves[game] or [], [p for _, p in group]))
    if workers <= 1 or len(tasks) < 2 * workers:
        return [fen for fens in _replay_all(tasks) for fen in fens]
    size = -(-len(tasks) // (workers * 4))
    chunks = [tasks[i : i + size] for i in range(0, len(tasks), size)]
    with SPAWN.Pool(workers, initializer=worker_start) as pool:
        return [fen for chunk in pool.map(_replay_all, chunks) for fens in chunk for fen in fens]


def _rows(manifest: dict, boards: pa.Table, fens: list[str]) -> pa.Table:
    """The board rows, in the board schema, of the boards the games say."""
    splits = manifest["splits"]
    split = boards.column("split").to_pylist()
    best = [code_move(c).uci() for c in boards.column("best").to_pylist()]
    cp = boards.column("cp").to_pylist()
    mate = boards.column("mate").to_pylist()
    value = [
        win_probability(cp=c) if m is None else win_probability(mate=m)
        for c, m in zip(cp, mate, strict=True)
    ]

    def shared(name: str) -> list:
        return [splits[s]["shared"][name] for s in split]

    columns = {
        "fen": fens,
        "count": boards.column("count").to_pylist(),
        "moves": [[b] for b in best],
        "win_probs": [[v] for v in value],
        "cp": [[c] for c in cp],
        "mate": [[m] for m in mate],
        "partial": boards.column("partial").to_pylist(),
        "best_move": best,
        "state_win_prob": value,
        "state_cp": cp,
        "state_mate": mate,
        **{name: shared(name) for name in SHARED},
    }
    return pa.table([pa.array(columns[f.name], f.type) for f in BOARD_SCHEMA], schema=BOARD_SCHEMA)


def _read_table(path: str, name: str, schema: pa.Schema) -> pa.Table:
    file = os.path.join(path, name)
    try:
        found = pq.read_schema(file)
        if not found.equals(schema):
            raise PackError(f"{file}: columns {found.names}, not the pack's {schema.names}")
        return pq.read_table(file)
    except (OSError, pa.ArrowInvalid) as e:
        raise PackError(f"{path}: unreadable ({e})") from e


def _loose_name(split: int) -> str:
    return f"{split:03d}.parquet"


def unpack(path: str, out: str, workers: int = 1) -> int:
    """Writes every row of the pack at `path` as board shards into `out` (created; it must
    not hold shards already); returns the rows written."""
    manifest = read_manifest(path)
    if os.path.isdir(out) and any(name.startswith("boards-") for name in os.listdir(out)):
        raise PackError(f"{out} holds board shards already: not mixed with the pack's")
    games = _read_table(path, GAMES_FILE, GAMES_SCHEMA)
    boards = _read_table(path, BOARDS_FILE, BOARDS_SCHEMA)
    try:
        splits = manifest["splits"]
        expected = manifest["boards"]
        loose = [_loose_name(i) for i, split in enumerate(splits) if split["loose"]]
        if any(name not in split["shared"] for split in splits for name in SHARED):
            raise KeyError("shared columns")
    except (KeyError, TypeError) as e:
        raise PackError(f"{path}/{MANIFEST}: no {e} in it") from e
    if any(s >= len(splits) for s in boards.column("split").to_pylist()):
        raise PackError(f"{path}: a board of a split the manifest does not name")
    rows = _rows(manifest, boards, _fens(games, boards, workers))
    loose_dir = os.path.join(path, LOOSE_DIR)
    parts = [rows.slice(i, ROWS_PER_SHARD) for i in range(0, rows.num_rows, ROWS_PER_SHARD)]
    try:
        parts += [read_board_file(os.path.join(loose_dir, name)) for name in loose]
    except (OSError, SchemaError) as e:
        raise PackError(f"{path}: loose rows unreadable ({e})") from e
    if sum(part.num_rows for part in parts) != expected:
        raise PackError(
            f"{path}: {sum(part.num_rows for part in parts):,} rows, where {MANIFEST} says "
            f"{expected:,}: the pack is damaged"
        )
    os.makedirs(out, exist_ok=True)
    for index, part in enumerate(parts):
        target = os.path.join(out, shard_name("boards", index, len(parts)))
        pq.write_table(part, target + ".partial", row_group_size=ROW_GROUP_SIZE)
        os.replace(target + ".partial", target)
    return sum(part.num_rows for part in parts)
