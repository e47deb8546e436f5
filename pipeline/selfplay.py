"""Games to take training positions from, with no download: Stockfish against itself.

    python -m pipeline.selfplay --games 1000 --out data/selfplay/games.pgn.zst \\
        [--limit nodes=500] [--workers 2] [--seed 0] [--random-plies 4] [--random-prob 0.05] \\
        [--max-plies 300] [--openings FILE.pgn] [--engine PATH] [--date 2026.11.23]

Game i (from 0) starts from an opening of the bundled ECO set (core/data/openings.pgn, or
`--openings`: a seeded shuffle of the set, cycled), then plays `--random-plies` uniformly
random legal moves, then Stockfish moves for both sides under `--limit`, each ply replaced by
a random legal move with probability `--random-prob`. The game ends by the rules
(core/game_end.py: mate, stalemate, insufficient material, threefold repetition, fifty moves)
or after `--max-plies` plies past the opening (result `*`, Termination "Unterminated").

Deterministic by `--seed` whatever `--workers`: game i draws its random moves from its own
stream (seed, i), its engine starts the game with `ucinewgame` (a cleared hash) and searches
each move with one thread under a node limit, the whole game so far given as `position ...
moves`; the games are written in game order, so the output is byte-identical for any number
of workers, and a run of N games is the first N games of any longer run with the same
settings. (A `time=` limit plays fine but is not reproducible.)

The output is Lichess-style PGN (`.pgn`, or `.pgn.zst` compressed), written under a temporary
name and renamed when complete: Event, Site, Date (`--date`, else unknown), Round, White,
Black, Result, WhiteElo/BlackElo `?`, ECO and Opening from the opening, TimeControl `-`,
Termination, and a GameId unique to the game and the settings (`sp<digest of the
settings>-<game number>`), which the annotator uses to sample games. `python -m
pipeline.annotate` reads the file as any PGN (games from `.epd` openings start from a set-up
position, with FEN/SetUp headers: annotate them with `--allow-setup`). A JSON summary (games,
boards, results, rates) goes to stdout, progress with rate and ETA to stderr.
"""

from __future__ import annotations

import argparse
import atexit
import collections
import contextlib
import dataclasses
import hashlib
import io
import itertools
import json
import os
import random
import re
import sys
import time
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

import chess
import chess.pgn
import zstandard

from core.engine_path import EngineNotFoundError, find_engine
from core.engine_settings import EngineLimit, EngineOptions
from core.game_end import board_outcome
from core.openings import DEFAULT_OPENINGS, Opening, choose_openings, load_openings
from pipeline.labels.uci_client import EngineError, UciEngine
from runtime.cli import config_from_args, positive_int
from runtime.outputs import OutputError, check_file
from runtime.progress import Progress, format_duration, print_result
from runtime.workers import SPAWN, usable_cores, worker_start

DEFAULT_LIMIT = "nodes=500"
UNFINISHED = "*"
ZSTD_LEVEL = 10
_GAMES_PER_WORKER = 4  # games in flight per worker, so none waits for the next


class SelfPlayError(RuntimeError):
    """The run could not go on (an engine that keeps failing, a worker that died)."""


@dataclass(frozen=True)
class SelfPlayConfig:
    """One run: the command line's options (see `_parser` for each one's meaning)."""

    games: int
    out: str
    limit: EngineLimit = EngineLimit.parse(DEFAULT_LIMIT)
    seed: int = 0
    random_plies: int = 4
    random_prob: float = 0.0
    max_plies: int = 300
    openings: str | None = None  # None: the bundled ECO set
    workers: int = 1  # 0: one per usable core
    engine: str | None = None
    hash_mb: int = 16
    date: str = "????.??.??"
    overwrite: bool = False
    progress_seconds: float = 2.0

    def __post_init__(self):
        problems = []
        if self.games < 1:
            problems.append(f"--games must be >= 1, got {self.games}")
        if self.random_plies < 0:
            problems.append(f"--random-plies must be >= 0, got {self.random_plies}")
        if not 0 <= self.random_prob <= 1:
            problems.append(f"--random-prob must lie in [0, 1], got {self.random_prob}")
        if self.max_plies < 1:
            problems.append(f"--max-plies must be >= 1, got {self.max_plies}")
        if self.workers < 0:
            problems.append(f"--workers must be >= 0, got {self.workers}")
        if not self.out.endswith((".pgn", ".pgn.zst")):
            problems.append(f"--out {self.out}: must end in .pgn or .pgn.zst")
        if not re.fullmatch(r"(\d{4}|\?{4})\.(\d\d|\?\?)\.(\d\d|\?\?)", self.date):
            problems.append(f"--date {self.date!r} is not YYYY.MM.DD (PGN's date form)")
        if problems:
            raise ValueError("; ".join(problems))

    @property
    def worker_count(self) -> int:
        return min(self.workers or usable_cores(), self.games)


@dataclass(frozen=True)
class GameTask:
    """Everything that decides one game (sent to a worker)."""

    index: int
    opening: Opening
    game_id: str
    limit: EngineLimit
    rng_seed: str
    random_plies: int
    random_prob: float
    max_plies: int


@dataclass(frozen=True)
class PlayedGame:
    """A finished game: its moves (UCI, opening included) and how it ended."""

    index: int
    moves: tuple[str, ...]
    result: str
    termination: str  # "checkmate", ..., "max plies"
    engine_moves: int
    random_moves: int
    nodes: int


# --- one game ------------------------------------------------------------------------------


def play(engine: UciEngine, task: GameTask) -> PlayedGame:
    """Plays game `task.index` with `engine` (both sides); EngineError if the engine fails."""
    rng = random.Random(task.rng_seed)
    board = task.opening.board()
    played = list(task.opening.moves)
    engine_moves = random_moves = nodes = 0
    new_game = True
    plies = 0
    while (outcome := board_outcome(board)) is None:
        if plies >= task.max_plies:
            return PlayedGame(
                task.index, tuple(played), UNFINISHED, "max plies", engine_moves, random_moves,
                nodes,
            )  # fmt: skip
        if plies < task.random_plies or (task.random_prob and rng.random() < task.random_prob):
            move = rng.choice(list(board.legal_moves))
            random_moves += 1
        else:
            search = engine.search(task.opening.fen, task.limit, played, new_game=new_game)
            new_game = False
            move = chess.Move.from_uci(search.best_move)
            if not board.is_legal(move):
                raise EngineError(f"engine played the illegal {search.best_move} in {board.fen()}")
            engine_moves += 1
            nodes += search.nodes
        board.push(move)
        played.append(move.uci())
        plies += 1
    return PlayedGame(
        task.index, tuple(played), outcome.result, outcome.termination, engine_moves,
        random_moves, nodes,
    )  # fmt: skip


def play_with_retry(engine: UciEngine, task: GameTask) -> PlayedGame:
    """`play`, replayed once from its start on a restarted engine if the engine fails (the
    game is a function of its task, so the replay is the game the first try would have
    been); SelfPlayError if it fails again."""
    try:
        return play(engine, task)
    except EngineError as first:
        engine.restart()
        try:
            return play(engine, task)
        except EngineError as second:
            raise SelfPlayError(
                f"game {task.index + 1} ({task.game_id}): the engine failed twice: {first}; "
                f"then {second}"
            ) from None


# --- PGN -----------------------------------------------------------------------------------


def pgn_text(task: GameTask, game: PlayedGame, player: str, date: str) -> str:
    """The game as Lichess-style PGN (see the module doc), ending in a blank line."""
    board = chess.Board(task.opening.fen)
    for uci in game.moves:
        board.push_uci(uci)
    pgn = chess.pgn.Game.from_board(board)  # FEN/SetUp headers only for a set-up opening
    headers = {
        "Event": "searchless-chess self-play",
        "Site": f"searchless-chess/selfplay/{task.game_id}",
        "Date": date,
        "Round": "-",
        "White": player,
        "Black": player,
        "Result": game.result,
        "WhiteElo": "?",
        "BlackElo": "?",
    }
    if task.opening.eco:
        headers["ECO"] = task.opening.eco
    headers["Opening"] = task.opening.name
    headers["TimeControl"] = "-"
    headers["Termination"] = "Unterminated" if game.result == UNFINISHED else "Normal"
    headers["GameId"] = task.game_id
    for key in ("FEN", "SetUp"):
        if key in pgn.headers:
            headers[key] = pgn.headers[key]
    pgn.headers.clear()
    pgn.headers.update(headers)
    exporter = chess.pgn.StringExporter(headers=True, variations=False, comments=False)
    return pgn.accept(exporter) + "\n\n"


# --- the run -------------------------------------------------------------------------------


def selfplay_identity(config: SelfPlayConfig, engine_name: str, openings: list[Opening]) -> dict:
    """Everything that decides the games (not `workers`, `out` or `date`)."""
    return {
        "engine": engine_name,
        "limit": str(config.limit),
        "seed": config.seed,
        "random_plies": config.random_plies,
        "random_prob": config.random_prob,
        "max_plies": config.max_plies,
        "openings": hashlib.sha256(
            json.dumps([dataclasses.astuple(o) for o in openings]).encode()
        ).hexdigest()[:16],
    }


def plan(config: SelfPlayConfig, openings: list[Opening], identity: dict) -> list[GameTask]:
    """The tasks of games 0 .. games-1."""
    digest = hashlib.blake2b(
        json.dumps(identity, sort_keys=True).encode(), digest_size=4
    ).hexdigest()
    chosen = choose_openings(openings, config.games, config.seed)
    return [
        GameTask(
            index=i,
            opening=chosen[i],
            game_id=f"sp{digest}-{i + 1:06d}",
            limit=config.limit,
            rng_seed=f"selfplay/{config.seed}/{i}",
            random_plies=config.random_plies,
            random_prob=config.random_prob,
            max_plies=config.max_plies,
        )
        for i in range(config.games)
    ]


_WORKER_ENGINE: UciEngine | None = None


def _worker_init(path: str, hash_mb: int) -> None:
    global _WORKER_ENGINE
    worker_start()
    _WORKER_ENGINE = UciEngine(EngineOptions(path, hash_mb=hash_mb))
    atexit.register(_WORKER_ENGINE.close)


def _worker_play(task: GameTask) -> PlayedGame:
    return play_with_retry(_WORKER_ENGINE, task)


def played_games(
    tasks: list[GameTask], path: str, hash_mb: int, workers: int
) -> Iterator[PlayedGame]:
    """The games of `tasks`, in task order, played by `workers` processes (this one if 1)."""
    if workers == 1:
        with UciEngine(EngineOptions(path, hash_mb=hash_mb)) as engine:
            for task in tasks:
                yield play_with_retry(engine, task)
        return
    pool = ProcessPoolExecutor(
        workers, mp_context=SPAWN, initializer=_worker_init, initargs=(path, hash_mb)
    )
    pending = iter(tasks)
    in_flight: collections.deque[Future[PlayedGame]] = collections.deque()
    try:
        while True:
            for task in itertools.islice(pending, workers * _GAMES_PER_WORKER - len(in_flight)):
                in_flight.append(pool.submit(_worker_play, task))
            if not in_flight:
                return
            yield in_flight.popleft().result()
    except BrokenProcessPool as e:
        raise SelfPlayError("a worker process died (killed? out of memory?)") from e
    finally:
        pool.shutdown(cancel_futures=True)


@contextlib.contextmanager
def _output(path: str):
    """A text stream to `path` (zstd for .zst) written under `path.tmp`, renamed on success."""
    temporary = path + ".tmp"
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    raw = open(temporary, "wb")
    try:
        if path.endswith(".zst"):
            compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL)
            binary = compressor.stream_writer(raw, closefd=False)
        else:
            binary = raw
        text = io.TextIOWrapper(binary, encoding="utf-8", newline="\n", write_through=True)
        yield text
        text.flush()
        if binary is not raw:
            binary.close()  # ends the zstd frame
        raw.close()
        os.replace(temporary, path)
    except BaseException:
        raw.close()
        with contextlib.suppress(FileNotFoundError):
            os.remove(temporary)
        raise


def run(config: SelfPlayConfig, show_progress: bool = True) -> dict:
    """Plays and writes the games; returns the summary document."""
    if os.path.exists(config.out) and not config.overwrite:
        raise FileExistsError(f"{config.out} exists: pass --overwrite to replace it")
    openings = load_openings(config.openings)
    path = find_engine(config.engine)
    with UciEngine(path) as probe:
        engine_name = probe.name
    identity = selfplay_identity(config, engine_name, openings)
    tasks = plan(config, openings, identity)
    player = f"{engine_name} {config.limit}"
    if config.random_prob:
        player += f" random={config.random_prob:g}"
    workers = config.worker_count
    progress = Progress("selfplay", config.games, "games", every=config.progress_seconds)
    results: collections.Counter[str] = collections.Counter()
    terminations: collections.Counter[str] = collections.Counter()
    boards = engine_moves = random_moves = nodes = 0
    began = time.monotonic()
    with _output(config.out) as out:
        for done, game in enumerate(played_games(tasks, path, config.hash_mb, workers), 1):
            out.write(pgn_text(tasks[game.index], game, player, config.date))
            results[game.result] += 1
            terminations[game.termination] += 1
            boards += len(game.moves)
            engine_moves += game.engine_moves
            random_moves += game.random_moves
            nodes += game.nodes
            if show_progress:
                rate = boards / max(time.monotonic() - began, 1e-9)
                progress.update(done, f"{boards:,} boards ({rate:,.0f}/s)")
    wall = time.monotonic() - began
    if show_progress:
        progress.done(f"{boards:,} boards")
    return {
        "out": config.out,
        "games": config.games,
        "boards": boards,  # positions before each move, opening included: what annotate reads
        "engine_moves": engine_moves,
        "random_moves": random_moves,
        "nodes": nodes,
        "results": dict(sorted(results.items())),
        "terminations": dict(sorted(terminations.items())),
        "wall_time_s": round(wall, 3),
        "games_per_s": round(config.games / wall, 3),
        "boards_per_s": round(boards / wall, 2),
        "workers": workers,
        "reproducible": config.limit.deterministic,
        "settings": identity
        | {"openings_file": config.openings or str(DEFAULT_OPENINGS), "date": config.date},
        "first_game_id": tasks[0].game_id,
    }


# --- command line ----------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pipeline.selfplay",
        description="Stockfish self-play games from varied openings, as Lichess-style PGN "
        "for the annotation pipeline. Deterministic by --seed whatever --workers.",
    )
    parser.add_argument("--games", type=int, required=True, help="games to play")
    parser.add_argument("--out", required=True, help="output file, .pgn or .pgn.zst")
    parser.add_argument(
        "--limit",
        type=EngineLimit.parse,
        default=DEFAULT_LIMIT,
        help=f"Stockfish's search per move: nodes=N (reproducible) or time=SECONDS; "
        f"default {DEFAULT_LIMIT}",
    )
    parser.add_argument("--seed", type=int, default=0, help="openings and random moves")
    parser.add_argument(
        "--random-plies",
        type=int,
        default=4,
        help="uniformly random moves played right after the opening (default 4)",
    )
    parser.add_argument(
        "--random-prob",
        type=float,
        default=0.0,
        help="chance that any later ply is a random legal move instead of Stockfish's (default 0)",
    )
    parser.add_argument(
        "--max-plies",
        type=int,
        default=300,
        help="plies after the opening before a game is stopped unfinished (default 300)",
    )
    parser.add_argument(
        "--openings",
        default=None,
        help="a .pgn (each game's moves) or .epd of openings (default: the bundled ECO lines)",
    )
    parser.add_argument(
        "--workers", type=int, default=1, help="games played at once, one engine each (0: cores)"
    )
    parser.add_argument("--engine", default=None, help="UCI engine (default: find Stockfish)")
    parser.add_argument(
        "--hash", type=positive_int, default=16, dest="hash_mb", help="engine hash, MB"
    )
    parser.add_argument(
        "--date", default="????.??.??", help="the Date header, YYYY.MM.DD (default unknown)"
    )
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        config = config_from_args(SelfPlayConfig, args)
        check_file(config.out)
        document = run(config, show_progress=not args.quiet)
    except (
        ValueError,
        FileExistsError,
        OutputError,
        EngineNotFoundError,
        SelfPlayError,
        EngineError,
    ) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("selfplay: interrupted; no output written", file=sys.stderr)
        return 130
    print_result(
        f"selfplay: {document['games']:,} games, {document['boards']:,} boards -> "
        f"{document['out']} in {format_duration(document['wall_time_s'])} "
        f"({document['games_per_s']:.2f} games/s, {document['boards_per_s']:,.0f} boards/s)",
        document,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
