"""The Beam pipeline end to end on the real DirectRunner, real Stockfish and real Parquet.

Small inputs the tests write themselves and tiny node limits keep these quick; the check on
20 real games at nodes=2000 (the acceptance run) is marked slow.
"""

from __future__ import annotations

import collections
import io
import json
import os
import pathlib
import stat
import sys
import textwrap
import types

import apache_beam as beam
import chess
import chess.pgn
import pyarrow.parquet as pq
import pytest
import zstandard
from apache_beam.testing import test_pipeline
from apache_beam.testing.util import assert_that, equal_to

from core.actions import legal_actions
from core.engine_settings import EngineLimit
from core.schema import FAILURE_SCHEMA, check_schema, meta_dir, read_boards, stats_path
from pipeline import pgn
from pipeline.annotate import annotate
from pipeline.annotate import boards as annotate_boards
from pipeline.annotate import settings as annotate_settings
from pipeline.annotate.arguments import parse_args
from pipeline.beam import portable


def _positions(text: str) -> collections.Counter:
    """Independent count: the FEN before each mainline move of every game, by python-chess."""
    counts: collections.Counter = collections.Counter()
    handle = io.StringIO(text)
    while (game := chess.pgn.read_game(handle)) is not None:
        board = game.board()
        for move in game.mainline_moves():
            counts[board.fen()] += 1
            board.push(move)
    return counts


def _rows(out, split="train") -> list[dict]:
    return read_boards(str(out / split)).to_pylist()


def _stats(out, split="train") -> dict:
    return json.loads(pathlib.Path(stats_path(str(out / split))).read_text())


def _check_rows(rows: list[dict]) -> None:
    """The dataset's invariants: action-space order, probabilities, consistent best move."""
    for row in rows:
        assert row["moves"] == legal_actions(chess.Board(row["fen"]))
        n = len(row["moves"])
        assert len(row["win_probs"]) == len(row["cp"]) == len(row["mate"]) == n
        assert all(0.0 <= p <= 1.0 for p in row["win_probs"])
        assert all((c is None) != (m is None) for c, m in zip(row["cp"], row["mate"], strict=True))
        best = row["moves"].index(row["best_move"])
        assert row["win_probs"][best] == max(row["win_probs"])
        assert row["state_win_prob"] == row["win_probs"][best]
        assert (row["state_cp"], row["state_mate"]) == (row["cp"][best], row["mate"][best])


@pytest.fixture
def inputs(tmp_path, pgn_samples):
    """A PGN with junk, good games and bad ones, and a zstd file cut off mid-game."""
    s = pgn_samples
    mixed = (
        s.garbage + s.scholars_mate + s.garbage + s.italian + s.illegal + s.chess960 + s.setup
        + s.garbage + s.petrov
    )  # fmt: skip
    (tmp_path / "mixed.pgn").write_text(mixed)
    first = s.game("extra001", "1. d4 d5 2. c4 e6 3. Nc3 Nf6")
    # A long comment spreads the second game over several zstd blocks, so the cut lands inside
    # it after part of it was decoded.
    comment = os.urandom(200_000).hex()
    second = s.game("extra002", f"1. d4 {{ {comment} }} Nf6 2. c4 g6 3. Nc3 Bg7 4. e4 d6")
    # Two zstd frames, the second cut short: the first frame's game must survive.
    compressor = zstandard.ZstdCompressor(write_checksum=True)
    frames = compressor.compress(first.encode()) + compressor.compress(second.encode())[:-12]
    (tmp_path / "cut.pgn.zst").write_bytes(frames)
    good = s.scholars_mate + s.italian + s.petrov + first
    return types.SimpleNamespace(
        dir=tmp_path, mixed=tmp_path / "mixed.pgn", cut=tmp_path / "cut.pgn.zst", good=good
    )


def test_bad_input_is_counted_and_skipped_and_no_good_game_is_lost(inputs, tmp_path):
    out = tmp_path / "out"
    stats = annotate.run(
        [str(inputs.dir / "*.pgn*"), "--out", str(out), "--limit", "nodes=50", "--num-shards", "3"]
    )
    expected = _positions(inputs.good)
    rows = _rows(out)
    assert {r["fen"]: r["count"] for r in rows} == dict(expected)
    _check_rows(rows)
    assert stats == _stats(out)
    games = stats["games"]
    assert games["read"] == 8 and games["used"] == 4
    assert games["skipped"] == {"illegal_move": 1, "variant": 1, "setup": 1, "truncated": 1}
    assert stats["garbage_blocks"] == 3
    assert stats["boards"] == {
        "total": sum(expected.values()),
        "unique": len(expected),
        "no_legal_moves": 0,
        "after_random_move": 0,
        "annotated": len(expected),
        "failed": 0,
    }
    assert stats["action_values"] == sum(len(r["moves"]) for r in rows)
    assert [e["file"] for e in stats["input_errors"]] == [str(inputs.cut)]
    assert "truncated zstd" in stats["input_errors"][0]["error"]
    assert any("illegal1" in text for text in stats["examples"]["illegal_move"])
    assert len(stats["engine_names"]) == 1 and stats["engine_names"][0].startswith("Stockfish")
    assert stats["limit"] == "nodes=50" and stats["reproducible"] is True
    assert sorted(os.listdir(out / "train")) == [  # the split folder holds only boards
        "boards-00000-of-00003.parquet",
        "boards-00001-of-00003.parquet",
        "boards-00002-of-00003.parquet",
    ]
    assert sorted(os.listdir(meta_dir(str(out / "train")))) == [
        "failures-00000-of-00001.parquet",
        "stats.json",
    ]
    failures = pq.read_table(f"{meta_dir(str(out / 'train'))}/failures-00000-of-00001.parquet")
    check_schema(failures.schema, "failures", FAILURE_SCHEMA)
    assert failures.num_rows == 0


def test_a_damaged_input_can_stop_the_run_with_an_error_naming_it(inputs, tmp_path):
    argv = [str(inputs.cut), "--out", str(tmp_path / "o"), "--limit", "nodes=10"]
    with pytest.raises(Exception, match=r"cut\.pgn\.zst: truncated zstd stream"):
        annotate.run([*argv, "--fail-on-input-error"])


def test_sampling_and_max_games_pick_the_same_games_by_their_id_hash(inputs, tmp_path):
    out = tmp_path / "out"
    stats = annotate.run(
        [
            str(inputs.mixed),
            "--out",
            str(out),
            "--limit",
            "nodes=10",
            "--max-games",
            "2",
            "--allow-setup",
            "--seed",
            "3",
        ]  # fmt: skip
    )
    games = [g for g in pgn.split_games(inputs.mixed.read_text().split("\n"))
             if isinstance(g, pgn.GameText)]  # fmt: skip
    valid = [g for g in games if isinstance(pgn.parse_game(g, allow_setup=True), pgn.GameBoards)]
    assert len(valid) == 4  # scholar, italian, setup, petrov
    chosen = sorted(valid, key=lambda g: pgn.sample_point(pgn.game_id(g), seed=3))[:2]
    expected = _positions("".join(g.text + "\n" for g in chosen))
    assert {r["fen"]: r["count"] for r in _rows(out)} == dict(expected)
    assert stats["games"]["used"] == 2 and stats["games"]["over_max_games"] == 2


def _poisoned_engine(tmp_path, stockfish: str, poison_fen: str) -> str:
    """The real Stockfish behind a relay that dies whenever it is sent `poison_fen`."""
    path = tmp_path / "poisoned_engine.py"
    path.write_text(
        f"#!{sys.executable}\n"
        + textwrap.dedent(
            f"""
            import os, subprocess, sys, threading
            engine = subprocess.Popen([{stockfish!r}], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, bufsize=0)
            def relay():
                while chunk := os.read(engine.stdout.fileno(), 65536):
                    os.write(1, chunk)
            threading.Thread(target=relay, daemon=True).start()
            for line in sys.stdin:
                if {poison_fen!r} in line:
                    engine.kill()
                    os._exit(7)
                engine.stdin.write(line.encode())
            """
        )
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_a_board_the_engine_keeps_dying_on_goes_to_the_failures_output(
    tmp_path, pgn_samples, stockfish
):
    (tmp_path / "in.pgn").write_text(pgn_samples.italian)
    poison = _positions(pgn_samples.italian).most_common()[3][0]
    engine = _poisoned_engine(tmp_path, stockfish, poison)
    out = tmp_path / "out"
    stats = annotate.run(
        [
            str(tmp_path / "in.pgn"),
            "--out",
            str(out),
            "--limit",
            "nodes=20",
            "--engine",
            engine,
            "--retries",
            "1",
        ]  # fmt: skip
    )
    failures = pq.read_table(
        f"{meta_dir(str(out / 'train'))}/failures-00000-of-00001.parquet"
    ).to_pylist()
    assert [f["fen"] for f in failures] == [poison]
    assert "2 attempts failed" in failures[0]["error"] and "code 7" in failures[0]["error"]
    assert failures[0]["limit"] == "nodes=20" and failures[0]["engine"].startswith("Stockfish")
    rows = _rows(out)
    assert len(rows) == len(_positions(pgn_samples.italian)) - 1
    assert stats["boards"]["failed"] == 1
    # At least the poisoned board's two attempts; more when the engine dies while the board
    # queued before it is still searching (that board is then retried alone, and succeeds).
    assert stats["engine_restarts"] >= 2


def test_boards_with_no_legal_move_are_dropped_and_counted(tmp_path, stockfish):
    mated, stalemated = "R5k1/5ppp/8/8/8/8/5PPP/6K1 b - - 1 1", "7k/5Q2/6K1/8/8/8/8/8 b - - 0 1"
    start = chess.STARTING_FEN
    dofn = annotate_boards.AnnotateBoards(
        annotate_settings.EngineConfig(stockfish), EngineLimit.parse("nodes=10"), 30.0, 1
    )
    with test_pipeline.TestPipeline(argv=["--runner=DirectRunner"]) as p:
        group = p | beam.Create([(0, [(mated, 1), (stalemated, 2), (start, 5)], None)])
        out = portable.split(group | beam.ParDo(dofn), ("rows", "failures", "stats"), "Out")
        fens = out["rows"] | beam.Map(lambda row: row["fen"])
        assert_that(fens, equal_to([start]), label="rows")
        counts = out["stats"] | beam.Map(lambda partial: partial["counts"].get("no_legal_moves", 0))
        assert_that(counts | beam.CombineGlobally(sum), equal_to([2]), label="dropped")


def test_an_existing_output_is_not_mixed_with_a_new_run(inputs, tmp_path):
    out = tmp_path / "out"
    argv = [str(inputs.mixed), "--out", str(out), "--limit", "nodes=5", "--max-games", "1"]
    annotate.run(argv)
    with pytest.raises(FileExistsError, match="--overwrite"):
        annotate.run(argv)
    annotate.run([*argv, "--overwrite"])
    assert annotate.main([str(tmp_path / "nothing-*.pgn"), "--out", str(out)]) == 1


def test_the_runner_defaults_to_the_direct_runner_and_beam_options_pass_through():
    config, beam_args = parse_args(["x.pgn", "--out", "o", "--direct_num_workers=2"])
    assert "--runner=DirectRunner" in beam_args and "--direct_num_workers=2" in beam_args
    assert config.limit == EngineLimit(nodes=2000) and config.engine.threads == 1
    _, beam_args = parse_args(["x.pgn", "--out", "o", "--runner", "DataflowRunner"])
    assert "--runner=DirectRunner" not in beam_args and "--runner=DataflowRunner" in beam_args
    _, beam_args = parse_args(["x.pgn", "--out", "o", "--runner=DaskRunner"])
    assert "--runner=apache_beam.runners.dask.dask_runner.DaskRunner" in beam_args


GAMES_FILE = "lichess_db_standard_rated_2021-10_head999__kdave_pgn-toys.pgn"
ROOT = pathlib.Path(__file__).resolve().parents[2]
SHARED_DATA = ROOT.parent / "shared" / "data"  # as tests/conftest.py


@pytest.fixture(scope="module")
def twenty_real_games(tmp_path_factory) -> tuple[str, str]:
    """20 Lichess games from ../shared/data, or where that is absent (CI) 20 of the bundled
    sample's master games, so the checks below run everywhere."""
    shared = SHARED_DATA / "games" / GAMES_FILE
    if shared.is_file():
        text = shared.read_text()
    else:
        raw = (ROOT / "data" / "sample" / "games.pgn.zst").read_bytes()
        text = zstandard.ZstdDecompressor().decompressobj().decompress(raw).decode("utf-8")
    games = [g for g in pgn.split_games(text.split("\n")) if isinstance(g, pgn.GameText)]
    chosen = "".join(g.text + "\n" for g in games[:20])
    path = tmp_path_factory.mktemp("real") / "twenty.pgn"
    path.write_text(chosen)
    return str(path), chosen


@pytest.fixture(scope="module")
def real_run(twenty_real_games, tmp_path_factory):
    path, _ = twenty_real_games
    out = tmp_path_factory.mktemp("real_out")
    argv = [path, "--out", str(out), "--limit", "nodes=2000", "--num-shards", "2",
            "--direct_num_workers=2", "--direct_running_mode=multi_processing"]  # fmt: skip
    return out, argv, annotate.run(argv)


@pytest.mark.slow
def test_twenty_real_games_give_one_correct_row_per_unique_board(twenty_real_games, real_run):
    _, text = twenty_real_games
    out, _, stats = real_run
    expected = _positions(text)
    rows = _rows(out)
    assert len(rows) == len(expected)
    assert {r["fen"]: r["count"] for r in rows} == dict(expected)
    _check_rows(rows)
    assert stats["games"]["used"] == 20 and stats["boards"]["failed"] == 0


@pytest.mark.slow
def test_two_workers_run_two_engines_at_once(real_run):
    _, _, stats = real_run
    workers = stats["workers"]
    assert len(workers) == 2
    pids = [pid for w in workers for pid in w["engine_pids"]]
    assert len(set(pids)) == 2
    a, b = workers
    overlap = min(a["last_board_at"], b["last_board_at"]) - max(
        a["first_board_at"], b["first_board_at"]
    )
    shortest = min(w["last_board_at"] - w["first_board_at"] for w in workers)
    assert overlap > 0.5 * shortest  # both engines busy together most of the time


@pytest.mark.slow
def test_a_second_run_with_the_same_arguments_gives_identical_rows(real_run, tmp_path):
    out, argv, _ = real_run
    again = tmp_path / "again"
    annotate.run([argv[0], *[str(again) if a == str(out) else a for a in argv[1:]]])
    for shard in ("boards-00000-of-00002.parquet", "boards-00001-of-00002.parquet"):
        first = pq.read_table(out / "train" / shard)
        second = pq.read_table(again / "train" / shard)
        assert first.num_rows > 0 and first.equals(second)
