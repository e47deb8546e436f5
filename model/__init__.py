"""Encodings and the JAX/Haiku transformer that learns action values, state values or moves."""
