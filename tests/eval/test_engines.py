import os
import signal
import warnings

import chess
import numpy as np
import pytest

from core.actions import legal_actions
from core.engine_path import EngineNotFoundError
from eval.agents.base import Agent
from eval.agents.players import (
    GreedyAgent,
    RandomAgent,
    greedy_move,
    make_agent,
    material_balance,
    material_gain,
    pick_index,
    repetition_adjusted,
)
from eval.agents.specs import parse_agent_spec
from eval.agents.stockfish import (
    ELO_MOVE_TIME,
    EngineSettings,
    StockfishAgent,
    StockfishOracleAgent,
    engine_elo_range,
)

SCHOLAR = "r1bqkbnr/pppp1ppp/2n5/4p3/2B1P3/5Q2/PPPP1PPP/RNB1K1NR w KQkq - 2 4"  # Qxf7#
FOOL = "rnbqkbnr/pppp1ppp/8/4p3/6P1/5P2/PPPPP2P/RNBQKBNR b KQkq - 0 2"  # Qh4#
BACK_RANK = "6k1/5ppp/2p5/8/8/8/6PP/RR4K1 w - - 0 2"  # Ra8# and Rb8# both mate


def alive(pid: int) -> bool:
    return os.path.exists(f"/proc/{pid}")


# --- specs --------------------------------------------------------------------------------


def test_spec_parsing():
    assert parse_agent_spec("random").kind == "random"
    assert parse_agent_spec("random:seed=3").options == {"seed": "3"}
    spec = parse_agent_spec("stockfish:nodes=100000,threads=2")
    assert (spec.kind, spec.options) == ("stockfish", {"nodes": "100000", "threads": "2"})
    assert spec.label == "stockfish:nodes=100000,threads=2"
    assert parse_agent_spec("oracle:time=0.05,name=SF").label == "SF"
    spec = parse_agent_spec("neural:runs/small,temperature=0.5,ema=false")
    assert spec.options == {"path": "runs/small", "temperature": "0.5", "ema": "false"}
    assert parse_agent_spec("neural:path=runs/x").options["path"] == "runs/x"


@pytest.mark.parametrize(
    "text, message",
    [
        ("alphazero", "unknown kind"),
        ("random:sed=3", "unknown option 'sed'"),
        ("stockfish:nodes=1,nodes=2", "given twice"),
        ("stockfish:100", "not key=value"),
        ("neural", "needs a checkpoint"),
        ("neural:temperature=1", "needs a checkpoint"),
    ],
)
def test_bad_specs_name_the_problem(text, message):
    with pytest.raises(ValueError, match=message):
        parse_agent_spec(text)


@pytest.mark.parametrize(
    "text, message",
    [
        ("random:seed=x", "seed='x' is not a int"),
        ("stockfish:threads=2", "at least one of nodes, time and depth"),
        ("stockfish:nodes=-5", "must be positive"),
        ("oracle:time=fast", "time='fast' is not a float"),
        ("stockfish:nodes=10,skill=40", "skill"),
        ("stockfish:elo=strong", "elo='strong' is not a int"),
        ("stockfish:elo=1500,skill=3", "skill or elo, not both"),
        ("oracle:nodes=10,elo=1500", "unknown option 'elo'"),
    ],
)
def test_bad_values_fail_before_any_engine_starts(text, message):
    with pytest.raises(ValueError, match=message):
        make_agent(text)


def test_a_missing_engine_is_a_clear_error():
    with pytest.raises(EngineNotFoundError, match="/no/such/engine"):
        make_agent("stockfish:nodes=10,engine=/no/such/engine")


def test_random_spec_builds_a_seeded_agent():
    with make_agent("random:seed=3") as agent:
        assert isinstance(agent, RandomAgent) and isinstance(agent, Agent)
        assert agent.name == "random:seed=3"


# --- random -------------------------------------------------------------------------------


def play_random_game(agent, plies: int) -> list[str]:
    board = chess.Board()
    moves = []
    for _ in range(plies):
        if board.is_game_over():
            break
        move = agent.choose_move(board)
        assert move in board.legal_moves
        board.push(move)
        moves.append(move.uci())
    return moves


def test_random_agent_is_legal_and_reproducible():
    first = play_random_game(RandomAgent(seed=7), 60)
    assert first == play_random_game(RandomAgent(seed=7), 60)
    assert first != play_random_game(RandomAgent(seed=8), 60)
    with pytest.raises(ValueError, match="no legal move"):
        RandomAgent().choose_move(chess.Board(position_fen_after_mate()))


def position_fen_after_mate() -> str:
    board = chess.Board(SCHOLAR)
    board.push_uci("f3f7")
    return board.fen()


# --- greedy -------------------------------------------------------------------------------


def greedy(fen: str) -> str:
    return greedy_move(chess.Board(fen)).uci()


def test_greedy_mates_in_one_before_taking_material():
    # gxh3 or Nxh3 would win a rook; the quiet Ra8 mates.
    board = chess.Board("6k1/5ppp/8/6N1/8/7r/6PP/R5K1 w - - 0 1")
    assert max(material_gain(board, move) for move in board.legal_moves) == 5
    assert greedy(board.fen()) == "a1a8"
    # Both rooks mate: the first in action-space order (a1 before b1).
    assert greedy(BACK_RANK) == "a1a8"
    assert greedy(FOOL) == "d8h4"


def test_greedy_takes_the_most_material():
    # The knight on e4 can take a pawn (d6) or a rook (f6): the rook.
    assert greedy("4k3/8/3p1r2/8/4N3/8/8/K7 w - - 0 1") == "e4f6"
    # En passant counts the pawn it takes: the only gain on the board.
    assert greedy("4k3/8/8/3pP3/8/8/8/K7 w - d6 0 2") == "e5d6"
    # A queen promotion (+8) beats taking a rook (+5); with a capture it is +13.
    assert greedy("4k3/P7/8/8/8/8/1r6/K7 w - - 0 1") == "a7a8q"  # not Kxb2
    assert greedy("1r2k3/P7/8/8/8/8/8/K7 w - - 0 1") == "a7b8q"


def test_greedy_breaks_ties_in_action_order_and_is_an_agent():
    board = chess.Board()
    assert greedy_move(board).uci() == legal_actions(board)[0] == "b1a3"
    assert board.fen() == chess.STARTING_FEN  # the board is left as it was
    with make_agent("greedy") as agent:
        assert isinstance(agent, GreedyAgent) and isinstance(agent, Agent)
        assert agent.name == "greedy"
        assert agent.choose_move(chess.Board(SCHOLAR)).uci() == "f3f7"
    assert make_agent("greedy:name=floor").name == "floor"
    with pytest.raises(ValueError, match="unknown option 'seed'"):
        parse_agent_spec("greedy:seed=1")
    with pytest.raises(ValueError, match="no legal move"):
        GreedyAgent().choose_move(chess.Board(position_fen_after_mate()))


def test_material_gain_is_the_change_in_material_balance():
    agent = RandomAgent(seed=11)
    checked = 0
    for _ in range(6):
        agent.new_game()
        board = chess.Board()
        while not board.is_game_over() and len(board.move_stack) < 200:
            before = material_balance(board, board.turn)
            for move in board.legal_moves:
                board.push(move)
                after = material_balance(board, not board.turn)
                board.pop()
                assert material_gain(board, move) == after - before, (board.fen(), move)
                checked += 1
            board.push(agent.choose_move(board))
    assert checked > 1000


# --- Stockfish ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fen, mates", [(SCHOLAR, {"f3f7"}), (FOOL, {"d8h4"}), (BACK_RANK, {"a1a8", "b1b8"})]
)
def test_stockfish_finds_mate_in_one(stockfish, fen, mates):
    with make_agent("stockfish:nodes=20000", engine_path=stockfish) as agent:
        assert isinstance(agent, StockfishAgent)
        assert agent.choose_move(chess.Board(fen)).uci() in mates


def test_stockfish_process_is_gone_after_close(stockfish):
    agent = StockfishAgent(EngineSettings(path=stockfish, nodes=1000))
    pid = agent.pid
    assert alive(pid)
    agent.choose_move(chess.Board())
    agent.close()
    assert not alive(pid)
    agent.close()  # idempotent
    with StockfishOracleAgent(EngineSettings(path=stockfish, nodes=100)) as oracle:
        pid = oracle.pid
        assert alive(pid)
    assert not alive(pid)


def test_stockfish_elo_plays_within_the_range_the_engine_announces(stockfish):
    low, high = engine_elo_range(stockfish)
    assert 0 < low < high  # Stockfish 15.1 says 1350..2850, later versions 1320..3190
    with make_agent(f"stockfish:elo={low}", engine_path=stockfish) as agent:
        assert agent.settings.elo == low and agent.settings.time == ELO_MOVE_TIME
        assert agent.choose_move(chess.Board()) in chess.Board().legal_moves
    with make_agent(f"stockfish:elo={high},nodes=500", engine_path=stockfish) as agent:
        assert agent.settings.time is None and agent.settings.nodes == 500
    for outside in (low - 1, high + 1):
        with pytest.raises(ValueError, match=rf"elo={outside} is outside .*range {low}\.\.{high}"):
            make_agent(f"stockfish:elo={outside}", engine_path=stockfish)


def test_an_elo_outside_the_range_is_one_line_and_a_failing_exit(stockfish, tmp_path, capsys):
    from eval.elo.tournament import main

    low, high = engine_elo_range(stockfish)
    code = main(
        ["--agents", "random", f"stockfish:elo={high + 100}", "--engine", stockfish]
        + ["--games", "2", "--out", str(tmp_path), "--quiet"]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err == (f"error: elo={high + 100} is outside {stockfish}'s UCI_Elo range {low}..{high}")


def test_stockfish_restarts_after_a_crash(stockfish):
    with StockfishAgent(EngineSettings(path=stockfish, nodes=5000)) as agent:
        old = agent.pid
        os.kill(old, signal.SIGKILL)
        move = agent.choose_move(chess.Board(SCHOLAR))
        assert move.uci() == "f3f7"
        assert agent._process.restarts == 1 and agent.pid != old
        assert not alive(old)


def test_oracle_values_every_move_and_picks_the_mate(stockfish):
    board = chess.Board(SCHOLAR)
    with make_agent("oracle:nodes=1000", engine_path=stockfish) as oracle:
        assert isinstance(oracle, StockfishOracleAgent)
        values = oracle.move_values(board)
        assert [v.move.uci() for v in values] == legal_actions(board)
        by_move = {v.move.uci(): v for v in values}
        assert by_move["f3f7"].score == chess.engine.Mate(1)
        assert by_move["f3f7"].win_prob == 1.0
        # Moving the queen away loses nothing decisive: a value strictly between 0 and 1.
        assert 0.0 < by_move["f3e2"].win_prob < 1.0
        assert oracle.choose_move(board).uci() == "f3f7"


def test_oracle_prefers_the_shortest_mate(stockfish):
    # White mates at once with Ra8# or Rb8#; the rook's other moves mate later or not at all.
    with StockfishOracleAgent(EngineSettings(path=stockfish, nodes=2000)) as oracle:
        values = {v.move.uci(): v for v in oracle.move_values(chess.Board(BACK_RANK))}
        assert values["a1a8"].score == chess.engine.Mate(1)
        # Ties on the best score go to the first move in action-space order (a1a8 < b1b8).
        assert oracle.choose_move(chess.Board(BACK_RANK)).uci() == "a1a8"


# --- choosing from values -----------------------------------------------------------------


def test_pick_index_argmax_and_sampling():
    rng = np.random.default_rng(0)
    scores = np.array([0.2, 0.9, 0.5, 0.9])
    assert pick_index(scores, "av", 0.0, rng) == 1  # first of the equal best
    # Sampling at temperature 0.1 follows softmax(values / 0.1).
    draws = np.bincount([pick_index(scores, "av", 0.1, rng) for _ in range(4000)], minlength=4)
    expected = np.exp(scores / 0.1) / np.exp(scores / 0.1).sum()
    assert np.allclose(draws / 4000, expected, atol=0.03)
    # BC at temperature 1 samples the model's own probabilities.
    probs = np.array([0.7, 0.2, 0.1])
    draws = np.bincount([pick_index(probs, "bc", 1.0, rng) for _ in range(4000)], minlength=3)
    assert np.allclose(draws / 4000, probs, atol=0.03)
    with pytest.raises(ValueError):
        pick_index(scores, "av", -1.0, rng)


@pytest.mark.parametrize("temperature", [1e-320, 5e-324, 1e-300])
def test_a_tiny_temperature_picks_among_the_best_instead_of_nan(temperature):
    # scores / 1e-320 overflowed to inf and inf - inf gave NaN probabilities.
    rng = np.random.default_rng(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for target in ("av", "bc"):
            scores = np.array([0.2, 0.9, 0.5, 0.9])
            picks = {pick_index(scores, target, temperature, rng) for _ in range(200)}
            assert picks == {1, 3}
    # A huge temperature samples uniformly.
    picks = [pick_index(np.array([0.2, 0.9, 0.5]), "av", 1e300, rng) for _ in range(3000)]
    assert np.allclose(np.bincount(picks) / 3000, 1 / 3, atol=0.04)


def test_repetition_workaround_values_a_claimable_move_at_a_half():
    board = chess.Board()
    for uci in ("g1f3", "g8f6", "f3g1", "f6g8", "g1f3", "g8f6", "f3g1"):
        board.push_uci(uci)
    moves = legal_actions(board)
    values = np.linspace(0.6, 0.9, len(moves))
    adjusted = repetition_adjusted(board, moves, values)
    # ...Ng8 brings the start position back a third time: White could claim the draw.
    changed = [m for m, a, v in zip(moves, adjusted, values, strict=True) if a != v]
    assert changed == ["f6g8"]
    assert adjusted[moves.index("f6g8")] == 0.5
    assert board.fen() == position_after_knights()  # the board is left as it was


def position_after_knights() -> str:
    board = chess.Board()
    for uci in ("g1f3", "g8f6", "f3g1", "f6g8", "g1f3", "g8f6", "f3g1"):
        board.push_uci(uci)
    return board.fen()


def test_a_random_agents_game_does_not_depend_on_how_long_earlier_games_ran():
    def second_game_moves(first_game_plies: int) -> list[str]:
        agent = RandomAgent(seed=5)
        board = chess.Board()
        agent.new_game()
        for _ in range(first_game_plies):
            board.push(agent.choose_move(board))
        agent.new_game()
        board = chess.Board()
        moves = []
        for _ in range(12):
            move = agent.choose_move(board)
            moves.append(move.uci())
            board.push(move)
        return moves

    assert second_game_moves(3) == second_game_moves(17)
    assert second_game_moves(3) != [m.uci() for m in _first_moves(RandomAgent(seed=5), 12)]


def _first_moves(agent: RandomAgent, plies: int) -> list[chess.Move]:
    agent.new_game()
    board, moves = chess.Board(), []
    for _ in range(plies):
        moves.append(agent.choose_move(board))
        board.push(moves[-1])
    return moves
