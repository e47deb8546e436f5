"""The training data: Parquet boards to batches, in memory or streamed."""
