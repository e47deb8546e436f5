"""`make cpu-model`'s settings (jobs/cpu_model/recipe.py): its scales, its places and the evaluation
sets it never trains on and judges with."""

from __future__ import annotations

import glob
import pathlib
import sys
from dataclasses import dataclass

ROOT = pathlib.Path(__file__).resolve().parents[2]
SAMPLE_PUZZLES = ROOT / "data" / "sample" / "puzzles.csv"
MAIN_CONFIG = ROOT / "model" / "configs" / "cpu.toml"
SHIPPED_MODEL = ROOT / "models" / "cpu"
PUZZLE_FILE = "lichess_puzzles_10k_fen_moves_rating__jorgenwh_alpha-nonzero.csv"
STS_FILE = "STS1-STS15_LAN_v3.epd"
BASELINES = ("greedy", "random")


@dataclass(frozen=True)
class Scale:
    """How much of everything: `full` fits 2 hours on 2 cores, `quick` a test."""

    selfplay_games: int  # training games
    test_games: int  # held-out games (another seed)
    lichess_games: int  # at most this many of <shared>/games (0: none)
    selfplay_limit: str  # Stockfish's search per self-play move
    label_limit: str  # per legal move: the action values
    search_games: int  # at most this many of <shared>/games valued by one search per board
    search_limit: str  # that one search (its best move is the BC label)
    # The same games' boards after a random move (positions after a mistake, whose label
    # punishes it), one split per seed of the move, each valued by one search per board.
    random_move_seeds: tuple[int, ...]
    # More such splits (other seeds) of which only the boards whose best move gives check are
    # trained on (pipeline/select_boards.py): a puzzle's first move is a check far more often
    # than a game's best move. Measured at the full scale with seeds (2, 3), no gain
    # (docs/cpu-model.md).
    check_seeds: tuple[int, ...]
    target: str  # the main model's
    steps: int
    batch_size: int  # boards
    curve_points: int  # checkpoints on the learning curve
    ablation_steps: int  # AV vs SV vs BC
    data_steps: int  # all the boards vs a quarter: enough steps to repeat the quarter
    curve_puzzles: int
    curve_sts_every: int  # every k-th STS position
    final_puzzles: int
    final_sts_every: int
    ceiling_puzzles: int  # Stockfish's share of the puzzles and STS (it is slow)
    ceiling_sts_every: int
    metrics_boards: int
    model: tuple[tuple[str, int], ...] = ()  # shape overrides of cpu.toml (quick: tiny)
    # Positions from the policy model's own games (DAgger): this many games (even: each
    # opening once with either colour) against the opponent from the bundled ECO openings,
    # each board valued by one search (the split OWN_GAMES_SPLIT). 0: off (600 games at the
    # full scale did not make a stronger player: docs/cpu-model.md).
    own_games: int = 0
    own_games_opponent: str = "stockfish:elo=1350"


SCALES: dict[str, Scale] = {
    "full": Scale(
        selfplay_games=200,
        test_games=12,
        lichess_games=100,
        selfplay_limit="nodes=300",
        label_limit="nodes=200",
        search_games=10_000,
        # 4x nodes=500's search, at about the same annotation wall time on two cores (the
        # pipeline's round trip per board dominates a search this short): labels that agree
        # with a nodes=40000 search on 62-73% of the boards instead of 50-61%, and a model
        # with 453 more STS points and 1.5 more points of puzzles (docs/cpu-model.md,
        # "Deeper labels").
        search_limit="nodes=2000",
        random_move_seeds=(0, 1),
        check_seeds=(),
        target="bc",
        steps=24_000,
        batch_size=32,
        curve_points=6,
        ablation_steps=150,
        data_steps=600,
        curve_puzzles=200,
        curve_sts_every=5,
        final_puzzles=1000,
        final_sts_every=1,
        ceiling_puzzles=300,
        ceiling_sts_every=10,
        metrics_boards=1000,
        own_games=0,
        own_games_opponent="stockfish:elo=1350",
    ),
    "quick": Scale(
        selfplay_games=6,
        test_games=2,
        lichess_games=3,
        selfplay_limit="nodes=50",
        label_limit="nodes=20",
        search_games=6,
        search_limit="nodes=50",
        random_move_seeds=(0,),
        check_seeds=(1,),
        target="bc",
        steps=24,
        batch_size=8,
        curve_points=2,
        ablation_steps=8,
        data_steps=16,
        curve_puzzles=6,
        curve_sts_every=10,
        final_puzzles=10,
        final_sts_every=5,
        ceiling_puzzles=3,
        ceiling_sts_every=10,
        metrics_boards=100,
        model=(("num_layers", 1), ("embedding_dim", 16), ("num_heads", 2)),
        own_games=2,
        own_games_opponent="stockfish:nodes=50",
    ),
}
STOCKFISH = "stockfish:nodes=100000"
# The boards of the check_seeds splits whose best move gives check.
CHECKS_SPLIT = "search-random-move-checks"
# The boards of the policy model's own games (Scale.own_games).
OWN_GAMES_SPLIT = "search-own-games"


@dataclass(frozen=True)
class Paths:
    work: pathlib.Path  # games and annotated Parquet, and the log of the steps that made them
    runs: pathlib.Path  # training runs
    results: pathlib.Path  # and the log of the model's steps
    models: pathlib.Path  # where the final run is shipped
    shared: pathlib.Path  # ../shared/data: real games, puzzles, EPD suites (optional)
    # The network every run of the recipe trains (`make cpu-transformer`: the square-token
    # transformer's); recipes with one `work` share its data.
    config: pathlib.Path = MAIN_CONFIG
    # The model whose own games give positions (Scale.own_games): by default the shipped
    # models/cpu; absent, the step is skipped.
    own_games_model: pathlib.Path = SHIPPED_MODEL


def own_games_on(scale: Scale, paths: Paths) -> bool:
    """Whether the recipe plays and trains on the policy model's own games."""
    return scale.own_games > 0 and paths.own_games_model.is_dir()


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def banner(number: int, title: str) -> None:
    print(f"\n=== cpu-model step {number}/7: {title} ===", file=sys.stderr, flush=True)


# --- what the evaluation sets are ------------------------------------------------------------


def exclusion_files(paths: Paths) -> list[str]:
    """Every puzzle CSV and EPD suite there is: never trained on."""
    found = sorted(glob.glob(str(paths.shared / "puzzles" / "*.csv")))
    found += sorted(glob.glob(str(paths.shared / "puzzles" / "*.csv.zst")))
    found += sorted(glob.glob(str(paths.shared / "epd" / "*.epd")))
    found += sorted(glob.glob(str(paths.shared / "*epd*" / "*.epd")))
    return sorted(set(found)) + [str(SAMPLE_PUZZLES)]


def puzzle_file(paths: Paths) -> str:
    shared = paths.shared / "puzzles" / PUZZLE_FILE
    return str(shared) if shared.exists() else str(SAMPLE_PUZZLES)


def sts_file(paths: Paths) -> str | None:
    shared = paths.shared / "epd" / STS_FILE
    return str(shared) if shared.exists() else None


def lichess_games(paths: Paths) -> list[str]:
    return sorted(glob.glob(str(paths.shared / "games" / "*.pgn*")))


def train_glob(paths: Paths, shards: str = "*") -> str:
    """The boards with full action values (the ablations train on these)."""
    return str(paths.work / "annotated" / "train-*" / f"boards-{shards}-of-*.parquet")


def split_glob(paths: Paths, split: str) -> str:
    """The board shards of one annotated split."""
    return str(paths.work / "annotated" / split / "boards-*-of-*.parquet")
