"""A checkpoint judged on an annotated test split: action accuracy, Kendall's tau, log-loss.

The per-board rules themselves are `core.move_metrics` (the trainer uses the same ones).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

import chess
import numpy as np

from core.actions import legal_actions, moves_to_indices
from core.bins import to_bins
from core.move_metrics import summarize
from core.schema import SchemaError, board_files, read_board_file
from core.targets import target_kind
from core.tokenizer import tokenize_batch
from model.data.loader import BOARD_COLUMNS, DataError, table_arrays
from model.predictor import Predictor, legal_move_probs
from runtime.outputs import OutputError, check_file
from runtime.progress import Progress

_EVAL_COLUMNS = ["fen", "moves", "win_probs", "best_move", "state_win_prob", "partial"]


def read_rows(path: str, max_boards: int | None = None) -> list[dict]:
    """The first `max_boards` (default all) annotated boards at `path` (file, shard directory
    or glob) as dicts with the columns evaluate_checkpoint needs, schema-checked and checked
    row by row as the trainer checks them.

    Raises FileNotFoundError, core.schema.SchemaError (an unreadable shard too) naming the
    file, or model.data.loader.DataError naming the file and row: a bad FEN, a win probability NaN
    or outside [0, 1], a move that is not an action or not legal on its board, or a complete
    board whose moves are not exactly its legal moves in action-space order.
    """
    if max_boards is not None and max_boards < 0:
        raise ValueError(f"max_boards must be >= 0, got {max_boards}")
    rows: list[dict] = []
    for file in board_files(path):
        if max_boards is not None and len(rows) >= max_boards:
            break
        table = read_board_file(file, BOARD_COLUMNS)
        if max_boards is not None:
            table = table.slice(0, max_boards - len(rows))
        table_arrays(table, file)  # raises the DataError naming the row
        for index, row in enumerate(table.select(_EVAL_COLUMNS).to_pylist()):
            if row["moves"] and not row["partial"]:
                if list(row["moves"]) != legal_actions(chess.Board(row["fen"])):
                    raise DataError(
                        f"{file}: row {index} (FEN {row['fen']!r}): the moves are not its legal "
                        "moves in action-space order"
                    )
            rows.append(row)
    return rows


def score_rows(predictor, rows: list[dict]) -> tuple[list[np.ndarray], np.ndarray]:
    """The model's score of each row's moves, and -log p(target) of each of its examples.

    Scores are move_values' (higher = better, float32), one array per row in the order of
    its `moves`, which must be the board's legal moves in action-space order. Examples
    and targets: AV, one per (board, move), the bin of the move's win probability; SV, one
    per board, the bin of the board's win probability; BC, one per board, Stockfish's best
    move among the 1968 actions. Bins are the model's own (config.num_bins).

    The network runs once per input it needs: AV scores and losses come from the same
    (board, move) log-probabilities, BC's from the same board log-probabilities; SV scores
    value the successor boards and its losses the boards themselves.
    """
    for row in rows:
        if list(row["moves"]) != legal_actions(chess.Board(row["fen"])):
            raise ValueError(
                f"board {row['fen']!r}: the data's moves are not its legal moves in "
                "action-space order"
            )
    if not rows:
        return [], np.zeros(0)
    score = target_kind(predictor.config.target).move_score
    fens = [row["fen"] for row in rows]
    if score == "policy":
        log_probs = predictor.move_log_probs(fens)
        scores = [
            legal_move_probs(board, row["moves"])
            for board, row in zip(log_probs, rows, strict=True)
        ]
        labels = moves_to_indices([row["best_move"] for row in rows])
    elif score == "successor_value":
        scores = [s for _, s in predictor.move_values([chess.Board(fen) for fen in fens])]
        log_probs = predictor.log_probs(tokenize_batch(fens))
        win_probs = np.array([row["state_win_prob"] for row in rows])
        labels = to_bins(win_probs, predictor.config.num_bins)
    else:
        lengths = np.array([len(row["moves"]) for row in rows])
        states = np.repeat(tokenize_batch(fens), lengths, axis=0)
        actions = moves_to_indices(np.concatenate([row["moves"] for row in rows]))
        log_probs, values = predictor.log_probs_and_values(states, actions)
        scores = np.split(values, np.cumsum(lengths)[:-1])
        win_probs = np.concatenate([row["win_probs"] for row in rows])
        labels = to_bins(win_probs, predictor.config.num_bins)
    losses = -log_probs[np.arange(len(labels)), labels]
    return [np.asarray(s, np.float32) for s in scores], losses


def evaluate_checkpoint(
    predictor, rows: list[dict], chunk_boards: int = 64, show_progress: bool = True
) -> dict:
    """Action accuracy, Kendall's tau, mean regret, blunder share, mean |win-prob error| and
    log-loss over `rows` (dicts with the columns of core.schema; `moves` in action-space
    order). Boards
    without legal moves are left out, and so are partial boards (only some moves valued):
    accuracy and tau compare every legal move."""
    predicted, truth = [], []
    loss_sum, loss_count = 0.0, 0
    progress = Progress("metrics", len(rows), "boards") if show_progress else None
    for start in range(0, len(rows), chunk_boards):
        chunk = [
            row
            for row in rows[start : start + chunk_boards]
            if row["moves"] and not row.get("partial", False)
        ]
        scores, losses = score_rows(predictor, chunk)
        for row, board_scores in zip(chunk, scores, strict=True):
            predicted.append(board_scores.astype(np.float64))
            truth.append(np.asarray(row["win_probs"], dtype=np.float64))
        loss_sum += float(losses.sum())
        loss_count += len(losses)
        if progress:
            progress.update(min(start + chunk_boards, len(rows)))
    if progress:
        progress.done()
    result = summarize(predicted, truth)
    kind = target_kind(predictor.config.target)
    if not kind.value_head:
        # Policy scores are move probabilities, not win probabilities: no error to report.
        result["mean_abs_win_prob_error"] = None
    outputs = kind.output_size(predictor.config.num_bins)
    result["log_loss"] = loss_sum / loss_count if loss_count else math.nan
    result["log_loss_examples"] = loss_count
    result["uniform_log_loss"] = math.log(outputs)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m eval.metrics",
        description="Action accuracy (ties count), Kendall's tau, the first choice's mean regret "
        "and blunder share, log-loss and mean absolute win-probability error of a checkpoint on "
        "annotated test boards; JSON out.",
    )
    parser.add_argument("--checkpoint", required=True, help="run dir or one checkpoint's dir")
    parser.add_argument("--data", required=True, help="annotated Parquet: file, shard dir, glob")
    parser.add_argument("--max-boards", type=int, default=None, help="first N boards")
    parser.add_argument("--step", type=int, default=None, help="checkpoint step (latest)")
    parser.add_argument("--no-ema", action="store_true", help="raw params instead of EMA")
    parser.add_argument("--out", default=None, help="also write the JSON here")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    args = parser.parse_args(argv)
    if args.max_boards is not None and args.max_boards < 1:
        parser.error("--max-boards must be >= 1")
    try:
        check_file(args.out, "--out")  # before any work
        rows = read_rows(args.data, args.max_boards)
    except (FileNotFoundError, SchemaError, DataError, OutputError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1

    try:
        predictor = Predictor.from_checkpoint(
            args.checkpoint, use_ema=not args.no_ema, step=args.step
        )
    except FileNotFoundError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    result = {
        "checkpoint": args.checkpoint,
        "step": predictor.step,
        "ema": not args.no_ema,
        "target": predictor.config.target,
        "data": args.data,
    } | evaluate_checkpoint(predictor, rows, show_progress=not args.quiet)
    text = json.dumps(result, indent=1)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            f.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
