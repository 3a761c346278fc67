"""GLUE as the papers run it: every task from its own files, GLUE's metrics, two averages, several seeds.

    python train.py finetune --init DIR --glue GLUE_DIR --seeds 0 1 2 --out OUT

GLUE_DIR is laid out as GLUE's download script leaves it (GLUE_DIR/<task>/train.tsv, dev.tsv,
test.tsv; MNLI's dev_matched/dev_mismatched and test_matched/test_mismatched; the diagnostic
set at GLUE_DIR/diagnostic/diagnostic.tsv). Each task's files have their own columns (QNLI's
`question sentence`, MRPC's `#1 String #2 String`, CoLA's file without a header line), so
the table below names them, with the label set and GLUE's metrics (Wang et al., 2018).

The recipe is BERT's (Devlin et al., 2019, appendix A.3): batch 32, 3 epochs, lr 2e-5 (the
lowest of its grid, the one that never diverges), 128 tokens; RTE and STS-B take 10 epochs, as in
ELECTRA (Clark et al., 2020, appendix): small sets need more passes. Any flag overrides it.

    OUT/<task>/seed-<n>/   one fine-tuning run (job.py's outputs; MNLI's eval.json adds the mismatched dev scores)
    OUT/glue.json          every metric per seed, its median and range, the two averages
    OUT/submission/        the test predictions GLUE's server takes, from each task's median seed

A sweep takes hours, so a seed's run that finished with the same settings is read back, not
trained again: run the command again after an interruption, or with more seeds or tasks, and
only what is missing runs (`finished_run`).

Two averages, as the field reports them: ELECTRA's dev average (Clark et al., 2020: the eight
tasks without WNLI, whose dev set is adversarial to its training set; Matthews for CoLA,
Spearman for STS-B, accuracy for the others, MNLI's matched) and GLUE's leaderboard score
(every task; a task with two metrics counts as their mean).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import NamedTuple

from ..operations.files import write_atomic, write_json
from ..operations.tensor_files import SAFETENSORS_FILE
from .checkpoint import check_out, load_classifier
from .job import TaskFiles, check_max_len, finetune, load_backbone, predict, prediction_rows, recorded_args
from .scores import dev_scores
from .tasks import Columns, read_task

BERT_RECIPE = dict(lr=2e-5, batch_size=32, epochs=3.0)  # Devlin et al. (2019), appendix A.3
LONGER = dict(BERT_RECIPE, epochs=10.0)  # ELECTRA's 10 epochs for RTE and STS-B (Clark et al., 2020)
NLI = ["entailment", "not_entailment"]
DIAGNOSTIC = Path("diagnostic") / "diagnostic.tsv"  # GLUE's AX set, where the download script puts it
SUBMISSION = "submission"


class GlueTask(NamedTuple):
    """One GLUE task: its folder and files, columns, labels, metrics and recipe."""

    name: str  # the folder under GLUE_DIR and GLUE's own name
    columns: Columns
    labels: list | None  # the class names in id order; None: regression
    metrics: tuple[str, ...]  # eval.json keys GLUE scores the task by
    electra: str | None  # the one metric of ELECTRA's dev average; None: left out (WNLI)
    recipe: dict
    dev: str = "dev.tsv"
    tests: tuple[tuple[str, str], ...] = (("test.tsv", ""),)  # (test file, submission name; "" = the task's name)
    mismatched: str | None = None  # MNLI's second dev file, scored into "accuracy_mismatched"


GLUE_TASKS = {task.name: task for task in (
    GlueTask("CoLA", Columns(("sentence",), "label", names=("source", "label", "mark", "sentence")), [0, 1],
             ("mcc",), "mcc", BERT_RECIPE),
    GlueTask("SST-2", Columns(("sentence",), "label"), [0, 1], ("accuracy",), "accuracy", BERT_RECIPE),
    GlueTask("MRPC", Columns(("#1 String", "#2 String"), "Quality"), [0, 1], ("f1", "accuracy"), "accuracy", BERT_RECIPE),
    GlueTask("STS-B", Columns(("sentence1", "sentence2"), "score"), None, ("pearson", "spearman"), "spearman", LONGER),
    GlueTask("QQP", Columns(("question1", "question2"), "is_duplicate"), [0, 1], ("f1", "accuracy"), "accuracy", BERT_RECIPE),
    GlueTask("MNLI", Columns(("sentence1", "sentence2"), "gold_label"), ["contradiction", "entailment", "neutral"],
             ("accuracy", "accuracy_mismatched"), "accuracy", BERT_RECIPE, dev="dev_matched.tsv",
             tests=(("test_matched.tsv", "MNLI-m"), ("test_mismatched.tsv", "MNLI-mm")), mismatched="dev_mismatched.tsv"),
    GlueTask("QNLI", Columns(("question", "sentence"), "label"), NLI, ("accuracy",), "accuracy", BERT_RECIPE),
    GlueTask("RTE", Columns(("sentence1", "sentence2"), "label"), NLI, ("accuracy",), "accuracy", LONGER),
    GlueTask("WNLI", Columns(("sentence1", "sentence2"), "label"), [0, 1], ("accuracy",), None, BERT_RECIPE),
)}
AX = Columns(("sentence1", "sentence2"))  # the diagnostic set: MNLI's columns, no labels


def task_names(names: list[str] | None) -> list[str]:
    """GLUE's spelling of each name given (any case; None: all nine), or an error listing them."""
    if not names:
        return list(GLUE_TASKS)
    spelled = {name.lower(): name for name in GLUE_TASKS}
    unknown = [name for name in names if name.lower() not in spelled]
    if unknown:
        raise ValueError(f"--glue-tasks: no GLUE task {', '.join(unknown)}; choose among {', '.join(GLUE_TASKS)}")
    return [spelled[name.lower()] for name in dict.fromkeys(names)]


def present_tasks(glue_dir: Path, names: list[str]) -> list[GlueTask]:
    """The tasks whose train and dev files are under `glue_dir`; one line for each one skipped."""
    if not glue_dir.is_dir():
        raise NotADirectoryError(f"--glue {glue_dir} is not a folder; pass the folder GLUE's download script fills "
                                 f"(CoLA/, SST-2/, MRPC/, ...)")
    found = []
    for task in (GLUE_TASKS[name] for name in names):
        folder = glue_dir / task.name
        needed = ["train.tsv", task.dev, *([task.mismatched] if task.mismatched else [])]
        missing = [name for name in needed if not (folder / name).is_file()]
        if missing:
            print(f"{task.name}: skipped, no {folder if not folder.is_dir() else ', '.join(str(folder / m) for m in missing)}",
                  flush=True)
        else:
            found.append(task)
    if not found:
        raise FileNotFoundError(f"--glue {glue_dir} holds none of the tasks {', '.join(names)} (each a folder with "
                                f"train.tsv and dev.tsv, as GLUE distributes them)")
    return found


def run_glue(args: argparse.Namespace, device, amp) -> dict:
    """Fine-tune every task found, once per seed; print the table and both averages; write
    OUT/glue.json and the submission files. Returns glue.json's contents."""
    glue_dir, out = Path(args.glue), Path(args.out)
    seeds = list(dict.fromkeys(args.seeds if args.seeds is not None else [args.seed]))
    found = present_tasks(glue_dir, task_names(args.glue_tasks))
    finished = {}
    for task in found:
        for seed in seeds:
            folder = out / task.name / f"seed-{seed}"
            finished[task.name, seed] = None if args.overwrite else finished_run(folder, task, task_args(args, task, seed))
            check_out(folder, overwrite=True)  # a file in the way is still refused
    backbone = load_backbone(args.init)
    results = {}
    for task in found:
        scores = {}
        for seed in seeds:
            run_args = task_args(args, task, seed)
            files = TaskFiles(f"{task.name} seed {seed}", glue_dir / task.name / "train.tsv", glue_dir / task.name / task.dev,
                              out / task.name / f"seed-{seed}", task.columns, task.labels, args.max_train_examples)
            report = finished[task.name, seed]
            if report is not None:
                print(f"{files.name}: finished earlier with these settings, read from {files.out / 'eval.json'}", flush=True)
            else:
                report = finetune(run_args, files, backbone, device, amp)
                if task.mismatched:
                    report = score_mismatched(task, glue_dir, files.out, report, run_args, device, amp)
            scores[seed] = {metric: report[metric] for metric in task.metrics}
        results[task.name] = summary(task, scores, args)
    result = {"tasks": results, "averages": averages(found, results), "seeds": seeds,
              "max_train_examples": args.max_train_examples, "init": str(args.init)}
    print(table(result), flush=True)
    result["submission"] = write_submission(found, results, glue_dir, out, args, device, amp)
    write_json(out / "glue.json", result)
    print(f"the table as JSON in {out / 'glue.json'}; each run in {out}/<task>/seed-<n>/", flush=True)
    return result


SWEEP_ONLY = ("glue_tasks", "seeds", "out", "device")  # flags that choose runs or where they go, not what one computes


def finished_run(folder: Path, task: GlueTask, run_args: argparse.Namespace) -> dict | None:
    """The eval.json of a run that finished in `folder` with the same flags as `run_args` (all
    but SWEEP_ONLY) and holds every metric of `task`; None when `folder` holds no model. A model
    made with other flags, or one whose run did not finish, is refused in one line naming the
    flags: replacing it takes --overwrite."""
    if not (folder / SAFETENSORS_FILE).exists():
        return None
    try:
        report = json.loads((folder / "eval.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        report = {}
    differ = [k for k, v in recorded_args(run_args).items() if k not in SWEEP_ONLY and report.get("args", {}).get(k) != v]
    if not report or differ or not all(metric in report for metric in task.metrics):
        why = f"made with other settings ({', '.join('--' + k.replace('_', '-') for k in differ)})" if report and differ \
            else "whose run did not finish"
        raise FileExistsError(f"{folder} holds a model {why}; pass --overwrite to replace it, or choose another --out")
    return report


def task_args(args: argparse.Namespace, task: GlueTask, seed: int) -> argparse.Namespace:
    """The command's flags for one run: the task's recipe wherever a flag was not given."""
    recipe = {name: value for name, value in task.recipe.items() if getattr(args, name) is None}
    if args.steps is not None:
        recipe.pop("epochs", None)
    return argparse.Namespace(**{**vars(args), **recipe, "seed": seed})


def score_mismatched(task: GlueTask, glue_dir: Path, out: Path, report: dict, args, device, amp) -> dict:
    """MNLI's second dev set, scored by the model just saved: its accuracy joins eval.json as
    `accuracy_mismatched`, its predictions go to predictions_mismatched.tsv."""
    classifier = load_classifier(out)
    dev = read_task(glue_dir / task.name / task.mismatched, columns=task.columns)
    gold = classifier.labels.encode(dev)
    predicted = predict(classifier.model.to(device), classifier.tokenizer, dev, args.batch_size,
                        check_max_len(args.max_len, classifier.model.config), device, amp)
    report = {**report, "accuracy_mismatched": dev_scores(report["task"], predicted, gold, classifier.labels)["accuracy"]}
    write_json(out / "eval.json", report)
    write_atomic(out / "predictions_mismatched.tsv", prediction_rows(dev, predicted, gold, classifier.labels))
    print(f"{task.name}: dev accuracy on {task.mismatched} {report['accuracy_mismatched']:.4f}", flush=True)
    return report


def summary(task: GlueTask, scores: dict[int, dict], args) -> dict:
    """Each metric's value per seed, its median and its range; and the seed whose task score
    (the mean of its metrics) is the median (the lower of the two middle ones for an even count)."""
    metrics = {}
    for metric in task.metrics:
        values = [scores[seed][metric] for seed in scores]
        metrics[metric] = {"median": statistics.median(values), "min": min(values), "max": max(values),
                           "seeds": {str(seed): scores[seed][metric] for seed in scores}}
    by_score = sorted(scores, key=lambda seed: statistics.mean(scores[seed].values()))
    recipe = vars(task_args(args, task, 0))
    return {"metrics": metrics, "median_seed": by_score[(len(by_score) - 1) // 2],
            "recipe": {name: recipe[name] for name in ("lr", "batch_size", "epochs", "steps", "max_len")}}


def averages(found: list[GlueTask], results: dict) -> dict:
    """ELECTRA's dev average and GLUE's score over the tasks that ran, each on the medians, in
    points (x 100), with the tasks each one counts and those it lacks."""
    def average(values: dict[str, float], expected: list[str]) -> dict:
        return {"score": 100 * statistics.mean(values.values()), "tasks": list(values),
                "missing": [name for name in expected if name not in values]}

    electra = {task.name: results[task.name]["metrics"][task.electra]["median"] for task in found if task.electra}
    glue = {task.name: statistics.mean(results[task.name]["metrics"][m]["median"] for m in task.metrics) for task in found}
    return {"electra_dev": average(electra, [t.name for t in GLUE_TASKS.values() if t.electra]) if electra else None,
            "glue_score": average(glue, list(GLUE_TASKS))}


def table(result: dict) -> str:
    """One Markdown row per task and metric, in points: median and min-max over the seeds; then both averages."""
    seeds = result["seeds"]
    lines = [f"GLUE dev, {len(seeds)} seed{'s' * (len(seeds) > 1)} ({', '.join(map(str, seeds))}); median and range (min-max)"
             + (f"; at most {result['max_train_examples']} training examples per task" if result["max_train_examples"] else ""),
             "| task | metric | median | min-max |", "|---|---|---:|---:|"]
    for name, task in result["tasks"].items():
        for metric, value in task["metrics"].items():
            lines.append(f"| {name} | {metric} | {100 * value['median']:.1f} | {100 * value['min']:.1f}-{100 * value['max']:.1f} |")
    named = {"electra_dev": "ELECTRA's dev average (no WNLI; CoLA Matthews, STS-B Spearman, MNLI matched, accuracy elsewhere)",
             "glue_score": "GLUE score (every task; two metrics count as their mean)"}
    for key, title in named.items():
        average = result["averages"][key]
        if average is not None:
            missing = f" (without {', '.join(average['missing'])}: not run)" if average["missing"] else ""
            lines.append(f"{title}: {average['score']:.1f} over {len(average['tasks'])} tasks{missing}")
    return "\n".join(lines)


def write_submission(found: list[GlueTask], results: dict, glue_dir: Path, out: Path, args, device, amp) -> dict:
    """OUT/submission/<NAME>.tsv for each test file found, as GLUE's server takes them (`index`
    and `prediction`: label names, 0/1, or STS-B's score), each from its task's median seed;
    AX.tsv from MNLI's when GLUE_DIR holds the diagnostic set. Returns {file: the run it came from}."""
    written = {}
    for task in found:
        seed = results[task.name]["median_seed"]
        model = out / task.name / f"seed-{seed}"
        tests = [(glue_dir / task.name / file, name or task.name, task.columns) for file, name in task.tests]
        if task.name == "MNLI":
            tests.append((glue_dir / DIAGNOSTIC, "AX", AX))
        present = [test for test in tests if test[0].is_file()]
        if not present:
            print(f"{task.name}: no {' or '.join(test[0].name for test in tests)} in {glue_dir / task.name}, so no submission file for it",
                  flush=True)
            continue
        classifier = load_classifier(model)
        for path, name, columns in present:
            data = read_task(path, labelled=False, columns=columns._replace(names=None))  # test files have a header
            predicted = predict(classifier.model.to(device), classifier.tokenizer, data, task_args(args, task, seed).batch_size,
                                check_max_len(args.max_len, classifier.model.config), device, amp)
            show = (lambda p: f"{p:.3f}") if classifier.labels is None else (lambda p: str(classifier.labels.names[p]))
            write_atomic(out / SUBMISSION / f"{name}.tsv", "index\tprediction\n" + "".join(f"{i}\t{show(p)}\n" for i, p in enumerate(predicted)))
            written[f"{name}.tsv"] = str(model)
        print(f"{task.name}: test predictions from seed {seed}, whose dev score is the median of {len(results[task.name]['metrics'][task.metrics[0]]['seeds'])}",
              flush=True)
    if written:
        print(f"{len(written)} submission files in {out / SUBMISSION}: {', '.join(written)}", flush=True)
    return written
