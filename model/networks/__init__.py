"""The networks: the paper's transformer, the board-at-once backbones and their inputs."""
