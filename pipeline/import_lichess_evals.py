"""`python -m pipeline.import_lichess_evals`: the command (pipeline/lichess_evals/)."""

import sys

from pipeline.lichess_evals.import_lichess_evals import main

if __name__ == "__main__":
    sys.exit(main())
