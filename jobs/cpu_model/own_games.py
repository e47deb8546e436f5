"""`make cpu-model`'s positions from the model's own games (DAgger): the policy model plays
the scale's opponent from the bundled ECO openings (eval/elo/tournament.py's games and PGN), and
every board of those games is valued by one search, the split OWN_GAMES_SPLIT, which the main
model then trains on with the other `search-*` splits.

A model trained on good games alone never sees the positions its own mistakes lead to; its
own games against a stronger opponent are those positions, labelled by the teacher.
"""

from __future__ import annotations

import hashlib
import json
import pathlib
import time

from eval.agents.players import make_agent
from eval.elo.tournament import PGN_NAME, TournamentConfig, run_tournament
from jobs.cpu_model.settings import (
    OWN_GAMES_SPLIT,
    Paths,
    Scale,
    exclusion_files,
    log,
    own_games_on,
)
from jobs.step_log import StepLog, annotate_step, fingerprint
from runtime.file_digest import add_files

# A game longer than this is a draw: the model shuffling against a weak opponent teaches
# little past it.
MAX_PLIES = 300
EVENT = "cpu-model own games"


def model_digest(model: pathlib.Path) -> str:
    """A digest of every file of a model directory: a retrained model in the same place is
    another model, whose games are other games."""
    digest = hashlib.sha256()
    add_files(digest, model)
    return digest.hexdigest()[:16]


def play(policy: str, opponent: str, games: int, out: pathlib.Path, resume: bool) -> dict:
    """`games` games of the `policy` agent spec against `opponent` (each opening once with
    either colour) into `out`/games.pgn; returns the tournament's summary."""
    config = TournamentConfig(games_per_pair=games, max_plies=MAX_PLIES, event=EVENT)
    with make_agent(policy) as player, make_agent(opponent) as other:
        return run_tournament([player, other], out, config, resume=resume)


def own_games(scale: Scale, paths: Paths, steps: StepLog) -> dict | None:
    """The policy model's games (step `own-games`) and their boards valued by one search each
    (step `annotate-<OWN_GAMES_SPLIT>`), each reused while what it was made from is unchanged;
    None when the scale plays none or the model is absent."""
    if not scale.own_games:
        return None
    model = paths.own_games_model
    if not own_games_on(scale, paths):
        log(f"own games: skipped, no model at {model} (--own-games-model names one)")
        return None
    started = time.monotonic()
    out = paths.work / "own-games"
    pgn, summary = out / PGN_NAME, out / "tournament.json"
    policy = f"neural:{model}"
    key = fingerprint(model_digest(model), scale.own_games, scale.own_games_opponent, MAX_PLIES)
    if steps.finished("own-games", key, [pgn, summary]):
        log(f"own games: reusing {pgn}")
    else:
        log(f"own games: {scale.own_games} games of {policy} against {scale.own_games_opponent}")
        # An interrupted run of the same model and opponent keeps its finished games.
        resume = steps.done.get("own-games-started") == key
        steps.mark("own-games-started", key)
        play(policy, scale.own_games_opponent, scale.own_games, out, resume)
        steps.mark("own-games", key)
    played = json.loads(summary.read_text())
    annotated = annotate_own_games(scale, paths, steps, pgn)
    pair = played["pairs"][0]
    document = {
        "model": str(model),
        "opponent": scale.own_games_opponent,
        "games": played["games"],
        "model_score": pair["a_score"],
        "terminations": played["terminations"],
        "pgn": str(pgn),
        "boards": annotated["boards"]["unique"],
        "excluded": annotated["excluded"],
        "limit": annotated.get("row_limit", annotated["limit"]),
        "seconds": round(time.monotonic() - started, 1),
    }
    log(
        f"own games: {document['games']} games (model score {document['model_score']:.2f}), "
        f"{document['boards']:,} boards, {document['excluded']['boards']:,} evaluation "
        "positions dropped"
    )
    return document


def annotate_own_games(scale: Scale, paths: Paths, steps: StepLog, pgn: pathlib.Path) -> dict:
    """The games' boards valued by one search each, evaluation positions excluded as in every
    other split; returns the split's stats.json document."""
    exclude = exclusion_files(paths)
    annotated = paths.work / "annotated"
    argv = [str(pgn), "--out", str(annotated), "--split", OWN_GAMES_SPLIT]
    argv += ["--limit", scale.search_limit, "--mode", "search", "--exclude", *exclude]
    argv += ["--runner=DirectRunner", "--direct_num_workers=2"]
    argv += ["--direct_running_mode=multi_processing"]
    key = fingerprint(str(pgn), *exclude, argv)  # the PGN's contents: the games played
    say = lambda line: log(f"annotate {OWN_GAMES_SPLIT}: {line}")  # noqa: E731
    return annotate_step(steps, OWN_GAMES_SPLIT, annotated / OWN_GAMES_SPLIT, argv, key, say)
