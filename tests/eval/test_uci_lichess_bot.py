"""The console script driven exactly as lichess-bot drives a UCI engine (lib/engine_wrapper.py
and config.yml.default of lichess-bot-devs/lichess-bot), with no connection to lichess.org:

- started from lichess-bot's own directory (`engine.dir` + `engine.name`, made absolute),
  with `popen_uci(..., timeout=60, setpgrp=True)`;
- the model named relative to that directory, as docs/play.md's config does it, by
  `engine_options` (lichess-bot passes `--checkpoint=PATH`) and again by a WeightsFile in
  `uci_options`;
- configured with config.yml.default's `uci_options` (Move Overhead 100, Threads 4, Hash 512,
  SyzygyPath ./syzygy/, UCI_ShowWDL true) less the options python-chess manages; then the
  opponent's details;
- each move `engine.play(board, limit, info=INFO_ALL, ponder=..., draw_offered=False,
  root_moves=None)`: the first move with `Limit(time=10)` and no pondering, every later one
  with both clocks and increments (`move_overhead: 2000` taken off its own clock) and
  `ponder: true`, so python-chess sends `go ponder` after each `bestmove ... ponder ...` and
  `ponderhit` or `stop` before the next move;
- at the end `send_game_result`, then `ping` and `quit` (its `__exit__`).

The opponent plays the move our engine expects on every other turn, so both `ponderhit` and a
missed ponder (`stop`) happen.
"""

from __future__ import annotations

import os
import random
import time

import chess
import chess.engine
import pytest

from eval.uci import threads

# config.yml.default, engine.uci_options.
LICHESS_BOT_UCI_OPTIONS = {
    "Move Overhead": 100,
    "Threads": 4,
    "Hash": 512,
    "SyzygyPath": "./syzygy/",
    "UCI_ShowWDL": True,
}
MOVE_OVERHEAD_MS = 2000  # config.yml.default, move_overhead
FIRST_MOVE_SECONDS = 10  # engine_wrapper.first_move_time
PLIES = 40
CLOCK_MS, INCREMENT_MS = 180_000, 2_000  # a 3+2 blitz game


def remove_managed_options(options: dict) -> dict:
    """engine_wrapper.remove_managed_options."""
    return {
        name: value
        for name, value in options.items()
        if not chess.engine.Option(name, "", None, None, None, None).is_managed()
    }


def limit_for(board: chess.Board, clocks: dict[str, int]) -> tuple[chess.engine.Limit, bool]:
    """engine_wrapper.move_time for a real-time game: (limit, may ponder)."""
    if len(board.move_stack) < 2:
        return chess.engine.Limit(time=FIRST_MOVE_SECONDS, clock_id="first move"), False
    times = dict(clocks)
    side = "wtime" if board.turn == chess.WHITE else "btime"
    times[side] = max(1, times[side] - MOVE_OVERHEAD_MS)
    limit = chess.engine.Limit(
        white_clock=times["wtime"] / 1000,
        black_clock=times["btime"] / 1000,
        white_inc=INCREMENT_MS / 1000,
        black_inc=INCREMENT_MS / 1000,
        clock_id="real time",
    )
    return limit, True


@pytest.mark.slow
def test_lichess_bot_plays_a_game_with_its_default_config(trained_run, tmp_path, console_script):
    bot_dir = tmp_path / "lichess-bot"  # lichess-bot runs from its own directory
    (bot_dir / "engines").mkdir(parents=True)
    os.symlink(console_script, bot_dir / "engines" / "searchless-uci")
    os.symlink(trained_run, bot_dir / "engines" / "weights")
    command = [os.path.abspath(os.path.join(bot_dir, "./engines/", "searchless-uci"))]
    command += [f"--{key}={value}" for key, value in {"checkpoint": "engines/weights"}.items()]
    options = remove_managed_options({**LICHESS_BOT_UCI_OPTIONS, "WeightsFile": "engines/weights"})
    engine = chess.engine.SimpleEngine.popen_uci(
        command, timeout=60.0, debug=False, setpgrp=True, stderr=None, cwd=bot_dir
    )
    rng = random.Random(18)
    board = chess.Board()
    clocks = {"wtime": CLOCK_MS, "btime": CLOCK_MS}
    results: list[chess.engine.PlayResult] = []
    hits = misses = 0
    with engine:
        engine.configure(options)
        engine.send_opponent_information(
            opponent=chess.engine.Opponent(
                name="opponent", title=None, rating=1500, is_engine=False
            ),
            engine_rating=1500,
        )
        while len(board.move_stack) < PLIES and not board.is_game_over(claim_draw=True):
            limit, can_ponder = limit_for(board, clocks)
            start = time.perf_counter()
            result = engine.play(
                board,
                limit,
                info=chess.engine.INFO_ALL,
                ponder=can_ponder,
                draw_offered=False,
                root_moves=None,
            )
            assert result.move in board.legal_moves, (board.fen(), result)
            assert "score" in result.info and "wdl" in result.info, result.info
            assert result.info["pv"][0] == result.move
            clocks["wtime"] += INCREMENT_MS - int((time.perf_counter() - start) * 1000)
            clocks["btime"] += INCREMENT_MS  # the opponent answers at once
            results.append(result)
            board.push(result.move)
            if board.is_game_over(claim_draw=True):
                break
            # The opponent: the expected reply on every other turn (the engine's ponder
            # search then ends with ponderhit), otherwise another move (stop).
            replies = list(board.legal_moves)
            if result.ponder is not None and len(results) % 2 == 0:
                reply = result.ponder
            else:
                reply = rng.choice([m for m in replies if m != result.ponder] or replies)
            if len(board.move_stack) > 2 and result.ponder is not None:
                hits, misses = (hits + 1, misses) if reply == result.ponder else (hits, misses + 1)
            board.push(reply)
        # lichess-bot's Threads 4 on this machine: as many compute threads as CPUs, at most 4.
        names = [
            open(f"/proc/{engine.transport.get_pid()}/task/{task}/comm").read().strip()
            for task in os.listdir(f"/proc/{engine.transport.get_pid()}/task")
        ]
        assert names.count("tf_XLAEigen") == threads.effective_threads(4)
        engine.send_game_result(board)
    assert len(results) >= 10 and hits >= 3 and misses >= 3, (len(results), hits, misses)
    # Every move after the first came with the reply it expects (unless the game had ended).
    assert all(r.ponder is not None for r in results[1:-1])
    wdl = [r.info["wdl"].relative for r in results]
    assert all(w.wins + w.draws + w.losses == 1000 for w in wdl)
