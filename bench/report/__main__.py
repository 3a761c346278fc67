"""`python -m bench.report`: the same as `python bench/results.py`."""

import sys

from .cli import main

sys.exit(main())
