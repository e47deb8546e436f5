"""The web board's HTTP as a hostile client meets it: every refusal is one JSON line with the
right status (the standard library's own too), bad JSON values are 400s, chunked bodies
and slow clients cannot wedge a connection or a thread, and only the server's own page may
call it. The real WebServer in this process on a free port, with the real model store; no
request here needs a model loaded."""

from __future__ import annotations

import datetime
import http.client
import io
import json
import pathlib
import socket
import threading
import urllib.parse

import chess
import chess.pgn
import pytest

from eval.web.api import WebSettings
from eval.web.hosts import HostCheck
from eval.web.http_server import WebServer
from eval.web.models import ModelStore

ROOT = pathlib.Path(__file__).resolve().parents[3]
READ_TIMEOUT_S = 1.0
WAIT_S = 60
# Black to move while White's king stands in check: no legal position.
OPPOSITE_CHECK = "4k3/8/8/8/8/8/4r3/4K3 b - - 0 1"


@pytest.fixture(scope="module")
def server():
    store = ModelStore.create(None, None, str(ROOT))
    web = WebServer(("127.0.0.1", 0), store, WebSettings(read_timeout=READ_TIMEOUT_S))
    thread = threading.Thread(target=web.serve_forever, daemon=True)
    thread.start()
    yield web
    web.shutdown()
    web.server_close()


def call(server, method, path, body=None, headers=None):
    """(status, headers, body bytes) over a fresh connection."""
    connection = http.client.HTTPConnection(*server.server_address[:2], timeout=WAIT_S)
    try:
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body))
        connection.request(method, path, body=data, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.headers, response.read()
    finally:
        connection.close()


def error_line(headers, body: bytes) -> str:
    assert headers["Content-Type"] == "application/json"
    message = json.loads(body)["error"]
    assert "\n" not in message and "Traceback" not in message
    return message


def raw(server, data: bytes) -> bytes:
    """Sends `data` on a fresh socket; everything the server sends until it closes."""
    with socket.create_connection(server.server_address[:2], timeout=WAIT_S) as sock:
        sock.sendall(data)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


# --- the standard library's refusals, as JSON ---------------------------------------------


def test_a_request_line_too_long_is_a_json_414(server):
    status, headers, body = call(server, "GET", "/api/position?moves=" + "e" * 70000)
    assert status == 414
    assert "414" in error_line(headers, body)


def test_an_unknown_method_is_a_json_501(server):
    status, headers, body = call(server, "PUT", "/api/load", {"text": "x"})
    assert status == 501
    assert "PUT" in error_line(headers, body)


def test_head_answers_the_headers_of_get(server):
    status, headers, body = call(server, "HEAD", "/")
    assert status == 200 and headers["Content-Type"].startswith("text/html") and body == b""
    status, headers, body = call(server, "HEAD", "/api/position")
    assert status == 200 and headers["Content-Type"] == "application/json" and body == b""


def test_a_chunked_body_is_refused_and_the_connection_closed(server):
    request = (
        b"POST /api/load HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5\r\nhello\r\n0\r\n\r\n"
        b"GET /api/models HTTP/1.1\r\n\r\n"
    )
    answer = raw(server, request)
    assert answer.startswith(b"HTTP/1.1 411 ")
    assert b"Content-Length" in answer and answer.count(b"HTTP/1.1 ") == 1


def test_a_silent_client_is_dropped_after_the_read_timeout(server):
    # Half a request line, then nothing: the server hangs up instead of waiting forever.
    with socket.create_connection(server.server_address[:2], timeout=WAIT_S) as sock:
        sock.sendall(b"GET /api/models HT")
        assert sock.recv(1024) == b""
    # Headers, then half a body.
    with socket.create_connection(server.server_address[:2], timeout=WAIT_S) as sock:
        sock.sendall(b"POST /api/load HTTP/1.1\r\nContent-Length: 100\r\n\r\n{")
        assert sock.recv(1024) == b""


# --- JSON values of the wrong type -------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b'{"simulations": Infinity}', "the body is not JSON: Infinity is not a JSON number"),
        (b'{"simulations": NaN}', "the body is not JSON"),
        (b'{"simulations": 1e400}', "simulations must be a whole number, got inf"),
        (b'{"simulations": true}', "simulations must be a whole number, got True"),
        (b'{"simulations": 1.9}', "simulations must be a whole number, got 1.9"),
        (b'{"simulations": "2.5"}', "simulations must be a whole number"),
        (b'{"moves": 5}', "moves must be a list of UCI strings"),
        (b'{"moves": {"a": 1}}', "moves must be a list of UCI strings"),
        (b'{"model": ["cpu"]}', "model must be a string, got ['cpu']"),
        (b'{"value": 3}', "value must be a string"),
        (b'{"page": {}}', "page must be a string"),
        (b"[" * 100000 + b"]" * 100000, "nested too deep"),
    ],
)
def test_bad_json_values_are_a_400_line(server, body, words):
    status, headers, data = call(server, "POST", "/api/play", body)
    assert status == 400
    assert words in error_line(headers, data)


def test_simulations_in_a_query_are_digits_only(server):
    status, headers, body = call(server, "GET", "/api/analysis?simulations=1e400")
    assert status == 400 and "whole number" in error_line(headers, body)


def test_an_illegal_position_is_said_in_words(server):
    query = urllib.parse.urlencode({"fen": OPPOSITE_CHECK})
    status, headers, body = call(server, "GET", f"/api/position?{query}")
    assert status == 400
    message = error_line(headers, body)
    assert "the side not to move is in check" in message and "Status" not in message


def test_a_pgn_s_fen_header_is_checked_as_a_fen_alone_is(server):
    empty = "8/8/8/8/8/8/8/8 w - - 0 1"
    for text in (empty, f'[FEN "{empty}"]\n\n*', f'[FEN "{empty}"]\n[SetUp "1"]\n\n*'):
        status, headers, body = call(server, "POST", "/api/load", {"text": text})
        assert status == 400, text
        assert "the FEN is not a legal position: no white king" in error_line(headers, body)
    status, headers, body = call(server, "POST", "/api/load", {"text": f'[FEN "{OPPOSITE_CHECK}"]'})
    assert status == 400 and "in check" in error_line(headers, body)


# --- only the server's own page -----------------------------------------------------------


def test_a_foreign_host_or_origin_is_refused(server):
    port = server.server_address[1]
    own = f"127.0.0.1:{port}"
    status, headers, body = call(server, "GET", "/api/models", headers={"Host": "evil.test"})
    assert status == 403 and "Host 'evil.test'" in error_line(headers, body)
    status, headers, body = call(
        server,
        "POST",
        "/api/load",
        {"text": chess.STARTING_FEN},
        headers={"Host": own, "Origin": "http://elsewhere"},
    )
    assert status == 403 and "cross-origin" in error_line(headers, body)
    # An image or a link on another site's page sends no Origin, but the browser says so.
    cross_site = {"Host": own, "Sec-Fetch-Site": "cross-site"}
    status, headers, body = call(server, "GET", "/api/position", headers=cross_site)
    assert status == 403 and "another site" in error_line(headers, body)
    assert call(server, "GET", "/", headers=cross_site)[0] == 200  # a link to the board
    for host in (own, f"localhost:{port}", f"[::1]:{port}"):
        origin = {"Host": host, "Origin": f"http://{host}"}
        status, _, _ = call(server, "POST", "/api/load", {"text": chess.STARTING_FEN}, origin)
        assert status == 200, host


def test_the_host_given_with_host_is_the_server_s_own():
    check = HostCheck("my-box.lan", 8000)
    assert check.refusal("my-box.lan:8000", "http://my-box.lan:8000") is None
    assert check.refusal("my-box.lan:8001", None) is not None
    assert check.refusal("127.0.0.1:8000", None) is None
    # Listening on every address: any name of the machine, but the Origin must match it.
    everywhere = HostCheck("0.0.0.0", 8000)
    assert everywhere.refusal("192.168.1.5:8000", "http://192.168.1.5:8000") is None
    assert everywhere.refusal("192.168.1.5:8000", "http://elsewhere") is not None


# --- PGN export ---------------------------------------------------------------------------


def pgn_text(server, **params) -> str:
    status, _, body = call(server, "GET", "/api/pgn?" + urllib.parse.urlencode(params))
    assert status == 200, body
    return body.decode()


def pgn_of(server, **params) -> chess.pgn.Game:
    return chess.pgn.read_game(io.StringIO(pgn_text(server, **params)))


def test_pgn_header_values_cannot_inject_headers(server):
    text = pgn_text(server, white='x"]\n[Result "1-0', black="a\\b")
    tags = [line for line in text.splitlines() if line.startswith("[")]
    # One line each, quotes and backslashes escaped as PGN escapes them in strings.
    assert '[White "x\\"] [Result \\"1-0"]' in tags
    assert '[Black "a\\\\b"]' in tags
    assert [tag for tag in tags if tag.startswith("[Result ")] == ['[Result "*"]']


def test_pgn_export_has_today_s_date_and_standard_termination(server):
    game = pgn_of(server, moves="f2f3 e7e5 g2g4 d8h4", white="You", black="cpu")
    assert game.headers["Date"] == datetime.date.today().strftime("%Y.%m.%d")
    assert game.headers["Result"] == "0-1"
    assert game.headers["Termination"] == "normal"
    assert game.end().comment == "checkmate"


def test_a_pasted_game_s_tags_come_back_on_export(server):
    text = '[Event "Casual"]\n[White "Morphy"]\n[Black "Duke"]\n[Date "1858.??.??"]\n\n1. e4 e5 *'
    status, _, body = call(server, "POST", "/api/load", {"text": text})
    loaded = json.loads(body)
    assert status == 200
    assert loaded["tags"] == {
        "event": "Casual",
        "white": "Morphy",
        "black": "Duke",
        "date": "1858.??.??",
    }
    game = pgn_of(server, moves=" ".join(loaded["moves"]), **loaded["tags"])
    assert (game.headers["White"], game.headers["Black"]) == ("Morphy", "Duke")
    assert (game.headers["Event"], game.headers["Date"]) == ("Casual", "1858.??.??")
