"""ChessBench interop: bag shards the tests write -> Parquet -> bags again, and training on it.

The bag files are made here from the format (pipeline/chessbench/bag.py, checked against Beam's own
coders in test_bag.py); the boards are real positions with seeded made-up values."""

from __future__ import annotations

import collections
import json
import os
import pathlib
import random
import signal
import subprocess
import sys

import chess
import numpy as np
import pyarrow.parquet as pq
import pytest

from core.actions import ACTIONS, legal_actions
from core.schema import meta_dir, read_boards, stats_path
from model import config as config_lib
from model.data.loader import load_boards
from model.training.train import train
from pipeline.chessbench.bag import BagReader, BagWriter
from pipeline.chessbench.export_chessbench import ExportConfig, export
from pipeline.chessbench.import_chessbench import ChessBenchConfig, run_config
from pipeline.chessbench.import_chessbench import main as import_main
from pipeline.chessbench.records import encode_av, encode_bc, encode_sv

ROOT = pathlib.Path(__file__).resolve().parents[2]
BEAM = ["--runner=DirectRunner"]
SPECIAL = [
    "r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1",  # both castlings
    "rnbqkbnr/ppp1p1pp/8/3pPp2/8/8/PPPP1PPP/RNBQKBNR w KQkq f6 0 3",  # en passant
    "1n6/P7/8/8/8/8/8/k6K w - - 0 1",  # promotions and underpromotion captures
]


def positions(n: int, seed: int) -> list[str]:
    """Distinct positions from seeded random games, the special ones first."""
    rng = random.Random(seed)
    fens = list(SPECIAL)
    while len(fens) < n:
        board = chess.Board()
        for _ in range(rng.randint(1, 60)):
            moves = list(board.legal_moves)
            if not moves:
                break
            board.push(rng.choice(moves))
            if board.legal_moves.count() and board.fen() not in fens:
                fens.append(board.fen())
    return fens[:n]


def values(fens: list[str], seed: int) -> dict[str, dict[str, float]]:
    """A made-up win probability for every legal move of every board."""
    rng = random.Random(seed)
    return {fen: {m: rng.random() for m in legal_actions(chess.Board(fen))} for fen in fens}


def write_bag(path, records: list[bytes]) -> str:
    with BagWriter(str(path)) as writer:
        for record in records:
            writer.write(record)
    return str(path)


def read_records(paths) -> list[bytes]:
    out = []
    for path in paths:
        with BagReader(str(path)) as reader:
            out.extend(reader)
    return out


def run_import(tmp_path, pattern: str, kind: str, name: str = "imported", **more) -> dict:
    config = ChessBenchConfig(input=pattern, kind=kind, output=str(tmp_path / name), **more)
    return run_config(config, BEAM)


@pytest.fixture(scope="module")
def clean_av(tmp_path_factory):
    """12 complete boards in two shards, records shuffled so that some boards are split
    across the shards; and what each board's values are."""
    directory = tmp_path_factory.mktemp("bags")
    truth = values(positions(12, seed=1), seed=2)
    records = [encode_av(fen, m, p) for fen, moves in truth.items() for m, p in moves.items()]
    random.Random(3).shuffle(records)
    half = len(records) // 2
    write_bag(directory / "action_value-00000-of-00002_data.bag", records[:half])
    write_bag(directory / "action_value-00001-of-00002_data.bag", records[half:])
    return directory, truth, records


@pytest.fixture(scope="module")
def imported_av(clean_av, tmp_path_factory):
    directory, _, _ = clean_av
    out = tmp_path_factory.mktemp("imported")
    config = ChessBenchConfig(
        str(directory / "action_value@2_data.bag"), "av", str(out), num_shards=3, chunk_records=50
    )
    return out / "train", run_config(config, BEAM)


def test_av_records_become_one_complete_row_per_board(clean_av, imported_av):
    _, truth, records = clean_av
    split, document = imported_av
    rows = read_boards(str(split)).to_pylist()
    assert sorted(r["fen"] for r in rows) == sorted(truth)
    for row in rows:
        legal = legal_actions(chess.Board(row["fen"]))
        assert row["moves"] == legal  # every legal move, in action-space order
        assert row["win_probs"] == [truth[row["fen"]][m] for m in legal]  # float64, exact
        best = max(range(len(legal)), key=lambda i: (row["win_probs"][i], -i))
        assert row["best_move"] == legal[best]
        assert row["state_win_prob"] == row["win_probs"][best]
        assert row["cp"] is None and row["mate"] is None
        assert row["partial"] is False and row["source"] == "chessbench"
        assert row["count"] == 1
    assert document["records"]["read"] == len(records)
    assert document["boards"] == {"written": 12, "partial": 0, "conflicting": 0, "failed": 0}
    assert document["action_values"] == len(records)
    assert document["input_errors"] == []
    on_disk = json.loads(pathlib.Path(stats_path(str(split))).read_text())
    assert on_disk["boards"]["written"] == 12 and on_disk["kind"] == "av"
    assert len(list(split.glob("boards-*-of-00003.parquet"))) == 3


def test_the_shards_do_not_depend_on_how_the_records_were_chunked(clean_av, imported_av, tmp_path):
    directory, _, _ = clean_av
    split, _ = imported_av
    config = ChessBenchConfig(
        str(directory / "action_value@2_data.bag"),
        "av",
        str(tmp_path),
        num_shards=3,
        chunk_records=7,
    )
    run_config(config, BEAM)
    names = sorted(p.name for p in split.glob("*.parquet"))
    assert names == sorted(p.name for p in (tmp_path / "train").glob("*.parquet"))
    for name in names:
        assert (split / name).read_bytes() == (tmp_path / "train" / name).read_bytes()


def test_av_round_trip_gives_back_the_same_records(clean_av, imported_av, tmp_path):
    _, _, records = clean_av
    split, _ = imported_av
    result = export(
        ExportConfig(str(split), "av", str(tmp_path / "out" / "action_value@3_data.bag")),
        show_progress=False,
    )
    assert result["records"] == len(records) and result["boards_exported"] == 12
    again = read_records(sorted((tmp_path / "out").glob("action_value-*-of-00003_data.bag")))
    assert collections.Counter(again) == collections.Counter(records)
    # A board's records stay together in one shard, as the reference code reads them.
    shards_of_board = collections.defaultdict(set)
    for path in sorted((tmp_path / "out").iterdir()):
        with BagReader(str(path)) as reader:
            for record in reader:
                shards_of_board[record[1 : 1 + record[0]]].add(path.name)
    assert all(len(s) == 1 for s in shards_of_board.values())


@pytest.mark.parametrize("kind", ["sv", "bc"])
def test_sv_and_bc_round_trip(tmp_path, kind):
    fens = positions(10, seed=5)
    rng = random.Random(6)
    if kind == "sv":
        records = [encode_sv(fen, rng.random()) for fen in fens]
    else:
        records = [encode_bc(fen, rng.choice(legal_actions(chess.Board(fen)))) for fen in fens]
    name = "state_value" if kind == "sv" else "behavioral_cloning"
    pattern = write_bag(tmp_path / f"{name}_data.bagz", records)
    document = run_import(tmp_path, pattern, kind)
    assert document["boards"]["written"] == 10
    rows = read_boards(str(tmp_path / "imported" / "train")).to_pylist()
    assert all(r["moves"] == [] and r["partial"] for r in rows)
    if kind == "sv":
        assert all(r["best_move"] == "" and 0 <= r["state_win_prob"] <= 1 for r in rows)
    else:
        assert all(r["state_win_prob"] is None and r["best_move"] for r in rows)
    out = tmp_path / f"again.{kind}.bag"
    export(ExportConfig(str(tmp_path / "imported" / "train"), kind, str(out)), False)
    assert collections.Counter(read_records([out])) == collections.Counter(records)


def test_bad_boards_are_reported_and_the_rest_kept(tmp_path):
    fens = positions(6, seed=7)
    truth = values(fens, seed=8)
    records = []
    for fen, moves in truth.items():
        records += [encode_av(fen, m, p) for m, p in moves.items()]
    partial, illegal, conflicting, duplicated = fens[2], fens[3], fens[4], fens[5]
    dropped = next(iter(truth[partial]))
    records.remove(encode_av(partial, dropped, truth[partial][dropped]))
    not_legal = next(m for m in ACTIONS if m not in truth[illegal])
    records.append(encode_av(illegal, not_legal, 0.5))
    first = next(iter(truth[conflicting]))
    records.append(encode_av(conflicting, first, 1 - truth[conflicting][first] / 2))
    records += [encode_av(duplicated, m, p) for m, p in truth[duplicated].items()]  # all again
    records.append(encode_av("not a fen", "e2e4", 0.5))
    document = run_import(tmp_path, write_bag(tmp_path / "av.bag", records), "av")

    rows = {r["fen"]: r for r in read_boards(str(tmp_path / "imported" / "train")).to_pylist()}
    assert set(rows) == {fens[0], fens[1], partial, duplicated}
    assert rows[partial]["partial"] is True and dropped not in rows[partial]["moves"]
    assert len(rows[partial]["moves"]) == len(truth[partial]) - 1
    assert rows[duplicated]["count"] == 2 and rows[duplicated]["partial"] is False
    failures = read_failures(tmp_path / "imported" / "train")
    assert set(failures) == {illegal, conflicting, "not a fen"}
    assert not_legal in failures[illegal] and "not legal" in failures[illegal]
    assert "two win probabilities" in failures[conflicting]
    assert "unusable FEN" in failures["not a fen"]
    assert document["boards"] == {"written": 4, "partial": 1, "conflicting": 0, "failed": 3}
    assert document["records"]["duplicates"] == len(truth[duplicated])
    assert any(partial in text for text in document["examples"]["partial_boards"])


def read_failures(split) -> dict[str, str]:
    table = pq.read_table(next(pathlib.Path(meta_dir(str(split))).glob("failures-*.parquet")))
    return dict(zip(table["fen"].to_pylist(), table["error"].to_pylist(), strict=True))


def test_conflicting_bc_and_sv_records_are_counted(tmp_path):
    fen = positions(1, seed=9)[0]
    moves = legal_actions(chess.Board(fen))
    bc = [encode_bc(fen, moves[1]), encode_bc(fen, moves[0]), encode_bc(fen, moves[1])]
    document = run_import(tmp_path, write_bag(tmp_path / "bc.bag", bc), "bc", "bc")
    (row,) = read_boards(str(tmp_path / "bc" / "train")).to_pylist()
    assert row["best_move"] == moves[1] and row["count"] == 3  # the majority
    assert document["boards"]["conflicting"] == 1
    sv = [encode_sv(fen, 0.25), encode_sv(fen, 0.75)]
    document = run_import(tmp_path, write_bag(tmp_path / "sv.bag", sv), "sv", "sv")
    (row,) = read_boards(str(tmp_path / "sv" / "train")).to_pylist()
    assert row["state_win_prob"] == 0.5 and row["count"] == 2
    assert document["boards"]["conflicting"] == 1


def test_a_truncated_shard_is_named_and_the_others_imported(clean_av, tmp_path, capsys):
    directory, truth, _ = clean_av
    good = directory / "action_value-00000-of-00002_data.bag"
    cut = tmp_path / "action_value-00001-of-00002_data.bag"
    whole = (directory / cut.name).read_bytes()
    cut.write_bytes(whole[: len(whole) // 2])
    out = tmp_path / "out"
    code = import_main(["--input", f"{good},{cut}", "--kind", "av", "--output", str(out), *BEAM])
    assert code == 1  # imported what it could, but says something was wrong
    document = json.loads(pathlib.Path(stats_path(str(out / "train"))).read_text())
    (error,) = document["input_errors"]
    assert error["file"] == str(cut)
    assert document["shards"] == {"read": 1, "unreadable": 1}
    assert "WARNING" in capsys.readouterr().err
    # The good shard's boards are there: complete ones, and split ones marked partial.
    rows = read_boards(str(out / "train")).to_pylist()
    assert rows and all(r["fen"] in truth for r in rows)
    assert document["boards"]["partial"] == sum(r["partial"] for r in rows)


def test_ctrl_c_stops_the_import_in_one_line_with_130(clean_av, tmp_path):
    directory, truth, _ = clean_av
    pattern = str(directory / "action_value@2_data.bag")
    out = tmp_path / "out"
    process = subprocess.Popen(
        [sys.executable, "-m", "pipeline.chessbench.import_chessbench", "--input", pattern,
        "--kind", "av",
         "--output", str(out), *BEAM],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        start_new_session=True,  # the Ctrl-C goes to the whole group, as a terminal's
    )  # fmt: skip
    seen = []
    while not (line := process.stderr.readline()).startswith("import_chessbench:"):
        assert line, f"the import ended before it started: {seen}"
        seen.append(line)
    os.killpg(process.pid, signal.SIGINT)  # the pipeline is starting or running now
    stderr = process.stderr.read()
    assert process.wait(60) == 130, stderr[-3000:]
    assert "Traceback" not in stderr
    assert stderr.splitlines()[-1] == (
        "import_chessbench: stopped by SIGINT; an import is not resumed: rerun it with "
        f"--overwrite to replace what it wrote in {out / 'train'}"
    )
    config = ChessBenchConfig(pattern, "av", str(out), overwrite=True)
    assert run_config(config, BEAM)["boards"]["written"] == len(truth)


def test_bad_arguments_and_existing_outputs_are_clear_errors(clean_av, imported_av, capsys):
    directory, _, _ = clean_av
    split, _ = imported_av
    pattern = str(directory / "action_value@2_data.bag")
    assert import_main(["--input", pattern, "--kind", "av", "--output", str(split.parent)]) == 1
    assert "already holds" in capsys.readouterr().err
    missing = str(directory / "action_value@3_data.bag")
    assert import_main(["--input", missing, "--kind", "av", "--output", "/tmp/x"]) == 1
    assert "shards missing" in capsys.readouterr().err


@pytest.mark.parametrize("target", ["av", "sv", "bc"])
def test_the_trainer_runs_on_imported_chessbench_data(tmp_path, target):
    """Each kind imported from a bag the test makes, then trained on, the paper's way."""
    fens = positions(40, seed=10)
    truth = values(fens, seed=11)
    if target == "av":
        records = [encode_av(f, m, p) for f, moves in truth.items() for m, p in moves.items()]
    elif target == "sv":
        records = [encode_sv(f, max(moves.values())) for f, moves in truth.items()]
    else:
        records = [encode_bc(f, max(moves, key=moves.get)) for f, moves in truth.items()]
    run_import(tmp_path, write_bag(tmp_path / "data.bag", records), target, "data")
    data = load_boards(str(tmp_path / "data" / "train"))
    assert data.num_boards == 40
    config = config_lib.from_dict(
        {
            "model": {"num_layers": 1, "embedding_dim": 32, "num_heads": 2},
            "train": {"target": target, "batch_size": 16, "num_steps": 6, "log_every": 2,
                      "checkpoint_every": 6, "eval_every": 0, "learning_rate": 1e-3,
                      "num_bins": 32},
            "data": {"train": str(tmp_path / "data" / "train"), "test": ""},
        }
    )  # fmt: skip
    result = train(config, str(tmp_path / "run"), log=lambda _: None)
    assert result.step == 6
    records = [json.loads(line) for line in open(tmp_path / "run" / "metrics.jsonl")]
    losses = [r["loss"] for r in records if "loss" in r]
    assert len(losses) == 3 and np.isfinite(losses).all()


def _ordered_av_bag(path, boards: int, seed: int):
    """A bag of `boards` complete boards, each board's records together; returns the truth and
    the records' byte spans in the file (from the index)."""
    truth = values(positions(boards, seed=seed), seed=seed + 1)
    records = [encode_av(fen, m, p) for fen, moves in truth.items() for m, p in moves.items()]
    write_bag(path, records)
    with BagReader(str(path)) as reader:
        ends = [int(e) for e in reader._ends]
        index_start = reader._index_start
    spans = list(zip([0, *ends[:-1]], ends, strict=True))
    return truth, records, spans, index_start


@pytest.mark.parametrize("where", ["records", "index"])
def test_damage_costs_only_the_records_it_touches(tmp_path, capsys, where):
    path = tmp_path / "action_value_data.bag"
    truth, records, spans, index_start = _ordered_av_bag(path, boards=170, seed=11)
    data = bytearray(path.read_bytes())
    # 3 KB of damage in the middle of the records, or 512 bytes (64 entries) of the index.
    if where == "records":
        first = index_start // 2
        damaged = range(first, first + 3072)
    else:
        first = index_start + 8 * (len(records) // 2)
        damaged = range(first, first + 512)
    rng = random.Random(5)
    for i in damaged:
        data[i] = rng.randrange(256)
    path.write_bytes(bytes(data))
    if where == "records":  # a record is lost if its bytes overlap the damage
        hit = [k for k, (a, b) in enumerate(spans) if a < damaged.stop and b > damaged.start]
    else:  # or if an index entry it needs (its end, or its start: the previous end) is damaged
        entries = range((damaged.start - index_start) // 8, (damaged.stop - index_start) // 8)
        hit = sorted({k for e in entries for k in (e, e + 1)})
    out = tmp_path / "out"
    code = import_main(["--input", str(path), "--kind", "av", "--output", str(out), *BEAM])
    assert code == 1
    document = json.loads(pathlib.Path(stats_path(str(out / "train"))).read_text())
    counts = document["records"]
    # Every record the damage did not touch is read, before and after it.
    assert counts["read"] + counts["damaged"] == len(records)
    assert 0 < counts["damaged"] <= len(hit)
    assert len(records) - len(hit) > 4000
    (error,) = document["input_errors"]
    assert error["file"] == str(path) and "damaged" in error["error"]
    warnings = [line for line in capsys.readouterr().err.splitlines() if "WARNING" in line]
    assert len(warnings) == 1 and str(path) in warnings[0] and "damaged" in warnings[0]
    # The boards none of whose records were touched are imported whole, with their values.
    touched = {records[k] for k in hit}
    rows = {r["fen"]: r for r in read_boards(str(out / "train")).to_pylist()}
    whole = [
        fen
        for fen, moves in truth.items()
        if not any(encode_av(fen, m, p) in touched for m, p in moves.items())
    ]
    assert len(whole) >= len(truth) - 10
    for fen in whole:
        assert not rows[fen]["partial"]
        assert dict(zip(rows[fen]["moves"], rows[fen]["win_probs"], strict=True)) == truth[fen]


def test_an_empty_shard_is_an_input_error(clean_av, tmp_path, capsys):
    directory, _, _ = clean_av
    good = directory / "action_value-00000-of-00002_data.bag"
    empty = tmp_path / "empty_data.bag"
    empty.write_bytes(b"")
    out = tmp_path / "out"
    code = import_main(["--input", f"{good},{empty}", "--kind", "av", "--output", str(out), *BEAM])
    assert code == 1
    document = json.loads(pathlib.Path(stats_path(str(out / "train"))).read_text())
    (error,) = document["input_errors"]
    assert error["file"] == str(empty) and "0 bytes" in error["error"]
    err = capsys.readouterr().err
    assert [line for line in err.splitlines() if "WARNING" in line] == [
        f"WARNING: skipping {empty}: {empty}: empty file (0 bytes), no records"
    ]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -0.5, 1.5])
def test_win_probabilities_not_in_0_1_are_skipped_and_counted(tmp_path, bad):
    fens = positions(3, seed=21)
    truth = values(fens, seed=22)
    records = [encode_av(fen, m, p) for fen, moves in truth.items() for m, p in moves.items()]
    # A second value for a move would reject the board, unless the bad one is skipped first.
    records.append(encode_av(fens[0], next(iter(truth[fens[0]])), bad))
    write_bag(tmp_path / "in.bag", records)
    document = run_import(tmp_path, str(tmp_path / "in.bag"), "av")
    assert document["records"]["bad_values"] == 1
    assert document["examples"]["bad_value_records"]
    rows = read_boards(str(tmp_path / "imported" / "train")).to_pylist()
    assert all(np.isfinite(r["win_probs"]).all() for r in rows)
    assert all(dict(zip(r["moves"], r["win_probs"], strict=True)) == truth[r["fen"]] for r in rows)


def test_export_skips_boards_whose_values_are_not_in_0_1(clean_av, imported_av, tmp_path):
    _, truth, _ = clean_av
    split, _ = imported_av
    table = read_boards(str(split))
    rows = table.to_pylist()
    rows[0]["win_probs"][0] = float("nan")
    rows[1]["state_win_prob"] = float("nan")
    poisoned = tmp_path / "poisoned"
    poisoned.mkdir()
    pq.write_table(
        table.from_pylist(rows, schema=table.schema), poisoned / "boards-00000-of-00001.parquet"
    )
    av = export(ExportConfig(str(poisoned), "av", str(tmp_path / "av.bag")), show_progress=False)
    sv = export(ExportConfig(str(poisoned), "sv", str(tmp_path / "sv.bag")), show_progress=False)
    assert av["boards_with_bad_values"] == 1 and sv["boards_with_bad_values"] == 1
    assert av["boards"] == sv["boards"] == len(rows)
    for kind, name in (("av", "av.bag"), ("sv", "sv.bag")):
        document = run_import(tmp_path, str(tmp_path / name), kind, name=f"again-{kind}")
        assert document["records"]["bad_values"] == 0
        again = read_boards(str(tmp_path / f"again-{kind}" / "train")).to_pylist()
        assert len(again) == len(rows) - 1
        values_back = [p for r in again for p in r["win_probs"]]
        values_back += [r["state_win_prob"] for r in again if r["state_win_prob"] is not None]
        assert np.isfinite(values_back).all()
