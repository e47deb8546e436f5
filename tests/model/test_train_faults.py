"""The trainer under a hostile user: two trainings on one run dir, a lock left by a killed
one, a batch larger than the data, a full disk. Each ends in one line and a truthful exit
code, before doing harm."""

from __future__ import annotations

import errno
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time

import pytest

from model import checkpoint
from model.data.loader import load_boards, make_view
from model.training import train

ROOT = pathlib.Path(__file__).resolve().parents[2]
TINY = ["model.num_layers=1", "model.embedding_dim=32", "model.num_heads=2", "log_every=2"]


def argv(
    data: pathlib.Path, out: pathlib.Path, *sets: str, test: str = "", batch: int = 32
) -> list[str]:
    words = ["--config", "model/configs/small.toml", "--data", str(data / "train")]
    words += ["--test-data", test, "--out", str(out), "--steps", "6", "--batch-size", str(batch)]
    for item in [*TINY, "checkpoint_every=3", "eval_boards=5", "eval_batches=1", *sets]:
        words += ["--set", item]
    return words


def finished_steps(out: pathlib.Path) -> list[int]:
    directory = out / "checkpoints"
    return (
        sorted(int(n) for n in os.listdir(directory) if n.isdigit()) if directory.exists() else []
    )


def only_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in text, text[-3000:]
    return lines[0]


# --- one training per run dir ----------------------------------------------------------------


@pytest.mark.slow
def test_a_second_training_on_a_run_dir_in_use_is_refused_naming_the_holder(
    synthetic_data, tmp_path
):
    out = tmp_path / "run"
    command = [sys.executable, "-m", "model.training.train"]
    first_argv = argv(synthetic_data, out, "learning_rate=1e-3", "checkpoint_every=10")
    first_argv[first_argv.index("--steps") + 1] = "100000"  # still running when stopped
    first = subprocess.Popen([*command, *first_argv], cwd=ROOT, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        while not finished_steps(out) and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert finished_steps(out), "the first training must be running, with a checkpoint"
        before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
        second = subprocess.run(
            [*command, *argv(synthetic_data, out, "learning_rate=5e-4")],
            cwd=ROOT, capture_output=True, text=True, timeout=240,
        )  # fmt: skip
        assert second.returncode == 1
        line = only_line(second.stderr)
        assert line == (
            f"error: {out} is being written by another run (train pid {first.pid} on "
            f"{socket.gethostname()}, holding {out / 'lock'}); wait for it to end or stop it"
        )
        assert second.stdout == ""  # it loaded nothing, compiled nothing
        assert first.poll() is None
        # Nothing of the first run was replaced: its config (learning rate) and lock stand.
        assert (out / "config.toml").read_bytes() == before["config.toml"]
        assert "learning_rate = 0.001" in before["config.toml"].decode()
        assert (out / "lock").read_bytes() == before["lock"]
    finally:
        first.send_signal(signal.SIGTERM)
        _, stderr = first.communicate(timeout=240)
    assert first.returncode == 143, stderr[-3000:]
    assert not (out / "lock").exists()  # released as the first ended
    records = [json.loads(line) for line in open(out / "metrics.jsonl")]
    assert {r["learning_rate"] for r in records if r["kind"] == "train"} == {1e-3}


def test_a_lock_left_by_a_killed_training_is_taken_over_with_a_warning(synthetic_data, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # its PID is no longer alive
    host = socket.gethostname()
    (out / "lock").write_text(f"train pid {dead.pid} on {host}\n")
    logs: list[str] = []
    config = train.resolve_config(train.parse_args(argv(synthetic_data, out)))
    result = train.train(config, str(out), log=logs.append)
    assert result.step == 6
    warning = (
        f"warning: taking over {out / 'lock'}, left by train pid {dead.pid} on {host}, "
        "which ended without releasing it"
    )
    assert logs.count(warning) == 1
    assert not (out / "lock").exists()


# --- a batch larger than the data ------------------------------------------------------------


@pytest.mark.parametrize("streaming", [False, True])
def test_a_batch_larger_than_the_training_data_is_one_line_before_compiling(
    synthetic_data, tmp_path, capsys, streaming
):
    data = load_boards(str(synthetic_data / "train"))
    examples = len(make_view(data, "av", 128))
    streamed = f"data.streaming={str(streaming).lower()}"
    assert train.main(argv(synthetic_data, tmp_path / "run", streamed, batch=100_000)) == 1
    captured = capsys.readouterr()
    bound = "at most " if streaming else ""  # streaming counts from the footers
    assert only_line(captured.err) == (
        f"data error: train.batch_size 100,000 is larger than data.train: {data.num_boards} "
        f"boards, {bound}{examples:,} av examples; use a batch of at most {examples:,}"
    )
    assert "compiled" not in captured.out
    assert not finished_steps(tmp_path / "run")


# --- a full disk -----------------------------------------------------------------------------


def no_space() -> OSError:
    # What a write to a full disk raises: errno 28, no file named.
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_full_disk_while_checkpointing_is_one_line_and_the_rerun_resumes(
    synthetic_data, tmp_path, capsys, monkeypatch
):
    out = tmp_path / "run"
    save = checkpoint.Checkpointer.save

    def save_until_full(self, step, *args, **kwargs):
        if step > 3:
            raise no_space()
        return save(self, step, *args, **kwargs)

    monkeypatch.setattr(checkpoint.Checkpointer, "save", save_until_full)
    assert train.main(argv(synthetic_data, out)) == 1
    captured = capsys.readouterr()
    assert only_line(captured.err) == (
        f"error: no space left on device writing {out / 'checkpoints'}; free some space: run "
        "the same command again to resume from the last checkpoint"
    )
    monkeypatch.setattr(checkpoint.Checkpointer, "save", save)
    assert train.main(argv(synthetic_data, out)) == 0
    assert "resumed from step 3" in capsys.readouterr().out
    assert finished_steps(out)[-1] == 6


def test_a_full_disk_while_logging_metrics_is_one_line(
    synthetic_data, tmp_path, capsys, monkeypatch
):
    out = tmp_path / "run"
    opened = train.MetricsLog.__init__

    class FullDisk:
        """metrics.jsonl's file on a disk that fills after two records."""

        def __init__(self, file):
            self.file, self.records = file, 0

        def write(self, text):
            self.records += 1
            if self.records > 2:
                raise no_space()
            return self.file.write(text)

        def __getattr__(self, name):
            return getattr(self.file, name)

    def open_on_a_full_disk(self, *args, **kwargs):
        opened(self, *args, **kwargs)
        self._file = FullDisk(self._file)

    monkeypatch.setattr(train.MetricsLog, "__init__", open_on_a_full_disk)
    assert train.main(argv(synthetic_data, out)) == 1
    assert only_line(capsys.readouterr().err) == (
        f"error: no space left on device writing {out / 'metrics.jsonl'}; free some space: "
        "run the same command again to resume from the last checkpoint"
    )
    assert not (out / "lock").exists()  # released on the way out


def test_a_lock_that_is_a_directory_is_one_line(synthetic_data, tmp_path, capsys):
    out = tmp_path / "run"
    (out / "lock").mkdir(parents=True)
    assert train.main(argv(synthetic_data, out)) == 1
    line = only_line(capsys.readouterr().err)
    assert line == (
        f"error: {out} cannot be locked: {out / 'lock'} is a directory, not a lock file; remove it"
    )
    assert sorted(p.name for p in out.iterdir()) == ["lock"]


# --- a lost peer -----------------------------------------------------------------------------


def _two_processes(words: list[str], port: int, **env: str) -> list[subprocess.Popen]:
    shared = {**os.environ, "JAX_PLATFORMS": "cpu", "JAX_NUM_PROCESSES": "2", **env}
    shared["JAX_COORDINATOR_ADDRESS"] = f"127.0.0.1:{port}"
    return [
        subprocess.Popen(
            [sys.executable, "-m", "model.training.train", *words],
            cwd=ROOT,
            env={**shared, "JAX_PROCESS_ID": str(p)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for p in range(2)
    ]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.slow
def test_a_killed_peer_ends_the_other_in_one_line_and_the_run_resumes(synthetic_data, tmp_path):
    out = tmp_path / "run"
    words = argv(synthetic_data, out)
    words[words.index("--steps") + 1] = "100000"  # still running when its peer is killed
    first, second = _two_processes(words, _free_port(), SEARCHLESS_PEER_TIMEOUT="5")
    try:
        deadline = time.monotonic() + 300
        while not finished_steps(out) and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert finished_steps(out), "the run must be going, with a checkpoint"
        second.kill()
        second.wait()
        _, stderr = first.communicate(timeout=180)
    finally:
        for process in (first, second):
            process.kill()
            process.communicate()
    assert first.returncode == 3, stderr[-3000:]
    line = only_line(stderr)
    step = finished_steps(out)[-1]
    assert line.startswith("error: training process 1 of 2 stopped answering for ")
    assert line.endswith(
        " s (killed or crashed); process 0 stops too: the last complete checkpoint in "
        f"{out} is step {step}; the same command on every process resumes from it"
    )
    # The same command on both processes resumes from that checkpoint.
    words[words.index("--steps") + 1] = str(step + 3)
    resumed = _two_processes(words, _free_port())
    outputs = [p.communicate(timeout=300) for p in resumed]
    assert [p.returncode for p in resumed] == [0, 0], outputs[0][1][-3000:]
    assert f"resumed from step {step} " in outputs[0][0]
    assert finished_steps(out)[-1] == step + 3
