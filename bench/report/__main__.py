"""`python -m bench.report`: the same as `python bench/report.py`."""

import sys

from .cli import main

sys.exit(main())
