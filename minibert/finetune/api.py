"""`minibert.finetune(...)`: a fine-tune from Python, each flag of `python train.py finetune` a keyword.

    result = minibert.finetune(init="checkpoints/bert", train="sst2/train.tsv", dev="sst2/dev.tsv", out="runs/sst2")
    result.out, result.metrics["accuracy"]

A keyword is a flag's name in snake_case (`--max-len` is `max_len`): a FinetuneSettings field
(settings.py), with the flag's default. `resolve` turns keywords into FinetuneSettings, as
cli.py's `parse` turns flags, and both run the same `run` (run.py), which checks them first:
a bad value is the flag's own one-line error.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..runs.api import Keywords
from .run import run
from .settings import FLAGS, FinetuneSettings

NAMES = ("glue_tasks", "text_columns")  # lists of names, not of paths: their errors say so
KEYWORDS = Keywords("minibert.finetune", "python train.py finetune",
                    {field.name: str(field.type).replace("list[str]", "list[name]") if field.name in NAMES else str(field.type)
                     for field in FLAGS})


@dataclass(frozen=True)
class FinetuneResult:
    """What a finished fine-tune hands back: where it is, and its scores."""

    out: Path  # the run's folder (`load_classifier(out)` loads the model); --write-training-text: the file written
    metrics: dict | list[dict]  # eval.json's contents; with `tasks`, one per task; with `glue`, glue.json's


def finetune(**options) -> FinetuneResult:
    """Fine-tune as `python train.py finetune` does, each flag a keyword (`init="checkpoints/bert"`,
    `tasks=["glue/sst2", "glue/rte"]`, `steps=200`, `eval_every="epoch"`), with the flag's
    default and checks."""
    settings = resolve(options)
    metrics = run(settings)
    if settings.write_training_text:
        return FinetuneResult(Path(settings.write_training_text), metrics)
    one_task = not settings.glue and not settings.tasks
    return FinetuneResult(Path(settings.out), metrics[0] if one_task else metrics)


def resolve(options: dict) -> FinetuneSettings:
    """Keywords -> the run's FinetuneSettings: each keyword checked and converted as its flag is parsed."""
    return FinetuneSettings(**{name: KEYWORDS.checked(name, value) for name, value in options.items()})
