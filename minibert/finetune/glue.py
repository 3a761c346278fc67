"""GLUE as the papers run it: every task from its own files, GLUE's metrics, two averages, several seeds.

    python train.py finetune --init DIR --glue GLUE_DIR --seeds 0 1 2 --out OUT
    python train.py finetune --init DIR --glue GLUE_DIR --against-untrained --out OUT   # and the untrained twin
    python train.py finetune --init DIR1 DIR2 DIR3 --glue GLUE_DIR --against-untrained --out OUT  # pretraining seeds
    python train.py finetune --glue GLUE_DIR --write-training-text FILE.txt   # a pretraining corpus: train text only

GLUE_DIR is laid out as GLUE's download script leaves it (GLUE_DIR/<task>/train.tsv, dev.tsv,
test.tsv; MNLI's dev_matched/dev_mismatched and test_matched/test_mismatched; the diagnostic
set at GLUE_DIR/diagnostic/diagnostic.tsv). Each task's files have their own columns (QNLI's
`question sentence`, MRPC's `#1 String #2 String`, CoLA's file without a header line), so
the table below names them, with the label set and GLUE's metrics (Wang et al., 2018).

The recipe is --glue-recipe's (recipes.py): by default ELECTRA's row for the encoder's width
(lr and layer-wise lr decay; 10 epochs for RTE and STS-B, 3 elsewhere), or BERT-base's lr
2e-5, or the BERT miniatures' lr grid, chosen on held-out training rows. The command says in
one line which recipe ran and where its values come from; any flag overrides it.

    OUT/<task>/seed-<n>/   one fine-tuning run (job.py's outputs; MNLI's eval.json adds the mismatched dev scores)
    OUT/<task>/choose-lr/  the grid recipe's runs on held-out training rows, one per lr (eval.json, no model)
    OUT/untrained/         --against-untrained: the same for the untrained twin (twin.py)
    OUT/glue.json          every metric per seed, its median and range, the two averages (and the twin's, and the gains)
    OUT/submission/        the test predictions GLUE's server takes, from each task's median seed

With several --init checkpoints, each one's OUT is OUT/<its folder name>, and OUT/glue.json
gathers them with the gains over pretraining seeds.

A sweep takes hours, so a run that finished with the same settings is read back, not trained
again: run the command again after an interruption, or with more seeds or tasks, and only
what is missing runs (`finished_run`).

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
from typing import Iterator, NamedTuple

from ..operations.files import write_atomic, write_json
from ..operations.tensor_files import SAFETENSORS_FILE
from .checkpoint import check_out, load_classifier
from .job import TaskFiles, check_max_len, finetune, load_backbone, predict, prediction_rows, recorded_args
from .recipes import HELD_OUT, Recipe, choose, recipe_for
from .scores import dev_scores
from .tasks import Columns, read_task
from .twin import across, gains, gains_table, init_seed, spread, untrained_twin

NLI = ["entailment", "not_entailment"]
DIAGNOSTIC = Path("diagnostic") / "diagnostic.tsv"  # GLUE's AX set, where the download script puts it
SUBMISSION = "submission"
UNTRAINED = "untrained"  # the twin's OUT, inside the checkpoint's
CHOOSE = "choose-lr"  # a task's runs on held-out training rows, one per lr of the grid
MISMATCHED = "accuracy_mismatched"  # MNLI's second dev set, scored by the model of the first


class GlueTask(NamedTuple):
    """One GLUE task: its folder and files, columns, labels and metrics."""

    name: str  # the folder under GLUE_DIR and GLUE's own name
    columns: Columns
    labels: list | None  # the class names in id order; None: regression
    metrics: tuple[str, ...]  # eval.json keys GLUE scores the task by
    electra: str | None  # the one metric of ELECTRA's dev average; None: left out (WNLI)
    dev: str = "dev.tsv"
    tests: tuple[tuple[str, str], ...] = (("test.tsv", ""),)  # (test file, submission name; "" = the task's name)
    mismatched: str | None = None  # MNLI's second dev file, scored into MISMATCHED

    @property
    def file_metrics(self) -> tuple[str, ...]:
        """The metrics one scored file gives (all but MNLI's mismatched accuracy)."""
        return tuple(metric for metric in self.metrics if metric != MISMATCHED)


GLUE_TASKS = {task.name: task for task in (
    GlueTask("CoLA", Columns(("sentence",), "label", names=("source", "label", "mark", "sentence")), [0, 1], ("mcc",), "mcc"),
    GlueTask("SST-2", Columns(("sentence",), "label"), [0, 1], ("accuracy",), "accuracy"),
    GlueTask("MRPC", Columns(("#1 String", "#2 String"), "Quality"), [0, 1], ("f1", "accuracy"), "accuracy"),
    GlueTask("STS-B", Columns(("sentence1", "sentence2"), "score"), None, ("pearson", "spearman"), "spearman"),
    GlueTask("QQP", Columns(("question1", "question2"), "is_duplicate"), [0, 1], ("f1", "accuracy"), "accuracy"),
    GlueTask("MNLI", Columns(("sentence1", "sentence2"), "gold_label"), ["contradiction", "entailment", "neutral"],
             ("accuracy", MISMATCHED), "accuracy", dev="dev_matched.tsv",
             tests=(("test_matched.tsv", "MNLI-m"), ("test_mismatched.tsv", "MNLI-mm")), mismatched="dev_mismatched.tsv"),
    GlueTask("QNLI", Columns(("question", "sentence"), "label"), NLI, ("accuracy",), "accuracy"),
    GlueTask("RTE", Columns(("sentence1", "sentence2"), "label"), NLI, ("accuracy",), "accuracy"),
    GlueTask("WNLI", Columns(("sentence1", "sentence2"), "label"), [0, 1], ("accuracy",), None),
)}
AX = Columns(("sentence1", "sentence2"))  # the diagnostic set: MNLI's columns, no labels


class Side(NamedTuple):
    """One model a sweep fine-tunes: a checkpoint, or its untrained twin."""

    label: str  # before each run's name in the output: "" or "untrained ", after the checkpoint's name if several
    out: Path
    init: str  # the checkpoint, as --init gave it
    untrained_seed: int | None = None  # the twin's initialisation seed; None: the checkpoint itself


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
    """Fine-tune every task found, once per seed, from each --init (and its untrained twin with
    --against-untrained); print the tables, both averages and the gains; write glue.json and the
    submission files. Returns OUT/glue.json's contents."""
    glue_dir, out = Path(args.glue), Path(args.out)
    seeds = list(dict.fromkeys(args.seeds if args.seeds is not None else [args.seed]))
    found = present_tasks(glue_dir, task_names(args.glue_tasks))
    folders = checkpoint_folders(args.init, out)
    plans, said = {}, set()
    for name, (init, folder) in folders.items():
        backbone = load_backbone(init)
        recipe = recipe_for(args.glue_recipe or "electra", backbone[0].config)
        if (line := recipe.line(args)) not in said:
            print(line, flush=True)
            said.add(line)
        prefix = f"{name} " if len(folders) > 1 else ""
        sides = [Side(prefix, folder, init)]
        if args.against_untrained:
            seed, line = init_seed(Path(init))
            print(line, flush=True)
            sides.append(Side(f"{prefix}untrained ", folder / UNTRAINED, init, seed))
        plans[name] = backbone, recipe, sides
    for _, recipe, sides in plans.values():  # a run in the way is refused now, before anything is trained
        for side in sides:
            for folder, metrics, run_args, marker in planned_runs(args, found, seeds, recipe, side):
                check_out(folder, overwrite=True)
                finished_run(folder, metrics, run_args, marker)
    checkpoints = {name: checkpoint_sweep(args, found, seeds, glue_dir, *plan, device, amp) for name, plan in plans.items()}
    if len(checkpoints) == 1:
        result = next(iter(checkpoints.values()))
    else:
        result = {"checkpoints": checkpoints, "seeds": seeds, "max_train_examples": args.max_train_examples}
        if args.against_untrained:
            per_gains = {name: checkpoint["gains"] for name, checkpoint in checkpoints.items()}
            result["gains"] = across(per_gains)
            print(gains_table(per_gains, result["gains"]), flush=True)
        write_json(out / "glue.json", result)
    print(f"the tables as JSON in {out / 'glue.json'}; each run in {out}/{'<checkpoint>/' * (len(checkpoints) > 1)}"
          f"{'[untrained/]' * bool(args.against_untrained)}<task>/seed-<n>/", flush=True)
    return result


def checkpoint_sweep(args: argparse.Namespace, found: list[GlueTask], seeds: list[int], glue_dir: Path, backbone,
                     recipe: Recipe, sides: list[Side], device, amp) -> dict:
    """One checkpoint's sweep, and its untrained twin's when `sides` has one: the tables, the
    submission files, and its glue.json (the pretrained side's, with `untrained` and `gains`)."""
    pretrained = sides[0]
    result = {**sweep(args, found, seeds, recipe, backbone, pretrained, glue_dir, device, amp), "seeds": seeds,
              "max_train_examples": args.max_train_examples, "init": pretrained.init, "recipe": recipe.describe()}
    print(table(result, pretrained.label + ("pretrained" if len(sides) > 1 else "")), flush=True)
    result["submission"] = write_submission(found, result["tasks"], glue_dir, pretrained.out, args, device, amp)
    for twin in sides[1:]:
        untrained = sweep(args, found, seeds, recipe, untrained_twin(backbone, twin.untrained_seed), twin, glue_dir, device, amp)
        result["untrained"] = {**untrained, "init_seed": twin.untrained_seed}
        print(table({**untrained, "seeds": seeds, "max_train_examples": args.max_train_examples},
                    f"{twin.label}twin (seed {twin.untrained_seed})"), flush=True)
        result["gains"] = gains(result, untrained)
        print(gains_table({Path(pretrained.init).name or pretrained.init: result["gains"]}, None), flush=True)
    write_json(pretrained.out / "glue.json", result)
    return result


def checkpoint_folders(inits: list[str], out: Path) -> dict[str, tuple[str, Path]]:
    """{name: (--init as given, its OUT)}: OUT itself for one checkpoint, OUT/<folder name> for each of several."""
    if len(inits) == 1:
        return {Path(inits[0]).resolve().name: (inits[0], out)}
    names = [Path(init).resolve().name for init in inits]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"--init names more than one folder called {', '.join(repeated)}; each checkpoint's runs go to "
                         f"OUT/<folder name>, so give every checkpoint folder its own name")
    return {name: (init, out / name) for name, init in zip(names, inits)}


def sweep(args: argparse.Namespace, found: list[GlueTask], seeds: list[int], recipe: Recipe, backbone, side: Side,
          glue_dir: Path, device, amp) -> dict:
    """One model through every task: the lr chosen on held-out training rows where the recipe leaves
    it open, then one run per seed (read back when it finished earlier). Returns {tasks, averages, seed_averages}."""
    results = {}
    for task in found:
        values, choice = recipe.values(task.name), None
        if values["lr"] is None and args.lr is None:
            choice = choose_lr(args, task, seeds[0], recipe, values, backbone, side, glue_dir, device, amp)
            values["lr"] = choice["lr"]
        scores = {}
        for seed in seeds:
            run_args = task_args(args, seed, values, recipe, side)
            files = TaskFiles(f"{side.label}{task.name} seed {seed}", glue_dir / task.name / "train.tsv", glue_dir / task.name / task.dev,
                              run_folder(side, task, seed), task.columns, task.labels, args.max_train_examples)
            report = read_back(args, files, task.metrics, run_args)
            if report is None:
                report = finetune(run_args, files, backbone, device, amp)
                if task.mismatched:
                    report = score_mismatched(task, glue_dir, files, report, run_args, device, amp)
            scores[seed] = {metric: report[metric] for metric in task.metrics}
        results[task.name] = {**summary(task, scores, run_args), **({"lr_choice": choice} if choice else {})}
    return {"tasks": results, "averages": averages(found, results), "seed_averages": seed_averages(found, results, seeds)}


def choose_lr(args: argparse.Namespace, task: GlueTask, seed: int, recipe: Recipe, values: dict, backbone, side: Side,
              glue_dir: Path, device, amp) -> dict:
    """The recipe's lr for `task`, chosen on training rows alone: each candidate trained on the
    rest of the training rows and scored on a held-out HELD_OUT of them (seed 0), the dev file
    never opened (`TaskFiles.held_out`); the best mean of the task's metrics wins (`choose`)."""
    scores = {}
    for lr in recipe.lrs:
        run_args = task_args(args, seed, {**values, "lr": lr}, recipe, side, held_out=HELD_OUT)
        files = TaskFiles(f"{side.label}{task.name} lr {lr:g}", glue_dir / task.name / "train.tsv", None,
                          choice_folder(side, task, lr), task.columns, task.labels, args.max_train_examples,
                          held_out=HELD_OUT, keep_model=False)
        report = read_back(args, files, task.file_metrics, run_args, marker="eval.json") or finetune(run_args, files, backbone, device, amp)
        scores[lr] = statistics.mean(report[metric] for metric in task.file_metrics)
    chosen = choose(scores)
    print(f"{side.label}{task.name}: lr {chosen:g} chosen on {HELD_OUT:.0%} of the training rows held out "
          f"({', '.join(f'{lr:g}: {100 * score:.1f}' for lr, score in scores.items())}); trained next on all of them", flush=True)
    return {"lr": chosen, "held_out_scores": {f"{lr:g}": score for lr, score in scores.items()}, "held_out": HELD_OUT,
            "seed": seed, "metrics": list(task.file_metrics)}


def planned_runs(args: argparse.Namespace, found: list[GlueTask], seeds: list[int], recipe: Recipe,
                 side: Side) -> Iterator[tuple[Path, tuple[str, ...], argparse.Namespace, str]]:
    """(folder, metrics, flags, marker file) of every run of `side` whose flags are known before any
    run: all of them, but the lr grid's final runs, whose lr their choice decides."""
    for task in found:
        values = recipe.values(task.name)
        if values["lr"] is None and args.lr is None:
            for lr in recipe.lrs:
                run_args = task_args(args, seeds[0], {**values, "lr": lr}, recipe, side, held_out=HELD_OUT)
                yield choice_folder(side, task, lr), task.file_metrics, run_args, "eval.json"
            continue
        for seed in seeds:
            yield run_folder(side, task, seed), task.metrics, task_args(args, seed, values, recipe, side), SAFETENSORS_FILE


def run_folder(side: Side, task: GlueTask, seed: int) -> Path:
    return side.out / task.name / f"seed-{seed}"


def choice_folder(side: Side, task: GlueTask, lr: float) -> Path:
    return side.out / task.name / CHOOSE / f"lr-{lr:g}"


SWEEP_ONLY = ("glue_tasks", "seeds", "out", "device", "against_untrained")  # flags that choose runs or where they go, not what one computes


def read_back(args: argparse.Namespace, files: TaskFiles, metrics: tuple[str, ...], run_args: argparse.Namespace,
              marker: str = SAFETENSORS_FILE) -> dict | None:
    """The eval.json of the run in `files.out` when it finished with `run_args` (and no --overwrite), said in one line; else None."""
    report = None if args.overwrite else finished_run(files.out, metrics, run_args, marker)
    if report is not None:
        print(f"{files.name}: finished earlier with these settings, read from {files.out / 'eval.json'}", flush=True)
    return report


def finished_run(folder: Path, metrics: tuple[str, ...], run_args: argparse.Namespace, marker: str = SAFETENSORS_FILE) -> dict | None:
    """The eval.json of a run that finished in `folder` with the same flags as `run_args` (all
    but SWEEP_ONLY) and holds every one of `metrics`; None when `folder` holds no `marker` (the
    model, or eval.json for a run that keeps none). A run made with other flags, or one that
    did not finish, is refused in one line naming the flags: replacing it takes --overwrite."""
    if not (folder / marker).exists():
        return None
    try:
        report = json.loads((folder / "eval.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        report = {}
    differ = [k for k, v in recorded_args(run_args).items() if k not in SWEEP_ONLY and report.get("args", {}).get(k) != v]
    if not report or differ or not all(metric in report for metric in metrics):
        why = f"made with other settings ({', '.join('--' + k.replace('_', '-') for k in differ)})" if report and differ \
            else "whose run did not finish"
        raise FileExistsError(f"{folder} holds a {'model' if marker == SAFETENSORS_FILE else 'run'} {why}; pass --overwrite "
                              f"to replace it, or choose another --out")
    return report


def task_args(args: argparse.Namespace, seed: int, values: dict, recipe: Recipe, side: Side,
              held_out: float | None = None) -> argparse.Namespace:
    """The command's flags for one run of `side`: the recipe's `values` wherever a flag was not
    given; `held_out`: the share of the training rows a run that chooses the lr is scored on."""
    chosen = {name: value for name, value in values.items() if getattr(args, name) is None}
    if args.steps is not None:
        chosen.pop("epochs", None)
    return argparse.Namespace(**{**vars(args), **chosen, "seed": seed, "init": side.init, "untrained_seed": side.untrained_seed,
                                 "glue_recipe": recipe.name, "held_out": held_out, "recipe": recipe.describe()})


def score_mismatched(task: GlueTask, glue_dir: Path, files: TaskFiles, report: dict, args, device, amp) -> dict:
    """MNLI's second dev set, scored by the model just saved: its accuracy joins eval.json as
    `accuracy_mismatched`, its predictions go to predictions_mismatched.tsv."""
    out = files.out
    classifier = load_classifier(out)
    dev = read_task(glue_dir / task.name / task.mismatched, columns=task.columns)
    gold = classifier.labels.encode(dev)
    predicted = predict(classifier.model.to(device), classifier.tokenizer, dev, args.batch_size,
                        check_max_len(args.max_len, classifier.model.config), device, amp)
    report = {**report, MISMATCHED: dev_scores(report["task"], predicted, gold, classifier.labels)["accuracy"]}
    write_json(out / "eval.json", report)
    write_atomic(out / "predictions_mismatched.tsv", prediction_rows(dev, predicted, gold, classifier.labels))
    print(f"{files.name}: dev accuracy on {task.mismatched} {report[MISMATCHED]:.4f}", flush=True)
    return report


RECORDED = ("lr", "layer_decay", "weight_decay", "dropout", "batch_size", "epochs", "steps", "max_len")  # a task's settings in glue.json


def summary(task: GlueTask, scores: dict[int, dict], run_args: argparse.Namespace) -> dict:
    """Each metric's value per seed, its median and its range; the seed whose task score (the
    mean of its metrics) is the median (the lower of the two middle ones for an even count);
    and the settings the runs had (`run_args`, one seed's flags)."""
    metrics = {metric: spread({seed: scores[seed][metric] for seed in scores}) for metric in task.metrics}
    by_score = sorted(scores, key=lambda seed: statistics.mean(scores[seed].values()))
    return {"metrics": metrics, "median_seed": by_score[(len(by_score) - 1) // 2],
            "recipe": {name: getattr(run_args, name) for name in RECORDED}}


def averages(found: list[GlueTask], results: dict) -> dict:
    """ELECTRA's dev average and GLUE's score over the tasks that ran, each on the medians, in
    points (x 100), with the tasks each one counts and those it lacks."""
    def average(values: dict[str, float], expected: list[str]) -> dict:
        return {"score": 100 * statistics.mean(values.values()), "tasks": list(values),
                "missing": [name for name in expected if name not in values]}

    electra, glue = task_scores(found, results, "median")
    return {"electra_dev": average(electra, [t.name for t in GLUE_TASKS.values() if t.electra]) if electra else None,
            "glue_score": average(glue, list(GLUE_TASKS))}


def task_scores(found: list[GlueTask], results: dict, key: str) -> tuple[dict[str, float], dict[str, float]]:
    """Each task's value in ELECTRA's average and in GLUE's score, from its metrics' `key`: "median", or a seed."""
    value = (lambda m: m[key]) if key == "median" else (lambda m: m["seeds"][key])  # noqa: E731
    electra = {task.name: value(results[task.name]["metrics"][task.electra]) for task in found if task.electra}
    glue = {task.name: statistics.mean(value(results[task.name]["metrics"][m]) for m in task.metrics) for task in found}
    return electra, glue


def seed_averages(found: list[GlueTask], results: dict, seeds: list[int]) -> dict:
    """Both averages seed by seed, in points ({} for ELECTRA's when no task of it ran): what the gains pair up."""
    per_seed = {str(seed): task_scores(found, results, str(seed)) for seed in seeds}
    return {"electra_dev": {seed: 100 * statistics.mean(e.values()) for seed, (e, _) in per_seed.items() if e},
            "glue_score": {seed: 100 * statistics.mean(g.values()) for seed, (_, g) in per_seed.items()}}


def table(result: dict, title: str = "") -> str:
    """One Markdown row per task and metric, in points: median and min-max over the seeds; then both averages."""
    seeds = result["seeds"]
    lines = [f"{title + ': ' if title.strip() else ''}GLUE dev, {len(seeds)} seed{'s' * (len(seeds) > 1)} ({', '.join(map(str, seeds))}); median and range (min-max)"
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
            predicted = predict(classifier.model.to(device), classifier.tokenizer, data, results[task.name]["recipe"]["batch_size"],
                                check_max_len(args.max_len, classifier.model.config), device, amp)
            show = (lambda p: f"{p:.3f}") if classifier.labels is None else (lambda p: str(classifier.labels.names[p]))
            write_atomic(out / SUBMISSION / f"{name}.tsv", "index\tprediction\n" + "".join(f"{i}\t{show(p)}\n" for i, p in enumerate(predicted)))
            written[f"{name}.tsv"] = str(model)
        print(f"{task.name}: test predictions from seed {seed}, whose dev score is the median of {len(results[task.name]['metrics'][task.metrics[0]]['seeds'])}",
              flush=True)
    if written:
        print(f"{len(written)} submission files in {out / SUBMISSION}: {', '.join(written)}", flush=True)
    return written


def training_text(glue_dir: str | Path, tasks: list[str] | None = None, max_rows: int | None = None) -> Iterator[list[str]]:
    """The TRAINING text of GLUE's tasks, labels dropped: one document per training row (its text,
    and its pair's second text), task by task. Only each task's train.tsv is opened: no dev,
    test or diagnostic text ever enters it. `max_rows`: the seeded subsample a --max-train-examples
    sweep trains on (`TaskData.subsample`), the same rows."""
    glue_dir = Path(glue_dir)
    for task in (GLUE_TASKS[name] for name in task_names(tasks)):
        train = glue_dir / task.name / "train.tsv"
        if not train.is_file():
            continue
        data = read_task(train, labelled=False, columns=task.columns).subsample(max_rows)
        for i, text in enumerate(data.texts):
            document = [text.strip(), *([] if data.pairs is None else [data.pairs[i].strip()])]
            if any(document):
                yield [part for part in document if part]


def write_training_text(glue_dir: str | Path, path: str | Path, tasks: list[str] | None = None,
                        max_rows: int | None = None) -> dict:
    """`training_text` as a pretraining corpus (.txt: one text per line, a blank line after each
    document, as corpus/documents.py reads it); one line says what it holds."""
    glue_dir, path = Path(glue_dir), Path(path)
    if path.suffix != ".txt":
        raise ValueError(f"--write-training-text {path}: name a .txt file (one text per line, documents separated by blank lines)")
    if not glue_dir.is_dir():
        raise NotADirectoryError(f"--glue {glue_dir} is not a folder; pass the folder GLUE's download script fills")
    names = [name for name in task_names(tasks) if (glue_dir / name / "train.tsv").is_file()]
    if not names:
        raise FileNotFoundError(f"--glue {glue_dir} holds no <task>/train.tsv of {', '.join(task_names(tasks))}")
    documents = list(training_text(glue_dir, names, max_rows))
    write_atomic(path, "".join("".join(f"{line}\n" for line in document) + "\n" for document in documents))
    texts = sum(map(len, documents))
    print(f"{len(documents)} documents ({texts} texts, labels dropped) from the train.tsv of {', '.join(names)} in {path}; "
          f"no dev or test file read", flush=True)
    return {"documents": len(documents), "texts": texts, "tasks": names, "path": str(path)}
