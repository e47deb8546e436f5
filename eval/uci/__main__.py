"""`python -m eval.uci`: the command of eval/uci/server.py (`searchless-uci` too)."""

import sys

from eval.uci.server import main

if __name__ == "__main__":
    sys.exit(main())
