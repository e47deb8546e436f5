"""A trained model as the players (the UCI engine, the web board) meet it: its short name, and
XLA's compiled batch shapes kept on disk between starts."""

from __future__ import annotations

import os


def label(path: str) -> str:
    """A run's name for a run dir or one of its checkpoint dirs."""
    parts = os.path.normpath(path).split(os.sep)
    if len(parts) >= 3 and parts[-1].isdigit() and parts[-2] == "checkpoints":
        return f"{parts[-3]}@{parts[-1]}"
    return parts[-1]


def xla_cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "searchless-chess", "xla")


def keep_compilations_on_disk() -> None:
    """Keeps XLA's compiled batch shapes in xla_cache_dir() (JAX's persistent compilation
    cache), so an engine started again for the same architecture (lichess-bot starts one
    per game, tournament managers restart them) reads them back instead of compiling: the
    warm-up then costs a fraction. A cache the user set (JAX_COMPILATION_CACHE_DIR) or
    turned off (JAX_ENABLE_COMPILATION_CACHE=false) is left alone."""
    import jax  # only with a model: see NeuralFactory._load

    if jax.config.jax_compilation_cache_dir or not jax.config.jax_enable_compilation_cache:
        return
    directory = xla_cache_dir()
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError:
        return  # nowhere to keep them: every start compiles
    jax.config.update("jax_compilation_cache_dir", directory)
    # JAX keeps only compilations slower than 1 s by default; each shape counts here.
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
