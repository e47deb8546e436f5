"""Agents and their judges: the agents (neural, with or without tree search, Stockfish, greedy,
random), puzzles, action accuracy, Kendall's tau, EPD suites, the UCI engine, the web board,
tournaments and the Elo ladder."""
