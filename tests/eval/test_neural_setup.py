"""The front ends' one source of defaults and of the policy + value + search assembly
(eval/agents/neural_setup.py): the UCI engine's options, the web board's models and settings
and the Elo ladder's players all take theirs from it; and the pair it builds searches with the
committed models (models/cpu, a BC policy with a value head of its own, and models/cpu-av,
an AV model that can be named as its value model)."""

from __future__ import annotations

import ast
import pathlib

import chess
import pytest

from eval.agents.evaluators import DEFAULT_PRIOR_TEMPERATURE
from eval.agents.mcts import DEFAULT_CPUCT, DEFAULT_SIMS, SearchConfig, SearchLimit, max_nodes_for
from eval.agents.model_files import label
from eval.agents.neural_setup import (
    DEFAULT_MODEL,
    DEFAULT_SEARCH,
    DEFAULT_SEARCH_BATCH,
    ModelPair,
    SearchSettings,
)
from eval.agents.players import MctsAgent
from eval.agents.specs import agent_arguments, parse_agent_spec
from eval.elo.ladder import DEFAULT_MODELS
from eval.uci.options import UciOptions, option_lines
from eval.web.__main__ import parse_args
from eval.web.api import WebSettings
from eval.web.models import ModelStore

ROOT = pathlib.Path(__file__).resolve().parents[2]
HAVE_MODELS = all(
    (ROOT / path / "checkpoints").is_dir() for path in ("models/cpu", "models/cpu-av")
)
needs_models = pytest.mark.skipif(not HAVE_MODELS, reason="models/cpu(-av) not in this checkout")


def test_the_search_defaults_are_the_searchs_own_but_the_batch():
    assert DEFAULT_SEARCH == SearchSettings(
        DEFAULT_CPUCT, DEFAULT_SEARCH_BATCH, None, DEFAULT_PRIOR_TEMPERATURE, None
    )
    assert DEFAULT_SEARCH.config() == SearchConfig(cpuct=DEFAULT_CPUCT, batch=DEFAULT_SEARCH_BATCH)


def test_the_uci_engines_defaults_are_the_modules():
    options = UciOptions()
    assert options.weights == DEFAULT_MODEL
    assert options.value_weights == ""  # models/cpu values with its own head
    assert (options.search_batch, options.cpuct, options.prior_temperature) == (
        DEFAULT_SEARCH.batch,
        DEFAULT_SEARCH.cpuct,
        DEFAULT_SEARCH.prior_temperature,
    )
    lines = option_lines(options)  # what `uci` announces
    assert f"option name WeightsFile type string default {DEFAULT_MODEL}" in lines
    assert (
        f"option name SearchBatch type spin default {DEFAULT_SEARCH_BATCH} min 1 max 256" in lines
    )


def test_the_uci_options_search_as_they_say():
    options = UciOptions(cpuct=2.5, search_batch=4, search_contempt=0, hash_mb=1)
    assert options.search_settings() == SearchSettings(
        2.5, 4, None, DEFAULT_PRIOR_TEMPERATURE, max_nodes_for(1)
    )
    assert UciOptions(search_contempt=5).search_settings().contempt == 5


@needs_models
def test_the_web_boards_defaults_are_the_modules(tmp_path):
    store = ModelStore.create(None, None, str(tmp_path))  # found in the checkout
    assert store.models[store.default_model].path == str(ROOT / DEFAULT_MODEL)
    # No value model beside it: models/cpu values with its own head.
    assert (store.default_model, store.default_value) == (label(DEFAULT_MODEL), None)
    assert store.value_model(store.default_model, None) is None
    named = ModelStore.create(DEFAULT_MODEL, "models/cpu-av", str(tmp_path))
    assert named.default_value == "cpu-av"  # a value model named: beside the policy
    assert WebSettings().search_batch == DEFAULT_SEARCH.batch
    assert parse_args([]).search_batch == DEFAULT_SEARCH.batch


def test_the_ladders_default_players_are_the_modules():
    neural, mcts = (parse_agent_spec(spec) for spec in DEFAULT_MODELS)
    assert (neural.kind, neural.options["path"]) == ("neural", DEFAULT_MODEL)
    arguments = agent_arguments(mcts, engine_path=None)
    assert (arguments["path"], arguments["value_path"]) == (DEFAULT_MODEL, None)
    assert arguments["config"] == SearchConfig(batch=DEFAULT_SEARCH.batch)
    assert arguments["sims"] == DEFAULT_SIMS


def test_the_web_board_and_the_ladder_take_no_defaults_from_the_uci_engine():
    for module in ("eval/web/__main__.py", "eval/web/api.py", "eval/web/models.py"):
        imported = _imported_modules(ROOT / module)
        assert "eval.uci.options" not in imported, module
    assert not any(
        name.startswith("eval.uci") for name in _imported_modules(ROOT / "eval/elo/ladder.py")
    )


def _imported_modules(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}


@pytest.fixture(scope="module")
def pair():
    if not HAVE_MODELS:
        pytest.skip("models/cpu(-av) not in this checkout")
    return ModelPair.load(str(ROOT / DEFAULT_MODEL), str(ROOT / "models/cpu-av"))


def test_a_policy_searches_with_a_value_model_named_beside_it(pair):
    search = pair.search(SearchSettings(batch=2))
    assert search.config == SearchConfig(batch=2) and search.evaluator.target == "bc+av"
    board = chess.Board()
    search.set_position(board)
    search.run(SearchLimit(sims=4))
    assert board.is_legal(search.best_move())


def test_a_bc_policy_searches_alone_only_with_a_value_head_of_its_own(pair, tiny_bc_run):
    # models/cpu carries a value head beside its policy: alone, it is its own value model.
    alone = ModelPair(pair.policy).search(SearchSettings(batch=2))
    assert alone.evaluator.target == "bc+value"
    alone.set_position(chess.Board())
    alone.run(SearchLimit(sims=4))
    assert chess.Board().is_legal(alone.best_move())
    # A BC policy without one cannot search alone.
    plain = ModelPair.load(str(tiny_bc_run))
    with pytest.raises(ValueError, match="a BC model needs a value model to search"):
        plain.search()
    with pytest.raises(ValueError, match="goes with a BC policy"):
        ModelPair(pair.value, pair.value).evaluator()


@needs_models
def test_the_mcts_agent_is_built_on_the_pair():
    agent = MctsAgent.from_checkpoint(str(ROOT / DEFAULT_MODEL), None, sims=2, name="m")
    with agent:
        assert agent.target == "bc+value" and agent.search.config == SearchConfig()
        board = chess.Board()
        assert board.is_legal(agent.choose_move(board))
