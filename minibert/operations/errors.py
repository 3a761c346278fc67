"""A run that cannot go on, and a warning: said in one line each.

The command line (runs/cli.py) prints a TrainingError's message as one line and exits with
status 2, as it does for a user's error (a bad flag, a missing file); `--debug` shows the
traceback instead. Here, at the bottom, so that every floor above can raise and warn.
"""

from __future__ import annotations

import sys


class TrainingError(RuntimeError):
    """A run that cannot go on (locked, nothing intact to resume, the disk full), with the way out."""


def warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr, flush=True)
