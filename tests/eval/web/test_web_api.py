"""The web board's JSON API against the real server and the shipped models/cpu (a BC policy
with a value head of its own) and models/cpu-av (AV): the analysis, the model's moves, the tree
search, the game helpers (position, FEN/PGN paste, PGN export), and one clear 4xx line for
every bad input."""

from __future__ import annotations

import http.client
import io
import json
import pathlib

import chess
import chess.pgn
import pytest

from eval.agents.neural_setup import load_predictor

ROOT = pathlib.Path(__file__).resolve().parents[3]

START = chess.STARTING_FEN
# White to move, mated: the game is over.
MATED = "7k/6Q1/6K1/8/8/8/8/8 b - - 0 1"
# Black to move; White threatens Qxf7 mate (Scholar's mate set up).
SCHOLAR = "r1bqkbnr/pppp1ppp/2n5/4p2Q/2B1P3/8/PPPP1PPP/RNB1K1NR b KQkq - 3 3"
PROB_TOLERANCE = 1e-4  # float32 probabilities summed in float64


def test_the_server_listens_on_loopback_by_default(web_server):
    url, lines = web_server
    assert url.startswith("http://127.0.0.1:")
    assert not any("warning" in line for line in lines)


def test_models_lists_the_shipped_models_and_defaults(client):
    status, body = client.get("/api/models")
    assert status == 200
    kinds = {m["name"]: (m["target"], m["kind"]) for m in body["models"]}
    assert kinds["cpu"] == ("bc", "prob")
    assert kinds["cpu-av"] == ("av", "win")
    # No value model beside the default policy: models/cpu values with its own head.
    assert body["default_model"] == "cpu" and body["default_value"] is None


def test_analysis_scores_every_legal_move_best_first(client):
    status, body = client.get("/api/analysis", fen=START)
    assert status == 200
    moves = body["moves"]
    assert {m["uci"] for m in moves} == {m.uci() for m in chess.Board().legal_moves}
    scores = [m["score"] for m in moves]
    assert scores == sorted(scores, reverse=True)
    assert all(m["kind"] == "prob" for m in moves)
    assert sum(scores) == pytest.approx(1.0, abs=PROB_TOLERANCE)
    assert body["best"] == moves[0]["uci"]
    assert moves[0]["san"] == chess.Board().san(chess.Move.from_uci(moves[0]["uci"]))
    # The model's own value head: each move's win chance (one minus its value of the board
    # after the move) and the position's value (its value of the board).
    wins = {m["uci"]: m["win"] for m in moves}
    assert all(0.0 <= w <= 1.0 for w in wins.values())
    model = load_predictor(str(ROOT / "models" / "cpu"))
    after = chess.Board()
    after.push_uci(body["best"])
    [own, reply] = model.state_values([START, after.fen()])
    assert body["value"] == pytest.approx(float(own), abs=1e-5)  # float32, another batch
    assert wins[body["best"]] == pytest.approx(1.0 - float(reply), abs=1e-5)
    assert body["white_value"] == body["value"]  # White to move
    assert body["search"] is None


def test_a_value_model_named_beside_the_policy_gives_the_win_chances(client):
    status, body = client.get("/api/analysis", fen=START, value="cpu-av")
    assert status == 200 and body["value_model"] == "cpu-av"
    wins = [m["win"] for m in body["moves"]]
    assert all(0.0 <= w <= 1.0 for w in wins)
    # An AV model's value of the position is its best move's.
    assert body["value"] == pytest.approx(max(wins), abs=1e-6)
    _, own = client.get("/api/analysis", fen=START)
    assert own["value_model"] is None and own["value"] != body["value"]


def test_analysis_of_a_value_model_scores_win_chances(client):
    status, body = client.get("/api/analysis", fen=SCHOLAR, model="cpu-av")
    assert status == 200
    assert body["kind"] == "win" and body["value_model"] is None
    scores = [m["score"] for m in body["moves"]]
    assert scores == sorted(scores, reverse=True)
    assert body["value"] == pytest.approx(scores[0], abs=1e-6)
    # Black to move: the bar's number is White's.
    assert body["white_value"] == pytest.approx(1.0 - body["value"], abs=1e-9)


def test_analysis_takes_the_game_s_moves(client):
    status, body = client.get("/api/analysis", fen="", moves="e2e4 e7e5 g1f3")
    assert status == 200
    board = chess.Board()
    for uci in ("e2e4", "e7e5", "g1f3"):
        board.push_uci(uci)
    assert body["fen"] == board.fen() and body["turn"] == "black"
    assert {m["uci"] for m in body["moves"]} == {m.uci() for m in board.legal_moves}


def test_search_shows_visits_beside_the_policy(client):
    status, body = client.get("/api/analysis", fen=START, simulations=24)
    assert status == 200
    search = body["search"]
    assert search["playouts"] == 24
    visits = [m.get("visits", 0) for m in body["moves"]]
    assert sum(visits) == 24  # every playout passes through one root move
    most = max(body["moves"], key=lambda m: m.get("visits", 0))
    assert search["best"] == most["uci"]
    assert 0.0 <= search["value"] <= 1.0 and search["pv"]
    assert all("q" in m for m in body["moves"])


def test_play_answers_a_legal_move(client):
    board = chess.Board()
    board.push_uci("e2e4")
    status, body = client.post("/api/play", {"fen": START, "moves": ["e2e4"]})
    assert status == 200
    assert chess.Move.from_uci(body["move"]) in board.legal_moves
    _, analysis = client.get("/api/analysis", fen=START, moves="e2e4")
    assert body["move"] == analysis["best"]  # the policy's own best move
    board.push_uci(body["move"])
    assert body["fen"] == board.fen()


def test_play_with_the_search_plays_its_most_visited_move(client):
    status, body = client.post("/api/play", {"fen": SCHOLAR, "simulations": 16})
    assert status == 200
    assert body["simulations"] == 16 and body["playouts"] == 16
    assert chess.Move.from_uci(body["move"]) in chess.Board(SCHOLAR).legal_moves


def test_position_gives_legal_moves_sans_and_the_outcome(client):
    status, body = client.get("/api/position", moves="f2f3 e7e5 g2g4 d8h4")
    assert status == 200
    assert body["sans"] == ["f3", "e5", "g4", "Qh4#"]
    assert body["over"] == {"result": "0-1", "termination": "checkmate"}
    assert body["legal"] == []
    status, body = client.get("/api/position")
    assert len(body["legal"]) == 20 and body["over"] is None and body["turn"] == "white"


def test_load_reads_a_fen_or_a_pgn(client):
    status, body = client.post("/api/load", {"text": SCHOLAR})
    assert (status, body) == (200, {"fen": SCHOLAR, "moves": [], "tags": {}})
    pgn = f'[White "Anderssen"]\n[FEN "{SCHOLAR}"]\n[SetUp "1"]\n\n3... Nf6 4. Qxf7# 1-0\n'
    status, body = client.post("/api/load", {"text": pgn})
    assert (status, body) == (
        200,
        {"fen": SCHOLAR, "moves": ["g8f6", "h5f7"], "tags": {"white": "Anderssen"}},
    )


def test_pgn_export_round_trips_with_the_start_position(client):
    status, data, headers = client.request(
        "GET", "/api/pgn", {"fen": SCHOLAR, "moves": "g8f6 h5f7", "white": "You"}
    )
    assert status == 200
    assert "attachment" in headers["Content-Disposition"]
    game = chess.pgn.read_game(io.StringIO(data.decode()))
    assert game.headers["FEN"] == SCHOLAR
    assert game.headers["White"] == "You"
    assert game.headers["Result"] == "1-0"
    assert [m.uci() for m in game.mainline_moves()] == ["g8f6", "h5f7"]


def test_the_page_and_its_files_are_served(client):
    status, data, headers = client.request("GET", "/")
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert b"/static/board.js" in data and b"/static/app.js" in data
    for path in ("/static/board.js", "/static/app.js", "/static/style.css"):
        assert client.request("GET", path)[0] == 200
    status, data, headers = client.request("GET", "/piece/bN.svg")
    assert status == 200 and headers["Content-Type"] == "image/svg+xml"
    assert b"black knight" in data


# --- bad input: a 4xx and one line ------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "params", "status", "words"),
    [
        ("/api/analysis", {"fen": "not a fen"}, 400, "invalid FEN 'not a fen'"),
        ("/api/analysis", {"fen": "8/8/8/8/8/8/8/8 w - - 0 1"}, 400, "invalid FEN"),
        ("/api/analysis", {"moves": "e2e4 e7e4"}, 400, "illegal move 'e7e4'"),
        ("/api/analysis", {"fen": MATED}, 409, "the game is over (checkmate, 1-0)"),
        ("/api/analysis", {"model": "nowhere"}, 404, "unknown model 'nowhere'"),
        # models/cpu has a value head of its own; the square transformer has none.
        ("/api/analysis", {"value": "cpu-transformer"}, 400, "'cpu-transformer' is a BC model"),
        ("/api/analysis", {"simulations": "many"}, 400, "simulations must be a whole number"),
        ("/api/analysis", {"simulations": 10**6}, 400, "simulations must be between 0 and"),
        (
            "/api/analysis",
            {"model": "cpu-transformer", "value": "none", "simulations": 4},
            400,
            "cannot search with 'cpu-transformer'",
        ),
        ("/api/analysis", {"depth": 3}, 400, "unknown parameter 'depth'"),
        ("/api/position", {"moves": "e2e5"}, 400, "illegal move 'e2e5'"),
        ("/api/nothing", {}, 404, "no such API: /api/nothing"),
        ("/api/play", {}, 405, "GET /api/play: use POST"),
        ("/nothing.html", {}, 404, "no such page: /nothing.html"),
        ("/static/../api.py", {}, 404, "no such page"),
    ],
)
def test_bad_get_requests_get_one_clear_line(client, path, params, status, words):
    got, body, headers = client.request("GET", path, params)
    assert got == status
    assert headers["Content-Type"] == "application/json"
    message = json.loads(body)["error"]
    assert words in message
    assert "\n" not in message and "Traceback" not in message


@pytest.mark.parametrize(
    ("path", "body", "status", "words"),
    [
        ("/api/play", {"fen": MATED}, 409, "the game is over"),
        ("/api/play", {"moves": ["e2e4", "e2e4"]}, 400, "illegal move 'e2e4'"),
        ("/api/play", {"moves": "e2e4", "model": "gone"}, 404, "unknown model 'gone'"),
        ("/api/play", {"moves": [1, 2]}, 400, "moves must be a list of UCI strings"),
        ("/api/play", {"fen": 3}, 400, "fen must be a string"),
        ("/api/play", [1], 400, "the body must be a JSON object"),
        ("/api/load", {"text": "hello there"}, 400, "neither a valid FEN nor a PGN"),
        ("/api/load", {"text": "1. e4 e5 2. Ke3"}, 400, "bad PGN: illegal san: 'Ke3'"),
        ("/api/load", {"text": ""}, 400, "paste a FEN or a PGN"),
    ],
)
def test_bad_post_requests_get_one_clear_line(client, path, body, status, words):
    got, answer = client.post(path, body)
    assert got == status
    assert words in answer["error"] and "\n" not in answer["error"]


def test_a_body_that_is_not_json_gets_one_clear_line(client):
    status, body = client.post("/api/play", raw=b"{fen: nope")
    assert status == 400 and body["error"].startswith("the body is not JSON")
    # The server goes on answering.
    assert client.get("/api/models")[0] == 200


def test_a_refused_post_leaves_the_connection_usable(web_server):
    # HTTP/1.1 keeps the connection: a body left unread would be read as the next request.
    host, port = web_server[0].removeprefix("http://").rstrip("/").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=60)
    try:
        for path in ("/api/nothing", "/index.html", "/api/models"):
            connection.request("POST", path, body=json.dumps({"fen": START}))
            response = connection.getresponse()
            assert response.status in (404, 405)
            assert "error" in json.loads(response.read())
            connection.request("GET", "/api/models")
            response = connection.getresponse()
            assert response.status == 200
            response.read()
    finally:
        connection.close()
