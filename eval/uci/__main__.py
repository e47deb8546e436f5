"""`python -m eval.uci` (and the `searchless-uci` script): the command of eval/uci/server.py."""

import sys

from eval.uci.server import main

if __name__ == "__main__":
    sys.exit(main())
