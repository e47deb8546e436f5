"""The Elo ladder's reports: `elo.md` (the table, the time control and what the scale is
anchored to) and `elo.png`, drawn from the run's JSON document alone, so `--replot` can redraw
them without playing a game."""

from __future__ import annotations

import json
import os
import pathlib
import sys

from runtime.outputs import writing

# What the numbers mean; {…} filled in from the run.
ANCHOR_STATEMENT = (
    "Elo on Stockfish's own UCI_Elo scale: the opponents are {engine} with UCI_LimitStrength "
    "at UCI_Elo N, rated N. Stockfish calibrated UCI_Elo (its pull request #2225) with games "
    "at 60s+0.6s, Hash 64 MB, rated with Ordo and anchored to goldfish 1.13 = 2000 on the "
    "CCRL 40/4 list (Stockfish 16 refitted it against CCRL-rated Stash versions). So it is a "
    "computer-rating-list scale, not a Lichess, chess.com or FIDE rating. The games here are "
    "not at 60s+0.6s but at {time_control}; the engine's range is {low}..{high}, and a rating "
    "below {low} is the logistic model's extrapolation from lopsided scores against the "
    "weakest level."
)


# Under the table: what a bound instead of an estimate means.
BOUND_NOTE = (
    "A player who lost every game (or won every one) has no finite maximum-likelihood Elo: "
    "its row gives the end of the {pct:g}% interval instead, `below X` the rating above which "
    "so one-sided a score would be unlikely (and `above X` alike)."
)


def write_atomic(path: pathlib.Path, text: str) -> None:
    """`text` to `path` through `<path>.tmp` and a rename: a full disk or a kill leaves the
    earlier file whole, never a truncated one; a full disk's error names `path`."""
    temporary = path.with_name(path.name + ".tmp")
    try:
        with writing(str(path)), open(temporary, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def write_reports(document: dict, out: pathlib.Path) -> None:
    """`elo.json` (unless redrawing), `elo.md` and `elo.png` from the JSON document, each
    written whole or not at all."""
    write_atomic(out / "elo.json", json.dumps(document, indent=2) + "\n")
    _write_views(document, out)


def _write_views(document: dict, out: pathlib.Path) -> None:
    """`elo.md` and `elo.png` (also `--replot`: no games)."""
    write_atomic(out / "elo.md", format_markdown(document))
    from eval.plot import plot_elo_ladder  # matplotlib only when plotting

    temporary = out / "elo.tmp.png"
    try:
        with writing(str(out / "elo.png")):
            plot_elo_ladder(document, str(temporary))
        os.replace(temporary, out / "elo.png")
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def describe_fit(fit: dict | None) -> str:
    """A fit (FixedFit.to_dict) in words: `1234 [1180, 1290]`, or for a one-sided score the
    interval's finite end said as a bound: `< 1656 (no win yet: 95% upper bound)`."""
    if fit is None:
        return "no games"
    pct = 100 * fit["confidence"]
    if fit["bound"] == "upper":
        return f"< {fit['upper']:.0f} (no win or draw yet: {pct:g}% upper bound)"
    if fit["bound"] == "lower":
        return f"> {fit['lower']:.0f} (no loss or draw yet: {pct:g}% lower bound)"
    return f"{fit['elo']:.0f} [{fit['lower']:.0f}, {fit['upper']:.0f}]"


def how_it_ended(game: dict) -> str:
    """A game's ending from the rated player's side: an adjudication (eval/game.py: "White
    ahead by 1000 cp or more for 6 plies ...") says whether the player was ahead or behind."""
    termination = game["termination"]
    kind, colon, detail = termination.partition(":")
    if kind.strip() != "adjudication" or not colon:
        return termination
    words = detail.strip().split(" ", 2)
    if len(words) < 3 or words[1] != "ahead":
        return termination
    winner = words[0].lower()
    standing = "ahead" if winner == game["colour"] else "behind"
    return f"adjudicated: it was {standing} {words[2]}"


def format_markdown(document: dict) -> str:
    """The results table, with the time control and the anchor statement under it."""
    lines = [
        "| player | Elo (95% interval) | games | score | levels met (games) | stopped by |",
        "|---|---|---|---|---|---|",
    ]
    bounded = False
    for p in document["players"]:
        fit = p["fit"]
        bounded = bounded or (fit is not None and fit["bound"] is not None)
        if fit is None:
            elo = "no games"
        elif fit["bound"] == "upper":
            elo = f"below {fit['upper']:.0f} (0% score)"
        elif fit["bound"] == "lower":
            elo = f"above {fit['lower']:.0f} (100% score)"
        else:
            elo = f"**{fit['elo']:.0f}** [{fit['lower']:.0f}, {fit['upper']:.0f}]"
        score = f"{100 * fit['score']:.1f}%" if fit else "-"
        levels = ", ".join(f"{lv['elo']:g} ({lv['games']})" for lv in p["levels"])
        stop = p["stop"]
        if stop == "converged":
            stop = f"interval ±{document['config']['target']:g} reached"
        lines.append(f"| {p['name']} | {elo} | {len(p['games'])} | {score} | {levels} | {stop} |")
    if bounded:
        pct = 100 * document["config"]["confidence"]
        lines += ["", BOUND_NOTE.format(pct=pct)]
    if document.get("complete") is False:
        lines += ["", "Incomplete: the run was cut short; rerunning its command resumes it."]
    lines += [
        "",
        f"Time control: {document['time_control']}.",
        "",
        f"Scale: {document['anchor']}",
        "",
        f"Command: `{document['command']}`" if document["command"] else "",
    ]
    return "\n".join(lines).rstrip() + "\n"


def replot(out: pathlib.Path) -> int:
    """`--replot`: the table and the plot again from `out`'s elo.json; the exit status."""
    try:
        document = json.loads((out / "elo.json").read_text(encoding="utf-8"))
        _write_views(document, out)
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"error: cannot redraw from {out / 'elo.json'}: {e}", file=sys.stderr)
        return 2
    print(f"wrote {out / 'elo.md'} and {out / 'elo.png'}", file=sys.stderr)
    return 0
