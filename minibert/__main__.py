"""`python -m minibert COMMAND`: the commands of minibert/tools/ (fill-mask, detect, info,
attention, export, curves, predict, explore); `python -m minibert --help` lists them."""

import sys

from .tools.commands import main

if __name__ == "__main__":
    sys.exit(main())
