"""Real annotated boards for the trainer's tests, built once per session.

Positions come from seeded random games (so the tests need no shared data); every legal move
is searched by the real Stockfish at a small node budget (`root_moves=[move]`), the score
turned into a win probability by pipeline.values, and the rows written through
pipeline.schema, exactly the contract the pipeline's Parquet follows. The state value and
best move are those of the best-scoring move. Two engines run in parallel threads.
"""

from __future__ import annotations

import collections
import pathlib
import random
import threading
from concurrent.futures import ThreadPoolExecutor

import chess
import chess.engine
import pytest

from model.actions import legal_actions
from pipeline.engine_path import engine_id
from pipeline.schema import shard_name, write_boards
from pipeline.values import win_probability

NODES = 200
TRAIN_BOARDS = 900
TEST_BOARDS = 150
TRAIN_SHARDS = 3


def random_game_boards(num_boards: int, seed: int) -> list[tuple[str, int]]:
    """(FEN, times seen) of distinct non-terminal positions from seeded random games.

    Moves are random except that a capture is preferred half the time, which keeps the
    material balance moving, so values spread over the whole [0, 1] range.
    """
    rng = random.Random(seed)
    counts: collections.Counter[str] = collections.Counter()
    while len(counts) < num_boards:
        board = chess.Board()
        for _ in range(rng.randint(4, 80)):
            moves = list(board.legal_moves)
            if not moves:
                break
            counts[board.fen()] += 1
            captures = [m for m in moves if board.is_capture(m)]
            board.push(rng.choice(captures if captures and rng.random() < 0.5 else moves))
    return list(counts.items())[:num_boards]


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
    return {
        "fen": fen,
        "count": count,
        "moves": moves,
        "win_probs": probs,
        "cp": cps,
        "mate": mates,
        "best_move": moves[best],
        "state_win_prob": probs[best],
        "state_cp": cps[best],
        "state_mate": mates[best],
        "engine": name,
        "limit": f"nodes={NODES}",
    }


def annotate_all(boards: list[tuple[str, int]], engine_path: str, workers: int = 2) -> list[dict]:
    name = engine_id(engine_path)
    limit = chess.engine.Limit(nodes=NODES)
    local = threading.local()
    engines = []

    def work(item):
        if not hasattr(local, "engine"):
            local.engine = chess.engine.SimpleEngine.popen_uci(engine_path)
            local.engine.configure({"Threads": 1, "Hash": 16})
            engines.append(local.engine)
        return annotate(*item, local.engine, limit, name)

    try:
        with ThreadPoolExecutor(workers) as pool:
            return list(pool.map(work, boards))
    finally:
        for engine in engines:
            engine.quit()


@pytest.fixture(scope="session")
def annotated_data(tmp_path_factory, stockfish) -> pathlib.Path:
    """A directory with train/ (3 shards) and test/ (1 shard) of real annotated boards."""
    root = tmp_path_factory.mktemp("annotated")
    boards = random_game_boards(TRAIN_BOARDS + TEST_BOARDS, seed=2024)
    rows = annotate_all(boards, stockfish)
    train, test = rows[:TRAIN_BOARDS], rows[TRAIN_BOARDS:]
    per_shard = -(-len(train) // TRAIN_SHARDS)
    for i in range(TRAIN_SHARDS):
        chunk = train[i * per_shard : (i + 1) * per_shard]
        write_boards(chunk, str(root / "train" / shard_name("boards", i, TRAIN_SHARDS)))
    write_boards(test, str(root / "test" / shard_name("boards", 0, 1)))
    return root
