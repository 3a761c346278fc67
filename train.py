"""Pretrain a member of the BERT family, or fine-tune one.

    python train.py --variant {bert,roberta,albert,distilbert,electra} [flags]   # pretraining
    python train.py finetune --init DIR --train FILE --dev FILE --out DIR        # classification, regression
    python train.py finetune --init DIR --tasks DIR [DIR ...] --out DIR          # every task folder, one table

Everything lives in minibert/training/ and minibert/finetune/; `--help` lists every flag.
"""

import sys


def main(argv: list[str]) -> int:
    if argv[:1] == ["finetune"]:
        from minibert.finetune import main as finetune

        return finetune(argv[1:], prog="python train.py finetune")
    from minibert.runs.cli import main as pretrain

    return pretrain(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
