"""Lichess PGN dumps -> deduplicated boards -> Stockfish action values -> sharded Parquet."""

from pipeline import beam_env

beam_env.install()  # before any module of the package imports Beam (see beam_env)
