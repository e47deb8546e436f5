"""Annotation: PGN games -> deduplicated boards -> Stockfish action values -> Parquet.

`annotate` is the command and its Beam job, `arguments` its command line, `beam_graph` the
Beam graph, `games` reading and parsing games, `boards` the Stockfish stage, `journal` resuming,
`split_output` the output folder, `settings` the run's options.
"""
