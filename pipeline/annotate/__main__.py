"""`python -m pipeline.annotate`: the command of pipeline/annotate/annotate.py."""

import sys

from pipeline.annotate.annotate import main

if __name__ == "__main__":
    sys.exit(main())
