"""The tree search (eval/agents/mcts.py): agent specs and evaluator pairing, what ends a search
(deadlines, stop events, the node bound), and the agent in the evaluation CLIs (a model
trained here)."""

import gc
import json
import pathlib
import threading
import time
import tracemalloc

import chess
import numpy as np
import pytest

from eval.agents.evaluators import PolicyValueEvaluator, make_evaluator
from eval.agents.mcts import NODE_BYTES, SearchConfig, SearchLimit, TreeSearch
from eval.agents.players import MctsAgent, make_agent
from eval.agents.specs import parse_agent_spec
from eval.elo.tournament import main as tournament_main
from eval.puzzles import main as puzzles_main
from tests.eval.search_trees import MIDDLEGAME, searched, walk

SAMPLE_PUZZLES = pathlib.Path(__file__).resolve().parents[2] / "data" / "sample" / "puzzles.csv"


# --- specs and configuration ------------------------------------------------------------


def test_mcts_specs_are_checked_before_loading():
    spec = parse_agent_spec("mcts:runs/x,sims=64,batch=8,contempt=5,cpuct=2,value=runs/v")
    assert spec.options["path"] == "runs/x" and spec.options["value"] == "runs/v"
    for bad, message in (
        ("mcts:", "needs a checkpoint"),
        ("mcts:runs/x,batch=0", "batch must be >= 1"),
        ("mcts:runs/x,contempt=0", "contempt"),
        ("mcts:runs/x,cpuct=-1", "cpuct"),
        ("mcts:runs/x,sims=-1", "sims"),
        ("mcts:runs/x,time=0", "time"),
        ("mcts:runs/x,sims=ten", "not a int"),
        ("mcts:runs/x,prior_temperature=0", "prior_temperature"),
        ("mcts:runs/x,depth=3", "unknown option"),
    ):
        with pytest.raises(ValueError, match=message):
            parse_agent_spec(bad)


def test_evaluators_pair_the_models_correctly(nets):
    predictors, _ = nets
    with pytest.raises(ValueError, match="needs a value model"):
        make_evaluator(predictors["bc"])
    with pytest.raises(ValueError, match="goes with a BC policy"):
        make_evaluator(predictors["av"], predictors["sv"])
    with pytest.raises(ValueError, match="must be AV or SV"):
        PolicyValueEvaluator(predictors["bc"], predictors["bc"])
    [e] = make_evaluator(predictors["av"], prior_temperature=0.05).evaluate([chess.Board()])
    assert len(e.moves) == 20 and e.priors.sum() == pytest.approx(1.0)
    assert e.value == e.move_values.max()
    assert int(np.argmax(e.priors)) == int(np.argmax(e.move_values))


def test_a_deadline_or_a_stop_event_ends_the_search(nets):
    search = TreeSearch(nets[1]["sv"], SearchConfig(batch=2))
    search.set_position(chess.Board(MIDDLEGAME))
    stop = threading.Event()
    seen = []

    def on_info(info):
        seen.append(info)
        if info.playouts >= 6:
            stop.set()

    info = search.run(SearchLimit(stop=stop), on_info=on_info, info_every=0.0)
    assert stop.is_set() and 6 <= info.playouts <= 8 and seen[-1] == info
    assert info.nodes == search.root.total_visits and info.nps > 0 and info.pv
    start = time.monotonic()
    info = search.run(SearchLimit(deadline=time.monotonic() + 0.5))
    assert 0.5 <= time.monotonic() - start < 30 and info.playouts > 0
    with pytest.raises(ValueError, match="needs sims"):
        SearchLimit()
    search.set_position(chess.Board("7k/5Q2/6K1/8/8/8/8/8 b - - 0 1"))
    with pytest.raises(ValueError, match="game is over"):
        search.run(SearchLimit(sims=1))


def test_max_nodes_bounds_the_tree_and_its_memory(nets):
    """A full tree stops the search (however long it may run), and each node takes less
    than NODE_BYTES, so that Hash MB bound the memory."""
    searched(nets[1]["bc+sv"], chess.Board(MIDDLEGAME), 40, batch=4)  # compiled, moves made
    search = TreeSearch(nets[1]["bc+sv"], SearchConfig(batch=4, max_nodes=120))
    search.set_position(chess.Board(MIDDLEGAME))
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        info = search.run(SearchLimit(stop=threading.Event()))  # ends by the bound alone
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert search.full and 120 <= search.nodes < 120 + 4, search.nodes
    assert search.nodes == sum(1 for _ in walk(search.root))
    assert grown < (search.nodes - 2) * NODE_BYTES, grown / search.nodes
    assert info.playouts > 0 and search.best_move() in chess.Board(MIDDLEGAME).legal_moves
    # The subtree kept for the next move is counted anew: it has room to grow again.
    board = chess.Board(MIDDLEGAME)
    board.push(search.best_move())
    board.push(search.expected_reply(board.move_stack[-1]))
    assert search.set_position(board) and 0 < search.nodes < 120
    assert search.run(SearchLimit(sims=4)).playouts == 4


# --- the agent in the evaluation CLIs (a model trained here) ----------------------------


@pytest.mark.slow
def test_mcts_agent_in_the_puzzle_and_tournament_clis(trained_run, tmp_path, capsys):
    spec = f"mcts:{trained_run},sims=4,batch=2,name=search"
    with make_agent(spec) as agent:
        assert isinstance(agent, MctsAgent) and agent.name == "search"
        assert agent.target == "av"
    puzzles = tmp_path / "puzzles.csv"
    puzzles.write_text(
        "PuzzleId,FEN,Moves,Rating\n"
        "a,6k1/5ppp/8/8/8/8/5PPP/R5K1 b - - 0 1,g8h8 a1a8,600\n"
        "b,6k1/5ppp/8/8/8/8/5PPP/R5K1 b - - 0 1,h7h6 a1a8,700\n"
    )
    out = tmp_path / "puzzles.json"
    argv = ["--agent", spec, "--puzzles", str(puzzles), "--out", str(out), "--quiet"]
    assert puzzles_main(argv) == 0
    [result] = json.loads(out.read_text())["agents"]
    assert result["agent"] == "search" and result["total"] == 2
    argv = ["--agents", f"mcts:{trained_run},sims=2,name=search", "random", "--games", "2"]
    argv += ["--max-plies", "6", "--out", str(tmp_path / "t"), "--quiet"]
    assert tournament_main(argv) == 0
    summary = json.loads((tmp_path / "t" / "tournament.json").read_text())
    assert summary["games"] == 2 and summary["agents"] == ["search", "random"]


def test_a_missing_checkpoint_is_one_line_not_a_traceback(tmp_path, capsys):
    puzzles = str(SAMPLE_PUZZLES)
    missing = tmp_path / "no-run"
    argv = ["--agent", f"mcts:{missing},sims=4", "--puzzles", puzzles, "--num", "1"]
    assert puzzles_main([*argv, "--out", str(tmp_path / "p.json"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"error: agent 'mcts:{missing},sims=4'" in err and "Traceback" not in err
    argv = ["--agents", f"mcts:{missing}", "random", "--games", "2", "--out", str(tmp_path)]
    assert tournament_main([*argv, "--quiet"]) == 2
    assert "no checkpoints" in capsys.readouterr().err


class SlowEvaluator:
    """A real evaluator whose every call takes `delay` seconds more (a slow network)."""

    def __init__(self, inner, delay: float):
        self.inner, self.delay, self.target = inner, delay, inner.target

    def evaluate(self, boards):
        time.sleep(self.delay)
        return self.inner.evaluate(boards)


def test_within_deadline_starts_no_batch_that_would_end_past_it(nets):
    # Root evaluation 1 s, then batches of 1 s against a deadline 2.5 s away: the first
    # batch ends at ~2 s; a second would end at ~3 s, past the deadline. Half a second on
    # each side, so that a loaded machine's slower network calls (~10 ms here) decide nothing.
    searched(nets[1]["av"], chess.Board(MIDDLEGAME), sims=4, batch=2)  # compiles the shapes
    evaluator = SlowEvaluator(nets[1]["av"], delay=1.0)
    playouts = {}
    for within in (False, True):
        search = TreeSearch(evaluator, SearchConfig(batch=2))
        search.set_position(chess.Board(MIDDLEGAME))
        limit = SearchLimit(deadline=time.monotonic() + 2.5, within_deadline=within)
        playouts[within] = search.run(limit).playouts
    assert playouts == {False: 4, True: 2}
