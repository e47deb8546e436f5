"""Elo ratings: the BayesElo fit, ratings against fixed opponents, and the ladder."""
