"""The tree search (eval/agents/mcts.py) on random-initialised networks, where the tests are about
mechanics (exact terminal values decide whatever the network says): PUCT, batching, tree
reuse and search-contempt."""

import math

import chess
import numpy as np
import pytest

from core.game_end import terminal_value
from eval.agents.evaluators import LeafEvaluation
from eval.agents.mcts import Node, SearchLimit, contempt_index
from eval.agents.players import MctsAgent, NeuralAgent
from tests.eval.search_trees import (
    ENDGAME,
    MATE_IN_ONE,
    MIDDLEGAME,
    STALEMATE_TRAP,
    edge,
    searched,
    walk,
)

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
