"""`python train.py finetune`: one task (--train, --dev), every task folder given (--tasks), or GLUE (--glue).

    python train.py finetune --init DIR --train train.tsv --dev dev.tsv --out OUT
    python train.py finetune --init DIR --tasks data/sst2 data/rte data/stsb --out OUT
    python train.py finetune --init DIR --glue glue_data --seeds 0 1 2 --out OUT      (glue/sweep.py)
    python train.py finetune --init DIR --glue glue_data --against-untrained --out OUT
    python train.py finetune --glue glue_data --write-training-text glue-train.txt
    torchrun --nproc_per_node=N train.py finetune ...                                 (DDP, run_tools/steps.py)

The flags are FinetuneSettings' fields (settings.py: their defaults, help texts and checks),
and the command is `run` (run.py), which `minibert.finetune(...)` calls too (api.py): this
module only reads the flags and says how the command ended.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ..operations.checkpoint import Checkpoints
from ..operations.tensor_files import SAFETENSORS_FILE
from ..runs.cli import Parser, report_errors
from ..training.settings import flag
from .glue.sweep import finished_runs
from .run import run
from .run_tools.steps import CHECKPOINTS
from .settings import FLAGS, FinetuneSettings

PROG = "python -m minibert.finetune"
ALIASES = {"recipe": ("--glue-recipe",)}  # another spelling each of these flags accepts
PARSE = {"int": int, "int | None": int, "float": float, "float | None": float, "list[int] | None": int}  # else a string


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    """One flag per FinetuneSettings field (settings.py), its default and help text the field's;
    the values are checked by FinetuneSettings.check, as `minibert.finetune`'s keywords are."""
    parser = Parser(prog=prog, description="Fine-tune a pretrained encoder for classification, regression, tagging or "
                                            "question answering.")
    groups = {}
    for field in FLAGS:
        meta, kind = field.metadata, str(field.type)
        group = parser if meta["group"] is None else groups.setdefault(meta["group"], parser.add_argument_group(meta["group"]))
        names = (f"--{flag(field.name)}", *ALIASES.get(field.name, ()))
        if kind == "bool":
            group.add_argument(*names, action="store_true", help=meta["help"])
            continue
        group.add_argument(*names, type=steps_or_epoch if kind == "int | str | None" else PARSE.get(kind, str),
                           nargs="+" if kind.startswith("list") else None, default=field.default, metavar=meta["metavar"],
                           help=meta["help"].replace("%", "%%"))
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    return parser


def steps_or_epoch(text: str) -> int | str:
    """--eval-every's value as FinetuneSettings holds it: a number of steps, or the word (checked there)."""
    return int(text) if text.lstrip("-").isdigit() else text


def parse(argv: list[str], prog: str = PROG) -> FinetuneSettings:
    """The flags as FinetuneSettings (--debug aside: it says how to report an error)."""
    given = vars(build_parser(prog).parse_args(argv))
    given.pop("debug")
    return FinetuneSettings(**given)


def main(argv: list[str] | None = None, prog: str = PROG) -> int:
    """Run the command; a problem the user can fix is one line on stderr and exit code 2, and
    Ctrl-C one line saying what was kept and how to go on, exit code 130 (as pretraining's)."""
    argv = sys.argv[1:] if argv is None else argv
    started, parsed = time.time(), []

    def command() -> None:
        parsed.append(parse(argv, prog))
        run(parsed[0])

    try:
        return report_errors(prog, argv, command)
    except KeyboardInterrupt:
        print(f"{prog}: {interrupted(parsed[0] if parsed else None, started)}", file=sys.stderr)
        return 130


def interrupted(settings: FinetuneSettings | None, started: float) -> str:
    """What Ctrl-C kept and how to go on, true at that moment. A --glue sweep reads back every run
    that finished (`finished_runs`), so the same command trains only the rest; --train/--dev and
    --tasks go on with --resume where a checkpoint was kept, else start over, and a model this
    command saved before the interruption takes --overwrite."""
    if settings is None or settings.write_training_text or settings.out is None:
        return "interrupted before anything was written; run the same command again"
    out = Path(settings.out)
    if settings.glue:
        finished = len(finished_runs(out))
        if not finished:
            return "interrupted before any run finished; run the same command again"
        cut_short = " (with --resume, and goes on with the one cut short)" if any(Checkpoints(folder).steps() for folder in out.rglob(CHECKPOINTS)) else ""
        return (f"interrupted; {finished} finished run{'s' * (finished > 1)} kept in {out}: the same command reads "
                f"{'them' if finished > 1 else 'it'} back and trains only the rest{cut_short}")
    folders = [out / Path(folder).resolve().name for folder in settings.tasks] if settings.tasks else [out]
    resumable = [folder for folder in folders if Checkpoints(folder / CHECKPOINTS).steps()]
    if resumable:
        return f"interrupted; its training state kept in {resumable[0] / CHECKPOINTS}: the same command with --resume goes on from there"
    saved = [folder.name for folder in folders if (folder / SAFETENSORS_FILE).is_file()
             and (folder / SAFETENSORS_FILE).stat().st_mtime >= started]
    if not saved:
        return "interrupted before a model was saved; run the same command again"
    kept = f"the model{'s' * (len(saved) > 1)} of {', '.join(saved)}" if settings.tasks else "the model"
    return (f"interrupted; {kept} kept in {out}: running again starts over, and takes --overwrite to replace "
            f"{'them' if len(saved) > 1 else 'it'}")
