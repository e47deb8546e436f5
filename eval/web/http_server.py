"""The web board's HTTP server (the standard library's ThreadingHTTPServer): the page's files
from the package, python-chess's piece drawings, and the JSON API of eval/web/api.py.

    GET  /                        the page (eval/web/static/)
    GET  /piece/wK.svg            a piece (w|b + PNBRQK), python-chess's drawing
    GET  /api/models              the models offered and the defaults
    GET  /api/status              what a search waits for (the compile), searches running
    GET  /api/position?fen=&moves=             legal moves, SAN, the game's outcome
    GET  /api/analysis?fen=&moves=&model=&value=&simulations=&page=
    POST /api/play     {"fen", "moves", "model", "value", "simulations", "page"} -> {"move"...}
    POST /api/load     {"text": FEN or PGN} -> {"fen", "moves", "tags"}
    GET  /api/pgn?fen=&moves=&white=&black=&event=&site=&date=&round=   a .pgn download

Every error is a JSON object {"error": one line} with a 4xx status (5xx only for a fault of
the server's own, whose traceback goes to the server's stderr, never to the page). A request
whose client hangs up is given up (a search stops between batches) and answered with
nothing; one superseded by a newer request of the same `page` gets a 409.
"""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from urllib.parse import parse_qs, urlsplit

import chess
import chess.svg

from eval.web import api, game_records
from eval.web.cancel import Activity, Cancelled, PageGenerations, request_stop
from eval.web.hosts import HostCheck
from eval.web.models import ModelError, ModelStore
from eval.web.params import ApiError, BoardRequest

MAX_BODY_BYTES = 1 << 20
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}
PIECE_SIZE = 45  # python-chess draws its pieces in a 45x45 box


@dataclass(frozen=True)
class Route:
    method: str
    params: tuple[str, ...]  # the query's or body's keys it takes


BOARD_PARAMS = ("fen", "moves", "model", "value", "simulations", "page")
ROUTES = {
    "/api/models": Route("GET", ()),
    "/api/status": Route("GET", ()),
    "/api/position": Route("GET", ("fen", "moves")),
    "/api/analysis": Route("GET", BOARD_PARAMS),
    "/api/play": Route("POST", BOARD_PARAMS),
    "/api/load": Route("POST", ("text",)),
    "/api/pgn": Route("GET", ("fen", "moves", "white", "black", "event", "site", "date", "round")),
}
# The client hung up or went silent: nobody to answer, and nothing for the console.
GONE = (ConnectionError, TimeoutError)


def static_files() -> dict[str, bytes]:
    """The page's files, by name, read once from the package."""
    folder = resources.files("eval.web") / "static"
    return {item.name: item.read_bytes() for item in folder.iterdir() if item.is_file()}


def piece_svg(code: str) -> bytes | None:
    """`wK`, `bp`, ... as a standalone SVG; None for anything else."""
    if len(code) != 2 or code[0] not in "wb" or code[1].upper() not in "PNBRQK":
        return None
    symbol = code[1].upper() if code[0] == "w" else code[1].lower()
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {PIECE_SIZE} {PIECE_SIZE}" '
        f'width="{PIECE_SIZE}" height="{PIECE_SIZE}">{chess.svg.PIECES[symbol]}</svg>'
    ).encode()


class WebServer(ThreadingHTTPServer):
    daemon_threads = True  # a page left open does not keep Ctrl-C from ending the server

    def __init__(self, address, store: ModelStore, settings: api.WebSettings, quiet=True):
        super().__init__(address, Handler)
        self.store = store
        self.settings = settings
        self.quiet = quiet
        self.files = static_files()
        self.hosts = HostCheck(address[0], self.server_address[1])
        self.pages = PageGenerations()
        self.activity = Activity()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/"


class Handler(BaseHTTPRequestHandler):
    server: WebServer
    protocol_version = "HTTP/1.1"

    def setup(self):
        self.timeout = self.server.settings.read_timeout  # a silent client frees its thread
        super().setup()

    def handle(self):
        try:
            super().handle()
        except GONE:
            self.close_connection = True

    def log_message(self, format, *args):  # noqa: A002 - BaseHTTPRequestHandler's name
        if not self.server.quiet:
            super().log_message(format, *args)

    def do_GET(self):
        self._handle("GET")

    def do_HEAD(self):
        self._handle("GET")  # _send leaves the body out

    def do_POST(self):
        self._handle("POST")

    # --- replies -------------------------------------------------------------------------

    def _send(self, status: int, body: bytes, content_type: str, headers=()) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, payload: dict, headers=()) -> None:
        self._send(status, json.dumps(payload).encode(), "application/json", headers)

    def _error(self, status: int, message: str) -> None:
        headers = [("Connection", "close")] if self.close_connection else []
        self._json(status, {"error": message}, headers)

    def send_error(self, code, message=None, explain=None):
        """The standard library's own refusals (a request line too long, an unknown method,
        a malformed request) as the API's JSON line, not an HTML page."""
        self.close_connection = True
        try:
            phrase = HTTPStatus(code).phrase
        except ValueError:
            phrase = "error"
        self._error(code, f"{code} {phrase}" + (f": {message}" if message else ""))

    # --- dispatch ------------------------------------------------------------------------

    def _handle(self, method: str) -> None:
        try:
            self._respond(method)
        except GONE:
            self.close_connection = True

    def _respond(self, method: str) -> None:
        url = urlsplit(self.path)
        try:
            headers = self.headers
            refusal = self.server.hosts.refusal(headers.get("Host"), headers.get("Origin"))
            if refusal is None and url.path.startswith("/api/"):
                # What browsers say of a request another site's page makes (an image's GET
                # has no Origin): the API answers the board's own page only.
                if headers.get("Sec-Fetch-Site", "").lower() == "cross-site":
                    refusal = "a request from another site's page refused"
            if refusal is not None:
                self.close_connection = True  # its body is not read
                raise ApiError(HTTPStatus.FORBIDDEN, refusal)
            # A POST's body is read first, whatever the answer: HTTP/1.1 keeps the
            # connection, and a body left unread would be taken for the next request.
            raw = self._read_body() if method == "POST" else b""
            if url.path.startswith("/api/"):
                self._api(method, url.path, url.query, raw)
            elif method != "GET":
                self._error(HTTPStatus.METHOD_NOT_ALLOWED, f"{method} {url.path}: use GET")
            else:
                self._file(url.path)
        except (ApiError, ModelError) as e:
            self._error(e.status, str(e))
        except Cancelled as e:
            self.server.activity.gave_up(e)
            if not e.superseded:
                raise ConnectionAbortedError from None  # nobody to answer
            self._error(HTTPStatus.CONFLICT, str(e))
        except GONE:
            raise
        except Exception as e:  # a bug of ours: the page gets one line, the console the trace
            traceback.print_exc(file=sys.stderr)
            self._error(500, f"internal error: {type(e).__name__}: {e}")

    def _file(self, path: str) -> None:
        name = "index.html" if path in ("/", "/index.html") else path.removeprefix("/static/")
        if path.startswith("/piece/") and path.endswith(".svg"):
            body = piece_svg(path[len("/piece/") : -len(".svg")])
            if body is not None:
                self._send(200, body, CONTENT_TYPES[".svg"], [("Cache-Control", "max-age=3600")])
                return
        elif (path == "/" or path.startswith("/static/")) and name in self.server.files:
            suffix = name[name.rfind(".") :]
            self._send(200, self.server.files[name], CONTENT_TYPES.get(suffix, "text/plain"))
            return
        self._error(HTTPStatus.NOT_FOUND, f"no such page: {path}")

    def _params(self, method: str, query: str, route: Route, raw: bytes) -> dict:
        if method == "GET":
            parsed = parse_qs(query, keep_blank_values=True)
            params = {key: values[-1] for key, values in parsed.items()}
        else:
            params = self._json_body(raw)
        unknown = sorted(set(params) - set(route.params))
        if unknown:
            expected = ", ".join(route.params) or "none"
            raise ApiError(400, f"unknown parameter {unknown[0]!r}; expected: {expected}")
        return params

    def _read_body(self) -> bytes:
        if "Transfer-Encoding" in self.headers:
            # A chunked body is not read here: where the next request starts is unknown.
            self.close_connection = True
            raise ApiError(HTTPStatus.LENGTH_REQUIRED, "send the body with a Content-Length")
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            self.close_connection = True  # where the next request starts is unknown
            raise ApiError(400, "bad Content-Length") from None
        if length > MAX_BODY_BYTES:
            self.close_connection = True  # the body is not read
            raise ApiError(413, f"the body is over {MAX_BODY_BYTES} bytes")
        return self.rfile.read(length) if length > 0 else b""

    @staticmethod
    def _json_body(raw: bytes) -> dict:
        def not_json(name: str):
            raise ValueError(f"{name} is not a JSON number")

        try:
            body = json.loads(raw or b"{}", parse_constant=not_json)
        except (UnicodeDecodeError, ValueError) as e:  # JSONDecodeError is a ValueError
            raise ApiError(400, f"the body is not JSON: {e}") from None
        except RecursionError:
            raise ApiError(400, "the body is not JSON this server reads: nested too deep") from None
        if not isinstance(body, dict):
            raise ApiError(400, "the body must be a JSON object")
        return body

    def _board_call(self, handler: Callable, params: dict) -> dict:
        """/api/analysis and /api/play: given up as soon as the client hangs up or its page
        asks again."""
        server = self.server
        request = BoardRequest.parse(server.settings.max_simulations, **params)
        stop = request_stop(self.connection, server.pages.begin(request.page))
        return handler(server.store, server.settings, request, stop, server.activity)

    def _api(self, method: str, path: str, query: str, raw: bytes) -> None:
        route = ROUTES.get(path)
        if route is None:
            raise ApiError(404, f"no such API: {path}; there are {', '.join(ROUTES)}")
        if method != route.method:
            raise ApiError(405, f"{method} {path}: use {route.method}")
        params = self._params(method, query, route, raw)
        store, settings = self.server.store, self.server.settings
        if path == "/api/models":
            self._json(200, api.models(store, settings))
        elif path == "/api/status":
            self._json(200, api.status(store, self.server.activity))
        elif path == "/api/position":
            self._json(200, game_records.position(**params))
        elif path == "/api/analysis":
            self._json(200, self._board_call(api.analysis, params))
        elif path == "/api/play":
            self._json(200, self._board_call(api.play, params))
        elif path == "/api/load":
            self._json(200, game_records.load(params.get("text")))
        elif path == "/api/pgn":
            text = game_records.pgn(**params)
            disposition = ("Content-Disposition", 'attachment; filename="game.pgn"')
            self._send(200, text.encode(), "application/x-chess-pgn", [disposition])
