"""The paper's code as an oracle (bench/oracle.py): loaded once, skipping with the reason
where ../shared/reference or one of its packages is absent; tiny networks in the released
architecture, written by the reference code itself in the released checkpoint layout."""

from __future__ import annotations

import pytest

from bench import oracle
from core.actions import NUM_ACTIONS
from model.import_reference import import_checkpoint

NUM_LAYERS, WIDTH, NUM_BINS, STEP = 2, 32, 128, 12345
OUTPUT_SIZE = {"av": NUM_BINS, "sv": NUM_BINS, "bc": NUM_ACTIONS}


@pytest.fixture(scope="session")
def ref():
    try:
        return oracle.load()
    except oracle.OracleUnavailable as e:
        pytest.skip(str(e))


@pytest.fixture(scope="session")
def reference_model(ref):
    """model(target) -> (their predictor, params, params_ema): a tiny network in the released
    architecture, initialised by their code, every leaf perturbed, EMA perturbed again."""
    cache = {}

    def model(target: str):
        if target not in cache:
            config = oracle.transformer_config(ref, NUM_LAYERS, WIDTH, OUTPUT_SIZE[target])
            predictor = ref.transformer.build_transformer_predictor(config)
            seed = len(cache)
            params = oracle.perturbed(oracle.init_params(predictor), 0.05, seed=10 + seed)
            ema = oracle.perturbed(params, 0.05, seed=20 + seed)
            cache[target] = (predictor, params, ema)
        return cache[target]

    return model


@pytest.fixture(scope="session")
def imported_run(reference_model, tmp_path_factory):
    """run(target) -> (run dir imported from a released-layout checkpoint, their predictor,
    params, params_ema)."""
    cache = {}

    def run(target: str):
        if target not in cache:
            predictor, params, ema = reference_model(target)
            base = tmp_path_factory.mktemp(f"released-{target}")
            oracle.save_released(str(base / "checkpoint"), STEP, params, ema)
            import_checkpoint(str(base / "checkpoint"), str(base / "run"), target)
            cache[target] = (str(base / "run"), predictor, params, ema)
        return cache[target]

    return run


@pytest.fixture(scope="session")
def real_boards(sample_games):
    """Boards of the bundled sample's games every 7th ply, each with its move stack (the
    repetition rules need it), only boards with a legal move."""
    boards = []
    for game in sample_games("games.pgn.zst", count=6):
        board = game.board()
        for ply, move in enumerate(game.mainline_moves()):
            if ply % 7 == 3 and any(board.legal_moves):
                boards.append(board.copy())
            board.push(move)
    assert len(boards) >= 30
    return boards[:30]
