"""The UCI engine: the model behind the Universal Chess Interface, for any chess GUI.

`command` is the command, `server` the protocol loop, `choosers` what plays a move and
`factories` what builds them from the options, `position` and `go` those commands, `info` the
info line and its score, `options` the engine's options, `threads` the `Threads` option.
"""


def main(argv: list[str] | None = None) -> int:
    """The `searchless-uci` script's entry (`eval.uci:main`, so that an installed script keeps
    working); the server loads only when it runs."""
    from eval.uci.command import main as serve

    return serve(argv)
