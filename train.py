"""Pretrain a member of the BERT family: python train.py --variant {bert,roberta,albert,distilbert,electra}.

Everything lives in minibert/training/; `python train.py --help` lists every flag.
"""

import sys

from minibert.training.cli import main

if __name__ == "__main__":
    sys.exit(main())
