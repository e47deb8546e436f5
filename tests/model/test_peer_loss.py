"""model/training/peer_loss.py: processes of one training watch each other through JAX's real
coordination service (two clients of one service, in a child process: the service's clients
abort their process when it goes away)."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import textwrap

import pytest

from model.config import ConfigError
from model.training.peer_loss import peer_lost_line, peer_timeout

ROOT = pathlib.Path(__file__).resolve().parents[2]
WATCH = textwrap.dedent(
    """
    import json, os, socket, sys, threading, time
    from jax._src.lib import _jax
    from model.training.peer_loss import PeerWatch

    probe = socket.socket(); probe.bind(("127.0.0.1", 0)); port = probe.getsockname()[1]
    probe.close()
    address = f"127.0.0.1:{port}"
    service = _jax.get_distributed_runtime_service(address, 2, heartbeat_timeout=100)
    clients = [
        _jax.get_distributed_runtime_client(address, i, init_timeout=60, heartbeat_timeout=100)
        for i in range(2)
    ]
    threads = [threading.Thread(target=c.connect) for c in clients]
    [t.start() for t in threads]; [t.join() for t in threads]

    def watch(peer_finishes: bool) -> tuple[list[str], float, bool]:
        lost = []
        start = time.monotonic()
        watcher = PeerWatch(clients[0], 0, 2, lambda: "resume here", 3.0, on_lost=lost.append)
        peer = PeerWatch(clients[1], 1, 2, lambda: "", 3.0, on_lost=lambda line: None)
        watcher.start(); peer.start()
        time.sleep(2.0)
        if peer_finishes:
            peer.finished()
        else:
            peer._stop.set()  # it dies: no more beats, no word
        # A collective failing at once (Gloo's "Connection reset by peer") waits for the
        # watch's verdict: explained by the loss when the peer died, not when it finished.
        explained = watcher.explains(RuntimeError("Connection reset by peer"))
        seconds = time.monotonic() - start
        watcher.finished()
        return lost, seconds, explained

    # Each scenario with keys of its own: a fresh pair of watches on the same store.
    import model.training.peer_loss as peer_loss
    peer_loss._PREFIX = "dies"
    died = watch(peer_finishes=False)
    peer_loss._PREFIX = "finishes"
    finished = watch(peer_finishes=True)
    print(json.dumps({"died": died, "finished": finished}), flush=True)
    os._exit(0)
    """
)


def test_a_silent_peer_is_named_and_a_finished_one_is_not(tmp_path):
    run = subprocess.run(
        [sys.executable, "-c", WATCH], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    (line,), seconds, explained = result["died"]
    assert line == (
        "error: training process 1 of 2 stopped answering for 3 s (killed or crashed); "
        "process 0 stops too: resume here"
    )
    assert seconds < 11  # the peer went silent at 2 s; the timeout is 3 s
    assert explained
    lost, seconds, explained = result["finished"]
    assert lost == [] and not explained  # an exit after `finished` is no loss
    assert seconds < 2.0 + 3.0 + 3.0 + 2.0  # the error waited out the timeout, then is raised


def test_the_line_names_the_coordinator_and_the_timeout_is_checked(monkeypatch):
    line = peer_lost_line([0], 1, 2, 21.4, "resume")
    assert line.startswith("error: training process 0 of 2 (the coordinator) stopped answering")
    assert "for 21 s" in line
    assert "processes 1, 3 of 4" in peer_lost_line([1, 3], 0, 4, 30, "resume")
    monkeypatch.setenv("SEARCHLESS_PEER_TIMEOUT", "soon")
    with pytest.raises(ConfigError, match="SEARCHLESS_PEER_TIMEOUT='soon'"):
        peer_timeout()
    monkeypatch.setenv("SEARCHLESS_PEER_TIMEOUT", "0.5")
    with pytest.raises(ConfigError, match=">= 2 seconds"):
        peer_timeout()
    monkeypatch.setenv("SEARCHLESS_PEER_TIMEOUT", "45")
    assert peer_timeout() == 45.0
