"""`python train.py finetune`: one task (--train, --dev), every task folder given (--tasks), or GLUE (--glue).

    python train.py finetune --init DIR --train train.tsv --dev dev.tsv --out OUT
    python train.py finetune --init DIR --tasks data/sst2 data/rte data/stsb --out OUT
    python train.py finetune --init DIR --glue glue_data --seeds 0 1 2 --out OUT      (glue_sweep.py)
    python train.py finetune --init DIR --glue glue_data --against-untrained --out OUT
    python train.py finetune --glue glue_data --write-training-text glue-train.txt
    torchrun --nproc_per_node=N train.py finetune ...                                 (DDP, training.py)

A task folder holds one train.* and one dev.* file (.tsv, .csv, .jsonl or .conll: GLUE's layout).
With --tasks every folder is fine-tuned from the same checkpoint into OUT/<folder name>,
and one table of dev scores is printed at the end. Every flag applies to every task.

Every fine-tune runs one recipe (--recipe, recipes.py): by default ELECTRA's for the
encoder's width, the pooling the checkpoint's pretraining calls for; a flag given overrides
the recipe's value, and two lines say what ran and why.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from . import tagged, tasks
from ..heads import POOLINGS
from ..runs.cli import Parser, report_errors
from ..operations import distributed
from ..operations.checkpoint import Checkpoints
from ..operations.distributed import Distributed
from ..operations.precision import Precision
from ..operations.tensor_files import SAFETENSORS_FILE
from ..training.settings import DEVICES, PRECISIONS
from .checkpoint import check_out
from .glue_sweep import finished_runs, run_glue
from .glue_tasks import GLUE_TASKS, write_training_text
from .recipes import BATCH_SIZE, DEFAULT_RECIPE, DROPOUT, RECIPES, checkpoint_pooling, recipe_for, with_recipe
from .inference import DEFAULT_MAX_LEN
from .training import CHECKPOINTS, rank_0_prints
from .job import DEFAULT_ALPHA, DEFAULT_TEMPERATURE, TASKS, TaskFiles, finetune, load_backbone, reads_words

PROG = "python -m minibert.finetune"
TABLE = ("accuracy", "f1", "mcc", "pearson", "spearman")  # the score columns of the --tasks table
FORMATS = sorted({*tasks.FORMATS, *tagged.FORMATS})  # what a task folder's train.* and dev.* may be


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    parser = Parser(prog=prog, description="Fine-tune a pretrained encoder for classification, regression or tagging.")
    parser.add_argument("--init", nargs="+", metavar="DIR",
                        help="minibert checkpoint or Hugging Face BERT-family directory (required; --glue takes several, "
                             "e.g. one per pretraining seed, each into OUT/<folder name>)")
    parser.add_argument("--train", metavar="FILE", help="training examples: .tsv (GLUE), .csv or .jsonl; tagged words: .conll or .jsonl")
    parser.add_argument("--dev", metavar="FILE", help="held-out examples in the same format, labels from the training set")
    parser.add_argument("--tasks", nargs="+", metavar="DIR",
                        help="instead of --train/--dev: task folders, each with one train.* and one dev.* file; "
                             "each is fine-tuned into OUT/<folder name> and one table is printed")
    parser.add_argument("--glue", metavar="GLUE_DIR",
                        help="instead of --train/--dev: every GLUE task found in GLUE_DIR (GLUE's download layout: CoLA/, "
                             "SST-2/, MRPC/, STS-B/, QQP/, MNLI/, QNLI/, RTE/, WNLI/) from its own files, with its own "
                             "metrics and recipe, into OUT/<task>/seed-<n>; prints GLUE's table, writes OUT/glue.json "
                             "and OUT/submission/")
    parser.add_argument("--glue-tasks", nargs="+", metavar="TASK", help=f"with --glue: only these ({', '.join(GLUE_TASKS)})")
    parser.add_argument("--recipe", "--glue-recipe", choices=RECIPES, default=DEFAULT_RECIPE, metavar="{" + ",".join(RECIPES) + "}",
                        help="the fine-tuning recipe, for every task: electra = lr and layer-wise lr decay by the "
                             "encoder's width, as ELECTRA's appendix (H < 768: Small's lr 3e-4, 768: 1e-4, 1024: 5e-5), "
                             "3 epochs (--glue: 10 for RTE and STS-B), no weight decay; bert = BERT-base's lr 2e-5, 3 "
                             "epochs; grid (--glue; elsewhere with --lr) = lr chosen per task from 3e-4, 1e-4, 5e-5, 3e-5 "
                             "on held-out training rows (Turc et al. 2019), never on dev, 4 epochs; each with dropout "
                             f"{DROPOUT:g} and batch {BATCH_SIZE}; a flag given overrides its value (default "
                             f"{DEFAULT_RECIPE}; --glue-recipe is its earlier name)")
    parser.add_argument("--against-untrained", action="store_true",
                        help="with --glue: also fine-tune the untrained twin of each --init (same config, tokenizer and "
                             "initialisation seed, no training) into OUT/untrained/ and print pretrained - untrained")
    parser.add_argument("--write-training-text", metavar="FILE.txt",
                        help="with --glue: write the training text of its tasks (train.tsv only, labels dropped) as a "
                             "pretraining corpus, one document per row, and stop (no --init or --out needed; an existing "
                             "FILE takes --overwrite)")
    parser.add_argument("--seeds", nargs="+", type=int, metavar="S",
                        help="with --glue: fine-tune each task once per seed and report each metric's median and range "
                             "(default: --seed alone)")
    parser.add_argument("--max-train-examples", type=int, metavar="N",
                        help="train on at most N examples per task, a random subsample (the same rows for every seed)")
    parser.add_argument("--text-columns", nargs="+", metavar="COLUMN",
                        help="the text column, or the two of a pair, when a file's are not sentence/sentence1 "
                             "sentence2/text (a column left unread must be an id or genre; any other is refused); --transfer files too")
    parser.add_argument("--out", metavar="DIR", help="output directory for the model, eval.json and predictions.tsv (required)")
    parser.add_argument("--task", choices=("auto", *TASKS), default="auto",
                        help="auto = tokens for .conll files and JSONL with \"tokens\"; regression when the training "
                             "labels are numbers with fractions (STS-B); else classification (default auto)")
    length = parser.add_mutually_exclusive_group()
    length.add_argument("--steps", type=int, metavar="N", help="optimizer steps")
    length.add_argument("--epochs", type=float, metavar="E", help="passes over the training set (default: the recipe's)")
    parser.add_argument("--batch-size", type=int, metavar="B", help=f"examples per step (default: the recipe's, {BATCH_SIZE})")
    parser.add_argument("--lr", type=float, help="peak learning rate of AdamW (default: the recipe's, 3e-4 for the default runs' width)")
    parser.add_argument("--layer-decay", type=float, metavar="D",
                        help="layer-wise lr decay: each encoder layer below the top at D times the lr of the one above, "
                             "the embeddings lowest (default: the recipe's)")
    parser.add_argument("--warmup", type=float, default=0.1, metavar="FRACTION", help="linear warm-up as a fraction of the steps (default 0.1)")
    parser.add_argument("--weight-decay", type=float, metavar="DECAY",
                        help="AdamW weight decay, never on biases or LayerNorm (default: the recipe's)")
    parser.add_argument("--max-len", type=int, metavar="T",
                        help=f"tokens per example, specials included (default {DEFAULT_MAX_LEN} or the model's limit; "
                             "rotary models may go beyond it)")
    parser.add_argument("--dropout", type=float, metavar="P",
                        help=f"dropout on hidden states and attention while fine-tuning (default: the recipe's, {DROPOUT:g} as "
                             "BERT and ELECTRA fine-tuned, whatever the checkpoint was pretrained with)")
    parser.add_argument("--reference", action="store_true",
                        help="the reference path, to read and debug with: padded batches, naive attention, every layer at "
                             "every position (same results, slower; see ModelConfig.reference)")
    parser.add_argument("--pooling", choices=POOLINGS,
                        help="what a sentence task's head reads: cls = the [CLS] token, as BERT; mean = the mean of the "
                             "last layer over the tokens (default: cls for a checkpoint pretrained with NSP or SOP, mean "
                             "for one pretrained without, whose [CLS] learned nothing; cls when it records neither)")
    distil = parser.add_argument_group("distillation from a fine-tuned teacher")
    distil.add_argument("--teacher", metavar="DIR",
                        help="a model fine-tuned on this task (train.py finetune's output, or a Hugging Face "
                             "*ForSequenceClassification folder), with its own tokenizer: the student learns from its "
                             "class distribution as well as the labels (regression: from its score)")
    distil.add_argument("--alpha", type=float, metavar="A",
                        help=f"weight of the teacher's soft targets; 1 - A goes to the labels (default {DEFAULT_ALPHA:g})")
    distil.add_argument("--temperature", type=float, metavar="T",
                        help=f"softens both distributions before they are compared (default {DEFAULT_TEMPERATURE:g}; "
                             "classification only)")
    distil.add_argument("--transfer", metavar="FILE",
                        help="unlabelled texts the teacher labels for the student: .txt (one per line) or a task file "
                             "(.tsv, .csv, .jsonl; a label column is ignored); these rows take the soft loss alone")
    parser.add_argument("--seed", type=int, default=0, metavar="S",
                        help="seed of the head's initialisation, data order and dropout (default 0)")
    parser.add_argument("--device", choices=DEVICES, default="auto", help="auto = cuda when available, else cpu; mps = Apple GPUs")
    parser.add_argument("--precision", choices=PRECISIONS, default="auto",
                        help="auto = bf16 on a CUDA GPU that has it, else fp32; fp16 (CUDA only, loss scaling) for GPUs "
                             "without bf16 such as the T4 (default auto)")
    parser.add_argument("--skip-nonfinite", action="store_true",
                        help="skip (and count) steps whose loss or gradient is NaN/Inf instead of stopping")
    tools = parser.add_argument_group("evaluation while training, and the run tools pretraining has")
    tools.add_argument("--eval-every", type=eval_interval, metavar="N|epoch",
                       help="score dev every N steps (or every epoch) and at the end, and keep the model of the best score "
                            "by the task's own metric (default: dev scored once, at the end; the last model kept)")
    tools.add_argument("--patience", type=int, metavar="K",
                       help="with --eval-every: stop after K evaluations in a row without a better score")
    tools.add_argument("--resume", action="store_true",
                       help="go on from the newest checkpoint in --out (written at each evaluation, else each epoch) "
                            "with the same flags, as if never stopped")
    tools.add_argument("--grad-accum", type=int, default=1, metavar="A",
                       help="micro-steps whose gradients make one step of --batch-size examples (default 1)")
    tools.add_argument("--compile", action="store_true", help="torch.compile the encoder's layers, as pretraining's --compile")
    parser.add_argument("--overwrite", action="store_true", help="replace a model already in --out, or the --write-training-text FILE")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    return parser


def eval_interval(text: str) -> int | str:
    """--eval-every's value: a positive number of steps, or "epoch"."""
    if text == "epoch" or (text.isdigit() and int(text) > 0):
        return text if text == "epoch" else int(text)
    raise argparse.ArgumentTypeError(f"takes a positive number of steps or 'epoch', got {text!r}")


def main(argv: list[str] | None = None, prog: str = PROG) -> int:
    """Run the command; a problem the user can fix is one line on stderr and exit code 2, and
    Ctrl-C one line saying what was kept and how to go on, exit code 130 (as pretraining's)."""
    argv = sys.argv[1:] if argv is None else argv
    started, parsed = time.time(), []

    def command() -> None:
        parsed.append(build_parser(prog).parse_args(argv))
        run(parsed[0])

    try:
        return report_errors(prog, argv, command)
    except KeyboardInterrupt:
        print(f"{prog}: {interrupted(parsed[0] if parsed else None, started)}", file=sys.stderr)
        return 130


def interrupted(args: argparse.Namespace | None, started: float) -> str:
    """What Ctrl-C kept and how to go on, true at that moment. A --glue sweep reads back every run
    that finished (`finished_runs`), so the same command trains only the rest; --train/--dev and
    --tasks start over, and a model this command saved before the interruption takes --overwrite."""
    if args is None or args.write_training_text or args.out is None:
        return "interrupted before anything was written; run the same command again"
    out = Path(args.out)
    if args.glue:
        finished = len(finished_runs(out))
        if not finished:
            return "interrupted before any run finished; run the same command again"
        cut_short = " (with --resume, and goes on with the one cut short)" if any(out.rglob(f"{CHECKPOINTS}/step-*")) else ""
        return (f"interrupted; {finished} finished run{'s' * (finished > 1)} kept in {out}: the same command reads "
                f"{'them' if finished > 1 else 'it'} back and trains only the rest{cut_short}")
    folders = [out / Path(folder).resolve().name for folder in args.tasks] if args.tasks else [out]
    resumable = [folder for folder in folders if Checkpoints(folder / CHECKPOINTS).steps()]
    if resumable:
        return f"interrupted; its training state kept in {resumable[0] / CHECKPOINTS}: the same command with --resume goes on from there"
    saved = [folder.name for folder in folders if (folder / SAFETENSORS_FILE).is_file()
             and (folder / SAFETENSORS_FILE).stat().st_mtime >= started]
    if not saved:
        return "interrupted before a model was saved; run the same command again"
    kept = f"the model{'s' * (len(saved) > 1)} of {', '.join(saved)}" if args.tasks else "the model"
    return (f"interrupted; {kept} kept in {out}: running again starts over, and takes --overwrite to replace "
            f"{'them' if len(saved) > 1 else 'it'}")


def run(args: argparse.Namespace) -> list[dict] | dict:
    """Every task of the command, one after another from the same checkpoint; their eval.json
    contents (--glue: glue.json's)."""
    check_args(args)
    if args.write_training_text:
        return write_training_text(args.glue, args.write_training_text, args.glue_tasks, args.max_train_examples, args.overwrite)
    dist = distributed.setup(args.device)  # under torchrun: join the other processes (DDP)
    try:
        with rank_0_prints(dist):
            return run_tasks(args, dist)
    finally:
        dist.close()


def run_tasks(args: argparse.Namespace, dist: Distributed) -> list[dict] | dict:
    device = dist.device(args.device)
    amp = Precision.of(args.precision, device)  # a device or format that cannot work fails now
    if args.glue:
        return run_glue(args, device, amp)
    args.init = args.init[0]
    jobs = task_files(args)
    for job in jobs:
        if not args.resume:
            check_out(job.out, args.overwrite)
    backbone = load_backbone(args.init)
    recipe = recipe_for(args.recipe, backbone[0].config, checkpoint_pooling(args.init))
    tagging = [reads_words(args.task, job.train) for job in jobs]
    print(recipe.line(args), flush=True)
    if not all(tagging):
        print(recipe.pooling_line(args), flush=True)
    reports = [finetune(with_recipe(args, recipe, recipe.values(tagging=tags)), job, backbone, device, amp)
               for job, tags in zip(jobs, tagging)]
    if args.tasks:
        print(table([job.name for job in jobs], reports), flush=True)
    return reports


def check_args(args: argparse.Namespace) -> None:
    """Fail before anything is loaded on values that cannot work."""
    if args.write_training_text and not args.glue:
        raise ValueError("--write-training-text writes the training text of GLUE's tasks; add --glue GLUE_DIR")
    missing = [flag for flag in ("init", "out") if getattr(args, flag) is None and not args.write_training_text]
    if missing:
        raise ValueError(f"the following arguments are required: {', '.join('--' + flag for flag in missing)}")
    if args.init and len(args.init) > 1 and not args.glue:
        raise ValueError("several --init checkpoints are a --glue sweep's (one per pretraining seed); give one checkpoint")
    if args.tasks and (args.train or args.dev):
        raise ValueError("--tasks takes the train and dev files from each folder; drop --train and --dev, or --tasks")
    if args.glue:
        check_glue(args)
    elif not args.tasks and not (args.train and args.dev):
        raise ValueError("name the data: --train FILE --dev FILE, or --tasks DIR [DIR ...] (folders with train.* and dev.*), "
                         "or --glue GLUE_DIR")
    for flag in ("seeds", "glue_tasks", "against_untrained"):
        if getattr(args, flag) not in (None, False) and not args.glue:
            raise ValueError(f"--{flag.replace('_', '-')} is a setting of --glue; add --glue GLUE_DIR or drop it")
    if args.recipe == "grid" and args.lr is None and not args.glue:
        raise ValueError("--recipe grid chooses each GLUE task's lr on held-out training rows, which --glue does; "
                         "add --lr LR, or take --recipe electra or bert")
    if args.patience is not None and args.eval_every is None:
        raise ValueError("--patience counts evaluations while training; add --eval-every N (or epoch)")
    if args.text_columns is not None and not 1 <= len(args.text_columns) <= 2:
        raise ValueError(f"--text-columns names one text column or the two of a pair, got {len(args.text_columns)}")
    for name in ("steps", "epochs", "batch_size", "lr", "max_len", "max_train_examples", "patience", "grad_accum"):
        value = getattr(args, name)
        if value is not None and not value > 0:
            raise ValueError(f"--{name.replace('_', '-')} must be positive, got {value}")
    if not 0.0 <= args.warmup <= 1.0:
        raise ValueError(f"--warmup is a fraction of the steps, between 0 and 1; got {args.warmup}")
    if args.weight_decay is not None and args.weight_decay < 0:
        raise ValueError(f"--weight-decay must not be negative, got {args.weight_decay}")
    if args.layer_decay is not None and not 0.0 < args.layer_decay <= 1.0:
        raise ValueError(f"--layer-decay is the factor from one layer's lr to the next one down, in (0, 1]; got {args.layer_decay}")
    if args.dropout is not None and not 0.0 <= args.dropout < 1.0:
        raise ValueError(f"--dropout is a probability in [0, 1), got {args.dropout}")
    check_distillation(args)


def check_glue(args: argparse.Namespace) -> None:
    """--glue reads GLUE's own files with their own columns and labels: flags for other data do not apply."""
    given = [flag for flag in ("train", "dev", "tasks", "text_columns", "teacher") if getattr(args, flag) is not None]
    if given:
        raise ValueError(f"--glue reads each task's files and columns from GLUE_DIR; drop --{given[0].replace('_', '-')}")
    if args.task != "auto":
        raise ValueError("--glue knows each task's kind (STS-B is regression, the others classification); drop --task")


def check_distillation(args: argparse.Namespace) -> None:
    """The --teacher flags: each needs the teacher, and the teacher one task."""
    if not args.teacher:
        given = [flag for flag in ("alpha", "temperature", "transfer") if getattr(args, flag) is not None]
        if given:
            raise ValueError(f"--{given[0]} is a setting of distillation; add --teacher DIR (a model fine-tuned on the task)")
        return
    if args.tasks:
        raise ValueError("--teacher is fine-tuned on one task; use it with --train/--dev, not --tasks")
    if args.alpha is not None and not 0.0 <= args.alpha <= 1.0:
        raise ValueError(f"--alpha weighs the teacher against the labels, between 0 and 1; got {args.alpha}")
    if args.temperature is not None and not args.temperature > 0:
        raise ValueError(f"--temperature must be positive (1 = the teacher's own distribution, 2 = the default); got {args.temperature}")


def task_files(args: argparse.Namespace) -> list[TaskFiles]:
    """The files and output folder of each task: --train/--dev into --out, or each --tasks folder into OUT/<its name>."""
    out = Path(args.out)
    read = dict(columns=tasks.Columns(tuple(args.text_columns)) if args.text_columns else None, max_train=args.max_train_examples)
    if not args.tasks:
        return [TaskFiles(out.name or str(out), Path(args.train), Path(args.dev), out, **read)]
    folders = [Path(folder) for folder in args.tasks]
    names = [folder.resolve().name for folder in folders]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"--tasks names more than one folder called {', '.join(repeated)}; each task's results go to "
                         f"OUT/<folder name>, so give every task folder its own name")
    return [TaskFiles(name, split_file(folder, "train"), split_file(folder, "dev"), out / name, **read)
            for name, folder in zip(names, folders)]


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
