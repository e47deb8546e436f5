"""Tools that make the repository's own assets: the bundled sample data (games, self-play games,
puzzles) and the web board's screenshot in the docs."""
