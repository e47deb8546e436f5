"""A local web board: play the model by clicking or dragging, and read its move values.

    python -m eval.web [--model RUN] [--value RUN] [--port 8000] [--host 127.0.0.1]

The models are loaded before the server listens; then it prints the address to open.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys
import threading

from eval.agents.neural_setup import DEFAULT_MODEL, DEFAULT_SEARCH
from eval.web.api import MAX_SIMULATIONS, WebSettings
from eval.web.http_server import WebServer
from eval.web.models import ModelError, ModelStore
from runtime.interrupts import interrupted

PROG = "python -m eval.web"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--model",
        help=f"the run dir the page starts with (default {DEFAULT_MODEL}); every run dir "
        "under models/ is offered too",
    )
    parser.add_argument(
        "--value",
        help="an AV or SV model to value the moves of a BC policy (default none, as is "
        f"'none': a policy with a value head of its own, as {DEFAULT_MODEL} has, values with it)",
    )
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="0 = any free port")
    parser.add_argument(
        "--host",
        default=DEFAULT_HOST,
        help="the address to listen on; anything but loopback lets others on the network play",
    )
    parser.add_argument(
        "--search-batch",
        type=int,
        default=DEFAULT_SEARCH.batch,
        help="leaves per network call when the page searches",
    )
    parser.add_argument(
        "--max-simulations",
        type=int,
        default=MAX_SIMULATIONS,
        help="the most playouts a request may ask for",
    )
    parser.add_argument("--log", action="store_true", help="print every request")
    args = parser.parse_args(argv)
    if not 0 <= args.port <= 65535:
        parser.error(f"--port must be 0..65535, got {args.port}")
    if args.search_batch < 1 or args.max_simulations < 0:
        parser.error("--search-batch must be >= 1 and --max-simulations >= 0")
    return args


def warm_up_search(store: ModelStore, settings: WebSettings, stopping: threading.Event) -> None:
    """Compiles the search's batch shapes of the default models while the page is in use."""
    names = [name for name in (store.default_model, store.default_value) if name is not None]
    try:
        store.warm_up(names, settings.search_batch, stopping.is_set)
    except Exception as e:  # the first search tries again and reports it
        if not stopping.is_set():  # at exit, XLA's threads refuse work: no news
            print(f"{PROG}: warning: warming up the search: {e}", file=sys.stderr)


def load_models(store: ModelStore) -> None:
    """The default model and its value model, loaded and warmed up before the first page."""
    for name in (store.default_model, store.default_value):
        if name is not None:
            print(f"{PROG}: loading {name} ({store.models[name].path})", flush=True)
            store.predictor(name)
    store.value_model(store.default_model, None)  # a BC model as --value is refused here


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    settings = WebSettings(search_batch=args.search_batch, max_simulations=args.max_simulations)
    try:
        store = ModelStore.create(args.model, args.value, os.getcwd())
    except ModelError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    stopping = threading.Event()
    warming = threading.Thread(
        target=warm_up_search, args=(store, settings, stopping), name="search-warm-up", daemon=True
    )
    # Listening before the models load: a port in use is told at once, not after them.
    try:
        server = WebServer((args.host, args.port), store, settings, quiet=not args.log)
    except OSError as e:
        reason = e.strerror or str(e)
        print(f"{PROG}: error: cannot listen on {args.host}:{args.port}: {reason}", file=sys.stderr)
        return 1
    try:
        try:
            load_models(store)
        except ModelError as e:
            print(f"{PROG}: error: {e}", file=sys.stderr)
            return 2
        if not is_loopback(args.host):
            print(
                f"{PROG}: warning: listening on {args.host}: anyone who can reach it can use it",
                file=sys.stderr,
            )
        print(f"{PROG}: serving the board on {server.url} (Ctrl-C stops)", flush=True)
        warming.start()
        server.serve_forever()
    except KeyboardInterrupt:
        code = interrupted(f"{PROG}: stopped")
        if warming.is_alive():
            # The compile's own threads would hold the exit for its whole length (a minute
            # where XLA's disk cache is empty); nothing is left to save.
            stopping.set()
            sys.stdout.flush()
            os._exit(code)
        return code
    finally:
        stopping.set()
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
