"""The Parquet loader: views, order, sampling, resume and refusal of bad input."""

from __future__ import annotations

import collections
import itertools

import chess
import numpy as np
import pyarrow.parquet as pq
import pytest

from core import bins
from core.actions import ACTIONS, move_to_index
from core.schema import SCHEMA_VERSION, SchemaError, boards_table
from core.tokenizer import tokenize_batch
from model.data.loader import Batches, DataError, load_boards, make_view
from model.data.loader_settings import LoaderSettings


@pytest.fixture(scope="module")
def rows(make_rows):
    return make_rows(60, seed=11)


@pytest.fixture(scope="module")
def shards(rows, tmp_path_factory, shard_writer):
    return shard_writer(rows, tmp_path_factory.mktemp("shards"), 3)


@pytest.fixture(scope="module")
def data(shards):
    return load_boards(str(shards))


def pairs_of(rows):
    return [(r["fen"], m, p) for r in rows for m, p in zip(r["moves"], r["win_probs"], strict=True)]


def test_load_flattens_every_pair_in_file_order(rows, data):
    assert data.num_boards == len(rows)
    assert len(data.files) == 3
    assert data.num_pairs == sum(len(r["moves"]) for r in rows)
    np.testing.assert_array_equal(data.states, tokenize_batch([r["fen"] for r in rows]))
    i = 17
    assert list(data.legal_moves(i)) == rows[i]["moves"]
    np.testing.assert_allclose(data.move_win_probs(i), rows[i]["win_probs"], rtol=1e-6)


def decode_av(data, batch):
    """(fen, move) of each AV example, read back through the token arrays."""
    fen_of = {bytes(s): f for s, f in zip(data.states, data.fens, strict=True)}
    return [(fen_of[bytes(s)], a) for s, a in zip(batch.states, batch.actions, strict=True)]


def test_av_batches_hold_the_right_targets(rows, data):
    truth = {(f, move_to_index(m)): p for f, m, p in pairs_of(rows)}
    batches = Batches(data, LoaderSettings("av", 32, batch_size=50, seed=3, prefetch=0))
    batch = next(batches)
    assert batch.states.shape == (50, 77) and batch.targets.shape == (50,)
    probs = np.array([truth[key] for key in decode_av(data, batch)], np.float32)
    np.testing.assert_array_equal(batch.targets, bins.to_bins(probs, 32))


def test_sv_and_bc_views_are_boards(rows, data):
    sv = make_view(data, "sv", 128)
    bc = make_view(data, "bc", 128)
    assert len(sv) == len(bc) == len(rows)
    np.testing.assert_array_equal(
        sv.label, bins.to_bins(np.float32([r["state_win_prob"] for r in rows]), 128)
    )
    np.testing.assert_array_equal(bc.label, [move_to_index(r["best_move"]) for r in rows])
    batch = next(Batches(data, LoaderSettings("bc", 128, batch_size=8, seed=0, prefetch=0)))
    assert batch.actions is None and batch.targets.dtype == np.int32


@pytest.fixture(scope="module")
def mixed(rows, tmp_path_factory, shard_writer):
    """Rows as the importers make them: complete boards; partial boards (a few moves
    valued, as from the Lichess evaluations); boards with only a state value (ChessBench SV);
    boards with only a best move (ChessBench BC)."""
    complete = [dict(r) for r in rows[:20]]
    partial = [
        dict(r, moves=r["moves"][:2], win_probs=r["win_probs"][:2], cp=None, mate=None)
        for r in rows[20:30]
    ]
    partial = [dict(r, partial=True, best_move=r["moves"][0]) for r in partial]
    state_only = [
        dict(r, moves=[], win_probs=[], cp=None, mate=None, best_move="", partial=True)
        for r in rows[30:35]
    ]
    best_only = [
        dict(r, moves=[], win_probs=[], cp=None, mate=None, state_win_prob=None, partial=True)
        for r in rows[35:40]
    ]
    all_rows = complete + partial + state_only + best_only
    directory = shard_writer(all_rows, tmp_path_factory.mktemp("mixed"), 2)
    return all_rows, load_boards(str(directory))


def test_av_leaves_partial_boards_out_unless_asked(mixed):
    all_rows, data = mixed
    assert data.partial.tolist() == [bool(r.get("partial")) for r in all_rows]
    complete_pairs = sum(len(r["moves"]) for r in all_rows[:20])
    without = make_view(data, "av", 32)
    assert len(without) == complete_pairs
    assert not data.partial[without.board].any()
    with_partial = make_view(data, "av", 32, av_partial=True)
    assert len(with_partial) == complete_pairs + 2 * 10 == data.num_pairs
    # The kept pairs keep their own actions and values, not their neighbours'.
    truth = {
        (r["fen"], move_to_index(m)): p
        for r in all_rows
        for m, p in zip(r["moves"], r["win_probs"], strict=True)
    }
    got = [(data.fens[b], a) for b, a in zip(with_partial.board, with_partial.action, strict=True)]
    np.testing.assert_array_equal(
        with_partial.label, bins.to_bins(np.float32([truth[key] for key in got]), 32)
    )


def test_sv_takes_boards_with_a_state_value_and_bc_boards_with_a_best_move(mixed):
    all_rows, data = mixed
    sv = make_view(data, "sv", 32)
    assert sorted(sv.board.tolist()) == [
        i for i, r in enumerate(all_rows) if r["state_win_prob"] is not None
    ]
    assert np.isnan(data.state_win_probs[35:40]).all()
    bc = make_view(data, "bc", 32)
    assert sorted(bc.board.tolist()) == [i for i, r in enumerate(all_rows) if r["best_move"]]


def test_no_av_examples_says_the_partial_boards_were_left_out(mixed, tmp_path, shard_writer):
    all_rows, _ = mixed
    only_partial = shard_writer(all_rows[20:30], tmp_path, 1)
    data = load_boards(str(only_partial))
    with pytest.raises(DataError, match="10 of 10 boards are partial.*av_partial"):
        Batches(data, LoaderSettings("av", 32, batch_size=4, seed=0, prefetch=0))
    batch = next(
        Batches(data, LoaderSettings("av", 32, batch_size=4, seed=0, prefetch=0, av_partial=True))
    )
    assert batch.actions.shape == (4,)


def test_an_epoch_visits_every_pair_once_shuffled_across_shards(data):
    n = data.num_pairs
    batches = Batches(data, LoaderSettings("av", 128, batch_size=n, seed=5, prefetch=0))
    order = batches.indices(0)
    assert sorted(order) == list(range(n))
    # A global shuffle: the first few examples already come from every shard.
    board_shard = np.searchsorted(np.cumsum([20, 20, 20]), data.pair_board[order[:30]], "right")
    assert set(board_shard) == {0, 1, 2}
    # Epochs differ, and the order depends on the seed.
    assert not np.array_equal(order, batches.indices(n))
    other = Batches(data, LoaderSettings("av", 128, batch_size=n, seed=6, prefetch=0))
    assert not np.array_equal(order, other.indices(0))


def test_weighted_sampler_follows_count(tmp_path, make_rows, shard_writer):
    rows = make_rows(20, seed=3)
    for i, row in enumerate(rows):
        row["count"] = 9 if i % 2 else 1
    data = load_boards(str(shard_writer(rows, tmp_path, 2)))
    seen = collections.Counter()
    uniform = collections.Counter()
    for kind, counter in (("weighted", seen), ("uniform", uniform)):
        batches = Batches(
            data, LoaderSettings("sv", 128, batch_size=200, seed=0, sampler=kind, prefetch=0)
        )
        for batch in itertools.islice(batches, 100):
            counter.update(bytes(s) for s in batch.states)
    heavy = sum(n for i, n in enumerate(_by_board(data, seen)) if i % 2)
    light = sum(n for i, n in enumerate(_by_board(data, seen)) if not i % 2)
    assert 8.0 < heavy / light < 10.0
    counts = _by_board(data, uniform)
    assert max(counts) == min(counts) == 1000  # uniform: every board once per epoch


def _by_board(data, counter):
    return [counter[bytes(s)] for s in data.states]


@pytest.mark.parametrize("prefetch", [0, 3])
def test_a_resumed_loader_continues_exactly(data, prefetch):
    def make(position=0):
        return Batches(
            data,
            LoaderSettings("av", 64, batch_size=48, seed=1, prefetch=prefetch),
            position=position,
        )

    with make() as straight:
        expected = [next(straight) for _ in range(40)]  # 1920 examples: crosses epochs
        assert straight.position == 40 * 48
    with make() as first:
        head = [next(first) for _ in range(13)]
        position = first.position
    assert position == 13 * 48
    with make(position) as resumed:
        tail = [next(resumed) for _ in range(27)]
    for a, b in zip(expected, head + tail, strict=True):
        for key, value in a.arrays().items():
            np.testing.assert_array_equal(value, b.arrays()[key])


def test_processes_split_each_global_batch(data):
    whole = next(Batches(data, LoaderSettings("av", 128, batch_size=12, seed=2, prefetch=0)))
    parts = [
        next(
            Batches(
                data,
                LoaderSettings("av", 128, 12, seed=2, prefetch=0, process_index=p, process_count=3),
            )
        )
        for p in range(3)
    ]
    for key, value in whole.arrays().items():
        np.testing.assert_array_equal(value, np.concatenate([p.arrays()[key] for p in parts]))


def test_hl_gauss_targets_are_distributions_around_the_value(data):
    batch = next(
        Batches(data, LoaderSettings("av", 32, batch_size=16, seed=0, hl_gauss=True, prefetch=0))
    )
    hard = next(Batches(data, LoaderSettings("av", 32, batch_size=16, seed=0, prefetch=0))).targets
    soft = batch.targets
    assert soft.shape == (16, 32)
    np.testing.assert_allclose(soft.sum(axis=1), 1.0, rtol=1e-5)
    assert np.all(np.abs(soft.argmax(axis=1) - hard) <= 1)


def test_refuses_a_file_without_the_schema(tmp_path, rows):
    table = boards_table(rows[:3]).replace_schema_metadata(None)
    path = tmp_path / "boards-00000-of-00001.parquet"
    pq.write_table(table, path)
    with pytest.raises(SchemaError, match="boards-00000-of-00001.parquet"):
        load_boards(str(tmp_path))


def test_refuses_an_unknown_schema_version(tmp_path, rows):
    table = boards_table(rows[:3])
    metadata = dict(table.schema.metadata)
    metadata[b"searchless_chess.schema_version"] = str(SCHEMA_VERSION + 1).encode()
    pq.write_table(table.replace_schema_metadata(metadata), tmp_path / "boards.parquet")
    with pytest.raises(SchemaError, match="version"):
        load_boards(str(tmp_path / "boards.parquet"))


def test_a_bad_row_is_named(tmp_path, rows, shard_writer):
    bad = [dict(r) for r in rows[:5]]
    bad[3]["win_probs"] = [1.5] * len(bad[3]["moves"])
    shard_writer(bad, tmp_path, 1)
    with pytest.raises(DataError, match=r"boards-00000-of-00001.parquet: row 3 .*outside"):
        load_boards(str(tmp_path))


def test_mismatched_lists_are_named(tmp_path, rows):
    bad = [dict(r) for r in rows[:5]]
    bad[2]["win_probs"] = bad[2]["win_probs"][:-1]
    table = boards_table(bad)
    pq.write_table(table, tmp_path / "boards-00000-of-00001.parquet")
    with pytest.raises(DataError, match="row 2 .*win_probs"):
        load_boards(str(tmp_path))


def test_missing_path_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no annotated board shards"):
        load_boards(str(tmp_path / "nothing"))


def illegal_action(fen: str) -> str:
    """An action (a move of the action space) that no piece of the side to move can make."""
    board = chess.Board(fen)
    possible = {m.uci() for m in board.pseudo_legal_moves}
    return next(a for a in ACTIONS if a not in possible and a[:4] not in possible)


def test_a_move_illegal_on_its_board_is_named(tmp_path, rows, shard_writer):
    # A valid action, but not a move on this board: it would train as one of its moves.
    bad = [dict(r) for r in rows[:5]]
    move = illegal_action(bad[3]["fen"])
    bad[3]["moves"] = [move, *bad[3]["moves"][1:]]
    shard_writer(bad, tmp_path / "moves", 1)
    with pytest.raises(DataError) as caught:
        load_boards(str(tmp_path / "moves"))
    assert str(caught.value) == (
        f"{tmp_path / 'moves' / 'boards-00000-of-00001.parquet'}: row 3 (FEN {bad[3]['fen']!r}): "
        f"move {move!r} is not legal on this board"
    )
    bad = [dict(r) for r in rows[:5]]
    best = illegal_action(bad[4]["fen"])
    bad[4]["best_move"] = best
    shard_writer(bad, tmp_path / "best", 1)
    with pytest.raises(DataError, match=rf"row 4 .*best_move {best!r} is not legal on this board"):
        load_boards(str(tmp_path / "best"))


def test_loader_settings_refuse_a_split_the_hosts_cannot_make():
    with pytest.raises(ValueError, match="batch size 10 is not divisible by 3 hosts"):
        LoaderSettings("av", 32, batch_size=10, seed=0, process_count=3)
    with pytest.raises(ValueError, match=r"process_index 3 is not in \[0, 3\)"):
        LoaderSettings("av", 32, batch_size=12, seed=0, process_index=3, process_count=3)
    settings = LoaderSettings("av", 32, batch_size=12, seed=0, process_index=2, process_count=3)
    assert (settings.local_batch, settings.local_rows) == (4, slice(8, 12))
