"""`python -m pipeline.import_chessbench`: pipeline/chessbench/import_chessbench.py's command."""

import sys

from pipeline.chessbench.import_chessbench import main

if __name__ == "__main__":
    sys.exit(main())
