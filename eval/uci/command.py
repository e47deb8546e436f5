"""A UCI engine for a trained model (AV, SV or BC): plug it into a chess GUI, Cute Chess,
fastchess or lichess-bot.

    searchless-uci                                 # the default model, models/cpu
    searchless-uci --checkpoint runs/small         # or: setoption name WeightsFile value ...
    python -m eval.uci --checkpoint runs/small     # the same

A relative model path is looked for in the directory the engine was started from, then in
the project's checkout (runtime/paths.py), so a GUI may start it from anywhere. A `--checkpoint`
that is not found is an error at start-up (one line naming it, status 2): a tournament would
otherwise score a random mover under the model's name. With `--allow-missing-model`, and
where the default model is absent, the engine runs without one: `isready` reports `info
string error: no model ...` and each `go` says so again and plays a uniformly random legal
move, so that a GUI or tournament carries on instead of losing the engine.

`quit` or the end of input ends the engine with status 0; Ctrl-C (SIGINT) prints one line
and exits with 130. What the engine answers: eval/uci/server.py; its options:
eval/uci/options.py.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

from eval.agents.model_files import label
from eval.agents.neural_setup import DEFAULT_MODEL
from eval.uci.factories import AgentFactory, ChooserFactory, NeuralFactory
from eval.uci.options import UciError, UciOptions, find_option, parse_value
from eval.uci.server import ENGINE_NAME, UciServer
from runtime.paths import resolve_path

EXIT_INTERRUPTED = 130
EXIT_USAGE = 2  # argparse's, for an argument that names nothing


def _rows_per_pass(text: str) -> int | None | str:
    if text in ("auto", "none"):
        return None if text == "none" else text
    if text.isdigit() and int(text) > 0:
        return int(text)
    raise argparse.ArgumentTypeError(f"expected auto, none or a positive integer, got {text!r}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="searchless-uci", description=__doc__.split("\n\n")[0], allow_abbrev=False
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--checkpoint",
        help=f"a run dir (latest checkpoint) or a checkpoint dir; default {DEFAULT_MODEL}. "
        "Relative paths: from the start directory, else from the project's checkout",
    )
    source.add_argument("--agent", help=argparse.SUPPRESS)  # any agent spec, for tests
    parser.add_argument(
        "--allow-missing-model",
        action="store_true",
        help="start even if --checkpoint is not found, playing random legal moves until "
        "WeightsFile names a model (an error otherwise)",
    )
    parser.add_argument("--engine", default=None, help=argparse.SUPPRESS)
    # For bench/uci.py: the engine without its warm-up, and the predictor's row passes
    # ("none": padded buckets, as on an accelerator).
    parser.add_argument("--no-warm-up", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--rows-per-pass", type=_rows_per_pass, default="auto", help=argparse.SUPPRESS
    )
    parser.add_argument("--temperature", type=float, default=0.0, help="initial Temperature")
    parser.add_argument(
        "--no-repetition-workaround", action="store_true", help="RepetitionWorkaround off"
    )
    parser.add_argument("--no-ema", action="store_true", help="UseEMA off")
    parser.add_argument("--seed", type=int, default=0, help="initial Seed")
    args = parser.parse_args(argv)
    start_dir = os.getcwd()
    weights = args.checkpoint or DEFAULT_MODEL
    resolved = resolve_path(weights, start_dir)
    try:
        temperature = parse_value(find_option("Temperature"), str(args.temperature))
        seed = parse_value(find_option("Seed"), str(args.seed))
    except UciError as e:
        parser.error(str(e))
    # The default model keeps its name; the factory resolves it as it resolves any WeightsFile.
    defaults = UciOptions(
        weights=(resolved.path or weights) if args.checkpoint else DEFAULT_MODEL,
        temperature=temperature,
        repetition_workaround=not args.no_repetition_workaround,
        use_ema=not args.no_ema,
        seed=seed,
    )
    if args.agent:
        factory: ChooserFactory = AgentFactory(args.agent, engine_path=args.engine)
        name = f"{ENGINE_NAME} ({args.agent})"
    else:
        factory = NeuralFactory(
            start_dir, warm_up=not args.no_warm_up, rows_per_pass=args.rows_per_pass
        )
        name = f"{ENGINE_NAME} {label(resolved.path)}" if resolved.path else ENGINE_NAME
        if resolved.path is None and args.checkpoint:
            if not args.allow_missing_model:
                print(
                    f"searchless-uci: error: checkpoint {resolved.describe_missing()}; name an "
                    "existing run or checkpoint (--allow-missing-model starts without one)",
                    file=sys.stderr,
                    flush=True,
                )
                return EXIT_USAGE
            print(
                f"searchless-uci: error: checkpoint {resolved.describe_missing()}; running "
                "without a model until WeightsFile names one",
                file=sys.stderr,
                flush=True,
            )

    # A GUI may send bytes that are not UTF-8; they must not end the engine.
    if hasattr(sys.stdin, "reconfigure"):
        sys.stdin.reconfigure(encoding="utf-8", errors="replace")
    engine = UciServer(factory, sys.stdout, name=name, defaults=defaults, start_dir=start_dir)
    try:
        engine.run(sys.stdin)
    except KeyboardInterrupt:
        print("searchless-uci: interrupted", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # the GUI went away; keep Python's exit flush from failing too
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


if __name__ == "__main__":
    sys.exit(main())
