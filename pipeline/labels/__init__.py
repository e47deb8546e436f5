"""Labelling boards with Stockfish: the UCI client, action values, the engine pool."""
