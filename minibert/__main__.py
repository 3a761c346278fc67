"""`python -m minibert COMMAND`: the commands of minibert/tools/ (fill-mask, detect, info,
attention, export, curves, predict, explore); `python -m minibert --help` lists them."""

import sys

try:  # a Ctrl-C while the commands' code loads stops the command in one line, not a traceback
    from .tools.commands import main
except KeyboardInterrupt:
    print("stopped", flush=True)
    sys.exit(130)

if __name__ == "__main__":
    sys.exit(main())
