"""Shared fixtures: where the real data and the real engine are, skipping with a reason if not;
tiny randomly initialised models saved as runs, for tests of the machinery around a model."""

from __future__ import annotations

import gc
import io
import os
import pathlib
import shutil
import signal
import sys
import tempfile

import chess.pgn
import pytest
import zstandard

from core.engine_path import EngineNotFoundError, find_engine

ROOT = pathlib.Path(__file__).resolve().parent.parent

# The engines and the web board keep XLA's compilations in the user's cache
# (eval/agents/model_files.py), where JAX writes each entry in place: an engine a test kills
# mid-write can leave one that a later reader loads and crashes on. The tests, and every
# process they start, keep theirs in a cache of this session's own, empty at the start as on a
# fresh machine. Set here, before any test module imports JAX.
SESSION_CACHE = tempfile.mkdtemp(prefix="searchless-tests-cache-")
os.environ["XDG_CACHE_HOME"] = SESSION_CACHE
os.environ.pop("JAX_COMPILATION_CACHE_DIR", None)


def pytest_unconfigure(config):
    shutil.rmtree(SESSION_CACHE, ignore_errors=True)


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Each XLA program compiled on the CPU keeps its own memory mappings, and one process
    running every test compiles thousands: past the kernel's limit (vm.max_map_count, 65,530)
    the next compile aborts the process. Each module's programs are let go after it."""
    yield
    if "jax" in sys.modules:
        import jax

        jax.clear_caches()
        gc.collect()


def pytest_configure(config):
    """On a GPU, XLA's default float32 matrix product is tf32 (a 10-bit mantissa), whose
    rounding differs between batch shapes by ~1e-3: the tests that compare two paths of one
    float32 computation (a padded batch and one board alone) ask for full float32 there.
    CPUs compute float32 products in full either way."""
    import jax

    if jax.default_backend() == "gpu":
        jax.config.update("jax_default_matmul_precision", "highest")
    # A shell without job control starts background commands (`make test &`, nohup) with
    # SIGINT ignored, and an ignored signal stays ignored in every child: the tests that send
    # Ctrl-C to a command would see nothing arrive. A handler, unlike SIG_IGN, is not
    # inherited: the children start with SIGINT's default, as from a terminal.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


SHARED_DATA = ROOT.parent / "shared" / "data"
SAMPLE = ROOT / "data" / "sample"


@pytest.fixture(scope="session")
def shared_data() -> pathlib.Path:
    """../shared/data (real Lichess games, puzzles and EPD suites), or skip."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"{SHARED_DATA} is absent: the real-data checks run where it exists")
    return SHARED_DATA


@pytest.fixture(scope="session")
def stockfish() -> str:
    """Path to the real Stockfish binary, or skip (make setup installs it)."""
    try:
        return find_engine()
    except EngineNotFoundError as e:
        pytest.skip(str(e))


def _read_sample_games(name: str, count: int | None = None) -> list[chess.pgn.Game]:
    raw = (SAMPLE / name).read_bytes()
    text = zstandard.ZstdDecompressor().decompressobj().decompress(raw).decode("utf-8")
    stream, games = io.StringIO(text), []
    while count is None or len(games) < count:
        if (game := chess.pgn.read_game(stream)) is None:
            break
        games.append(game)
    return games


@pytest.fixture(scope="session")
def sample_games():
    """read(name, count=None): the games of data/sample/<name> (a .pgn.zst), the first
    `count` of them if given (test modules cannot import conftest)."""
    return _read_sample_games


def save_tiny_model(directory: pathlib.Path, target: str = "av", seed: int = 1) -> pathlib.Path:
    """A run dir with one checkpoint of a randomly initialised one-layer tiny model, its
    weights jittered so that moves score differently (what engine mechanics need, fast)."""
    # Imported here: most tests never need JAX, and importing it costs seconds.
    import jax
    import numpy as np
    import optax

    from model.checkpoint import Checkpointer
    from model.config import Config
    from model.networks.transformer import init_params

    config = Config().replace(
        train={"target": target},
        model={"size": "tiny", "num_layers": 1, "embedding_dim": 32, "num_heads": 2},
    )
    rng = np.random.default_rng(seed)
    params = jax.tree_util.tree_map(
        lambda p: p + rng.normal(0.0, 0.05, p.shape).astype(p.dtype), init_params(config, seed)
    )
    checkpointer = Checkpointer(str(directory / "checkpoints"))
    meta = {"step": 0, "data_position": 0, "data_fingerprint": "", "config": config.to_dict()}
    checkpointer.save(0, params, params, optax.adam(1e-4).init(params), meta)
    checkpointer.close()
    return directory


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> pathlib.Path:
    """A random one-layer tiny AV model's run dir (save_tiny_model)."""
    return save_tiny_model(tmp_path_factory.mktemp("tiny-run"))


@pytest.fixture(scope="session")
def tiny_bc_run(tmp_path_factory) -> pathlib.Path:
    """The same for a behavioural-cloning (policy) model."""
    return save_tiny_model(tmp_path_factory.mktemp("tiny-bc-run"), target="bc")


@pytest.fixture(scope="session")
def console_script() -> str:
    """The installed `searchless-uci` console script of this environment."""
    path = pathlib.Path(sys.executable).parent / "searchless-uci"
    if not path.exists():
        pytest.fail(f"{path} is missing: `make setup` installs the package and its script")
    return str(path)
