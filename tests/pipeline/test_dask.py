"""The cluster path on a real distributed engine: annotate and import_chessbench on Beam's
DaskRunner against a dask.distributed scheduler and two worker processes on 127.0.0.1, their
shards compared byte for byte with the DirectRunner's (--exclude in one run; --mode search,
Ctrl-C and the rerun that resumes from the journal in another)."""

from __future__ import annotations

import json
import os
import pathlib
import random
import signal
import subprocess
import sys
import time

import chess
import chess.pgn
import pytest

from core.actions import legal_actions
from core.positions import position_key
from core.schema import journal_path, meta_dir, read_boards, stats_path
from pipeline.annotate import annotate
from pipeline.chessbench.bag import BagWriter
from pipeline.chessbench.import_chessbench import ChessBenchConfig, run_config
from pipeline.chessbench.records import encode_av

distributed = pytest.importorskip("distributed", reason="dask[distributed] is not installed")
from pipeline.beam.dask_cluster import local_cluster  # noqa: E402 - needs distributed
from tests.sessions import own_session, wait_for_a_journal_part  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
GAMES = 2  # self-play games of the bundled sample: ~150 unique boards
LIMIT = "nodes=100"


@pytest.fixture(scope="module")
def dask_cluster(tmp_path_factory):
    """A scheduler and two single-thread worker processes on 127.0.0.1, started in a scratch
    directory (so that relative paths would break) and stopped afterwards."""
    work = tmp_path_factory.mktemp("dask")
    with local_cluster(workers=2, cwd=str(work), log_dir=str(work)) as address:
        yield address


def _moves_played(game: chess.pgn.Game) -> list[tuple[chess.Board, chess.Move]]:
    board, found = game.board(), []
    for move in game.mainline_moves():
        found.append((board.copy(stack=False), move))
        board.push(move)
    return found


def _shards(split: pathlib.Path) -> dict[str, bytes]:
    """Every Parquet file of a split and its meta folder, by name."""
    files = [*split.glob("*.parquet"), *pathlib.Path(meta_dir(str(split))).glob("*.parquet")]
    return {f.name: f.read_bytes() for f in sorted(files)}


@pytest.mark.slow
def test_annotate_on_a_dask_cluster_writes_the_direct_runners_shards(
    dask_cluster, sample_games, stockfish, tmp_path
):
    chosen = sample_games("selfplay.pgn.zst", GAMES)
    games = tmp_path / "selfplay.pgn"
    games.write_text("\n\n".join(str(g) for g in chosen) + "\n")
    # Evaluation positions to drop (--exclude): three boards of the first game.
    played = _moves_played(chosen[0])[10:40:10]
    dropped = [board.fen() for board, _ in played]
    suite = tmp_path / "suite.epd"
    suite.write_text("".join(f"{position_key(b.fen())} bm {b.san(m)};\n" for b, m in played))
    argv = [str(games), "--limit", LIMIT, "--num-shards", "3", "--engine", stockfish,
            "--exclude", str(suite)]  # fmt: skip
    direct = annotate.run([*argv, "--out", str(tmp_path / "direct")])
    # As docs/cluster.md's command: relative paths (the workers run elsewhere), the short name.
    command = [sys.executable, "-m", "pipeline.annotate", "selfplay.pgn", *argv[1:],
               "--out", "dask", "--runner=DaskRunner",
               f"--dask_client_address={dask_cluster}"]  # fmt: skip
    finished = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert finished.returncode == 0, finished.stderr[-3000:]
    on_dask = json.loads(finished.stdout)

    direct_split, dask_split = tmp_path / "direct" / "train", tmp_path / "dask" / "train"
    assert sorted(p.name for p in dask_split.iterdir()) == [
        f"boards-{i:05d}-of-00003.parquet" for i in range(3)
    ]
    assert _shards(dask_split) == _shards(direct_split)  # byte for byte
    rows = read_boards(str(dask_split)).to_pylist()
    assert len(rows) == direct["boards"]["annotated"] > 100  # not an empty match
    assert on_dask["runner"] == "apache_beam.runners.dask.dask_runner.DaskRunner"
    for key in ("games", "boards", "action_values", "nodes_searched", "resumed", "input_errors",
                "excluded"):  # fmt: skip
        assert on_dask[key] == direct[key], key
    assert direct["excluded"]["boards"] == 3 and direct["excluded"]["occurrences"] >= 3
    assert not {row["fen"] for row in rows} & set(dropped)
    # Both workers annotated: the boards were spread, each engine in a worker process.
    assert len(on_dask["workers"]) == 2
    assert sum(w["boards"] for w in on_dask["workers"]) == len(rows)
    # One engine per worker slot for the whole job, not one per dask task.
    assert [len(w["engine_pids"]) for w in on_dask["workers"]] == [1, 1]
    # The engine as the DirectRunner's stats.json names it, though the launcher never ran it.
    assert on_dask["engine"] == direct["engine"] and on_dask["engine"]["name"]
    # Beam's chatter (a false "Discarding unparseable args: --dask_client_address") is not shown.
    assert not [line for line in finished.stderr.splitlines() if ":apache_beam" in line
                or ":root:" in line or "Discarding" in line], finished.stderr[-3000:]  # fmt: skip
    assert json.loads(pathlib.Path(stats_path(str(dask_split))).read_text()) == on_dask


def _wait_until_idle(address: str, seconds: float = 300) -> None:
    """Until no task runs on the cluster: a stopped launcher's running tasks finish their work
    unit (a thread cannot be interrupted), and the test's rerun must not race them."""
    deadline = time.monotonic() + seconds
    with distributed.Client(address, timeout=60) as client:
        while any(client.processing().values()):
            assert time.monotonic() < deadline, "the cluster stayed busy"
            time.sleep(0.2)


@pytest.mark.slow
def test_ctrl_c_on_dask_is_one_line_and_the_rerun_resumes_in_search_mode(
    dask_cluster, sample_games, stockfish, tmp_path
):
    games = tmp_path / "selfplay.pgn"
    games.write_text("\n\n".join(str(g) for g in sample_games("selfplay.pgn.zst", GAMES)) + "\n")
    argv = ["selfplay.pgn", "--mode", "search", "--multipv", "2", "--limit", "nodes=5000",
            "--engine", stockfish, "--journal-every", "5", "--out", "dask"]  # fmt: skip
    command = [sys.executable, "-m", "pipeline.annotate", *argv, "--runner=DaskRunner",
               f"--dask_client_address={dask_cluster}"]  # fmt: skip
    journal = pathlib.Path(journal_path(str(tmp_path / "dask" / "train")))
    log = tmp_path / "stopped.log"
    with own_session(command, log, cwd=tmp_path, stdout=subprocess.DEVNULL) as process:
        wait_for_a_journal_part(process, journal, log, seconds=600)
        os.killpg(process.pid, signal.SIGINT)  # as a terminal's Ctrl-C
        assert process.wait(60) == 130
    said = log.read_text()
    assert "Traceback" not in said, said[-3000:]
    assert said.splitlines()[-1].startswith(
        "annotate: stopped by SIGINT; the boards annotated so far are in the journal "
        f"{journal_path('dask/train')}"  # as the command was given it
    )
    _wait_until_idle(dask_cluster)

    rerun = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "resuming the interrupted run" in rerun.stderr
    resumed = json.loads(rerun.stdout)
    assert resumed["resumed"]["boards"] > 0 and not journal.exists()
    direct = annotate.run([str(games), *argv[1:-1], str(tmp_path / "direct")])
    assert _shards(tmp_path / "dask" / "train") == _shards(tmp_path / "direct" / "train")
    assert resumed["boards"]["unique"] == direct["boards"]["unique"] > 100
    assert resumed["action_values"] == direct["action_values"]
    rows = read_boards(str(tmp_path / "dask" / "train")).to_pylist()
    assert {row["limit"] for row in rows} == {"search:nodes=5000,multipv=2"}


@pytest.mark.slow
def test_import_chessbench_on_a_dask_cluster_writes_the_direct_runners_shards(
    dask_cluster, tmp_path
):
    rng = random.Random(5)
    board, records = chess.Board(), []
    for _ in range(30):  # the boards of a random game, every legal move valued
        for move in legal_actions(board):
            records.append(encode_av(board.fen(), move, rng.random()))
        board.push(rng.choice(list(board.legal_moves)))
        if board.is_game_over():
            break
    records.append(encode_av("not a fen", "e2e4", 0.5))  # one failure row
    rng.shuffle(records)
    for index, part in enumerate((records[: len(records) // 2], records[len(records) // 2 :])):
        with BagWriter(str(tmp_path / f"av-{index:05d}-of-00002_data.bag")) as writer:
            for record in part:
                writer.write(record)
    pattern = str(tmp_path / "av@2_data.bag")
    config = ChessBenchConfig(
        pattern, "av", str(tmp_path / "direct"), num_shards=2, chunk_records=40
    )
    direct = run_config(config, ["--runner=DirectRunner"])
    on_dask = run_config(
        ChessBenchConfig(pattern, "av", str(tmp_path / "dask"), num_shards=2, chunk_records=40),
        ["--runner=DaskRunner", f"--dask_client_address={dask_cluster}"],
    )
    assert _shards(tmp_path / "dask" / "train") == _shards(tmp_path / "direct" / "train")
    for key in ("records", "boards", "action_values", "input_errors"):
        assert on_dask[key] == direct[key], key
    assert direct["boards"]["written"] > 20 and direct["boards"]["failed"] == 1
