"""The training loop and its collaborators: the step, the run directory, evaluation, logs."""
