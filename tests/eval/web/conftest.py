"""The web board's server, started as a person starts it (`python -m eval.web`) with the
shipped models/cpu on a free port of 127.0.0.1, once for the session, and a small client."""

from __future__ import annotations

import json
import pathlib
import queue
import subprocess
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
START_TIMEOUT_S = 300  # loading the model; XLA compiles it where its disk cache is empty
READY = "serving the board on "


class Client:
    """GET and POST against the server; each returns (status, decoded JSON body)."""

    def __init__(self, url: str):
        self.url = url.rstrip("/")

    def request(self, method: str, path: str, params=None, body=None, raw: bytes | None = None):
        url = self.url + path
        if params:
            url += "?" + urllib.parse.urlencode(params)
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=120) as response:
                return response.status, response.read(), response.headers
        except urllib.error.HTTPError as e:
            return e.code, e.read(), e.headers

    def get(self, path: str, **params):
        status, body, _ = self.request("GET", path, params)
        return status, json.loads(body)

    def post(self, path: str, body=None, raw: bytes | None = None):
        status, data, _ = self.request("POST", path, body=body, raw=raw)
        return status, json.loads(data)


def start_server(*args: str, env=None) -> tuple[subprocess.Popen, str, list[str]]:
    """`python -m eval.web --port 0 ARGS` from the checkout; (process, URL, output lines: the
    list goes on growing with what the server prints later)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "eval.web", "--port", "0", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    lines: queue.Queue[str | None] = queue.Queue()
    seen: list[str] = []

    def pump():
        for line in process.stdout:
            seen.append(line.rstrip("\n"))
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    while True:
        try:
            line = lines.get(timeout=START_TIMEOUT_S)
        except queue.Empty:
            process.kill()
            raise RuntimeError(f"the server did not start: {seen}") from None
        if line is None:
            raise RuntimeError(f"the server exited with {process.wait()}: {seen}")
        if READY in line:
            url = line.split(READY, 1)[1].split()[0]
            return process, url, seen


@pytest.fixture(scope="session")
def web_server():
    """(URL, output lines) of the server on models/cpu (BC, with its own value head);
    searches one leaf per network call, whose shapes the start compiles already."""
    if not (ROOT / "models" / "cpu" / "checkpoints").is_dir():
        pytest.skip("models/cpu is not in this checkout")
    process, url, lines = start_server("--search-batch", "1")
    yield url, lines
    process.terminate()
    process.wait(timeout=30)


@pytest.fixture(scope="session")
def client(web_server) -> Client:
    return Client(web_server[0])


@pytest.fixture(scope="session")
def launch():
    """For a test that needs a server of its own (and stops it): ARGS, env -> (process,
    client, output lines)."""

    def start(*args: str, env=None) -> tuple[subprocess.Popen, Client, list[str]]:
        process, url, lines = start_server(*args, env=env)
        return process, Client(url), lines

    return start
