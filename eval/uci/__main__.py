"""`python -m eval.uci`: the command of eval/uci/command.py (`searchless-uci` too)."""

import sys

from eval.uci.command import main

if __name__ == "__main__":
    sys.exit(main())
