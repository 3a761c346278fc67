"""`python -m minibert.finetune`: the same command as `python train.py finetune`."""

import sys

from .cli import main

sys.exit(main())
