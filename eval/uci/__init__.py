"""The UCI engine: the model behind the Universal Chess Interface, for any chess GUI.

`server` is the protocol loop and the command, `choosers` what plays a move, `go` the `go`
command's limits and time management, `options` the engine's options, `threads` the
`Threads` option.
"""
