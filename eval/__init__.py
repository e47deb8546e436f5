"""Measuring agents: puzzles, action accuracy, Kendall's tau, EPD suites, UCI play, tournaments."""
