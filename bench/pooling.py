"""Which vector should a sentence head read after a short pretraining run: [CLS] or the mean?

    python bench/pooling.py --glue GLUE_DIR                         # pretrain, fine-tune, print the table
    python bench/pooling.py --glue GLUE_DIR --runs RUN [RUN ...]     # take finished run folders instead
    python bench/pooling.py --glue GLUE_DIR --page docs/pooling.md   # ... and write the page the docs cite
    python bench/pooling.py --glue GLUE_DIR --dry-run                # the commands only

The runs: a 600-step bert run (`--variant bert --steps 600`) and the five default runs
(`python train.py --variant V`; distilbert distils the bert run), into OUT/runs/; or the folders
--runs names. Each is fine-tuned with the project's own command (`python train.py finetune`) on
SST-2 at 2,000 training rows and on RTE (all its rows), once with --pooling cls and once with
--pooling mean per fine-tuning seed, the default recipe otherwise, into OUT/finetune/. A
fine-tune whose eval.json exists is read back, not rerun, and pretraining resumes, so the same
command continues where it stopped.

The table gives, per run, the held-out accuracy of its sentence task (NSP or SOP) that its
metrics.jsonl records last, the pooling the fine-tune picks without --pooling
(recipes.py:checkpoint_pooling, whose bar this table is the evidence for), and each pooling's
dev accuracy per seed.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import shlex
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from minibert.finetune.recipes import SENTENCE_LEARNED, checkpoint_pooling, sentence_accuracy  # noqa: E402
from minibert.operations.files import read_record  # noqa: E402

VARIANTS = ("bert", "roberta", "albert", "electra", "distilbert")  # distilbert last: its teacher is the bert run
SHORT = ("bert-600", ["--variant", "bert", "--steps", "600"])  # the short run the question started from
TASKS = (("SST-2", 2000), ("RTE", None))  # (GLUE task, training rows; None: all)
POOLINGS = ("cls", "mean")


def python(*args: str) -> list[str]:
    return [sys.executable, *args]


def runs(args) -> list[tuple[Path, list[str] | None]]:
    """(run folder, the command that pretrains it, or None for a folder given) for every run."""
    if args.runs:
        return [(Path(run), None) for run in args.runs]
    out = Path(args.out) / "runs"
    planned = [(out / SHORT[0], python("train.py", *SHORT[1], "--out", str(out / SHORT[0]), "--resume"))]
    for variant in VARIANTS:
        teacher = ["--teacher", str(out / "bert")] if variant == "distilbert" else []
        planned.append((out / variant, python("train.py", "--variant", variant, *teacher, "--out", str(out / variant), "--resume")))
    return planned


def finetune_folder(args, run: Path, task: str, rows: int | None, pooling: str, seed: int) -> Path:
    return Path(args.out) / "finetune" / run.name / f"{task}-{rows or 'all'}" / f"{pooling}-seed{seed}"


def finetunes(args, run: Path) -> list[tuple[Path, list[str]]]:
    """(OUT, command) for each task, pooling and seed of one run."""
    planned = []
    for task, rows in TASKS:
        for seed in args.seeds:
            for pooling in POOLINGS:
                out = finetune_folder(args, run, task, rows, pooling, seed)
                planned.append((out, python("train.py", "finetune", "--init", str(run),
                                            "--train", str(Path(args.glue) / task / "train.tsv"),
                                            "--dev", str(Path(args.glue) / task / "dev.tsv"),
                                            *(["--max-train-examples", str(rows)] if rows else []),
                                            "--pooling", pooling, "--seed", str(seed), "--out", str(out), "--overwrite")))
    return planned


def call(args, command: list[str], log: Path) -> None:
    print(shown(args, command), flush=True)
    if args.dry_run:
        return
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as file:
        code = subprocess.call(command, cwd=REPO, stdout=file, stderr=subprocess.STDOUT)
    if code != 0:
        sys.exit(f"bench/pooling.py: this step failed (exit {code}); its output is in {log}")


def measure(args) -> None:
    logs = Path(args.out) / "logs"
    for run, pretrain in runs(args):
        if pretrain:
            call(args, pretrain, logs / f"{run.name}.log")
        for out, command in finetunes(args, run):
            if not (out / "eval.json").is_file():
                call(args, command, logs / f"{run.name}-{out.parent.name}-{out.name}.log")


# --- the table --------------------------------------------------------------------------------

def accuracy(folder: Path) -> float | None:
    return read_record(folder / "eval.json").get("accuracy")


def sentence_cell(run: Path) -> str:
    """The run's sentence task and its last recorded held-out accuracy, in words."""
    layout = (read_record(run / "run.json").get("settings") or {}).get("layout")
    recorded = sentence_accuracy(run, layout) if layout in ("nsp", "sop") else None
    if recorded is None:
        return f"{layout}: not recorded" if layout in ("nsp", "sop") else "none"
    return f"{layout} {recorded[0]:.3f} (step {recorded[1]})"


def table(args) -> list[str]:
    lines = ["| run | held-out NSP/SOP accuracy | default pooling | task (training rows) | dev acc., cls | "
             "dev acc., mean | mean − cls |", "|---|---|---|---|---|---|---:|"]
    for run, _ in runs(args):
        default = checkpoint_pooling(run).name if (run / "run.json").is_file() else "?"
        for task, rows in TASKS:
            scores = {pooling: [accuracy(finetune_folder(args, run, task, rows, pooling, seed)) for seed in args.seeds]
                      for pooling in POOLINGS}
            if not any(score is not None for values in scores.values() for score in values):
                continue
            cells = {pooling: " / ".join("-" if score is None else f"{score:.3f}" for score in values)
                     for pooling, values in scores.items()}
            pairs = [mean - cls for cls, mean in zip(scores["cls"], scores["mean"]) if cls is not None and mean is not None]
            gain = f"{statistics.mean(pairs):+.3f}" if pairs else "-"
            lines.append(f"| {run.name} | {sentence_cell(run)} | {default} | {task} ({rows or 'all'}) | {cells['cls']} | "
                         f"{cells['mean']} | {gain} |")
    return lines


def pairs(args) -> dict[str, list[float]]:
    """Per task, mean − cls for every run and seed that has both."""
    gains = {task: [] for task, _ in TASKS}
    for run, _ in runs(args):
        for task, rows in TASKS:
            for seed in args.seeds:
                cls, mean = (accuracy(finetune_folder(args, run, task, rows, pooling, seed)) for pooling in POOLINGS)
                if cls is not None and mean is not None:
                    gains[task].append(mean - cls)
    return gains


def glance(args) -> str:
    parts = [f"{task}: the mean ahead in {sum(gain > 0 for gain in gains)} of {len(gains)} (run, seed) pairs, by "
             f"{statistics.mean(gains):+.3f} on average" for task, gains in pairs(args).items() if gains]
    return "; ".join(parts) + "." if parts else "Nothing measured yet."


def page(args) -> str:
    seeds = ", ".join(map(str, args.seeds))
    planned = runs(args)
    commands = ([shown(args, pretrain) for _, pretrain in planned if pretrain] +
                [shown(args, command) for _, command in finetunes(args, planned[0][0])])
    return "\n".join([
        f"_Generated by `python bench/pooling.py --glue GLUE_DIR --page {args.page}` on {datetime.date.today()} "
        f"({platform.python_version()}, {platform.machine()}): do not edit by hand; [finetune.md](finetune.md) says how "
        f"to read it._", "",
        "# [CLS] or the mean after a short pretraining run", "",
        f"**At a glance.** Dev accuracy with the head on [CLS] and on the mean of the last layer, fine-tuning seeds "
        f"{seeds} (the cells list them in order); a run reads [CLS] by default only where its recorded held-out NSP/SOP "
        f"accuracy reaches {SENTENCE_LEARNED:g} (`recipes.py:checkpoint_pooling`). {glance(args)}", "",
        *table(args), "",
        "Each fine-tune: `python train.py finetune` with the default recipe (ELECTRA's for the encoder's width) and "
        "`--pooling` as the column says. The held-out accuracy is the last `eval_nsp_accuracy` or `eval_sop_accuracy` of "
        "the run's metrics.jsonl.", "",
        "## The commands", "", f"OUT is --out, GLUE_DIR GLUE's folder; the fine-tunes of {planned[0][0].name} are shown, "
        "every other run's are the same with its folder.", "", "```", *commands, "```", ""])


def shown(args, command: list[str]) -> str:
    """A command as the page prints it: no path of this machine."""
    out, glue = str(Path(args.out)), str(Path(args.glue))
    def word_of(word: str) -> str:
        if word.startswith(glue + "/"):
            return "GLUE_DIR" + word[len(glue):]
        return "OUT" + word[len(out):] if word.startswith(out + "/") else word
    return " ".join(shlex.quote(word) for word in ["python", *map(word_of, command[1:])])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--glue", required=True, help="GLUE's folder (SST-2/, RTE/)")
    parser.add_argument("--out", default="runs/pooling")
    parser.add_argument("--runs", nargs="+", help="finished run folders to fine-tune instead of pretraining the six")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1], help="fine-tuning seeds")
    parser.add_argument("--page", help="write the table as this Markdown page")
    parser.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    parser.add_argument("--table-only", action="store_true", help="run nothing; print the table of the fine-tunes in OUT")
    args = parser.parse_args()
    if not args.table_only:
        measure(args)
    if not args.dry_run:
        print("\n".join(table(args)))
    if args.page and not args.dry_run:
        Path(args.page).write_text(page(args))
        print(f"wrote {args.page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
