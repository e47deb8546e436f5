"""Positions and tree walks shared by the tree-search tests (eval/agents/mcts.py)."""

import chess
import numpy as np

from eval.agents.mcts import Node, SearchConfig, SearchLimit, TreeSearch

MATE_IN_ONE = "6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1"  # Ra8#
STALEMATE_TRAP = "7k/8/6Q1/8/8/8/8/K7 w - - 0 1"  # Qf7 stalemates
MIDDLEGAME = "r1bqkb1r/pppp1ppp/2n2n2/4p3/2B1P3/5N2/PPPP1PPP/RNBQK2R w KQkq - 4 4"
ENDGAME = "8/8/8/4k3/8/8/4P3/4K3 w - - 0 1"  # few moves: nodes get visited often


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
