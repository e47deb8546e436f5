"""The Beam plumbing: portable transforms, the environment, Dask, shards, stats, locks."""
