"""The models the web board offers: the run dirs under the checkout's models/ plus the ones
named on the command line, each loaded once on first use and kept.

A model is named on the page and in the API by its label (`cpu`, `cpu-av`: the run dir's
name, as the UCI engine labels it), never by a path, so a request cannot make the server
read an arbitrary directory. Loading is done under a lock; network calls are not: each
request searches its own tree, and a policy's answer does not wait for another's search.
"""

from __future__ import annotations

import os
import threading
import time
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from core.targets import target_kind
from eval.agents.model_files import keep_compilations_on_disk, label
from eval.agents.neural_setup import DEFAULT_MODEL, load_predictor
from runtime.paths import project_root, resolve_path

MODELS_DIR = "models"
# A value model of "none": a BC policy then uses its own value head, and without one shows
# probabilities only and cannot search.
NO_VALUE = "none"


class ModelError(Exception):
    """A model that cannot serve; `status` is the HTTP status the API answers with."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class ModelInfo:
    name: str  # the label the page and the API use
    path: str  # absolute run dir (or checkpoint dir)
    target: str  # "bc", "av", "sv"; "" when its config.toml does not say (known once loaded)

    @property
    def kind(self) -> str:
        """What its move scores are: a policy's probabilities or a value model's win chances."""
        return "win" if self.target and target_kind(self.target).value_head else "prob"

    def as_json(self) -> dict:
        return {"name": self.name, "target": self.target, "kind": self.kind}


def read_target(path: str) -> str:
    """The training target its config.toml names, without loading the checkpoint."""
    try:
        with open(os.path.join(path, "config.toml"), "rb") as f:
            return str(tomllib.load(f).get("train", {}).get("target", ""))
    except (OSError, tomllib.TOMLDecodeError):
        return ""


def is_run_dir(path: str) -> bool:
    return os.path.isdir(os.path.join(path, "checkpoints"))


def discover(directory: str) -> list[ModelInfo]:
    """The run dirs directly under `directory`, by name."""
    if not os.path.isdir(directory):
        return []
    found = []
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if is_run_dir(path):
            found.append(ModelInfo(name, os.path.abspath(path), read_target(path)))
    return found


def _resolved(given: str, start_dir: str, what: str) -> ModelInfo:
    resolved = resolve_path(given, start_dir)
    if resolved.path is None:
        raise ModelError(404, f"no {what}: {resolved.describe_missing()}")
    return ModelInfo(label(resolved.path), resolved.path, read_target(resolved.path))


WAIT_POLL_S = 0.1  # how often a search waiting for the compile asks whether to give up


@dataclass(frozen=True)
class Compiling:
    """The search's shapes of one model being compiled, a power of two of boards per call at
    a time: since when, and how long in all as the steps done so far foretell."""

    name: str
    started: float  # time.monotonic()
    expected_s: float | None  # None before the first step is done

    def describe(self) -> str:
        elapsed = time.monotonic() - self.started
        left = None if self.expected_s is None else self.expected_s - elapsed
        when = f"about {left:.0f} s left" if left and left >= 1 else f"{elapsed:.0f} s so far"
        return f"compiling the search for {self.name}, once per start: {when}"


def compile_steps(boards: int) -> list[int]:
    """The boards per call each step compiles up to: 2, 4, ... then `boards`."""
    return [min(1 << k, boards) for k in range(1, max(0, boards - 1).bit_length() + 1)]


@dataclass
class ModelStore:
    """The offered models, the defaults the page starts with, and the loaded predictors."""

    models: dict[str, ModelInfo]
    default_model: str
    default_value: str | None  # the value model beside a BC policy; None: none
    _load_lock: threading.RLock = field(default_factory=threading.RLock)
    # Compiling the search's shapes takes the first search half a minute or more where XLA's
    # disk cache is empty: done in the background at the start, under a lock of its own so
    # the page can analyse meanwhile, and waited for by a search (which can give up).
    _warm_lock: threading.Lock = field(default_factory=threading.Lock)
    _predictors: dict[str, object] = field(default_factory=dict)
    _warmed: dict[str, int] = field(default_factory=dict)  # name -> boards per call compiled
    _compiling: Compiling | None = None

    @classmethod
    def create(cls, model: str | None, value: str | None, start_dir: str) -> ModelStore:
        """The store for `--model` (default models/cpu) and `--value` (default none: a BC
        policy with a value head of its own, as models/cpu is, values with it; "none" for
        none). ModelError naming the path when either is missing."""
        chosen = _resolved(model or DEFAULT_MODEL, start_dir, "model")
        value_path = "" if value in (None, NO_VALUE) else value
        companion = _resolved(value_path, start_dir, "value model") if value_path else None
        root = project_root()
        offered = discover(os.path.join(root or start_dir, MODELS_DIR))
        models = {info.name: info for info in offered}
        for info in (chosen, companion):
            if info is not None:
                models.setdefault(info.name, info)
        return cls(models, chosen.name, companion.name if companion else None)

    def info(self, name: str) -> ModelInfo:
        if name not in self.models:
            known = ", ".join(sorted(self.models)) or "none"
            raise ModelError(404, f"unknown model {name!r}; the models here: {known}")
        return self.models[name]

    def predictor(self, name: str):
        """The loaded model.predictor.Predictor of `name` (loaded and warmed up once)."""
        loaded = self._predictors.get(name)
        if loaded is not None:  # no lock: a model loading does not stall the loaded ones
            return loaded
        info = self.info(name)
        with self._load_lock:
            if name not in self._predictors:
                # JAX only once a model is wanted: the page and the errors need none.
                keep_compilations_on_disk()
                try:
                    predictor = load_predictor(info.path)
                    predictor.warm_up(max_boards=1)
                # A checkpoint can fail to load in as many ways as orbax and JAX have
                # errors; the server reports which and goes on.
                except Exception as e:
                    raise ModelError(
                        500, f"cannot load model {name!r} ({info.path}): {type(e).__name__}: {e}"
                    ) from None
                self._predictors[name] = predictor
                self._warmed[name] = 1
                self.models[name] = ModelInfo(info.name, info.path, predictor.config.target)
            return self._predictors[name]

    def warm_up(
        self,
        names: str | Sequence[str],
        boards: int,
        give_up: Callable[[], bool] = lambda: False,
    ) -> bool:
        """Compiles the shapes of `boards` boards per network call (the search's batch) of
        the model(s) `names`; while another thread compiles, waits for it unless `give_up()`
        turns true (then returns False)."""
        names = [names] if isinstance(names, str) else list(names)
        predictors = {name: self.predictor(name) for name in names}
        if all(self._warmed.get(name, 1) >= boards for name in names):
            return True
        while not self._warm_lock.acquire(timeout=WAIT_POLL_S):
            if give_up():
                return False
        try:
            self._compile(predictors, boards)
        finally:
            self._compiling = None
            self._warm_lock.release()
        return True

    def _compile(self, predictors: dict[str, object], boards: int) -> None:
        """The shapes of up to `boards` boards per call, a power of two at a time and model
        by model, so that the time the first steps took foretells the rest."""
        started = time.monotonic()
        steps = [
            (name, step)
            for name in predictors
            for step in compile_steps(boards)
            if step > self._warmed.get(name, 1)
        ]
        label = " and ".join(dict.fromkeys(name for name, _ in steps))
        for done, (name, step) in enumerate(steps):
            elapsed = time.monotonic() - started
            expected = elapsed / done * len(steps) if done else None
            self._compiling = Compiling(label, started, expected)
            predictors[name].warm_up(max_boards=step)
            self._warmed[name] = step

    def waiting_for(self) -> str | None:
        """What a search waits for now, in words (None: nothing)."""
        compiling = self._compiling
        return None if compiling is None else compiling.describe()

    def value_model(self, model: str, value: str | None) -> str | None:
        """The value model to pair with `model` for a request naming `value` (None: the
        default; "none": none, so that a policy with a value head uses its own). None beside an
        AV or SV model, which values moves itself."""
        if target_kind(self.models[model].target or "bc").value_head:
            return None
        name = self.default_value if value is None else value
        if name in (None, "", NO_VALUE):
            return None
        predictor = self.predictor(name)  # loads it and so learns its target
        own = getattr(predictor, "values_boards", False)  # a policy with a value head
        if not (target_kind(self.models[name].target).value_head or own):
            raise ModelError(400, f"value model {name!r} is a BC model, not an AV or SV one")
        return name
