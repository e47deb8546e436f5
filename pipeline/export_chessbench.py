"""`python -m pipeline.export_chessbench`: pipeline/chessbench/export_chessbench.py's command."""

import sys

from pipeline.chessbench.export_chessbench import main

if __name__ == "__main__":
    sys.exit(main())
