"""pipeline.download against a real HTTP server on 127.0.0.1 that drops connections mid-file,
ignores Range, or holds a response half-sent until the test lets it go on."""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from pipeline import download as dl

NAME = "lichess_db_standard_rated_2023-02.pgn.zst"
ROOT = pathlib.Path(__file__).resolve().parents[2]
GATE = dl._CHUNK  # a held response stops after one whole read of the client's


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, payload: bytes, checksums: str | None):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.payload = payload
        self.checksums = checksums
        self.cuts_left = 0  # responses to cut short after `cut_after` bytes
        self.cut_after = 0
        self.honour_range = True
        # While `gate` is clear, a response stops after `gate_after` bytes until it is set.
        self.gate = threading.Event()
        self.gate.set()
        self.gate_after = 0
        self.requests: list[tuple[str, str | None]] = []

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/"


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, *args) -> None:  # keep pytest output clean
        pass

    def do_GET(self) -> None:
        server = self.server
        server.requests.append((self.path, self.headers.get("Range")))
        if self.path == "/" + dl.CHECKSUM_LIST:
            if server.checksums is None:
                self.send_error(404)
                return
            body = server.checksums.encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if self.path != "/" + NAME:
            self.send_error(404)
            return
        payload, start = server.payload, 0
        match = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range") or "")
        if match and server.honour_range:
            start = int(match.group(1))
            if start >= len(payload):
                self.send_error(416)
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(payload) - 1}/{len(payload)}")
        else:
            self.send_response(200)
        body = payload[start:]
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if server.cuts_left > 0:
            server.cuts_left -= 1
            self.wfile.write(body[: server.cut_after])
            self.wfile.flush()
            self.close_connection = True
            self.connection.close()  # mid-file: the client sees a short read
            return
        if not server.gate.is_set():
            self.wfile.write(body[: server.gate_after])
            self.wfile.flush()
            server.gate.wait(60)
            body = body[server.gate_after :]
        self.wfile.write(body)


@pytest.fixture
def payload() -> bytes:
    return os.urandom(3_000_000)


def _serve(payload: bytes, checksums: str | None):
    server = _Server(payload, checksums)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server


@pytest.fixture
def server(payload):
    digest = hashlib.sha256(payload).hexdigest()
    srv = _serve(payload, f"{'0' * 64}  other.pgn.zst\n{digest}  {NAME}\n")
    yield srv
    srv.gate.set()
    srv.shutdown()
    srv.server_close()


def test_a_cut_connection_is_resumed_with_range_and_the_file_is_identical(
    server, payload, tmp_path
):
    server.cuts_left, server.cut_after = 2, 1_000_000
    result = dl.download(server.base + NAME, str(tmp_path), backoff=0)
    assert open(result.path, "rb").read() == payload
    assert result.verified and result.checksum_source.endswith(dl.CHECKSUM_LIST)
    ranges = [r for path, r in server.requests if path == "/" + NAME]
    assert ranges == [None, "bytes=1000000-", "bytes=2000000-"]
    assert not os.path.exists(result.path + ".part")


def test_a_partial_file_left_by_an_earlier_run_is_resumed(server, payload, tmp_path):
    (tmp_path / (NAME + ".part")).write_bytes(payload[:1_234_567])
    result = dl.download(server.base + NAME, str(tmp_path), backoff=0)
    assert result.resumed_from == 1_234_567
    assert open(result.path, "rb").read() == payload
    assert [r for p, r in server.requests if p == "/" + NAME] == ["bytes=1234567-"]


def test_a_server_ignoring_range_restarts_from_zero(server, payload, tmp_path):
    server.honour_range = False
    (tmp_path / (NAME + ".part")).write_bytes(b"x" * 5000)  # wrong bytes: must not survive
    result = dl.download(server.base + NAME, str(tmp_path), backoff=0)
    assert open(result.path, "rb").read() == payload and result.verified
    assert result.resumed_from == 0  # none of the 5000 bytes on disk were kept


def test_a_wrong_checksum_is_refused_and_the_bytes_kept_aside(server, payload, tmp_path):
    with pytest.raises(dl.ChecksumMismatch, match="moved aside"):
        dl.download(server.base + NAME, str(tmp_path), sha256="ab" * 32, backoff=0)
    assert not (tmp_path / NAME).exists()
    assert (tmp_path / (NAME + ".bad")).read_bytes() == payload


def test_a_mismatch_with_the_published_list_is_refused(payload, tmp_path):
    srv = _serve(payload, f"{'cd' * 32}  {NAME}\n")
    try:
        with pytest.raises(dl.ChecksumMismatch, match=dl.CHECKSUM_LIST):
            dl.download(srv.base + NAME, str(tmp_path), backoff=0)
    finally:
        srv.shutdown()
        srv.server_close()
    assert not (tmp_path / NAME).exists() and (tmp_path / (NAME + ".bad")).exists()


def test_without_any_checksum_the_file_is_complete_but_reported_unverified(payload, tmp_path):
    srv = _serve(payload, None)
    try:
        result = dl.download(srv.base + NAME, str(tmp_path), backoff=0)
    finally:
        srv.shutdown()
        srv.server_close()
    assert not result.verified and open(result.path, "rb").read() == payload


def test_giving_up_keeps_the_part_for_the_next_run(server, payload, tmp_path):
    server.cuts_left, server.cut_after = 10, 500_000
    with pytest.raises(dl.DownloadError, match="resumes"):
        dl.download(server.base + NAME, str(tmp_path), retries=1, backoff=0)
    assert (tmp_path / (NAME + ".part")).stat().st_size == 1_000_000
    server.cuts_left = 0
    result = dl.download(server.base + NAME, str(tmp_path), backoff=0)
    assert result.resumed_from == 1_000_000 and open(result.path, "rb").read() == payload


def test_the_command_line_prints_json_and_fails_clearly(server, payload, tmp_path, capsys):
    assert dl.main(["--url", server.base + NAME, "--out", str(tmp_path)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["sha256"] == hashlib.sha256(payload).hexdigest() and printed["verified"]
    assert dl.main(["--url", server.base + "missing.pgn.zst", "--out", str(tmp_path)]) == 1
    assert "HTTP 404" in capsys.readouterr().err


def test_a_404_leaves_no_empty_part(server, tmp_path, capsys):
    out = tmp_path / "out"
    assert dl.main(["--url", server.base + "missing.pgn.zst", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == f"error: {server.base}missing.pgn.zst: HTTP 404 Not Found"
    assert "Traceback" not in err
    assert list(out.iterdir()) == []


def test_month_urls():
    assert dl.month_url("2023-02").endswith("/standard/lichess_db_standard_rated_2023-02.pgn.zst")
    with pytest.raises(ValueError, match="2023-02"):
        dl.month_url("2023-13")


def _command(url: str, out: pathlib.Path) -> list[str]:
    return [sys.executable, "-m", "pipeline.download", "--url", url, "--out", str(out)]


def _wait_for(condition, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _part_size(path: pathlib.Path) -> int:
    return path.stat().st_size if path.exists() else 0


def test_two_processes_downloading_the_same_file_leave_it_whole(server, payload, tmp_path):
    """The second run waits on the first's lock, then finds the file in place and verifies it."""
    server.gate.clear()
    server.gate_after = GATE
    part = tmp_path / (NAME + ".part")
    first = subprocess.Popen(
        _command(server.base + NAME, tmp_path),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _wait_for(lambda: _part_size(part) >= GATE)
    second = subprocess.Popen(
        _command(server.base + NAME, tmp_path),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    waiting = second.stderr.readline()  # its checksum-list fetch prints nothing
    server.gate.set()
    outputs = [process.communicate(timeout=120) for process in (first, second)]
    assert "another process is downloading" in waiting and str(part) in waiting
    digest = hashlib.sha256(payload).hexdigest()
    for process, (out, err) in zip((first, second), outputs, strict=True):
        assert process.returncode == 0, err
        result = json.loads(out)
        assert result["verified"] and result["sha256"] == digest
        assert result["bytes"] == len(payload)
    assert (tmp_path / NAME).read_bytes() == payload
    assert not part.exists()
    assert [r for p, r in server.requests if p == "/" + NAME] == [None]  # fetched once


def test_the_checksum_is_that_of_the_bytes_on_disk(server, payload, tmp_path):
    """Bytes appended to the .part by a writer ignoring the lock are caught, not reported
    as verified (the hash is read back from the file, not summed from what was received)."""
    server.gate.clear()
    server.gate_after = GATE
    part = tmp_path / (NAME + ".part")
    outcome: list[BaseException | dl.Downloaded] = []

    def run() -> None:
        try:
            outcome.append(dl.download(server.base + NAME, str(tmp_path), backoff=0))
        except BaseException as e:  # noqa: BLE001 - handed to the test thread
            outcome.append(e)

    thread = threading.Thread(target=run)
    thread.start()
    _wait_for(lambda: _part_size(part) >= GATE)
    with open(part, "ab") as rogue:
        rogue.write(b"not the file")
    server.gate.set()
    thread.join(60)
    [result] = outcome
    assert isinstance(result, dl.ChecksumMismatch), result
    assert not (tmp_path / NAME).exists()


def test_a_malformed_sha256_is_refused_before_anything_is_fetched(server, tmp_path, capsys):
    with pytest.raises(ValueError, match="64 hexadecimal digits"):
        dl.download(server.base + NAME, str(tmp_path), sha256="abc123", backoff=0)
    with pytest.raises(SystemExit) as exit_info:
        dl.main(["--url", server.base + NAME, "--out", str(tmp_path), "--sha256", "g" * 64])
    assert exit_info.value.code == 2
    assert "--sha256 must be 64 hexadecimal digits" in capsys.readouterr().err
    assert server.requests == [] and not any(tmp_path.iterdir())


def test_ctrl_c_keeps_the_part_says_so_in_one_line_and_exits_130(server, payload, tmp_path):
    server.gate.clear()
    server.gate_after = GATE
    part = tmp_path / (NAME + ".part")
    process = subprocess.Popen(
        _command(server.base + NAME, tmp_path),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _wait_for(lambda: _part_size(part) >= GATE)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert "Traceback" not in err and out == ""
    assert err.strip().splitlines()[-1].startswith("download: interrupted;")
    assert part.read_bytes() == payload[:GATE]
    server.gate.set()
    result = dl.download(server.base + NAME, str(tmp_path), backoff=0)
    assert result.resumed_from == GATE and (tmp_path / NAME).read_bytes() == payload


def test_no_network_says_nothing_is_kept_and_leaves_no_part(tmp_path, capsys):
    # A port on 127.0.0.1 nobody listens on: the connection is refused at every attempt.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/{NAME}"
    out = tmp_path / "out"
    assert dl.main(["--url", url, "--out", str(out), "--retries", "0", "--sha256", "0" * 64]) == 1
    err = capsys.readouterr().err
    line = err.strip().splitlines()[-1]
    assert line.startswith(f"error: {url}: gave up after 1 attempt (")
    assert line.endswith("nothing was received; the next run starts afresh")
    assert ".part" not in err and "Traceback" not in err
    assert list(out.iterdir()) == []
