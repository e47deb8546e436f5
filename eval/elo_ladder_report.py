"""The Elo ladder's reports: `elo.md` (the table, the time control and what the scale is
anchored to) and `elo.png`, drawn from the run's JSON document alone, so `--replot` can redraw
them without playing a game."""

from __future__ import annotations

import json
import pathlib
import sys

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


def write_reports(document: dict, out: pathlib.Path) -> None:
    """`elo.md` and `elo.png` from the JSON document (also `--replot`: no games)."""
    (out / "elo.md").write_text(format_markdown(document), encoding="utf-8")
    from eval.plot import plot_elo_ladder  # matplotlib only when plotting

    plot_elo_ladder(document, str(out / "elo.png"))


def format_markdown(document: dict) -> str:
    """The results table, with the time control and the anchor statement under it."""
    lines = [
        "| player | Elo (95% interval) | games | score | levels met (games) | stopped by |",
        "|---|---|---|---|---|---|",
    ]
    for p in document["players"]:
        fit = p["fit"]
        if fit is None:
            elo = "no games"
        elif fit["bound"] == "upper":
            elo = f"below {fit['upper']:.0f}"
        elif fit["bound"] == "lower":
            elo = f"above {fit['lower']:.0f}"
        else:
            elo = f"**{fit['elo']:.0f}** [{fit['lower']:.0f}, {fit['upper']:.0f}]"
        score = f"{100 * fit['score']:.1f}%" if fit else "-"
        levels = ", ".join(f"{lv['elo']:g} ({lv['games']})" for lv in p["levels"])
        stop = p["stop"]
        if stop == "converged":
            stop = f"interval ±{document['config']['target']:g} reached"
        lines.append(f"| {p['name']} | {elo} | {len(p['games'])} | {score} | {levels} | {stop} |")
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
        write_reports(document, out)
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"error: cannot redraw from {out / 'elo.json'}: {e}", file=sys.stderr)
        return 2
    print(f"wrote {out / 'elo.md'} and {out / 'elo.png'}", file=sys.stderr)
    return 0
