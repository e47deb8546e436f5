"""Annotation: PGN games -> deduplicated boards -> Stockfish action values -> Parquet.

`annotate` is the command and its Beam job, `arguments` its command line, `graph` the Beam
graph, `games` reading and parsing games, `boards` the Stockfish stage, `journal` resuming,
`output` the output folder, `config` the run's options.
"""
