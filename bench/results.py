"""The results report, one command: `python bench/results.py [--only SECTION] [--quick] [--list]`.

The report itself is the package bench/report/ (its docstring says what each section
measures); this script runs it from a checkout without installing anything, as the docs
cite it. `python -m bench.report` does the same.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: bench.report and minibert

from bench.report.cli import main  # noqa: E402  (the package bench/report/, not this file)

if __name__ == "__main__":
    sys.exit(main())
