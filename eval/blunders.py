"""Why a player loses: its blunders in games, found and sorted by Stockfish.

    python -m eval.blunders --games results/cpu-model/king-flights/elo/games.pgn \\
        --player flights [--nodes 20000] [--drop 0.2] [--out blunders.json]

Every move the player makes from move `--from-move` on is judged by a search of `--nodes` of
the board before it and one of the board after it (with the game's history, so a repetition
is seen), as win probabilities for the player (core.values); a move that ends the game is
judged by its result. A move that gives up more than `--drop` (core.move_metrics'
BLUNDER_REGRET by default) is a blunder, and the engine's best reply on the board after it
says what kind:

- `allows mate`: the reply starts a forced mate;
- `draw`: the move ends the game drawn (core.game_end: stalemate, too little material, a
  repetition or the fifty moves);
- `moved piece lost`: the reply takes the piece that just moved;
- `threat ignored`: it takes another piece that stood en prise before the move (attacked by a
  cheaper piece, or attacked and undefended: model/networks/move_facts.py), which the move did
  not save;
- `piece exposed`: it takes another piece that was not en prise before the move (the move took
  a defender away or opened a line onto it, or the loss is deeper than one exchange);
- `check`: it gives check (no mate found);
- `quiet`: anything else (a positional or a deeper tactical loss).

A game's player is found by the PGN's White and Black tags; a game of the player's that cannot
be replayed (a bad FEN, an illegal move) is one line on stderr and left out. The JSON has the
totals by class, the share of the player's moves that were blunders, and one record per
blunder (game, move number, FEN, the move, the reply, the win probabilities).
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import os
import sys
from dataclasses import asdict, dataclass

import chess
import chess.engine
import chess.pgn

from core.engine_path import EngineNotFoundError, find_engine
from core.game_end import terminal_value
from core.move_metrics import BLUNDER_REGRET
from core.values import win_probability
from model.networks.move_facts import en_prise
from runtime.interrupts import interrupted
from runtime.outputs import OutputError, check_file
from runtime.progress import Progress

KINDS = (
    "allows mate",
    "draw",
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
        victim = reply.to_square
        if after.is_en_passant(reply):  # the pawn taken is the one that just moved
            victim += 8 if after.turn == chess.BLACK else -8
        if victim == move.to_square:
            return "moved piece lost"
        return "threat ignored" if en_prise(board, victim) else "piece exposed"
    if after.gives_check(reply):
        return "check"
    return "quiet"


@dataclass(frozen=True)
class PlayerGame:
    number: int  # 1-based, in the file's order
    game: chess.pgn.Game
    colour: chess.Color


def read_games(path: str, player: str) -> tuple[list[PlayerGame], list[str]]:
    """The games of `player` in PGN file `path`, and one line for each of its games that
    cannot be replayed (a bad FEN, an illegal move), which are left out. OSError if the file
    cannot be read."""
    games, skipped = [], []
    with open(path, encoding="utf-8", errors="replace") as f:
        number = 0
        while (game := chess.pgn.read_game(f)) is not None:
            number += 1
            colour = _player_colour(game, player)
            if colour is None:
                continue
            error = str(game.errors[0]) if game.errors else None
            if error is None:
                try:
                    game.board()
                except ValueError as e:
                    error = str(e)
            if error is not None:
                skipped.append(f"{path}: game {number}: skipped: {error}")
                continue
            games.append(PlayerGame(number, game, colour))
    return games, skipped


def _player_colour(game: chess.pgn.Game, player: str) -> chess.Color | None:
    if game.headers.get("White") == player:
        return chess.WHITE
    if game.headers.get("Black") == player:
        return chess.BLACK
    return None


def find_blunders(
    games: list[PlayerGame],
    engine: chess.engine.SimpleEngine,
    nodes: int = 20_000,
    drop: float = BLUNDER_REGRET,
    from_move: int = 6,
    show_progress: bool = True,
) -> dict:
    """The player's blunders in `games` (see the module docstring)."""
    limit = chess.engine.Limit(nodes=nodes)

    def value(board: chess.Board, colour: chess.Color) -> tuple[float, chess.engine.InfoDict]:
        info = engine.analyse(board, limit, game=object())  # no hash carried between boards
        score = info["score"].pov(colour)
        if score.is_mate():
            return win_probability(mate=score.mate()), info
        return win_probability(cp=score.score()), info

    progress = Progress("blunders", None, "moves") if show_progress else None
    blunders: list[Blunder] = []
    moves = 0
    for played in games:
        colour = played.colour
        board = played.game.board()
        for move in played.game.mainline_moves():
            if board.turn == colour and board.fullmove_number >= from_move:
                moves += 1
                after = board.copy()  # with its history: a repetition is a draw
                after.push(move)
                before, _ = value(board, colour)
                ended = terminal_value(after)  # the opponent's, who is to move
                if ended is not None:
                    after_value, reply, kind = 1.0 - ended, "", "draw"
                else:
                    after_value, info = value(after, colour)
                    pv = info.get("pv") or []
                    reply = pv[0].uci() if pv else ""
                    mate = info["score"].pov(colour).is_mate()
                    kind = blunder_kind(board, move, pv[0], mate) if pv else "quiet"
                if before - after_value > drop:
                    blunders.append(
                        Blunder(
                            played.number,
                            board.fullmove_number,
                            board.fen(),
                            move.uci(),
                            reply,
                            round(before, 4),
                            round(after_value, 4),
                            kind,
                        )
                    )
                if progress:
                    progress.update(moves, f"blunders {len(blunders)}")
            board.push(move)
    if progress:
        progress.done(f"blunders {len(blunders)}")
    by_kind = collections.Counter(b.kind for b in blunders)
    return {
        "settings": {"nodes": nodes, "drop": drop, "from_move": from_move},
        "games_played": len(games),
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
    parser.add_argument(
        "--drop",
        type=float,
        default=BLUNDER_REGRET,
        help=f"win probability a blunder gives up (default {BLUNDER_REGRET})",
    )
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
    logging.getLogger("chess.pgn").setLevel(logging.CRITICAL)  # read_games says it once
    try:
        games, skipped = read_games(args.games, args.player)
    except OSError as e:
        print(f"error: --games {args.games}: {e.strerror or e}", file=sys.stderr)
        return 1
    for line in skipped:
        print(line, file=sys.stderr)
    if not games:
        print(f"error: {args.games}: no game of a player named {args.player!r}", file=sys.stderr)
        return 1
    path = args.engine
    try:
        path = find_engine(args.engine)
        with chess.engine.SimpleEngine.popen_uci(path) as engine:
            engine.configure({"Threads": 1})
            result = find_blunders(
                games, engine, args.nodes, args.drop, args.from_move, not args.quiet
            )
    except EngineNotFoundError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except (chess.engine.EngineError, chess.engine.EngineTerminatedError, OSError) as e:
        print(f"error: engine {path}: {str(e) or type(e).__name__}", file=sys.stderr)
        return 2
    result = {"games": args.games, "player": args.player, "skipped": skipped} | result
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
