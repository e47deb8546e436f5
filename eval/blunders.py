"""Why a player loses: its blunders in games, found and sorted by Stockfish.

    python -m eval.blunders --games results/cpu-model/king-flights/elo/games.pgn \\
        --player flights [--nodes 20000] [--drop 0.25] [--out blunders.json]

Every move the player makes from move `--from-move` on is judged by two searches of
`--nodes` each: the board before it and the board after it, as win probabilities for the
player (core.values). A move that gives up more than `--drop` is a blunder, and the engine's
best reply on the board after it says what kind:

- `allows mate`: the reply starts a forced mate;
- `moved piece lost`: the reply takes the piece that just moved;
- `threat ignored`: it takes another piece that stood en prise before the move (attacked by a
  cheaper piece, or attacked and undefended: model/networks/move_facts.py), which the move did
  not save;
- `piece exposed`: it takes another piece that was safe before the move (the move took its
  defender away or opened a line onto it);
- `check`: it gives check (no mate found);
- `quiet`: anything else (a positional or a deeper tactical loss).

A game's player is found by the PGN's White and Black tags. The JSON has the totals by class,
the share of the player's moves that were blunders, and one record per blunder (game, move
number, FEN, the move, the reply, the win probabilities).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass

import chess
import chess.engine
import chess.pgn

from core.engine_path import EngineNotFoundError, find_engine
from core.values import win_probability
from model.networks.move_facts import en_prise
from runtime.interrupts import interrupted
from runtime.outputs import OutputError, check_file
from runtime.progress import Progress

KINDS = (
    "allows mate",
    "moved piece lost",
    "threat ignored",
    "piece exposed",
    "check",
    "quiet",
)


@dataclass(frozen=True)
class Blunder:
    game: int  # 1-based, in the file's order
    move_number: int
    fen: str  # the board before the move
    move: str  # UCI
    reply: str  # the engine's best reply, UCI
    before: float  # the player's win probability before the move
    after: float  # and after it
    kind: str


def blunder_kind(board: chess.Board, move: chess.Move, reply: chess.Move, mate: bool) -> str:
    """The class of a blunder `move` on `board` (before it is played) from the engine's best
    `reply`; `mate` says whether the engine found a forced mate after the move."""
    if mate:
        return "allows mate"
    after = board.copy(stack=False)
    after.push(move)
    if after.is_capture(reply):
        if reply.to_square == move.to_square:
            return "moved piece lost"
        victim = reply.to_square
        if after.is_en_passant(reply):
            victim = reply.to_square + (8 if after.turn == chess.BLACK else -8)
        return "threat ignored" if en_prise(board, victim) else "piece exposed"
    if after.gives_check(reply):
        return "check"
    return "quiet"


def _games(path: str) -> Iterator[chess.pgn.Game]:
    with open(path, encoding="utf-8", errors="replace") as f:
        while (game := chess.pgn.read_game(f)) is not None:
            yield game


def _player_colour(game: chess.pgn.Game, player: str) -> chess.Color | None:
    if game.headers.get("White") == player:
        return chess.WHITE
    if game.headers.get("Black") == player:
        return chess.BLACK
    return None


def find_blunders(
    path: str,
    player: str,
    engine: chess.engine.SimpleEngine,
    nodes: int = 20_000,
    drop: float = 0.25,
    from_move: int = 6,
    show_progress: bool = True,
) -> dict:
    """The player's blunders in the games of PGN file `path` (see the module docstring)."""
    limit = chess.engine.Limit(nodes=nodes)

    def value(board: chess.Board, colour: chess.Color) -> tuple[float, chess.engine.InfoDict]:
        info = engine.analyse(board, limit, game=object())  # no hash carried between boards
        score = info["score"].pov(colour)
        if score.is_mate():
            return win_probability(mate=score.mate()), info
        return win_probability(cp=score.score()), info

    progress = Progress("blunders", None, "moves") if show_progress else None
    blunders: list[Blunder] = []
    games = moves = 0
    for number, game in enumerate(_games(path), 1):
        colour = _player_colour(game, player)
        if colour is None:
            continue
        games += 1
        board = game.board()
        for move in game.mainline_moves():
            if board.turn == colour and board.fullmove_number >= from_move:
                moves += 1
                after = board.copy(stack=False)
                after.push(move)
                if not after.is_game_over():
                    before, _ = value(board, colour)
                    after_value, info = value(after, colour)
                    if before - after_value > drop and info.get("pv"):
                        mate = info["score"].pov(colour).is_mate()
                        kind = blunder_kind(board, move, info["pv"][0], mate)
                        blunders.append(
                            Blunder(
                                number,
                                board.fullmove_number,
                                board.fen(),
                                move.uci(),
                                info["pv"][0].uci(),
                                round(before, 4),
                                round(after_value, 4),
                                kind,
                            )
                        )
                if progress:
                    progress.update(moves, f"blunders {len(blunders)} in {games} games")
            board.push(move)
    if progress:
        progress.done(f"blunders {len(blunders)} in {games} games")
    by_kind = collections.Counter(b.kind for b in blunders)
    return {
        "games": path,
        "player": player,
        "settings": {"nodes": nodes, "drop": drop, "from_move": from_move},
        "games_played": games,
        "moves_judged": moves,
        "blunders": len(blunders),
        "blunders_per_100_moves": round(100 * len(blunders) / moves, 2) if moves else None,
        "by_kind": {kind: by_kind.get(kind, 0) for kind in KINDS},
        "records": [asdict(b) for b in blunders],
    }


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except KeyboardInterrupt:
        return interrupted("blunders: interrupted; nothing written")


def _main(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m eval.blunders",
        description="A player's blunders in PGN games, sorted by what they lost (Stockfish).",
    )
    parser.add_argument("--games", required=True, help="PGN file (e.g. a ladder's games.pgn)")
    parser.add_argument("--player", required=True, help="the player's name in White/Black")
    parser.add_argument("--nodes", type=int, default=20_000, help="nodes per search")
    parser.add_argument("--drop", type=float, default=0.25, help="win probability a blunder loses")
    parser.add_argument("--from-move", type=int, default=6, help="judge moves from this number on")
    parser.add_argument("--engine", default=None, help="Stockfish binary")
    parser.add_argument("--out", default=None, help="JSON file (default: stdout)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    args = parser.parse_args(argv)
    if args.nodes < 1 or not 0 < args.drop < 1:
        parser.error("--nodes must be >= 1 and --drop inside (0, 1)")
    try:
        check_file(args.out, "--out")
    except OutputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if not os.path.isfile(args.games):
        print(f"error: --games {args.games}: no such file", file=sys.stderr)
        return 1
    if not any(_player_colour(g, args.player) is not None for g in _games(args.games)):
        print(f"error: {args.games}: no game of a player named {args.player!r}", file=sys.stderr)
        return 1
    try:
        path = find_engine(args.engine)
    except EngineNotFoundError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    with chess.engine.SimpleEngine.popen_uci(path) as engine:
        engine.configure({"Threads": 1})
        result = find_blunders(
            args.games, args.player, engine, args.nodes, args.drop, args.from_move, not args.quiet
        )
    text = json.dumps(result, indent=1)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            f.write(text + "\n")
        print(f"wrote {args.out}", file=sys.stderr)
    else:
        print(text)
    kinds = ", ".join(f"{k} {n}" for k, n in result["by_kind"].items() if n)
    print(
        f"{args.player}: {result['blunders']} blunders in {result['moves_judged']} moves of "
        f"{result['games_played']} games ({kinds})",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
