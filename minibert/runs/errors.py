"""What goes wrong, said in one line.

Every problem a user can cause or fix — a bad flag, a missing file, a run that diverged —
is raised as one of the exceptions below (or a ValueError / FileNotFoundError) with a
message that names the problem and the fix. The command line prints that one line and
exits with status 2; `--debug` shows the traceback instead.
"""

from __future__ import annotations

from ..operations.errors import TrainingError
from ..training.loop import NonFiniteLoss  # the loop's own (a run that diverged), reported here in one line

USER_ERRORS = (ValueError, FileNotFoundError, NotADirectoryError, FileExistsError, PermissionError)
EXIT_USER_ERROR = 2
RUN_ERRORS = (TrainingError, NonFiniteLoss)  # a run that cannot go on (operations/errors.py), the loop's included
