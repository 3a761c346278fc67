"""A fine-tune's run: one task (--train, --dev), every task folder given (--tasks), or GLUE (--glue).

`run` is what `python train.py finetune` (cli.py) and `minibert.finetune(...)` (api.py) both
call with their FinetuneSettings. A task folder holds one train.* and one dev.* file (.tsv,
.csv, .jsonl or .conll: GLUE's layout). With --tasks every folder is fine-tuned from the same
checkpoint into OUT/<folder name>, and one table of dev scores is printed at the end. Every
setting applies to every task, and two lines say which recipe ran (recipes.py) and what a
sentence task's head reads, and why.
"""

from __future__ import annotations

from pathlib import Path

import torch

from ..operations import distributed
from ..operations.distributed import rank_0_prints
from ..operations.precision import Precision, auto_line
from .glue.sweep import run_glue
from .glue.tasks import write_training_text
from .job import TaskFiles, finetune, load_backbone
from .kinds import KINDS, kind_of
from .kinds.sentence_files import Columns
from .recipes import checkpoint_pooling, overridden, recipe_for
from .run_tools.steps import check_out, check_unfinished
from .settings import FinetuneSettings

TABLE = ("accuracy", "f1", "mcc", "pearson", "spearman")  # the score columns of the --tasks table
FORMATS = sorted({suffix for kind in KINDS.values() for suffix in kind.formats})  # what a task folder's train.* and dev.* may be


def run(settings: FinetuneSettings) -> list[dict] | dict:
    """Every task of the command, one after another from the same checkpoint; their eval.json
    contents (--glue: glue.json's; --write-training-text: what the file holds)."""
    settings.check()
    if settings.write_training_text:
        return write_training_text(settings.glue, settings.write_training_text, settings.glue_tasks,
                                   settings.max_train_examples, settings.overwrite)
    dist = distributed.setup(settings.device)  # under torchrun: join the other processes (DDP)
    try:
        with rank_0_prints(dist):
            device = dist.device(settings.device)
            amp = Precision.of(settings.precision, device)  # a device or format that cannot work fails now
            if chose := auto_line(settings.precision, device):  # auto on a CPU with native bf16: said, with the reason
                print(chose, flush=True)
            return run_glue(settings, device, amp, dist) if settings.glue else run_tasks(settings, device, amp)
    finally:
        dist.close()


def run_tasks(settings: FinetuneSettings, device: torch.device, amp: Precision) -> list[dict]:
    init = settings.init[0]  # one checkpoint (checked): a run records it as a path
    jobs = task_files(settings)
    for job in jobs:  # what would stop a later job is refused before anything is trained
        job.kind.refuse(settings, job)
        if not settings.resume:
            check_out(job.out, settings.overwrite)
            check_unfinished(job.out, settings.overwrite)
    backbone = load_backbone(init)
    config = backbone[0].config  # a recipe's row by the kind of task: question answering takes its SQuAD row, 2.0's on SQuAD 2.0 data
    rows = [job.kind.recipe_row(job.train) for job in jobs]
    pooling = checkpoint_pooling(init)
    recipes = {row: recipe_for(settings.recipe, config, pooling, squad=row) for row in sorted(set(rows), key=lambda row: row or "")}
    for recipe in recipes.values():
        print(recipe.line(overridden(settings), glue=False), flush=True)
    if any(job.kind.pooled for job in jobs):  # a head that reads one pooled vector: which, and why
        print(recipes[None].pooling_line(settings.pooling), flush=True)
    reports = [finetune(recipes[row].applied(settings, recipes[row].values(pooled=job.kind.pooled), init=init), job, backbone,
                        device, amp) for job, row in zip(jobs, rows)]
    if settings.tasks:
        print(table([job.name for job in jobs], reports), flush=True)
    return reports


def task_files(settings: FinetuneSettings) -> list[TaskFiles]:
    """The files, output folder and kind of each task: --train/--dev into --out, or each --tasks folder into OUT/<its name>."""
    out = Path(settings.out)
    if settings.tasks:
        folders = [Path(folder) for folder in settings.tasks]
        names = [folder.resolve().name for folder in folders]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"--tasks names more than one folder called {', '.join(repeated)}; each task's results go to "
                             f"OUT/<folder name>, so give every task folder its own name")
        files = [(name, split_file(folder, "train"), split_file(folder, "dev"), out / name) for name, folder in zip(names, folders)]
    else:
        files = [(out.name or str(out), Path(settings.train), Path(settings.dev), out)]
    columns = Columns(tuple(settings.text_columns)) if settings.text_columns else None
    return [TaskFiles(name, train, dev, folder, kind_of(settings.task, train), columns, max_train=settings.max_train_examples)
            for name, train, dev, folder in files]


def split_file(folder: Path, split: str) -> Path:
    """The one train.* or dev.* file of a task folder."""
    if not folder.is_dir():
        raise NotADirectoryError(f"--tasks {folder} is not a folder; pass folders that hold train.tsv and dev.tsv (or .csv, .jsonl)")
    found = sorted(path for path in folder.glob(f"{split}.*") if path.suffix in FORMATS)
    if len(found) != 1:
        have = "none" if not found else " and ".join(path.name for path in found)
        raise FileNotFoundError(f"--tasks {folder} needs exactly one {split} file "
                                f"({', '.join(split + suffix for suffix in FORMATS)}), found {have}")
    return found[0]


def table(names: list[str], reports: list[dict]) -> str:
    """One Markdown row per task: its kind, dev size, steps and every score it has ('-' where
    a score does not apply: accuracy for regression, Pearson for classification)."""
    columns = [column for column in TABLE if any(column in report for report in reports)]
    header = ["task", "kind", "dev", "steps", *columns, "train loss"]
    rows = [[name, report["task"], str(report["examples"]), str(report["steps"]),
             *(f"{report[c]:.4f}" if c in report else "-" for c in columns), f"{report['train_loss']:.4f}"]
            for name, report in zip(names, reports)]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = ["| " + " | ".join(cell.ljust(width) for cell, width in zip(row, widths)) + " |" for row in [header, *rows]]
    lines.insert(1, "|" + "|".join("-" * (width + 2) for width in widths) + "|")
    return "\n".join(lines)
