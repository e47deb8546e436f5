"""The web board computes only what someone waits for: a search whose client hung up stops,
one superseded by a newer request of its page stops, and a policy's answer (no search) does
not wait behind a search. Against the real server (conftest: models/cpu, its own value head,
one leaf per network call, so a 5000-playout search runs for many seconds), with raw
sockets that hang up as a closed browser tab does; every wait is for an event the server
reports in GET /api/status, with a generous bound."""

from __future__ import annotations

import http.client
import json
import socket
import time
import urllib.parse

import pytest

WAIT_S = 120  # generous: the machine may be loaded
LONG = 5000  # playouts: far longer than anything the tests wait for meanwhile


def open_request(url: str, method: str, path: str, body=None) -> socket.socket:
    """Sends one request on a fresh connection and returns the socket, unread."""
    parts = urllib.parse.urlsplit(url)
    sock = socket.create_connection((parts.hostname, parts.port), timeout=WAIT_S)
    data = b"" if body is None else json.dumps(body).encode()
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
    )
    sock.sendall(head.encode() + data)
    return sock


def read_response(sock: socket.socket) -> tuple[int, dict]:
    response = http.client.HTTPResponse(sock)
    response.begin()
    return response.status, json.loads(response.read())


def wait_until(predicate, what: str):
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    pytest.fail(f"waited {WAIT_S} s for {what}")


def status(client) -> dict:
    code, body = client.get("/api/status")
    assert code == 200, body
    return body


def quiet_since(lines: list[str], start: int) -> list[str]:
    """What the server printed since line `start` (it prints nothing for a client gone)."""
    return lines[start:]


def test_searches_whose_clients_hung_up_are_given_up_silently(web_server, client):
    url, lines = web_server
    printed = len(lines)
    before = status(client)
    sockets = [open_request(url, "POST", "/api/play", {"simulations": LONG}) for _ in range(4)]
    wait_until(lambda: status(client)["searches"] >= 1, "a search to start")
    for sock in sockets:
        sock.close()
    wait_until(
        lambda: status(client)["cancelled"] == before["cancelled"] + 4, "the searches to stop"
    )
    wait_until(lambda: status(client)["searches"] == 0, "no search left running")
    code, body = client.get("/api/analysis", simulations=8)
    assert code == 200 and body["search"]["playouts"] == 8
    assert quiet_since(lines, printed) == []


def test_a_policy_answer_does_not_wait_for_a_running_search(web_server, client):
    url, _ = web_server
    before = status(client)
    sock = open_request(url, "POST", "/api/play", {"simulations": LONG})
    try:
        wait_until(lambda: status(client)["searches"] == 1, "the search to start")
        code, body = client.get("/api/analysis", moves="e2e4")
        assert code == 200 and body["search"] is None
        # Answered while the search still ran: the search's client has no answer yet.
        assert status(client)["searches"] == 1
        sock.setblocking(False)
        with pytest.raises(BlockingIOError):
            sock.recv(1)
    finally:
        sock.close()
    wait_until(lambda: status(client)["cancelled"] == before["cancelled"] + 1, "the search to stop")


def test_a_newer_request_of_the_page_supersedes_its_search(web_server, client):
    url, lines = web_server
    printed = len(lines)
    before = status(client)
    query = urllib.parse.urlencode({"simulations": LONG, "page": "tab-1"})
    older = open_request(url, "GET", f"/api/analysis?{query}")
    try:
        wait_until(lambda: status(client)["searches"] == 1, "the search to start")
        # Another page's request leaves it running; the same page's newer one stops it.
        assert client.get("/api/analysis", page="tab-2")[0] == 200
        assert status(client)["searches"] == 1
        code, body = client.get("/api/analysis", moves="d2d4", page="tab-1")
        assert code == 200 and body["search"] is None
        code, body = read_response(older)
    finally:
        older.close()
    assert code == 409 and "superseded" in body["error"]
    after = status(client)
    assert after["superseded"] == before["superseded"] + 1 and after["searches"] == 0
    assert quiet_since(lines, printed) == []
