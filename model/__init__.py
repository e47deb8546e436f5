"""Learning: the training-data loaders, the JAX/Haiku networks (the paper's transformer, the
GATEAU edge backbone), the training loop, checkpoints and jitted predictions, for AV, SV or BC."""
