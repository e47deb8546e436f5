"""Lichess PGN dumps -> deduplicated boards -> Stockfish action values -> sharded Parquet."""
