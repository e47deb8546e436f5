"""The UCI engine: the model behind the Universal Chess Interface, for any chess GUI.

`server` is the protocol loop and the command, `choosers` what plays a move, `go` the `go`
command's limits and time management, `options` the engine's options, `threads` the
`Threads` option.
"""


def main(argv: list[str] | None = None) -> int:
    """The `searchless-uci` script's entry (`eval.uci:main`, so that an installed script keeps
    working); the server loads only when it runs."""
    from eval.uci.server import main as serve

    return serve(argv)
