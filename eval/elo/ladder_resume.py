"""What a rerun of the Elo ladder does with the games an earlier run left in `<out>`.

A player's ladder is deterministic given its results (the level starts at the engine's floor
and each step re-aims from the fit), so a rerun replays it game by game and reuses each game
the earlier run finished (`games.pgn`, matched by round, players, opening and the settings
that shape the games), playing only what is missing: an interrupted ladder resumes where it
stopped. A game cut short by the interruption is played again; earlier games the rerun does not
reach (a lower game cap) are kept at the end of games.pgn.

Games of other settings, or of players this run does not rate, cannot be reused: a player is
its agent spec and the checkpoints the spec reads (a name given to another spec, or the same
spec over a retrained checkpoint, is another player; a game that does not say who played it
is of no player this run rates). Rather than
drop them, the earlier results are moved aside, whole, into `<out>/earlier-<time>/`, and the
run starts over (said in one line).
"""

from __future__ import annotations

import datetime
import hashlib
import os
import pathlib
from collections.abc import Mapping
from dataclasses import dataclass, field

import chess.pgn

from eval.agents.specs import parse_agent_spec
from eval.elo.tournament import read_finished
from model import checkpoint
from runtime.file_digest import add_files

# PGN tags of the ladder's own: the settings that shape its games, a game's seconds, and who
# its rated player was (`player_identity`).
SETTINGS_TAG = "LadderSettings"
SECONDS_TAG = "LadderSeconds"
PLAYER_TAG = "LadderPlayer"
GameKey = tuple[str, str, str, str]


def player_identity(spec: str) -> str:
    """The `LadderPlayer` tag of a game rated for `spec`: the spec, and for a model's spec a
    digest of the checkpoint files it reads (the policy's and a `value=` model's), so that a
    model retrained in place is not taken for the one that played the earlier games."""
    parsed = parse_agent_spec(spec)
    paths = [parsed.options[k] for k in ("path", "value") if k in parsed.options]
    digest = hashlib.blake2b(digest_size=8)
    read = 0
    for path in paths:
        try:
            directory, step = checkpoint.resolve(path)
        except FileNotFoundError:  # not a checkpoint (value=none): the spec says it all
            continue
        step_dir = pathlib.Path(directory, str(step))
        for item in checkpoint.MODEL_ITEMS:
            read += add_files(digest, step_dir / item, base=step_dir)
    return f"{spec} #{digest.hexdigest()}" if read else spec


def settings_text(engine_name: str, config) -> str:
    """The settings a reused game must have been played under (its `LadderSettings` tag):
    the engine, its movetime, the ply cap, adjudication, openings and how levels are aimed.
    The stopping rules (target, time, game caps) may change between runs."""
    return (
        f"engine={engine_name};sf_time={config.sf_time:g};max_plies={config.max_plies};"
        f"adjudicate={config.adjudicate};seed={config.seed};"
        f"pairs_per_step={config.pairs_per_step};level_step={config.level_step};"
        f"confidence={config.confidence:g}"
    )


def game_key(round_: str, white: str, black: str, opening: str) -> GameKey:
    return round_, white, black, opening


@dataclass
class EarlierGames:
    """The finished games a rerun may reuse, by key; `used` counts those it did."""

    games: dict[GameKey, chess.pgn.Game]
    taken: set[GameKey] = field(default_factory=set)

    def take(self, key: GameKey) -> chess.pgn.Game | None:
        game = self.games.get(key)
        if game is not None:
            self.taken.add(key)
        return game

    def untaken(self) -> list[chess.pgn.Game]:
        """The earlier games this run did not reach (a lower cap, an interruption first):
        written back to games.pgn after the run's own, so that no finished game is lost."""
        return [g for k, g in self.games.items() if k not in self.taken]


def _ladder_player(game: chess.pgn.Game, players: Mapping[str, str]) -> str | None:
    """The rated side's name (the other side is a Stockfish level), or None; None too where
    the game does not name its player as this run's player of that name (`player_identity`),
    or does not name it at all."""
    sides = {game.headers.get("White", ""), game.headers.get("Black", "")}
    found = sides & set(players)
    if len(found) != 1:
        return None
    name = next(iter(found))
    played_by = game.headers.get(PLAYER_TAG)
    return name if played_by == players[name] else None


def earlier_games(
    out: pathlib.Path, pgn_name: str, settings: str, players: Mapping[str, str]
) -> tuple[EarlierGames, str | None]:
    """(the reusable games in `out/pgn_name`, the reason they cannot be reused or None), for
    `players` {name: player_identity}. A reason means the earlier results must be set aside before
    the run writes anything."""
    path = out / pgn_name
    if not path.exists() or path.stat().st_size == 0:
        return EarlierGames({}), None
    try:
        finished = read_finished(path)
    except (OSError, UnicodeDecodeError, ValueError) as e:
        return EarlierGames({}), f"{path} cannot be read ({e})"
    if not finished:
        return EarlierGames({}), f"{path} holds no finished game"
    other = [g for g in finished.values() if g.headers.get(SETTINGS_TAG) != settings]
    if other:
        return EarlierGames({}), f"{path} holds {len(other)} games of other settings"
    strangers = [g for g in finished.values() if _ladder_player(g, players) is None]
    if strangers:
        return EarlierGames({}), f"{path} holds {len(strangers)} games of other players"
    return EarlierGames(finished), None


def set_aside(out: pathlib.Path, names: tuple[str, ...]) -> pathlib.Path:
    """Moves the outputs `names` that exist in `out` into a new `out/earlier-<UTC time>/`;
    returns that folder."""
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    folder = out / f"earlier-{stamp}"
    suffix = 1
    while folder.exists():
        suffix += 1
        folder = out / f"earlier-{stamp}-{suffix}"
    folder.mkdir()
    for name in names:
        if (out / name).exists():
            os.replace(out / name, folder / name)
    return folder
