"""Helpers for the eval tests: a scripted agent (protocol tests), positions made by moves,
random tiny networks for the tree search, a UCI engine process to talk to line by line, and
(session fixtures) Stockfish-annotated boards and a small model trained on them."""

from __future__ import annotations

import os
import pathlib
import queue
import random
import subprocess
import threading

import chess
import jax
import numpy as np
import pytest

from core.schema import BOARDS_PREFIX, make_board_row, shard_name, write_boards
from eval.agents.base import AgentBase
from eval.agents.evaluators import make_evaluator
from eval.agents.stockfish import EngineSettings, StockfishOracleAgent
from model.config import Config
from model.networks.transformer import init_params
from model.predictor import Predictor

ROOT = pathlib.Path(__file__).resolve().parents[2]


class ScriptedAgent(AgentBase):
    """Plays `script[board.fen()]` (UCI), whatever that move is, legal or not."""

    def __init__(self, script: dict[str, str], name: str = "scripted"):
        self.script = script
        self.name = name
        self.new_games = 0

    def new_game(self) -> None:
        self.new_games += 1

    def choose_move(self, board: chess.Board) -> chess.Move:
        return chess.Move.from_uci(self.script[board.fen()])


def position_after(fen: str, moves: str) -> str:
    """The FEN after playing the space-separated UCI `moves` from `fen`."""
    board = chess.Board(fen)
    for uci in moves.split():
        board.push_uci(uci)
    return board.fen()


@pytest.fixture
def scripted():
    """The ScriptedAgent class and the position_after helper."""
    return ScriptedAgent, position_after


@pytest.fixture(scope="module")
def nets():
    """Random one-layer tiny models of each target (their weights jittered so that moves
    score differently), and the evaluators searching with them."""
    rng = np.random.default_rng(1)
    predictors = {}
    for target in ("av", "sv", "bc"):
        config = Config().replace(
            train={"target": target},
            model={"size": "tiny", "num_layers": 1, "embedding_dim": 32, "num_heads": 2},
        )
        params = jax.tree_util.tree_map(
            lambda p: p + rng.normal(0.0, 0.05, p.shape).astype(p.dtype),
            init_params(config, seed=1),
        )
        predictors[target] = Predictor(params, config)
    evaluators = {
        "av": make_evaluator(predictors["av"]),
        "sv": make_evaluator(predictors["sv"]),
        "bc+sv": make_evaluator(predictors["bc"], predictors["sv"]),
    }
    return predictors, evaluators


def random_positions(num: int, seed: int) -> list[tuple[str, int]]:
    """(FEN, times seen) of distinct non-terminal positions from seeded random games."""
    rng = random.Random(seed)
    counts: dict[str, int] = {}
    while len(counts) < num:
        board = chess.Board()
        for _ in range(rng.randint(4, 60)):
            moves = list(board.legal_moves)
            if not moves:
                break
            counts[board.fen()] = counts.get(board.fen(), 0) + 1
            board.push(rng.choice(moves))
    return list(counts.items())[:num]


def annotated_rows(positions, oracle: StockfishOracleAgent) -> list[dict]:
    """Rows of core.schema, every legal move valued by the real Stockfish (the oracle's
    one-root-move searches, as the pipeline annotates)."""
    rows = []
    for fen, count in positions:
        values = oracle.move_values(chess.Board(fen))
        best = max(values, key=lambda v: v.score)
        rows.append(
            make_board_row(
                fen,
                count=count,
                moves=[v.move.uci() for v in values],
                win_probs=[v.win_prob for v in values],
                cp=[v.score.score() for v in values],
                mate=[v.score.mate() for v in values],
                best_move=best.move.uci(),
                state_win_prob=best.win_prob,
                state_cp=best.score.score(),
                state_mate=best.score.mate(),
                engine="stockfish",
                limit=oracle.settings.describe(),
            )
        )
    return rows


@pytest.fixture(scope="session")
def annotated(tmp_path_factory, stockfish) -> pathlib.Path:
    """A directory with train/ and test/ annotated-board Parquet made here with Stockfish."""
    root = tmp_path_factory.mktemp("annotated")
    with StockfishOracleAgent(EngineSettings(path=stockfish, nodes=200)) as oracle:
        for split, num, seed in (("train", 60, 1), ("test", 20, 2)):
            rows = annotated_rows(random_positions(num, seed), oracle)
            write_boards(rows, str(root / split / shard_name(BOARDS_PREFIX, 0, 1)))
    return root


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory, annotated) -> pathlib.Path:
    """A small AV model trained here by model.training.train for 80 steps (real JAX, real data)."""
    from model.training.train import main as train_main

    run = tmp_path_factory.mktemp("run")
    # Two layers, a high learning rate and no periodic evaluation keep this to seconds of
    # training after the compile; enough to bring the test loss below uniform.
    argv = [
        "--config", str(ROOT / "model" / "configs" / "small.toml"),
        "--data", str(annotated / "train"), "--out", str(run),
        "--steps", "80", "--batch-size", "32",
        "--set", 'data.test=""', "--set", "model.num_layers=2",
        "--set", "train.learning_rate=2e-3", "--set", "train.checkpoint_every=80",
        "--set", "train.log_every=40",
    ]  # fmt: skip
    assert train_main(argv) == 0
    return run


class UciProcess:
    """A real engine process (`argv`) spoken to over its pipes, line by line: `send` lines,
    then read with `until` (each line waits at most `timeout` seconds)."""

    def __init__(
        self,
        argv: list[str],
        cwd: str | os.PathLike,
        timeout: float = 300.0,
        env: dict[str, str] | None = None,
        stderr: pathlib.Path | None = None,  # a file for it (read while it runs), else a pipe
    ):
        self.timeout = timeout
        self._stderr_file = open(stderr, "wb") if stderr else None  # noqa: SIM115
        self.proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr_file or subprocess.PIPE,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.stderr = b""
        threading.Thread(target=self._read_stdout, daemon=True).start()
        self._stderr_reader = threading.Thread(target=self._read_stderr, daemon=True)
        if self._stderr_file is None:
            self._stderr_reader.start()

    def _read_stdout(self) -> None:
        for raw in self.proc.stdout:
            self.lines.put(raw.decode("utf-8", "replace").rstrip("\n"))
        self.lines.put(None)

    def _read_stderr(self) -> None:
        self.stderr = self.proc.stderr.read()

    def send(self, *lines: str | bytes) -> None:
        for line in lines:
            self.proc.stdin.write((line.encode() if isinstance(line, str) else line) + b"\n")
        self.proc.stdin.flush()

    def until(self, done) -> list[str]:
        """The lines up to and including the first for which done(line) is true."""
        got: list[str] = []
        while True:
            try:
                line = self.lines.get(timeout=self.timeout)
            except queue.Empty:
                raise AssertionError(f"no answer in {self.timeout} s; got {got}") from None
            if line is None:
                raise AssertionError(f"engine output ended; got {got}")
            got.append(line)
            if done(line):
                return got

    def ready(self) -> list[str]:
        """`isready`: the lines before `readyok`."""
        self.send("isready")
        return self.until(lambda line: line == "readyok")[:-1]

    def go(self, go: str = "go") -> tuple[list[str], str]:
        """The lines before `bestmove`, and the best move (UCI)."""
        self.send(go)
        lines = self.until(lambda line: line.startswith("bestmove "))
        return lines[:-1], lines[-1].split()[1]

    def thread_names(self) -> list[str]:
        """The names of the process's threads (Linux /proc)."""
        tasks = pathlib.Path(f"/proc/{self.proc.pid}/task")
        return [(task / "comm").read_text().strip() for task in tasks.iterdir()]

    def finish(self, timeout: float = 60.0) -> tuple[int, str]:
        """Closes stdin (end of input) if still open, then (exit status, stderr)."""
        if not self.proc.stdin.closed:
            self.proc.stdin.close()
        code = self.proc.wait(timeout=timeout)
        if self._stderr_file is None:
            self._stderr_reader.join(timeout)
        else:
            self._stderr_file.close()
            self.stderr = pathlib.Path(self._stderr_file.name).read_bytes()
        return code, self.stderr.decode("utf-8", "replace")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self._stderr_file is not None:
            self._stderr_file.close()


@pytest.fixture
def uci_process():
    """start(argv, cwd) -> a UciProcess, killed at the end of the test if still running."""
    started: list[UciProcess] = []

    def start(argv: list[str], cwd, **kwargs) -> UciProcess:
        started.append(UciProcess(argv, cwd, **kwargs))
        return started[-1]

    yield start
    for process in started:
        process.kill()
