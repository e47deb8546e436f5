"""The accelerator window's preparation on the CPU: the packer (jobs/pack_data.py) on real
Parquet shards, and the window's command (jobs/gpu_window.py) end to end as a dry run, its
exported model loaded back the way it is shipped and playing a legal move."""

from __future__ import annotations

import importlib.util
import json
import pathlib
import re

import chess
import jax.numpy as jnp
import numpy as np
import pyarrow.parquet as pq
import pytest

from core.schema import read_boards
from jobs import gpu_export, gpu_window, pack_data
from jobs.gpu_export import PART_BYTES, compact_params
from model.data.loader import load_boards

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _model_fixtures():
    """tests/model/conftest.py's real-board rows and shard writer (a conftest cannot be
    imported by name from another folder's tests)."""
    spec = importlib.util.spec_from_file_location(
        "model_fixtures", ROOT / "tests/model/conftest.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> pathlib.Path:
    """Four shards of 40 real boards each (legal moves, seeded random values)."""
    fixtures = _model_fixtures()
    directory = tmp_path_factory.mktemp("shards")
    fixtures.write_shards(fixtures.synthetic_rows(160, seed=11), directory, 4)
    return directory


def test_pack_takes_whole_shards_within_the_budget_recompressed(shards, tmp_path):
    sizes = [f.stat().st_size for f in sorted(shards.glob("boards-*.parquet"))]
    out = tmp_path / "packed"
    # Room for two recompressed shards, not three (zstd at 19 only shrinks these).
    budget = int(sum(sizes[:2]) * 1.05)
    packed = pack_data.pack(str(shards), str(out), budget)
    assert [p.name for p in packed] == [
        "boards-00000-of-00002.parquet",
        "boards-00001-of-00002.parquet",
    ]
    assert sum(p.bytes_after for p in packed) <= budget
    assert all(p.bytes_after < p.bytes_before for p in packed)
    for p in packed:
        column = pq.ParquetFile(out / p.name).metadata.row_group(0).column(0)
        assert column.compression == "ZSTD"
    # The same rows as the first two source shards, through the loader's schema check.
    source = read_boards(",".join(str(shards / f"boards-0000{i}-of-00004.parquet") for i in (0, 1)))
    assert read_boards(str(out)).to_pylist() == source.to_pylist()
    assert sum(p.boards for p in packed) == 80


def test_policy_only_pack_keeps_what_bc_and_av_read_and_is_smaller(shards, tmp_path):
    full = pack_data.pack(str(shards), str(tmp_path / "full"), 2**30)
    slim = pack_data.pack(
        str(shards), str(tmp_path / "slim"), 2**30, nulled=pack_data.POLICY_UNUSED
    )
    assert sum(p.bytes_after for p in slim) < sum(p.bytes_after for p in full)
    before = read_boards(str(tmp_path / "full")).to_pylist()
    after = read_boards(str(tmp_path / "slim")).to_pylist()
    assert len(after) == len(before) == 160
    for old, new in zip(before, after, strict=True):
        for name in pack_data.POLICY_UNUSED:
            assert new[name] is None
        kept = {k: v for k, v in old.items() if k not in pack_data.POLICY_UNUSED}
        assert {k: new[k] for k in kept} == kept
    # What a BC run trains on: the same boards, moves, values and best moves.
    a, b = load_boards(str(tmp_path / "full")), load_boards(str(tmp_path / "slim"))
    np.testing.assert_array_equal(a.states, b.states)
    np.testing.assert_array_equal(a.best_actions, b.best_actions)
    np.testing.assert_array_equal(a.pair_actions, b.pair_actions)
    np.testing.assert_array_equal(a.pair_win_probs, b.pair_win_probs)
    assert np.isnan(b.state_win_probs).all()  # the SV target's column is what went


def test_policy_value_pack_keeps_the_boards_value_for_the_value_head(shards, tmp_path):
    out = tmp_path / "pv"
    argv = ["--data", str(shards), "--out", str(out), "--budget-mib", "5", "--policy-value"]
    assert pack_data.main(argv) == 0
    manifest = json.loads((out / pack_data.MANIFEST).read_text())
    assert manifest["nulled"] == list(pack_data.POLICY_VALUE_UNUSED)
    assert not manifest["policy_only"]
    rows = read_boards(str(out)).to_pylist()
    assert all(row[name] is None for row in rows for name in pack_data.POLICY_VALUE_UNUSED)
    full = load_boards(str(shards))
    kept = load_boards(str(out))
    np.testing.assert_array_equal(kept.states, full.states)
    np.testing.assert_array_equal(kept.state_win_probs, full.state_win_probs)  # the head's
    assert not np.isnan(kept.state_win_probs).all()


def test_pack_refuses_to_null_and_keep_the_boards_value_at_once(shards, tmp_path, capsys):
    out = tmp_path / "both"
    argv = ["--data", str(shards), "--out", str(out), "--policy-only", "--policy-value"]
    with pytest.raises(SystemExit) as refused:
        pack_data.main(argv)
    assert refused.value.code == 2 and "not allowed with argument" in capsys.readouterr().err
    assert not out.exists()


def test_pack_command_says_what_it_packed_and_refuses_bad_input(shards, tmp_path, capsys):
    out = tmp_path / "packed"
    assert pack_data.main(["--data", str(shards), "--out", str(out), "--budget-mib", "5"]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("packed 160 boards in 4 of 4 shard(s)")
    manifest = json.loads((out / pack_data.MANIFEST).read_text())
    assert manifest["boards"] == 160 and manifest["shards_packed"] == 4
    assert pack_data.main(["--data", str(tmp_path / "none"), "--out", str(out)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("error: no annotated board shards")
    # A folder that is no earlier pack is not replaced.
    (tmp_path / "keep").mkdir()
    (tmp_path / "keep" / "notes.txt").write_text("mine")
    assert pack_data.main(["--data", str(shards), "--out", str(tmp_path / "keep")]) == 1
    assert "holds no pack.json: not replaced" in capsys.readouterr().err
    assert (tmp_path / "keep" / "notes.txt").read_text() == "mine"
    not_boards = tmp_path / "other" / "boards-00000-of-00001.parquet"
    not_boards.parent.mkdir()
    pq.write_table(
        pq.read_table(shards / "boards-00000-of-00004.parquet")
        .drop(["fen"])
        .replace_schema_metadata(None),
        not_boards,
    )
    assert pack_data.main(["--data", str(not_boards.parent), "--out", str(out)]) == 1
    assert "not an annotated-boards file" in capsys.readouterr().err


def test_compact_params_are_bfloat16():
    params = {"w": np.ones((3, 2), np.float32), "n": np.arange(3, dtype=np.int32)}
    compact = compact_params(params)
    assert compact["w"].dtype == jnp.bfloat16 and compact["n"].dtype == np.int32


@pytest.mark.slow
def test_dry_run_trains_by_the_clock_exports_and_the_model_plays(shards, tmp_path, capsys):
    out, run = tmp_path / "out", tmp_path / "run"
    argv = ["--dry-run", "--data", str(shards), "--out", str(out), "--run", str(run)]
    argv += ["--epochs", "1000"]  # the schedule as passes over the 160 boards in batches of 8
    test = str(shards / "boards-00003-of-00004.parquet")
    assert gpu_window.main([*argv, "--test-data", test, "--puzzle-count", "3"]) == 0
    printed = capsys.readouterr().out
    assert "stopped by the clock" in printed

    # What comes back from a device: at most 8 plain files, none over 16 MiB, plain names.
    files = sorted(out.iterdir())
    assert len(files) <= 8 and all(f.is_file() for f in files)
    assert all(re.fullmatch(r"[A-Za-z0-9._-]+", f.name) for f in files)
    assert all(f.stat().st_size <= PART_BYTES for f in files)
    assert {"window.json", "log.txt", "metrics.jsonl", "model.tar.00"} <= {f.name for f in files}

    window = json.loads((out / "window.json").read_text())
    import jax

    assert window["finished"] and window["dry_run"]
    assert window["environment"]["jax_version"] == jax.__version__
    assert window["environment"]["platform"] == "cpu"
    assert window["data"]["boards"] == 160
    assert window["epochs"] == 1000 and window["config"]["train"]["num_steps"] == 20_000
    step = window["step"]
    assert 1 <= step < window["config"]["train"]["num_steps"]
    assert window["examples_seen"] == step * 8
    assert window["model"]["dtype"] == "bfloat16"
    assert window["puzzles"]["total"] == 3
    assert np.isfinite(window["test"]["test_loss"]) and 0 <= window["test"]["test_accuracy"] <= 1
    assert (out / "log.txt").read_text().count("exported step") >= 1

    # Loaded back as every reader loads a run: the predictor, then a legal move.
    from model.predictor import Predictor

    model = tmp_path / "models-gpu"
    assert gpu_export.main([str(out), str(model)]) == 0
    predictor = Predictor.from_checkpoint(str(model))
    assert predictor.step == step and predictor.config.model.backbone == "squares"
    # The EMA parameters alone (no raw copy beside them), with where they were made.
    step_dir = model / "checkpoints" / str(step)
    assert {p.name for p in step_dir.iterdir()} >= {"ema_params", "meta"}
    assert not (step_dir / "params").exists()
    from model.checkpoint import load_params

    _, _, meta = load_params(str(model))
    assert meta["environment"]["jax_version"] == jax.__version__
    assert meta["data"]["boards"] == 160 and meta["examples_seen"] == step * 8
    board = chess.Board("r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3")
    move = predictor.best_moves([board])[0]
    assert chess.Move.from_uci(move) in board.legal_moves

    # A part damaged on its way is refused in one line, the model left as it was.
    part = out / "model.tar.00"
    part.write_bytes(part.read_bytes()[:-1] + b"x")
    assert gpu_export.main([str(out), str(model)]) == 1
    err = capsys.readouterr().err.strip()
    assert err == "error: model.tar.00 does not match its sha256"
    assert Predictor.from_checkpoint(str(model)).step == step


def test_window_refuses_bad_input_in_one_line_before_training(shards, tmp_path, capsys):
    out = tmp_path / "out"
    missing = ["--data", str(tmp_path / "none"), "--out", str(out)]
    assert gpu_window.main(missing) == 2
    assert capsys.readouterr().err.strip().startswith("config error: data.train = ")
    no_time = ["--data", str(shards), "--out", str(out), "--minutes", "1"]
    assert gpu_window.main(no_time) == 2
    err = capsys.readouterr().err.strip()
    assert err == "config error: --minutes 1.0 leaves no training time after --reserve-s 75.0"
    assert not (out / "model.tar.00").exists()


@pytest.fixture(scope="module")
def games_pack(stockfish, tmp_path_factory) -> tuple[pathlib.Path, pathlib.Path]:
    """A games pack of two real games' boards searched by the real engine, and those rows."""
    from jobs import pack_games
    from pipeline.annotate import annotate

    base = tmp_path_factory.mktemp("games")
    source = base / "games.pgn"
    source.write_text(
        '[Event "T"]\n[Site "https://lichess.org/window01"]\n[Result "1-0"]\n\n'
        "1. e4 e5 2. Bc4 Nc6 3. Qh5 Nf6 4. Qxf7# 1-0\n\n"
        '[Event "T"]\n[Site "https://lichess.org/window02"]\n[Result "*"]\n\n'
        "1. d4 d5 2. c4 e6 3. Nc3 Nf6 4. Bg5 Be7 *\n\n"
    )
    annotated = base / "annotated"
    annotate.run(
        [str(source), "--out", str(annotated), "--mode", "search", "--limit", "nodes=20",
         "--engine", stockfish, "--progress-seconds", "3600"]
    )  # fmt: skip
    pack = base / "pack"
    argv = ["--out", str(pack), "--split", str(annotated / "train"), "--games", str(source)]
    assert pack_games.main([*argv, "--quiet", "--budget-mib", "1"]) == 0
    return pack, annotated / "train"


def test_window_unpacks_a_games_pack_once_beside_its_run(games_pack, tmp_path):
    pack, rows = games_pack
    window = gpu_window.Window(str(tmp_path / "out"))
    (tmp_path / "out").mkdir()
    run = str(tmp_path / "run")
    data, info = gpu_window.training_data(window, str(pack), run)
    source = read_boards(str(rows)).to_pylist()  # 14: the two games share their first board
    assert data == f"{run}-data" and info["rows"] == len(source) == 14 and info["bytes"] > 0
    assert sorted(read_boards(data).to_pylist(), key=repr) == sorted(source, key=repr)
    assert "unpacked 14 boards" in (tmp_path / "out" / "log.txt").read_text()
    # A second call on the warm machine finds them; shards are passed through as they are.
    assert gpu_window.training_data(window, str(pack), run) == (data, info)
    assert gpu_window.training_data(window, str(rows), run) == (str(rows), None)
    # Another pack given to the same run is unpacked anew, not mistaken for the first.
    import shutil

    other = tmp_path / "other-pack"
    shutil.copytree(pack, other)
    again, other_info = gpu_window.training_data(window, str(other), run + "/")
    assert again == data and other_info["path"] == str(other)
    assert (tmp_path / "out" / "log.txt").read_text().count("unpacked 14 boards") == 2


def test_window_refuses_a_damaged_games_pack_in_one_line(games_pack, tmp_path, capsys):
    import shutil

    pack = tmp_path / "pack"
    shutil.copytree(games_pack[0], pack)
    (pack / "games.parquet").write_bytes(b"not parquet")
    argv = ["--data", str(pack), "--out", str(tmp_path / "out"), "--run", str(tmp_path / "run")]
    assert gpu_window.main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"data error: {pack}: unreadable")


def test_window_keeps_xla_programs_beside_its_run_for_a_second_call(tmp_path, monkeypatch):
    """A fresh process (the window's command) gets JAX's persistent cache beside its run; a
    process that has imported JAX (this one) is left as it is, its children's too."""
    import os
    import subprocess
    import sys

    run = tmp_path / "run"
    probe = (
        "import sys; from jobs import gpu_window; gpu_window.keep_compilations(sys.argv[1]); "
        "import jax, jax.numpy as jnp; jax.jit(lambda x: x + 1)(jnp.ones(3)).block_until_ready(); "
        "print(jax.config.jax_compilation_cache_dir)"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_COMPILATION_CACHE")}
    env["JAX_PLATFORMS"] = "cpu"
    done = subprocess.run(
        [sys.executable, "-c", probe, str(run)],
        cwd=ROOT, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert done.stdout.strip() == f"{run}-xla" == gpu_window.compilation_cache(str(run) + "/")
    assert any((tmp_path / "run-xla").iterdir())  # even a program that compiles in no time

    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    gpu_window.keep_compilations(str(run))
    assert "JAX_COMPILATION_CACHE_DIR" not in os.environ
