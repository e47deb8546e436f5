"""Agents that choose moves: neural policies with or without search, Stockfish, the floors."""
