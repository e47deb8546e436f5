"""Real annotated boards for the trainer's tests, built once per session.

Positions come from seeded random games, one position per game (so the tests need no shared
data); every legal move is searched by the real Stockfish at a small node budget
(`root_moves=[move]`), the score turned into a win probability by core.values, and the
rows written through core.schema, exactly the contract the pipeline's Parquet follows.
The state value and best move are those of the best-scoring move. Two engines run in
parallel threads. The loader and loop mechanics tests use faster
synthetic rows (real boards, random values) instead.
"""

from __future__ import annotations

import collections
import pathlib
import random
from concurrent.futures import ThreadPoolExecutor

import chess
import chess.engine
import pytest

from core.actions import legal_actions
from core.engine_path import engine_id
from core.schema import make_board_row, shard_name, write_boards
from core.values import win_probability

NODES = 200
TRAIN_BOARDS = 900
TEST_BOARDS = 150
TRAIN_SHARDS = 3


def random_game_boards(num_boards: int, seed: int, max_plies: int = 70) -> list[tuple[str, int]]:
    """(FEN, times reached) of distinct non-terminal positions, each from its own seeded
    random game stopped at a random ply: many games, so many material balances.

    Moves are random except that a capture is preferred half the time, which keeps the
    material balance moving, so values spread over the whole [0, 1] range.
    """
    rng = random.Random(seed)
    counts: collections.Counter[str] = collections.Counter()
    while len(counts) < num_boards:
        board = chess.Board()
        for _ in range(rng.randint(0, max_plies)):
            moves = list(board.legal_moves)
            if not moves:
                break
            captures = [m for m in moves if board.is_capture(m)]
            board.push(rng.choice(captures if captures and rng.random() < 0.5 else moves))
        if any(board.legal_moves):
            counts[board.fen()] += 1
    return list(counts.items())


def annotate(fen: str, count: int, engine: chess.engine.SimpleEngine, limit, name: str) -> dict:
    board = chess.Board(fen)
    moves = legal_actions(board)
    cps, mates, probs = [], [], []
    for uci in moves:
        info = engine.analyse(board, limit, root_moves=[chess.Move.from_uci(uci)])
        score = info["score"].pov(board.turn)
        cp, mate = score.score(), score.mate()
        cps.append(cp)
        mates.append(mate)
        probs.append(win_probability(cp=cp) if mate is None else win_probability(mate=mate))
    best = max(range(len(moves)), key=lambda i: probs[i])  # first best in action order
    return make_board_row(
        fen,
        count=count,
        moves=moves,
        win_probs=probs,
        cp=cps,
        mate=mates,
        best_move=moves[best],
        state_win_prob=probs[best],
        state_cp=cps[best],
        state_mate=mates[best],
        engine=name,
        limit=f"nodes={NODES}",
    )


def annotate_all(boards: list[tuple[str, int]], engine_path: str, workers: int = 2) -> list[dict]:
    """Annotated rows of `boards`, in order, by `workers` engines in parallel threads."""
    name = engine_id(engine_path)
    limit = chess.engine.Limit(nodes=NODES)
    share = -(-len(boards) // workers)

    def work(part: list[tuple[str, int]]) -> list[dict]:
        engine = chess.engine.SimpleEngine.popen_uci(engine_path)
        try:
            engine.configure({"Threads": 1, "Hash": 16})
            return [annotate(fen, count, engine, limit, name) for fen, count in part]
        finally:
            engine.quit()

    parts = [boards[i * share : (i + 1) * share] for i in range(workers)]
    with ThreadPoolExecutor(workers) as pool:
        return [row for part in pool.map(work, parts) for row in part]


@pytest.fixture(scope="session")
def annotated_data(tmp_path_factory, stockfish) -> pathlib.Path:
    """A directory with train/ (3 shards) and test/ (1 shard) of real annotated boards."""
    root = tmp_path_factory.mktemp("annotated")
    rows = annotate_all(random_game_boards(TRAIN_BOARDS + TEST_BOARDS, seed=2024), stockfish)
    write_shards(rows[:TRAIN_BOARDS], root / "train", TRAIN_SHARDS)
    write_shards(rows[TRAIN_BOARDS:], root / "test", 1)
    return root


def synthetic_rows(num_boards: int, seed: int) -> list[dict]:
    """Rows with real boards and legal moves but seeded random values and counts: for tests
    of the loader and the loop's mechanics, where what the values mean does not matter."""
    rng = random.Random(seed)
    rows = []
    for fen, _ in random_game_boards(num_boards, seed):
        moves = legal_actions(chess.Board(fen))
        probs = [rng.random() for _ in moves]
        best = max(range(len(moves)), key=lambda i: probs[i])
        rows.append(
            make_board_row(
                fen,
                count=rng.randint(1, 5),
                moves=moves,
                win_probs=probs,
                best_move=moves[best],
                state_win_prob=probs[best],
                engine="synthetic",
                limit="none",
            )
        )
    return rows


def write_shards(rows: list[dict], directory: pathlib.Path, num_shards: int) -> pathlib.Path:
    per_shard = -(-len(rows) // num_shards)
    for i in range(num_shards):
        chunk = rows[i * per_shard : (i + 1) * per_shard]
        write_boards(chunk, str(directory / shard_name("boards", i, num_shards)))
    return directory


@pytest.fixture(scope="session")
def synthetic_data(tmp_path_factory) -> pathlib.Path:
    """train/ (3 shards, 120 boards) and test/ (1 shard, 30 boards) of synthetic rows."""
    root = tmp_path_factory.mktemp("synthetic")
    rows = synthetic_rows(150, seed=7)
    write_shards(rows[:120], root / "train", 3)
    write_shards(rows[120:], root / "test", 1)
    return root


@pytest.fixture(scope="session")
def make_rows():
    """synthetic_rows(num_boards, seed), for tests (test modules cannot import conftest)."""
    return synthetic_rows


@pytest.fixture(scope="session")
def shard_writer():
    """write_shards(rows, directory, num_shards)."""
    return write_shards
