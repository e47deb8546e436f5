"""Lichess PGN dumps -> deduplicated boards -> Stockfish action values -> sharded Parquet."""

from pipeline.beam import environment

# Before any module of the package imports Beam (see pipeline/beam/environment.py).
environment.install()
