"""The tree search (eval/mcts.py) on real networks: random-initialised ones where the test is
about mechanics (exact terminal values decide whatever the network says), a trained one for
the agent in the evaluation CLIs."""

import gc
import json
import math
import pathlib
import threading
import time
import tracemalloc

import chess
import jax
import numpy as np
import pytest

from core.game_end import terminal_value
from eval.engines import MctsAgent, NeuralAgent, make_agent, parse_agent_spec
from eval.evaluators import LeafEvaluation, PolicyValueEvaluator, make_evaluator
from eval.mcts import NODE_BYTES, Node, SearchConfig, SearchLimit, TreeSearch, contempt_index
from eval.puzzles import main as puzzles_main
from eval.tournament import main as tournament_main
from model.config import Config
from model.predictor import Predictor
from model.transformer import init_params

MATE_IN_ONE = "6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1"  # Ra8#
STALEMATE_TRAP = "7k/8/6Q1/8/8/8/8/K7 w - - 0 1"  # Qf7 stalemates
MIDDLEGAME = "r1bqkb1r/pppp1ppp/2n2n2/4p3/2B1P3/5N2/PPPP1PPP/RNBQK2R w KQkq - 4 4"
SAMPLE_PUZZLES = pathlib.Path(__file__).resolve().parents[2] / "data" / "sample" / "puzzles.csv"
ENDGAME = "8/8/8/4k3/8/8/4P3/4K3 w - - 0 1"  # few moves: nodes get visited often


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


def searched(evaluator, board, sims, **config) -> TreeSearch:
    search = TreeSearch(evaluator, SearchConfig(**config), np.random.default_rng(7))
    search.set_position(board)
    search.run(SearchLimit(sims=sims))
    return search


def walk(node: Node, depth: int = 0):
    """(node, depth) of every evaluated node of the tree, parents first."""
    yield node, depth
    if node.expanded:
        for child in node.children:
            if child is not None and child.expanded:
                yield from walk(child, depth + 1)


def edge(search: TreeSearch, uci: str) -> tuple[int, float, Node]:
    """The root move's visits, mean value and child node."""
    root = search.root
    i = root.moves.index(chess.Move.from_uci(uci))
    return int(root.visits[i]), root.value_sums[i] / max(1, root.visits[i]), root.children[i]


# --- PUCT: exact terminal values --------------------------------------------------------


@pytest.mark.parametrize("name", ["av", "sv", "bc+sv"])
@pytest.mark.parametrize("batch", [1, 8])
def test_visits_concentrate_on_a_forced_mate(nets, name, batch):
    search = searched(nets[1][name], chess.Board(MATE_IN_ONE), sims=60, batch=batch)
    visits, value, child = edge(search, "a1a8")
    assert search.best_move().uci() == "a1a8"
    assert visits > 30  # most of the 60 playouts, whatever the random network thinks
    assert value == 1.0 and child.terminal and child.value == 0.0  # mate, exactly
    assert search.info().win_prob == 1.0 and search.info().pv[0].uci() == "a1a8"


def test_stalemate_and_fifty_moves_are_draws_exactly(nets):
    # A high cpuct makes every root move's first visit come early: each gets looked at.
    search = searched(nets[1]["av"], chess.Board(STALEMATE_TRAP), sims=80, cpuct=4.0)
    assert (search.root.visits > 0).all()
    visits, value, child = edge(search, "g6f7")
    assert child.terminal and child.value == 0.5 and value == 0.5
    # One move before the fifty-move rule: every quiet move draws, so the root value is 0.5.
    fifty = searched(nets[1]["sv"], chess.Board("8/8/4k3/8/8/3RK3/8/8 w - - 99 80"), 40)
    visited = [node for node in fifty.root.children if node is not None]
    assert visited and all(node.terminal and node.value == 0.5 for node in visited)
    assert fifty.info().win_prob == 0.5


def test_repetition_uses_the_games_move_stack(nets):
    board = chess.Board()
    for san in "Nf3 Nf6 Ng1 Ng8 Nf3 Nf6 Ng1".split():
        board.push_san(san)
    search = searched(nets[1]["bc+sv"], board, sims=80, cpuct=4.0)
    visits, value, child = edge(search, "f6g8")  # the start position, a third time
    assert visits > 0 and child.terminal and value == 0.5
    # From the bare FEN (no history) the same move repeats nothing.
    fresh = searched(nets[1]["bc+sv"], chess.Board(board.fen()), sims=80, cpuct=4.0)
    assert not edge(fresh, "f6g8")[2].terminal


def test_every_terminal_leaf_is_scored_by_the_rules(nets):
    board = chess.Board(STALEMATE_TRAP)
    search = searched(nets[1]["sv"], board, sims=60, batch=4)

    def check(node: Node, board: chess.Board):
        for move, child, n, w in zip(
            node.moves, node.children, node.visits, node.value_sums, strict=True
        ):
            if child is None:
                continue
            board.push(move)
            if child.terminal:
                assert child.value == terminal_value(board)
                assert w == n * (1.0 - child.value)  # every visit backed up the exact value
            else:
                assert terminal_value(board) is None
                check(child, board)
            board.pop()

    check(search.root, board)


def test_sims_zero_plays_the_models_own_move(nets):
    predictors, evaluators = nets
    boards = [chess.Board(), chess.Board(MIDDLEGAME), chess.Board(STALEMATE_TRAP)]
    for target, name in (("av", "av"), ("sv", "sv"), ("bc", "bc+sv")):
        agent = MctsAgent(evaluators[name], sims=0)
        neural = NeuralAgent(predictors[target], repetition_workaround=False)
        for board in boards:
            assert agent.choose_move(board) == neural.choose_move(board)
            assert agent.search.info().playouts == 0


# --- batching ---------------------------------------------------------------------------


class ReferenceSearch:
    """The textbook sequential algorithm, one recursive playout at a time, written plainly
    with Python lists: what TreeSearch must equal with batch 1."""

    def __init__(self, evaluator, cpuct, contempt, rng):
        self.evaluator, self.cpuct, self.contempt, self.rng = evaluator, cpuct, contempt, rng

    def node(self, board):
        value = terminal_value(board)
        if value is not None:
            return {"terminal": True, "value": value}
        [e] = self.evaluator.evaluate([board.copy(stack=False)])
        init = list(e.move_values) if e.move_values is not None else [e.value] * len(e.moves)
        count = len(e.moves)
        return {
            "terminal": False,
            "value": e.value,
            "moves": list(e.moves),
            "priors": [float(p) for p in e.priors],
            "init": [float(q) for q in init],
            "n": [0] * count,
            "w": [0.0] * count,
            "children": [None] * count,
            "frozen": None,
        }

    def select(self, node, opponent):
        if opponent and self.contempt is not None:
            if node["frozen"] is None and sum(node["n"]) >= self.contempt:
                node["frozen"] = list(node["n"])
            if node["frozen"] is not None:
                r, total, seen = self.rng.random(), sum(node["frozen"]), 0
                for i, count in enumerate(node["frozen"]):
                    seen += count
                    if seen / total > r:
                        return i
        root_n = math.sqrt(1 + sum(node["n"]))
        scores = []
        for n, w, p, q in zip(node["n"], node["w"], node["priors"], node["init"], strict=True):
            scores.append((w / n if n else q) + self.cpuct * root_n * p / (1 + n))
        return scores.index(max(scores))

    def playout(self, node, board, root_turn) -> float:
        """One playout below `node`; its value for the side to move at `node`."""
        if node["terminal"]:
            return node["value"]
        i = self.select(node, board.turn != root_turn)
        board.push(node["moves"][i])
        if node["children"][i] is None:
            node["children"][i] = child = self.node(board)
            child_value = child["value"]
        else:
            child_value = self.playout(node["children"][i], board, root_turn)
        board.pop()
        node["n"][i] += 1
        node["w"][i] += 1.0 - child_value
        return 1.0 - child_value

    def run(self, board, sims):
        root = self.node(board)
        for _ in range(sims):
            self.playout(root, board, board.turn)
        return root


def same_tree(node: Node, ref: dict) -> None:
    assert node.terminal == ref["terminal"] and node.value == ref["value"]
    if node.terminal:
        return
    assert list(node.moves) == ref["moves"]
    assert node.visits.tolist() == ref["n"]
    assert node.value_sums.tolist() == ref["w"]  # bit for bit: same sums in the same order
    assert (node.frozen is None) == (ref["frozen"] is None)
    if node.frozen is not None:
        assert node.frozen.tolist() == ref["frozen"]
    for child, ref_child in zip(node.children, ref["children"], strict=True):
        assert (child is None) == (ref_child is None)
        if child is not None:
            same_tree(child, ref_child)


@pytest.mark.parametrize(
    ("name", "contempt"), [("av", None), ("bc+sv", None), ("av", 3), ("bc+sv", 2)]
)
def test_batch_one_is_the_sequential_algorithm(nets, name, contempt):
    evaluator = nets[1][name]
    board = chess.Board(ENDGAME if contempt else MIDDLEGAME)
    search = searched(evaluator, board, sims=40, contempt=contempt)
    ref = ReferenceSearch(evaluator, 1.5, contempt, np.random.default_rng(7)).run(board, 40)
    same_tree(search.root, ref)
    assert search.root.total_visits == 41
    if contempt:  # the comparison covered frozen nodes
        assert any(node.frozen is not None for node, _ in walk(search.root))


def test_batched_search_keeps_its_books(nets):
    search = searched(nets[1]["av"], chess.Board(MIDDLEGAME), sims=50, batch=8)
    assert search.info().playouts == 50 and search.root.total_visits == 51
    deeper = 0
    for node, _ in walk(search.root):
        assert not node.in_flight.any()  # every virtual loss was taken back
        for child, n in zip(node.children, node.visits, strict=True):
            if child is not None and child.expanded:
                assert n == child.total_visits  # a node's visits are its playouts
                deeper += 1
    assert deeper > 8  # the batches went past the root's children
    assert search.info().seldepth >= 2
    stats = search.root_moves()
    assert stats[0].move == search.best_move() == search.info().pv[0]
    assert sum(s.visits for s in stats) == 50
    assert [s.visits for s in stats] == sorted((s.visits for s in stats), reverse=True)


# --- tree reuse -------------------------------------------------------------------------


@pytest.mark.parametrize("contempt", [None, 4])
def test_the_tree_is_reused_along_the_game(nets, contempt):
    evaluator = nets[1]["av"]
    board = chess.Board(MIDDLEGAME)
    search = searched(evaluator, board, sims=40, contempt=contempt)
    ours = search.root.best_index()
    reply_node = search.root.children[ours]
    theirs = reply_node.best_index()
    kept = reply_node.children[theirs]
    assert kept is not None and kept.expanded
    kept_visits = kept.total_visits

    odd = board.copy()
    odd.push(search.root.moves[ours])
    two = odd.copy()
    two.push(reply_node.moves[theirs])
    if contempt is None:  # the opponent's turn: PUCT's tree serves both sides
        assert search.set_position(odd) and search.root is reply_node
    else:  # search-contempt's tree is one-sided
        other = searched(evaluator, board, sims=40, contempt=contempt)
        assert not other.set_position(odd)
    assert search.set_position(two) and search.root is kept
    search.run(SearchLimit(sims=10))
    assert search.root.total_visits == kept_visits + 10
    # Another game (or a take-back) starts afresh.
    assert not search.set_position(chess.Board(MIDDLEGAME))
    assert search.root.total_visits == 0


def test_the_agent_reuses_its_tree_until_a_new_game(nets):
    agent = MctsAgent(nets[1]["sv"], sims=12)
    board = chess.Board(MIDDLEGAME)
    board.push(agent.choose_move(board))
    board.push(next(iter(board.legal_moves)))
    agent.choose_move(board)
    agent.new_game()
    assert agent.search.root is None
    agent.choose_move(board)
    assert not agent.search.reused
    no_reuse = MctsAgent(nets[1]["sv"], sims=12, reuse=False)
    no_reuse.choose_move(board)
    no_reuse.choose_move(board)
    assert not no_reuse.search.reused


# --- search-contempt --------------------------------------------------------------------


def node_with(visits: list[int]) -> Node:
    node = Node()
    count = len(visits)
    moves = tuple(chess.Move(chess.A2, chess.A3 + i) for i in range(count))  # labels only
    node.expand(LeafEvaluation(moves, np.full(count, 1 / count), 0.5, None))
    node.visits[:] = visits
    node.value_sums[:] = 0.5 * node.visits
    return node


def test_contempt_freezes_the_visit_counts_and_samples_them():
    rng = np.random.default_rng(0)
    node = node_with([2, 0, 1, 0])
    assert contempt_index(node, 4, rng) is None and node.frozen is None  # 3 visits: PUCT
    node.visits[0] += 1
    first = contempt_index(node, 4, rng)
    assert node.frozen.tolist() == [3, 0, 1, 0]
    draws = [first] + [contempt_index(node, 4, rng) for _ in range(3999)]
    node.visits[:] = [0, 50, 0, 50]  # later visits do not move the frozen distribution
    draws += [contempt_index(node, 4, rng) for _ in range(4000)]
    counts = np.bincount(draws, minlength=4) / len(draws)
    assert counts[1] == counts[3] == 0  # never a move the first N_scl visits skipped
    assert counts[0] == pytest.approx(0.75, abs=0.02)
    assert counts[2] == pytest.approx(0.25, abs=0.02)


def test_contempt_freezes_opponent_nodes_only(nets):
    n_scl = 3
    search = searched(nets[1]["av"], chess.Board(ENDGAME), sims=80, contempt=n_scl)
    frozen = 0
    for node, depth in walk(search.root):
        total = int(node.visits.sum())
        if depth % 2 == 0:  # the root player's nodes: PUCT however often visited
            assert node.frozen is None
            continue
        if total > n_scl:  # a playout went through after the N_scl-th: it was frozen
            assert node.frozen is not None
        if node.frozen is not None:
            frozen += 1
            assert node.frozen.sum() == n_scl  # frozen at exactly N_scl visits (batch 1)
            # Later playouts only went where the frozen distribution puts weight.
            assert (node.visits[node.frozen == 0] == 0).all()
            assert (node.visits >= node.frozen).all()
    assert search.root.visits.sum() == 80 > n_scl
    assert frozen >= 2


def test_contempt_beyond_the_budget_is_puct(nets):
    board = chess.Board(ENDGAME)
    puct = searched(nets[1]["av"], board, sims=30)
    never = searched(nets[1]["av"], board, sims=30, contempt=10**9)
    # Exact on purpose: the same network values summed in the same order (IEEE-754 additions
    # are correctly rounded, so the same bits on every machine).
    for (a, _), (b, _) in zip(walk(puct.root), walk(never.root), strict=True):
        assert a.visits.tolist() == b.visits.tolist()
        assert a.value_sums.tolist() == b.value_sums.tolist()


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
