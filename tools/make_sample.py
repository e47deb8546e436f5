"""Makes the bundled sample in data/sample/: games, self-play games and puzzles, all by the project.

    python -m tools.make_sample [--steps games,selfplay,puzzles] [--engine PATH] [--out data/sample]

1. `games.pgn.zst`: the well-known games of `tools/famous_games.txt` (entered by hand from the
   public record), checked move by move with python-chess and written as a Lichess-style PGN.
2. `selfplay.pgn.zst`: games Stockfish plays against itself from the bundled ECO openings
   (core/data/openings.pgn), each side with its own small node budget so the weaker side makes
   mistakes. Node-limited single-threaded searches with a cleared hash are deterministic, so the
   same engine build gives the same games.
3. `mismatch.pgn.zst`: Stockfish at a small node budget against a seeded random mover (and
   some random-against-random games), from the bundled openings. Such games are full of hanging
   pieces, material swings and mates, the positions in which a model first learns what a
   capture or a mate is worth; master games and self-play hardly contain them.
4. `puzzles.csv`: Lichess-format puzzles cut from both files: a position, the move that was
   played in the game (`Moves[0]`, the opponent's), then a solution Stockfish finds and proves
   unique (see `PuzzleRules` in tools/sample_puzzles.py), kept only if the check in
   tests/test_sample.py passes too.

Nothing is downloaded; the output depends only on this script, its inputs and the engine build
(recorded in the PGN headers). Re-running a step overwrites its output.
"""

from __future__ import annotations

import argparse
import io
import pathlib
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import chess
import chess.engine
import chess.pgn
import zstandard

from core.engine_path import engine_id, find_engine
from core.openings import load_openings
from eval.agents.players import RandomAgent
from eval.agents.stockfish import EngineSettings, StockfishAgent
from eval.game import play_game
from runtime.progress import Progress
from tools.sample_puzzles import PuzzleRules, find_puzzles, select, write_puzzles

ROOT = pathlib.Path(__file__).resolve().parent.parent
FAMOUS_SOURCE = ROOT / "tools" / "famous_games.txt"
GAMES_FILE = "games.pgn.zst"
SELFPLAY_FILE = "selfplay.pgn.zst"
MISMATCH_FILE = "mismatch.pgn.zst"
PUZZLES_FILE = "puzzles.csv"
ZSTD_LEVEL = 19


# --- writing -----------------------------------------------------------------------------


def pgn_text(games: Sequence[chess.pgn.Game]) -> str:
    exporter_text = []
    for game in games:
        exporter = chess.pgn.StringExporter(headers=True, variations=False, comments=False)
        exporter_text.append(game.accept(exporter))
    return "\n\n".join(exporter_text) + "\n"


def write_zst(text: str, path: pathlib.Path) -> None:
    """zstd at a fixed level with no timestamps: the same text gives the same bytes."""
    path.write_bytes(zstandard.ZstdCompressor(level=ZSTD_LEVEL).compress(text.encode("utf-8")))


def read_zst_games(path: pathlib.Path) -> list[chess.pgn.Game]:
    text = zstandard.ZstdDecompressor().decompressobj().decompress(path.read_bytes()).decode()
    stream, games = io.StringIO(text), []
    while (game := chess.pgn.read_game(stream)) is not None:
        games.append(game)
    return games


def lichess_headers(game: chess.pgn.Game, values: dict[str, str]) -> None:
    """The Lichess header set, in Lichess's order, then our GameId."""
    game.headers.clear()
    for key in ("Event", "Site", "Date", "Round", "White", "Black", "Result"):
        game.headers[key] = values.get(key, "?")
    for key in ("WhiteElo", "BlackElo", "TimeControl", "Termination", "GameId"):
        game.headers[key] = values.get(key, "?")


class NodeLimitedEngines:
    """One single-threaded Stockfish per node budget, started on first use, all closed on
    exit; the agents are named by the engine build and budget, as the PGN headers show."""

    def __init__(self, engine: str):
        self.engine = engine
        self.name = engine_id(engine)
        self._agents: dict[int, StockfishAgent] = {}

    def get(self, nodes: int) -> StockfishAgent:
        if nodes not in self._agents:
            settings = EngineSettings(path=self.engine, nodes=nodes, threads=1, hash_mb=16)
            self._agents[nodes] = StockfishAgent(settings, name=f"{self.name} nodes={nodes}")
        return self._agents[nodes]

    def __enter__(self) -> NodeLimitedEngines:
        return self

    def __exit__(self, *exc) -> None:
        for agent in self._agents.values():
            agent.close()


def play_series(
    label: str, event: str, game_ids: str, pairing: Callable, games: int, max_plies: int
) -> list[chess.pgn.Game]:
    """Game i between `pairing(i)` = (white, black, opening), as Lichess-style PGN with a
    GameId `<game_ids>-NNN`, the opening's name and the agents' names."""
    progress = Progress(label, games, "games")
    played = []
    for i in range(games):
        white, black, opening = pairing(i)
        board, outcome = play_game(white, black, opening, max_plies)
        game = chess.pgn.Game.from_board(board)
        capped = outcome.termination.startswith("max plies")
        lichess_headers(
            game,
            {
                "Event": f"searchless-chess sample {event} (tools/make_sample.py)",
                "Site": "?",
                "Date": "????.??.??",
                "Round": str(i + 1),
                "White": white.name,
                "Black": black.name,
                "Result": outcome.result,
                "TimeControl": "-",
                "Termination": "Unterminated" if capped else "Normal",
                "GameId": f"{game_ids}-{i + 1:03d}",
            },
        )
        game.headers["Opening"] = opening.label
        played.append(game)
        progress.update(i + 1, f"{opening.label}: {outcome.result} ({outcome.termination})")
    progress.done()
    return played


# --- 1. famous games ---------------------------------------------------------------------


class SampleError(ValueError):
    pass


def famous_games(source: pathlib.Path = FAMOUS_SOURCE) -> list[chess.pgn.Game]:
    """The hand-entered games, each verified: every move legal, mates scored correctly."""
    games, ids = [], set()
    for number, line in enumerate(source.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        where = f"{source}, line {number}"
        fields = line.split("|")
        if len(fields) != 8:
            raise SampleError(f"{where}: expected 8 '|'-separated fields, got {len(fields)}")
        game_id, event, site, date, white, black, result, movetext = fields
        if game_id in ids:
            raise SampleError(f"{where}: GameId {game_id!r} repeated")
        ids.add(game_id)
        board = chess.Board()
        for san in re.sub(r"\d+\.", " ", movetext).split():
            try:
                board.push_san(san)
            except ValueError as e:
                raise SampleError(f"{where} ({game_id}): move {san!r}: {e}") from None
        if board.is_checkmate():
            expected = "0-1" if board.turn == chess.WHITE else "1-0"
            if result != expected:
                raise SampleError(f"{where} ({game_id}): ends in mate but the result is {result}")
        elif result not in ("1-0", "0-1", "1/2-1/2"):
            raise SampleError(f"{where} ({game_id}): unknown result {result!r}")
        game = chess.pgn.Game.from_board(board)
        lichess_headers(
            game,
            {
                "Event": event,
                "Site": site,
                "Date": date,
                "Round": "-",
                "White": white,
                "Black": black,
                "Result": result,
                "TimeControl": "-",
                "Termination": "Normal",
                "GameId": game_id,
            },
        )
        games.append(game)
    return games


# --- 2. self-play ------------------------------------------------------------------------


@dataclass(frozen=True)
class SelfPlayRules:
    games: int = 16
    # Node budgets: game i pairs BUDGETS[i % 4] (White) with BUDGETS[(i // 4) % 4] (Black),
    # skipping equal pairs, so strengths differ and mistakes (hence puzzles) occur.
    budgets: tuple[int, ...] = (64, 256, 1024, 4096)
    max_plies: int = 240


def selfplay_games(engine: str, rules: SelfPlayRules = SelfPlayRules()) -> list[chess.pgn.Game]:
    pairs = [(w, b) for b in rules.budgets for w in rules.budgets if w != b]
    openings = load_openings()
    with NodeLimitedEngines(engine) as engines:

        def pairing(i: int):
            white_nodes, black_nodes = pairs[i % len(pairs)]
            opening = openings[(7 * i) % len(openings)]  # 7 is coprime to the set's size
            return engines.get(white_nodes), engines.get(black_nodes), opening

        return play_series(
            "self-play", "self-play", "selfplay", pairing, rules.games, rules.max_plies
        )


# --- 3. mismatches -----------------------------------------------------------------------


@dataclass(frozen=True)
class MismatchRules:
    games: int = 64
    # Game i: Stockfish at BUDGETS[i % 3] nodes against a random mover seeded with i, colours
    # alternating; every fourth game is random against random.
    budgets: tuple[int, ...] = (32, 128, 512)
    max_plies: int = 160


def mismatch_games(engine: str, rules: MismatchRules = MismatchRules()) -> list[chess.pgn.Game]:
    openings = load_openings()
    with NodeLimitedEngines(engine) as engines:

        def pairing(i: int):
            mover = RandomAgent(seed=i, name=f"random seed={i}")
            if i % 4 == 3:
                opponent = RandomAgent(seed=10_000 + i, name=f"random seed={10_000 + i}")
            else:
                opponent = engines.get(rules.budgets[i % len(rules.budgets)])
            opening = openings[(11 * i) % len(openings)]  # 11 is coprime to the set's size
            return (opponent, mover, opening) if i % 2 == 0 else (mover, opponent, opening)

        return play_series(
            "mismatch", "mismatches", "mismatch", pairing, rules.games, rules.max_plies
        )


# --- the CLI -----------------------------------------------------------------------------


def unique_boards(games: Sequence[chess.pgn.Game]) -> int:
    fens = set()
    for game in games:
        board = game.board()
        for move in game.mainline_moves():
            fens.add(board.fen())
            board.push(move)
    return len(fens)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.make_sample", description=__doc__)
    parser.add_argument("--steps", default="games,selfplay,mismatch,puzzles")
    parser.add_argument("--engine", default=None, help="Stockfish binary")
    parser.add_argument("--out", default=str(ROOT / "data" / "sample"))
    parser.add_argument("--selfplay-games", type=int, default=SelfPlayRules.games)
    args = parser.parse_args(argv)
    steps = set(args.steps.split(","))
    unknown = steps - {"games", "selfplay", "mismatch", "puzzles"}
    if unknown:
        parser.error(f"unknown steps {sorted(unknown)}")
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    engine = find_engine(args.engine)
    started = time.monotonic()

    if "games" in steps:
        games = famous_games()
        write_zst(pgn_text(games), out / GAMES_FILE)
        print(f"{out / GAMES_FILE}: {len(games)} games, {unique_boards(games)} unique boards")
    if "selfplay" in steps:
        games = selfplay_games(engine, SelfPlayRules(games=args.selfplay_games))
        write_zst(pgn_text(games), out / SELFPLAY_FILE)
        print(f"{out / SELFPLAY_FILE}: {len(games)} games, {unique_boards(games)} unique boards")
    if "mismatch" in steps:
        games = mismatch_games(engine)
        write_zst(pgn_text(games), out / MISMATCH_FILE)
        print(f"{out / MISMATCH_FILE}: {len(games)} games, {unique_boards(games)} unique boards")
    if "puzzles" in steps:
        sources = [
            (name, game)
            for name in (GAMES_FILE, SELFPLAY_FILE)
            for game in read_zst_games(out / name)
        ]
        rules = PuzzleRules()
        found = find_puzzles(engine, sources, rules)
        rows = write_puzzles(select(found, rules.max_puzzles), engine, out / PUZZLES_FILE)
        print(f"{out / PUZZLES_FILE}: {len(rows)} puzzles (of {len(found)} found)")
    everything = [g for name in (GAMES_FILE, SELFPLAY_FILE, MISMATCH_FILE) if (out / name).exists()
                  for g in read_zst_games(out / name)]  # fmt: skip
    print(f"all sample games: {len(everything)}, unique boards {unique_boards(everything)}")
    print(f"done in {time.monotonic() - started:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
