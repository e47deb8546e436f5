"""The board graph of the gateau backbone: the edge table against the action space, the
move and attack edges against python-chess on real boards, and the node inputs."""

from __future__ import annotations

import chess
import chess.pgn
import jax.numpy as jnp
import numpy as np
import pytest

from core.actions import ACTIONS, NUM_ACTIONS, legal_actions, move_to_index
from core.tokenizer import tokenize_batch
from model.data import board_view
from model.data.loader import load_boards
from model.networks import board_graph, board_net
from model.networks.board_graph_reference import reference_board_edges
from model.networks.move_facts import exchange_class, exchange_classes


def real_boards(games) -> list[chess.Board]:
    """Every position of the games (move stacks dropped), with promotions, castling and
    en passant among them in real play."""
    boards = []
    for game in games:
        board = game.board()
        for move in game.mainline_moves():
            boards.append(board.copy(stack=False))
            board.push(move)
    return boards


@pytest.fixture(scope="module")
def boards(sample_games) -> list[chess.Board]:
    boards = real_boards(sample_games("games.pgn.zst", 12))
    boards += real_boards(sample_games("mismatch.pgn.zst", 4))
    # Under-promotions, both castlings and en passant, for each side to move.
    boards += [
        chess.Board("8/2P1k3/8/8/8/8/4Kp2/8 w - - 0 1"),
        chess.Board("8/2P1k3/8/8/8/8/4Kp2/8 b - - 0 1"),
        chess.Board("r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1"),
        chess.Board("r3k2r/8/8/8/8/8/8/R3K2R b KQkq - 0 1"),
        chess.Board("4k3/8/8/3pP3/8/8/8/4K3 w - d6 0 1"),
        chess.Board("4k3/8/8/8/3Pp3/8/8/4K3 b - d3 0 1"),
    ]
    return boards


def test_the_edge_table_maps_every_action_to_an_edge_and_back():
    for black in (False, True):
        seen = set()
        for action, uci in enumerate(ACTIONS):
            sender, receiver, kind = board_graph.move_edge(action, black)
            geometry, promotion, edge_type = board_graph.unpack_kind(kind)
            assert edge_type == board_graph.MOVE
            assert board_graph.edge_action(black, sender, receiver, promotion) == action
            m = board_graph.MIRROR if black else 0
            move = chess.Move(sender ^ m, receiver ^ m)
            suffix = "" if promotion == 0 else board_graph.PROMOTION_PIECES[promotion - 1]
            assert move.uci() + suffix == uci
            assert geometry == board_graph.geometry(sender, receiver)
            seen.add((sender, receiver, promotion))
        assert len(seen) == NUM_ACTIONS  # no two actions share an edge
    assert board_graph.edge_action(False, 0, 0, 0) == -1  # a1a1 is no move


def test_the_geometry_is_seen_from_the_side_to_move():
    e2e4 = move_to_index("e2e4")
    e7e5 = move_to_index("e7e5")
    g1f3 = move_to_index("g1f3")
    g8f6 = move_to_index("g8f6")
    assert (
        board_graph.EDGE_GEOMETRY[0, e2e4] == board_graph.EDGE_GEOMETRY[1, e7e5]
    )  # both "forward 2"
    assert board_graph.EDGE_GEOMETRY[0, g1f3] == board_graph.EDGE_GEOMETRY[1, g8f6]
    assert board_graph.EDGE_GEOMETRY[0, e2e4] != board_graph.EDGE_GEOMETRY[0, e7e5]


def test_every_legal_move_of_real_boards_is_a_move_edge_and_back(boards):
    assert len(boards) > 800
    graphs = board_graph.encode_boards(boards)
    promotions = castles = 0
    for i, board in enumerate(boards):
        start, n = graphs.offsets[i], graphs.num_moves[i]
        legal = legal_actions(board)
        assert n == len(legal)
        black = board.turn == chess.BLACK
        for j, uci in enumerate(legal):
            edge = start + j
            action = move_to_index(uci)
            assert graphs.actions[edge] == action
            sender, receiver = int(graphs.senders[edge]), int(graphs.receivers[edge])
            kind = int(graphs.kinds[edge])
            _, promotion, edge_type = board_graph.unpack_kind(kind)
            assert edge_type == board_graph.MOVE
            static = board_graph.edge_kind(*board_graph.unpack_kind(kind))  # without the check bit
            assert (sender, receiver, static) == board_graph.move_edge(action, black)
            move = chess.Move.from_uci(uci)
            assert board_graph.kind_gives_check(kind) == board.gives_check(move)
            assert board_graph.kind_exchange(kind) == exchange_class(board, move)
            assert board_graph.edge_action(black, sender, receiver, promotion) == action
            promotions += promotion > 0
            castles += board.is_castling(chess.Move.from_uci(uci))
        # No other edge carries an action.
        assert (graphs.actions[start + n : graphs.offsets[i + 1]] == -1).all()
    assert promotions >= 8 and castles >= 4


def test_attack_edges_are_every_attack_of_both_sides(boards):
    for board in boards[::7]:
        senders, receivers, kinds, actions, n = board_graph.board_edges(board)
        m = board_graph.MIRROR if board.turn == chess.BLACK else 0
        moves = set(zip(senders[:n], receivers[:n], strict=True))
        found = {board_graph.ATTACK_MINE: set(), board_graph.ATTACK_THEIRS: set()}
        for s, r, k in zip(senders[n:], receivers[n:], kinds[n:], strict=True):
            found[board_graph.unpack_kind(k)[2]].add((s, r))
        for colour, edge_type in ((board.turn, board_graph.ATTACK_MINE), (not board.turn, 2)):
            expected = {
                (origin ^ m, target ^ m)
                for origin in chess.SquareSet(board.occupied_co[colour])
                for target in board.attacks(origin)
            }
            if edge_type == board_graph.ATTACK_MINE:  # those already a move edge are not repeated
                assert found[edge_type] == expected - moves
            else:
                assert found[edge_type] == expected


def test_node_inputs_read_the_board_from_the_tokens_as_the_mover_sees_it(boards):
    chosen = boards[::5] + boards[-6:]
    fens = [b.fen() for b in chosen]
    classes, en_passant, globals_ = map(np.asarray, board_net.node_inputs(tokenize_batch(fens)))
    for i, board in enumerate(chosen):
        m = board_graph.MIRROR if board.turn == chess.BLACK else 0
        for node in range(64):
            piece = board.piece_at(node ^ m)
            if piece is None:
                expected = 0
            else:
                mine = piece.color == board.turn
                expected = piece.piece_type + (0 if mine else 6)
            assert classes[i, node] == expected
        ep = fens[i].split()[3]  # what the tokens hold: FENs name a legal en passant only
        marked = np.flatnonzero(en_passant[i])
        assert list(marked) == ([] if ep == "-" else [chess.parse_square(ep) ^ m])
        us, them = board.turn, not board.turn
        rights = [
            board.has_kingside_castling_rights(us),
            board.has_queenside_castling_rights(us),
            board.has_kingside_castling_rights(them),
            board.has_queenside_castling_rights(them),
        ]
        expected_globals = [
            float(board.turn == chess.BLACK),
            *map(float, rights),
            min(board.halfmove_clock, 100) / 100,
            min(board.fullmove_number, 200) / 200,
        ]
        np.testing.assert_allclose(globals_[i], expected_globals, rtol=1e-6)


def test_padding_keeps_each_boards_edges_and_marks_the_rest(boards):
    graphs = board_graph.encode_boards(boards[:40])
    chosen = np.array([3, 0, 39, 17])
    padded = board_graph.pad_edges(graphs, chosen)
    width = padded["senders"].shape[1]
    assert width % 64 == 0 and width >= graphs.edge_counts()[chosen].max()
    for row, board in enumerate(chosen):
        start, stop = graphs.offsets[board], graphs.offsets[board + 1]
        n = stop - start
        np.testing.assert_array_equal(padded["senders"][row, :n], graphs.senders[start:stop])
        np.testing.assert_array_equal(padded["kinds"][row, :n], graphs.kinds[start:stop])
        np.testing.assert_array_equal(padded["edge_index"][row, :n], np.arange(start, stop))
        assert (padded["kinds"][row, n:] == board_graph.PAD_KIND).all()
        assert (padded["edge_index"][row, n:] == -1).all()
    with pytest.raises(ValueError, match="more than the padded width"):
        board_graph.pad_edges(graphs, chosen, width=8)


def test_jax_and_numpy_agree_on_the_packed_kind():
    kinds = np.arange(board_graph.NUM_EDGE_KINDS)
    for unpack in (lambda k: np.asarray(k), jnp.asarray):
        packed = unpack(kinds)
        parts = (
            *board_graph.unpack_kind(packed),
            board_graph.kind_gives_check(packed),
            board_graph.kind_exchange(packed),
            board_graph.kind_threat(packed),
            board_graph.kind_flights(packed),
            board_graph.kind_hanging(packed),
            board_graph.kind_danger(packed),
        )
        np.testing.assert_array_equal(np.asarray(board_graph.edge_kind(*parts)), kinds)
    assert board_graph.kind_gives_check(kinds).max() == 1
    assert board_graph.kind_exchange(kinds).max() == board_graph.EXCHANGE_CLASSES - 1
    assert board_graph.kind_threat(kinds).max() == board_graph.THREAT_CLASSES - 1
    assert board_graph.kind_flights(kinds).max() == board_graph.FLIGHT_CLASSES - 1
    assert board_graph.kind_hanging(kinds).max() == board_graph.HANGING_CLASSES - 1
    assert board_graph.kind_danger(kinds).max() == board_graph.DANGER_CLASSES - 1
    # The packed kinds are stored as the graphs' integer type.
    stored = board_graph.encode_boards([]).kinds.dtype
    assert board_graph.NUM_EDGE_KINDS <= np.iinfo(stored).max + 1


def random_game_boards(games: int, seed: int) -> list[chess.Board]:
    """Every position of random games: discovered and double checks, checking promotions and
    castlings, which sound play rarely has."""
    rng = np.random.default_rng(seed)
    boards = []
    for _ in range(games):
        board = chess.Board()
        while not board.is_game_over() and board.ply() < 160:
            boards.append(board.copy(stack=False))
            board.push(rng.choice(list(board.legal_moves)))
    return boards


def test_checking_moves_are_the_moves_python_chess_says_give_check(boards):
    special = [
        chess.Board("4k3/8/8/8/8/8/8/4K2R w K - 0 1"),  # O-O gives check from the rook
        chess.Board("5k2/8/8/8/8/8/8/R3K3 w Q - 0 1"),  # O-O-O does
        chess.Board("4k3/2P5/8/8/8/8/8/4K3 w - - 0 1"),  # c8=Q and c8=R check, c8=N not
        chess.Board("8/8/8/K2pP2q/8/8/8/7k w - d6 0 1"),  # exd6 uncovers nothing: pinned
        chess.Board("k7/8/8/3pP3/8/8/8/B3K3 w - d6 0 1"),  # exd6 gives no check
        chess.Board("7k/8/8/3pP3/8/1B6/8/4K3 w - d6 0 1"),  # exd6: the bishop sees the king
        chess.Board("4k3/8/8/8/4N3/8/8/4R1K1 w - - 0 1"),  # any knight move: discovered
        chess.Board("4k3/8/8/8/8/8/3Q4/4K3 w - - 0 1"),  # the queen checks along lines
    ]
    assert all(board.is_valid() for board in special)
    checks = direct = discovered = 0
    for board in [*boards, *random_game_boards(60, seed=5), *special]:
        moves = list(board.legal_moves)
        found = board_graph.checking_moves(board, moves)
        for move, check in zip(moves, found, strict=True):
            assert check == board.gives_check(move), (board.fen(), move.uci())
            if check:
                checks += 1
                after = board.copy(stack=False)
                after.push(move)
                direct += move.to_square in after.checkers()
                discovered += bool(after.checkers() & ~chess.BB_SQUARES[move.to_square])
    assert checks > 2_000 and direct > 1_000 and discovered > 20
    # Moves of a board without the opponent's king still get an answer.
    kingless = chess.Board("8/8/8/8/8/8/8/4K2R w - - 0 1")
    moves = list(kingless.legal_moves)
    assert board_graph.checking_moves(kingless, moves) == [False] * len(moves)


# Castling either way takes the king onto its own rook.
CHESS960 = "1r2k1r1/pppppppp/8/8/8/8/PPPPPPPP/1R2K1R1 w GBgb - 0 1"


def assert_same_graphs(found: board_graph.Graphs, expected: board_graph.Graphs) -> None:
    for field in ("offsets", "num_moves", "senders", "receivers", "kinds", "actions"):
        a, b = getattr(found, field), getattr(expected, field)
        assert a.dtype == b.dtype, field
        np.testing.assert_array_equal(a, b, err_msg=field)


def test_board_edges_are_the_reference_edges_exactly(boards):
    # The shortcuts (the opponent's attacks settling most exchanges, the mover's moves as
    # bitboards) change no edge, no kind and no order.
    chosen = [*boards, *random_game_boards(30, seed=11)]
    for board in chosen:
        assert board_graph.board_edges(board) == reference_board_edges(board), board.fen()


def test_the_exchanges_of_a_whole_board_are_each_moves_exchange():
    # Random play puts pieces en prise and into every kind of exchange, which sound play
    # rarely does.
    swaps = 0
    for board in [*random_game_boards(40, seed=3), chess.Board(CHESS960, chess960=True)]:
        moves = list(board.legal_moves)
        expected = [exchange_class(board, move) for move in moves]
        assert exchange_classes(board, moves) == expected, board.fen()
        swaps += sum(board.is_attacked_by(not board.turn, move.to_square) for move in moves)
    assert swaps > 5_000


def test_encoding_in_chunks_or_in_workers_gives_the_same_bytes(boards, monkeypatch):
    fens = [board.fen() for board in boards[:600]]
    whole = board_graph.encode_boards(chess.Board(fen) for fen in fens)
    # Small chunks, so that several workers each get several.
    monkeypatch.setattr(board_graph, "CHUNK_BOARDS", 70)
    assert_same_graphs(board_graph.encode_fens(fens), whole)
    done = []
    parallel = board_graph.encode_fens(
        np.asarray(fens, dtype=object), workers=2, progress=done.append
    )
    assert_same_graphs(parallel, whole)
    assert done == [*range(70, 600, 70), 600]
    assert_same_graphs(board_graph.encode_fens([], workers=2), board_graph.encode_boards([]))


def test_a_large_split_is_encoded_in_workers_with_a_progress_line(
    make_rows, shard_writer, tmp_path, monkeypatch, capsys
):
    data = load_boards(str(shard_writer(make_rows(30, seed=9), tmp_path, 2)))
    serial = board_view.board_graphs(data)
    assert "board graphs" not in capsys.readouterr().err  # a small split: no workers, no line
    # Lower the bar so that this split counts as large and is cut into several chunks.
    monkeypatch.setattr(board_view, "PARALLEL_BOARDS", 10)
    monkeypatch.setattr(board_graph, "CHUNK_BOARDS", 8)
    parallel = board_view.board_graphs(data)
    assert_same_graphs(parallel.graphs, serial.graphs)
    np.testing.assert_array_equal(parallel.edge_win_probs, serial.edge_win_probs)
    np.testing.assert_array_equal(parallel.best_edges, serial.best_edges)
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.startswith("board graphs (") and "30/30 boards (100.0%)" in last


def test_a_bad_fen_in_a_worker_fails_the_encoding_as_it_does_in_one_process(monkeypatch):
    monkeypatch.setattr(board_graph, "CHUNK_BOARDS", 2)
    fens = [chess.STARTING_FEN] * 5 + ["not a fen"]
    for workers in (1, 2):
        with pytest.raises(ValueError, match="not a fen"):
            board_graph.encode_fens(fens, workers=workers)
