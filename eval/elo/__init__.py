"""Elo ratings: round-robin tournaments among agents, the BayesElo fit, ratings against fixed
opponents, and the ladder against Stockfish's UCI_Elo levels."""
