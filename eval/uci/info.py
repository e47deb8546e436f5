"""The UCI `info` line of a move: its score (`score cp`, or `score mate N`), the WDL per mille
with `UCI_ShowWDL`, and the nodes, speed and pv."""

from __future__ import annotations

import chess

from core.values import centipawns

# Centipawns reported for a win probability of 0 or 1 (the inverse Lichess formula diverges).
MAX_REPORTED_CP = 10_000


def win_prob_to_cp(p: float) -> int:
    """The centipawns whose Lichess win probability is `p`, within +-MAX_REPORTED_CP."""
    return int(round(max(-MAX_REPORTED_CP, min(MAX_REPORTED_CP, centipawns(p)))))


def wdl_per_mille(p: float) -> tuple[int, int, int]:
    """Win/draw/loss per mille for the model's win probability `p`. The model predicts an
    expected score and no separate draw rate, so the draw share is 0 and W + D/2 = p."""
    wins = int(round(1000 * min(1.0, max(0.0, p))))
    return wins, 0, 1000 - wins


def mate_in(
    board: chess.Board, pv: list[chess.Move], win_prob: float | None, exact: bool
) -> int | None:
    """The moves to mate (N > 0: the mover mates; N < 0: it is mated) the line reports, if
    it reports one: 1 for a first move that mates; with `exact` (a search's value, exact for
    lines the rules end), also a pv ending in mate whose value is a sure win or loss."""
    after = board.copy(stack=False)
    after.push(pv[0])
    if after.is_checkmate():
        return 1
    if not exact or win_prob not in (0.0, 1.0):
        return None
    for move in pv[1:]:
        after.push(move)
    plies = len(pv)
    if after.is_checkmate() and (plies % 2 == 1) == (win_prob == 1.0):
        return (plies + 1) // 2 if win_prob == 1.0 else -(plies // 2)
    return None


def score_words(board: chess.Board, pv: list[chess.Move], win_prob: float | None, exact: bool):
    """The `score ...` words of an info line (none without a value) and the WDL per mille:
    `score mate N` where mate_in finds one, else `score cp X`."""
    mate = mate_in(board, pv, win_prob, exact)
    if mate is not None:
        return f"score mate {mate}", (1000, 0, 0) if mate > 0 else (0, 0, 1000)
    if win_prob is None:
        return None, None
    return f"score cp {win_prob_to_cp(win_prob)}", wdl_per_mille(win_prob)


def info_line(
    board: chess.Board,
    pv: list[chess.Move],
    win_prob: float | None,
    depth: int,
    seldepth: int,
    nodes: int,
    secs: float,
    exact: bool,
    show_wdl: bool,
) -> str:
    """The info line for `pv` played from `board`, `secs` after the `go`."""
    parts = ["info", f"depth {depth}", f"seldepth {seldepth}", "multipv 1"]
    score, wdl = score_words(board, pv, win_prob, exact)
    if score is not None:
        parts.append(score)
    if wdl is not None and show_wdl:
        parts.append("wdl {} {} {}".format(*wdl))
    millis = int(round(secs * 1000))
    parts += [
        f"nodes {nodes}",
        f"nps {int(nodes / max(secs, 1e-3))}",
        f"time {millis}",
        "pv",
        *(m.uci() for m in pv),
    ]
    return " ".join(parts)
