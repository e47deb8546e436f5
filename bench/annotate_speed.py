"""Annotation throughput: action values per second per engine process, and how much of the
engine's own speed the pipeline keeps.

    python -m bench.annotate_speed [--pgn PATH] [--boards 40] [--pipeline-boards 120]

Prints one JSON object:

- `nodes_2000`: action values/s per engine process through the pipeline's UCI client; the
  engine's own nodes/s in a bare `go nodes` search of each of the same boards (`bare_nps`,
  as the engine reports it);
  the mean nodes the engine actually searched per value; and the efficiency =
  values/s x nodes per value / bare_nps, with nodes per value as asked (2,000) and as
  searched. The same searches written to the engine all at once with no parsing at all give
  `raw_engine_values_per_s`, the ceiling for any client (`client_share_of_raw_engine`);
  `client_cpu_us_per_value` is the client's own CPU time per value, which on a busy machine
  competes with the engine for a core;
  Some of the boards through python-chess `engine.analyse` (the baseline the UCI client
  replaces) give `python_chess_values_per_s` and the speedup over it. These are
  measured in alternating rounds (`rounds`), so load that changes during the run skews each
  ratio less;
- `time_0.05`: action values/s at the paper's 50 ms per (state, action);
- `modes`: the cost per board of each annotation mode on the same boards, through the
  pipeline's annotator (boards queued as the pipeline queues them), measured in alternating
  rounds: full action values (`action-values`, one search per legal move at `--av-nodes`)
  against one unrestricted search per board (`search`) at each of `--search-nodes`, with
  MultiPV 1 and `--multipv` K, and at the smallest of them with a 1 MB hash instead of 16
  (each board's `ucinewgame` clears the hash, a cost a single search does not amortise). Per
  mode: ms and nodes per board, boards/s, the cost relative
  to full action values (`cost_vs_action_values`, time per board over theirs), the values per
  board, and how often its best move is one of the full action values' best moves
  (`best_move_agrees`, ties counted);
- `workers`: the Beam pipeline (DirectRunner, multi_processing) on the same games with one
  and with two workers, alternated `--worker-repeats` times, best of each: whole-run wall time,
  and the annotation stage's rate (action values over the span from the first board started
  to the last finished, across workers).

Other processes on the machine slow the engine and skew the ratios; `load_average` is
reported at the start and the end so a disturbed run can be told apart.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import random
import shutil
import statistics
import subprocess
import tempfile
import time

import chess
import chess.engine

from core.engine_path import find_engine
from core.engine_settings import EngineLimit, EngineOptions
from pipeline import pgn
from pipeline.annotate import annotate
from pipeline.labels.action_values import BoardAnnotator, Mode, board_moves
from pipeline.labels.uci_client import UciEngine
from pipeline.sources import read_lines

SHARED_GAMES = os.path.join(
    os.path.dirname(__file__), "..", "..", "shared", "data", "games",
    "lichess_db_standard_rated_2021-10_head999__kdave_pgn-toys.pgn",
)  # fmt: skip


def default_pgn() -> str | None:
    sample = sorted(glob.glob("data/sample/*.pgn*"))
    if sample:
        return sample[0]
    return SHARED_GAMES if os.path.exists(SHARED_GAMES) else None


def random_game_pgn(path: str, games: int = 40, seed: int = 0) -> str:
    """Fallback input: random legal games (the project makes its own)."""
    rng = random.Random(seed)
    with open(path, "w") as handle:
        for index in range(games):
            board = chess.Board()
            for _ in range(rng.randint(30, 90)):
                moves = list(board.legal_moves)
                if not moves:
                    break
                board.push(rng.choice(moves))
            game = chess.pgn.Game.from_board(board)
            game.headers["Site"] = f"https://lichess.org/random{index:03d}"
            print(game, file=handle, end="\n\n")
    return path


def games_and_boards(path: str, max_games: int) -> tuple[str, list[str]]:
    """The first `max_games` usable games as PGN text, and their distinct FENs in order."""
    chosen, fens = [], {}
    for item, result in pgn.parsed_games(read_lines(path)):
        chosen.append(item.text + "\n")
        fens.update(dict.fromkeys(result.fens))
        if len(chosen) >= max_games:
            break
    return "".join(chosen), list(fens)


def annotate_queued(annotator: BoardAnnotator, fens: list[str]) -> int:
    """Annotates `fens` as the pipeline does; returns the action values made."""
    return sum(len(row["moves"]) for row in annotate_rows(annotator, fens))


def client_rate(path: str, fens: list[str], limit: EngineLimit) -> dict:
    """Action values/s through the pipeline's own annotator (clears, restarts and all)."""
    annotator = BoardAnnotator(lambda: UciEngine(path), limit)
    annotator.start()  # outside the timing
    values = 0
    started = time.perf_counter()
    for fen in fens:
        values += len(annotator.annotate(fen)["moves"])
    elapsed = time.perf_counter() - started
    annotator.close()
    return {
        "boards": len(fens),
        "action_values": values,
        "seconds": round(elapsed, 3),
        "values_per_s": round(values / elapsed, 2),
        "nodes_per_value": round(annotator.nodes / values, 1),
    }


class RawEngine:
    """The engine with no client at all: a batch's commands written at once, the output only
    counted. Its rate is the ceiling any UCI client could reach on the same searches."""

    def __init__(self, path: str):
        self.process = subprocess.Popen([path], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self._send("uci\nsetoption name Threads value 1\nsetoption name Hash value 16\n")
        self._wait_for(b"uciok", 1)

    def _send(self, text: str) -> None:
        self.process.stdin.write(text.encode())
        self.process.stdin.flush()

    def _wait_for(self, token: bytes, count: int) -> None:
        seen, tail = 0, b""
        while seen < count:
            chunk = os.read(self.process.stdout.fileno(), 1 << 16)
            if not chunk:
                raise RuntimeError("engine exited")
            data = tail + chunk
            seen += data.count(token) - tail.count(token)
            tail = data[-len(token) :]

    def values_per_s(self, fens: list[str], limit: EngineLimit) -> float:
        commands, searches = [], 0
        for fen in fens:
            moves = board_moves(fen)
            commands.append(f"ucinewgame\nposition fen {fen}\n")
            commands.extend(f"go {limit.go_args} searchmoves {m}\n" for m in moves)
            searches += len(moves)
        started = time.perf_counter()
        self._send("".join(commands))
        self._wait_for(b"bestmove", searches)
        return searches / (time.perf_counter() - started)

    def close(self) -> None:
        self.process.kill()
        self.process.wait()


def efficiency_rounds(path: str, fens: list[str], rounds: int, bare_nodes: int) -> dict:
    """Per round and batch of boards: a bare search of each board, then the batch through the
    pipeline's annotator at nodes=2000, through the raw engine (no client), and its first
    board through python-chess.

    Each round compares rates measured seconds apart, so a machine whose load changes during
    the run skews each ratio less than measuring each rate in one block would.
    """
    limit = EngineLimit.parse("nodes=2000")
    annotator = BoardAnnotator(lambda: UciEngine(path), limit)
    engine = annotator.start()
    reference = chess.engine.SimpleEngine.popen_uci(path)
    reference.configure({"Threads": 1, "Hash": 16})
    raw = RawEngine(path)
    raw_rates = []
    per_round = []
    client_cpu = 0.0  # this process's CPU time while annotating: the client's own cost
    total_values = total_seconds = total_bare_nodes = total_bare_ms = 0
    reference_values = reference_seconds = 0.0
    batch = max(1, len(fens) // rounds)
    for r in range(rounds):
        boards = fens[r * batch : (r + 1) * batch]
        nodes = milliseconds = 0
        for fen in boards:  # the engine's own speed on the very boards it then annotates
            searched, spent = engine.timed_search(fen, EngineLimit(nodes=bare_nodes))
            nodes, milliseconds = nodes + searched, milliseconds + spent
        nps = nodes / (milliseconds / 1000)
        before_nodes, values = annotator.nodes, 0
        started, cpu_started = time.perf_counter(), time.process_time()
        values = annotate_queued(annotator, boards)
        seconds = time.perf_counter() - started
        client_cpu += time.process_time() - cpu_started
        raw_rates.append(raw.values_per_s(boards, limit))
        started = time.perf_counter()
        reference_values += python_chess_values(reference, boards[0], 2000)
        reference_seconds += time.perf_counter() - started
        rate = values / seconds
        searched = (annotator.nodes - before_nodes) / values
        per_round.append(
            {
                "bare_nps": round(nps),
                "values_per_s": round(rate, 1),
                "raw_engine_values_per_s": round(raw_rates[-1], 1),
                "efficiency": round(rate * 2000 / nps, 3),
                "efficiency_searched_nodes": round(rate * searched / nps, 3),
            }
        )
        total_values += values
        total_seconds += seconds
        total_bare_nodes += nodes
        total_bare_ms += milliseconds
    annotator.close()
    reference.quit()
    raw.close()
    rate = total_values / total_seconds
    nps = total_bare_nodes / (total_bare_ms / 1000)
    reference_rate = reference_values / reference_seconds
    return {
        "boards": batch * rounds,
        "action_values": total_values,
        "values_per_s": round(rate, 2),
        "nodes_per_value": round(annotator.nodes / total_values, 1),
        "bare_nps": round(nps),
        "bare_nodes_per_search": bare_nodes,
        "efficiency": round(rate * 2000 / nps, 3),
        "efficiency_searched_nodes": round(rate * annotator.nodes / total_values / nps, 3),
        "efficiency_median_of_rounds": round(
            statistics.median(r["efficiency"] for r in per_round), 3
        ),
        "raw_engine_values_per_s": round(statistics.mean(raw_rates), 2),
        "client_share_of_raw_engine": round(rate / statistics.mean(raw_rates), 3),
        "client_cpu_us_per_value": round(1e6 * client_cpu / total_values, 1),
        "python_chess_values_per_s": round(reference_rate, 2),
        "python_chess_efficiency": round(reference_rate * 2000 / nps, 3),
        "speedup_over_python_chess": round(rate / reference_rate, 2),
        "rounds": per_round,
    }


def mode_rounds(
    path: str, fens: list[str], rounds: int, av_nodes: int, search_nodes: list[int], multipv: int
) -> dict:
    """Cost per board of each annotation mode (see the module doc), every mode once per round
    on that round's boards, so load that drifts during the run hits every mode alike."""
    modes: list[tuple[str, Mode, EngineLimit, int, int]] = [  # label, mode, limit, multipv, hash MB
        (f"action-values nodes={av_nodes}", "action-values", EngineLimit(nodes=av_nodes), 1, 16)
    ]
    for nodes in search_nodes:
        for lines in sorted({1, multipv}):
            label = f"search nodes={nodes} multipv={lines}"
            modes.append((label, "search", EngineLimit(nodes=nodes), lines, 16))
    # The clear before each board (`ucinewgame`) empties the hash: a small one is cheaper.
    smallest = min(search_nodes)
    modes.append(
        (f"search nodes={smallest} multipv=1 hash=1", "search", EngineLimit(nodes=smallest), 1, 1)
    )
    annotators = {
        label: BoardAnnotator(
            lambda hash_mb=hash_mb: UciEngine(EngineOptions(path, hash_mb=hash_mb)),
            limit,
            mode=mode,
            multipv=lines,
        )  # fmt: skip
        for label, mode, limit, lines, hash_mb in modes
    }
    for annotator in annotators.values():
        annotator.start()  # outside the timing
    seconds = dict.fromkeys(annotators, 0.0)
    values = dict.fromkeys(annotators, 0)
    agree = dict.fromkeys(annotators, 0)
    batch = max(1, len(fens) // rounds)
    for r in range(rounds):
        boards = fens[r * batch : (r + 1) * batch]
        best: dict[str, list[dict]] = {}
        for label, annotator in annotators.items():
            started = time.perf_counter()
            rows = annotate_rows(annotator, boards)
            seconds[label] += time.perf_counter() - started
            values[label] += sum(len(row["moves"]) for row in rows)
            best[label] = rows
        reference = best[modes[0][0]]
        for label, rows in best.items():
            for row, full in zip(rows, reference, strict=True):
                top = max(full["win_probs"])
                agree[label] += full["win_probs"][full["moves"].index(row["best_move"])] == top
    for annotator in annotators.values():
        annotator.close()
    boards = batch * rounds
    base = seconds[modes[0][0]] / boards
    result = {}
    for label, annotator in annotators.items():
        per_board = seconds[label] / boards
        result[label] = {
            "ms_per_board": round(1000 * per_board, 2),
            "boards_per_s": round(1 / per_board, 2),
            "nodes_per_board": round(annotator.nodes / boards),
            "values_per_board": round(values[label] / boards, 2),
            "cost_vs_action_values": round(per_board / base, 4),
            "best_move_agrees": round(agree[label] / boards, 3),
        }
    return {"boards": boards, "rounds": rounds, "modes": result}


def annotate_rows(annotator: BoardAnnotator, fens: list[str]) -> list[dict]:
    """The rows of `fens`, one board queued behind the one searching, as the pipeline does."""
    rows = []
    for fen in fens:
        annotator.submit(fen)
        if annotator.in_flight > 1:
            rows.append(annotator.collect().row)
    while annotator.in_flight:
        rows.append(annotator.collect().row)
    return rows


def engine_name(path: str) -> str:
    with UciEngine(path) as engine:
        return engine.name


def python_chess_values(engine: chess.engine.SimpleEngine, fen: str, nodes: int) -> int:
    """Annotates one board the python-chess way (one `analyse` per move); returns the count."""
    board = chess.Board(fen)
    moves = board_moves(fen)
    for move in moves:
        # game=fen: python-chess sends ucinewgame once per board, as the pipeline does.
        engine.analyse(board, chess.engine.Limit(nodes=nodes),
                       root_moves=[chess.Move.from_uci(move)], game=fen)  # fmt: skip
    return len(moves)


def pipeline_run(pgn_path: str, workers: int, limit: str) -> dict:
    with tempfile.TemporaryDirectory() as out:
        started = time.perf_counter()
        stats = annotate.run(
            [pgn_path, "--out", out, "--limit", limit, "--progress-seconds", "3600",
             f"--direct_num_workers={workers}", "--direct_running_mode=multi_processing"]
        )  # fmt: skip
        wall = time.perf_counter() - started
    spans = stats["workers"]
    span = max(w["last_board_at"] for w in spans) - min(w["first_board_at"] for w in spans)
    return {
        "workers": workers,
        "engine_processes": len({p for w in spans for p in w["engine_pids"]}),
        "boards": stats["boards"]["unique"],
        "action_values": stats["action_values"],
        "wall_s": round(wall, 2),
        "annotation_span_s": round(span, 2),
        "annotation_values_per_s": round(stats["action_values"] / span, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pgn", default=None, help="games to take boards from")
    parser.add_argument("--engine", default=None)
    parser.add_argument("--boards", type=int, default=40, help="boards for the nodes=2000 rate")
    parser.add_argument(
        "--bare-nodes",
        type=int,
        default=200_000,
        help="nodes of each bare search (the engine's own speed), one per board",
    )
    parser.add_argument("--rounds", type=int, default=8, help="bare/annotate alternations")
    parser.add_argument("--time-boards", type=int, default=3)
    parser.add_argument("--pipeline-games", type=int, default=3,
                        help="games for the one- vs two-worker pipeline runs")  # fmt: skip
    parser.add_argument("--worker-repeats", type=int, default=2,
                        help="alternating one/two-worker runs; best of each")  # fmt: skip
    parser.add_argument("--parts", default="nodes,time,modes,workers",
                        help="comma-separated subset of nodes,time,modes,workers")  # fmt: skip
    parser.add_argument("--mode-boards", type=int, default=60,
                        help="boards for the modes' costs")  # fmt: skip
    parser.add_argument("--av-nodes", type=int, default=2000,
                        help="nodes per move searched for full action values")  # fmt: skip
    parser.add_argument("--search-nodes", default="2000,20000",
                        help="comma-separated node limits of the one-search mode")  # fmt: skip
    parser.add_argument("--multipv", type=int, default=4, help="K of the multipv runs")
    args = parser.parse_args()
    parts = set(args.parts.split(","))

    path = find_engine(args.engine)
    workdir = tempfile.mkdtemp(prefix="bench-annotate-")
    source = args.pgn or default_pgn() or random_game_pgn(os.path.join(workdir, "random.pgn"))
    _, fens = games_and_boards(source, 1000)
    boards = fens[: args.boards]
    result = {
        "engine": engine_name(path),
        "input": source,
        "cpu_count": os.cpu_count(),
        "load_average_start": [round(x, 2) for x in os.getloadavg()],
    }
    if "nodes" in parts:
        result["nodes_2000"] = efficiency_rounds(path, boards, args.rounds, args.bare_nodes)
    if "time" in parts:
        result["time_0.05"] = client_rate(
            path, boards[: args.time_boards], EngineLimit.parse("time=0.05")
        )
    if "modes" in parts:
        result["modes"] = mode_rounds(
            path, fens[: args.mode_boards], args.rounds, args.av_nodes,
            [int(n) for n in args.search_nodes.split(",")], args.multipv,
        )  # fmt: skip
    if "workers" in parts:
        games_text, _ = games_and_boards(source, args.pipeline_games)
        games_path = os.path.join(workdir, "games.pgn")
        with open(games_path, "w") as handle:
            handle.write(games_text)
        runs: dict[int, list[dict]] = {1: [], 2: []}
        for _ in range(args.worker_repeats):  # alternate, so load drifts hit both alike
            for workers in (1, 2):
                runs[workers].append(pipeline_run(games_path, workers, "nodes=2000"))
        one = max(runs[1], key=lambda r: r["annotation_values_per_s"])
        two = max(runs[2], key=lambda r: r["annotation_values_per_s"])
        result["workers"] = {
            "one": one,
            "two": two,
            "annotation_speedup": round(
                two["annotation_values_per_s"] / one["annotation_values_per_s"], 2),
            "wall_speedup": round(min(r["wall_s"] for r in runs[1])
                                  / min(r["wall_s"] for r in runs[2]), 2),
            "all_runs": runs,
        }  # fmt: skip
    result["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(result, indent=2))
    shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
