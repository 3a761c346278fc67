"""`finetune --glue`: GLUE as the papers run it, every task (tasks.py) with its own metrics,
several seeds, the lr chosen where the recipe leaves it open, and the two averages.

    python train.py finetune --init DIR --glue GLUE_DIR --seeds 0 1 2 --out OUT
    python train.py finetune --init DIR --glue GLUE_DIR --against-untrained --out OUT   # and the untrained twin
    python train.py finetune --init DIR1 DIR2 DIR3 --glue GLUE_DIR --against-untrained --out OUT  # pretraining seeds

The recipe and the pooling are every fine-tune's (recipes.py); only --glue knows RTE and STS-B
by name, for their long epochs, and only --glue chooses the grid recipe's lr (`choose_lr`).

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

import statistics
from itertools import product
from pathlib import Path
from typing import NamedTuple

from ...operations.distributed import Distributed
from ...operations.files import read_record, write_json
from ...operations.old_files import upgrade
from ...operations.tensor_files import SAFETENSORS_FILE
from ...training.settings import flag
from ..checkpoint import load_classifier
from ..job import TaskFiles, finetune, load_backbone
from ..kinds.kind import write_table
from ..kinds.scores import classification_metrics
from ..kinds.sentence_files import read_task
from ..recipes import HELD_OUT, Recipe, checkpoint_pooling, choose, overridden, recipe_for
from ..run_tools.steps import OPERATIONAL, check_out, check_unfinished
from ..settings import FinetuneSettings
from .tasks import GLUE_TASKS, MISMATCHED, GlueTask, present_tasks, task_names, write_submission
from .twin import across, gains, gains_table, init_seed, spread, untrained_twin

UNTRAINED = "untrained"  # the twin's OUT, inside the checkpoint's
CHOOSE = "choose-lr"  # a task's runs on held-out training rows, one per lr of the grid


class Side(NamedTuple):
    """One model a sweep fine-tunes: a checkpoint, or its untrained twin."""

    label: str  # before each run's name in the output: "" or "untrained ", after the checkpoint's name if several
    out: Path
    init: str  # the checkpoint, as --init gave it
    untrained_seed: int | None = None  # the twin's initialisation seed; None: the checkpoint itself


def run_glue(settings: FinetuneSettings, device, amp, dist: Distributed) -> dict:
    """Fine-tune every task found, once per seed, from each --init (and its untrained twin with
    --against-untrained); print the tables, both averages and the gains; write glue.json and the
    submission files (under torchrun: the first process alone). Returns OUT/glue.json's contents."""
    glue_dir, out = Path(settings.glue), Path(settings.out)
    seeds = list(dict.fromkeys(settings.seeds if settings.seeds is not None else [settings.seed]))
    folders = checkpoint_folders(settings.init, out)  # the flags first, then GLUE_DIR's tasks
    found = present_tasks(glue_dir, task_names(settings.glue_tasks))
    plans, said = {}, set()
    for name, (init, folder) in folders.items():
        backbone = load_backbone(init)
        recipe = recipe_for(settings.recipe, backbone[0].config, checkpoint_pooling(init))
        for line in (recipe.line(overridden(settings), glue=True), recipe.pooling_line(settings.pooling)):
            if line not in said:
                print(line, flush=True)
                said.add(line)
        prefix = f"{name} " if len(folders) > 1 else ""
        sides = [Side(prefix, folder, init)]
        if settings.against_untrained:
            seed, line = init_seed(Path(init))
            print(line, flush=True)
            sides.append(Side(f"{prefix}untrained ", folder / UNTRAINED, init, seed))
        plans[name] = backbone, recipe, sides
    for _, recipe, sides in plans.values():  # a run in the way is refused now, before anything is trained
        for side, task in product(sides, found):
            choices, runs = task_runs(settings, task, seeds, recipe, side)
            for folder, run_settings in (choices or runs).values():  # after a choice of the lr, the seeds' runs wait for it
                check_out(folder, overwrite=True)
                if not settings.resume:  # as run.py's --tasks: an interrupted run is refused now, not in its turn
                    check_unfinished(folder, settings.overwrite)
                if not settings.overwrite:  # a run made with other flags: refused now, as it would be in its turn
                    finished_run(folder, task.file_metrics, run_settings, "eval.json" if choices else SAFETENSORS_FILE)
    checkpoints = {name: checkpoint_sweep(settings, found, seeds, glue_dir, *plan, device, amp, dist) for name, plan in plans.items()}
    if len(checkpoints) == 1:
        result = next(iter(checkpoints.values()))
    else:
        result = {"checkpoints": checkpoints, "seeds": seeds, "max_train_examples": settings.max_train_examples}
        if settings.against_untrained:
            per_gains = {name: checkpoint["gains"] for name, checkpoint in checkpoints.items()}
            result["gains"] = across(per_gains)
            print(gains_table(per_gains, result["gains"]), flush=True)
        if dist.is_main:
            write_json(out / "glue.json", result)
    print(f"the tables as JSON in {out / 'glue.json'}; each run in {out}/{'<checkpoint>/' * (len(checkpoints) > 1)}"
          f"{'[untrained/]' * bool(settings.against_untrained)}<task>/seed-<n>/", flush=True)
    return result


def checkpoint_sweep(settings: FinetuneSettings, found: list[GlueTask], seeds: list[int], glue_dir: Path, backbone,
                     recipe: Recipe, sides: list[Side], device, amp, dist: Distributed) -> dict:
    """One checkpoint's sweep, and its untrained twin's when `sides` has one: the tables, the
    submission files, and its glue.json (the pretrained side's, with `untrained` and `gains`);
    the first process alone predicts the test sets and writes the files."""
    pretrained = sides[0]
    result = {**sweep(settings, found, seeds, recipe, backbone, pretrained, glue_dir, device, amp, dist), "seeds": seeds,
              "max_train_examples": settings.max_train_examples, "init": pretrained.init, "recipe": recipe.describe()}
    print(table(result, pretrained.label + ("pretrained" if len(sides) > 1 else "")), flush=True)
    if dist.is_main:
        result["submission"] = write_submission(found, result["tasks"], glue_dir, pretrained.out, settings, device, amp)
    for twin in sides[1:]:
        untrained = sweep(settings, found, seeds, recipe, untrained_twin(backbone, twin.untrained_seed), twin, glue_dir, device, amp,
                          dist)
        result["untrained"] = {**untrained, "init_seed": twin.untrained_seed}
        print(table({**untrained, "seeds": seeds, "max_train_examples": settings.max_train_examples},
                    f"{twin.label}twin (seed {twin.untrained_seed})"), flush=True)
        result["gains"] = gains(result, untrained)
        print(gains_table({Path(pretrained.init).name or pretrained.init: result["gains"]}, None), flush=True)
    if dist.is_main:
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


def sweep(settings: FinetuneSettings, found: list[GlueTask], seeds: list[int], recipe: Recipe, backbone, side: Side,
          glue_dir: Path, device, amp, dist: Distributed) -> dict:
    """One model through every task: the lr chosen on held-out training rows where the recipe leaves
    it open, then one run per seed (read back when it finished earlier). Returns {tasks, averages, seed_averages}."""
    results = {}
    for task in found:
        choices, runs = task_runs(settings, task, seeds, recipe, side)
        choice = choose_lr(settings, task, choices, backbone, side, glue_dir, device, amp) if choices else None
        scores = {}
        for seed, (folder, run_settings) in runs.items():
            run_settings = run_settings if choice is None else run_settings.replace(lr=choice["lr"])
            files = TaskFiles(f"{side.label}{task.name} seed {seed}", glue_dir / task.name / "train.tsv", glue_dir / task.name / task.dev,
                              folder, task.kind, task.columns, task.labels, settings.max_train_examples, metric=task.selected_by)
            report = run_once(settings, files, task.file_metrics, run_settings, backbone, device, amp)
            if task.mismatched and MISMATCHED not in report:  # scored once the model is saved: a run stopped before is scored now
                report = score_mismatched(task, glue_dir, files, report, run_settings, device, amp, dist)
            scores[seed] = {metric: report[metric] for metric in task.metrics}
        results[task.name] = {**summary(task, scores, run_settings), **({"lr_choice": choice} if choice else {})}
    return {"tasks": results, "averages": averages(found, results), "seed_averages": seed_averages(found, results, seeds)}


def task_runs(settings: FinetuneSettings, task: GlueTask, seeds: list[int], recipe: Recipe,
              side: Side) -> tuple[dict[float, tuple[Path, FinetuneSettings]], dict[int, tuple[Path, FinetuneSettings]]]:
    """The folder and flags of each of `side`'s runs of `task`, by lr and by seed: where the recipe
    leaves the lr open, one per lr of its grid (the first seed's, scored on held-out training rows:
    `choose_lr`), whose choice the seeds' runs then take (lr None until it is made); one per seed."""
    values = recipe.values(task.name)
    lrs = recipe.lrs if values["lr"] is None and settings.lr is None else ()
    choices = {lr: (side.out / task.name / CHOOSE / f"lr-{lr:g}",
                    task_settings(settings, seeds[0], {**values, "lr": lr}, recipe, side, held_out=HELD_OUT)) for lr in lrs}
    runs = {seed: (side.out / task.name / f"seed-{seed}", task_settings(settings, seed, values, recipe, side)) for seed in seeds}
    return choices, runs


def choose_lr(settings: FinetuneSettings, task: GlueTask, choices: dict[float, tuple[Path, FinetuneSettings]], backbone,
              side: Side, glue_dir: Path, device, amp) -> dict:
    """The recipe's lr for `task`, chosen on training rows alone: each candidate of `choices` (task_runs')
    trained on the rest of the training rows and scored on a held-out HELD_OUT of them (seed 0:
    `TaskData.held_out`), the dev file never opened; the best mean of the task's metrics wins, the
    lower lr on ties (`choose`)."""
    scores = {}
    for lr, (folder, run_settings) in choices.items():
        files = TaskFiles(f"{side.label}{task.name} lr {lr:g}", glue_dir / task.name / "train.tsv", None, folder, task.kind,
                          task.columns, task.labels, settings.max_train_examples, held_out=HELD_OUT, keep_model=False,
                          metric=task.selected_by)
        report = run_once(settings, files, task.file_metrics, run_settings, backbone, device, amp, marker="eval.json")
        scores[lr] = statistics.mean(report[metric] for metric in task.file_metrics)
    chosen = choose(scores)
    print(f"{side.label}{task.name}: lr {chosen:g} chosen on {HELD_OUT:.0%} of the training rows held out "
          f"({', '.join(f'{lr:g}: {100 * score:.1f}' for lr, score in scores.items())}); trained next on all of them", flush=True)
    return {"lr": chosen, "held_out_scores": {f"{lr:g}": score for lr, score in scores.items()}, "held_out": HELD_OUT,
            "seed": run_settings.seed, "metrics": list(task.file_metrics)}


def finished_runs(out: Path) -> list[Path]:
    """The runs under a sweep's OUT that the same command reads back instead of training them
    (`finished_run`): each seed's folder with its model and eval.json, each lr candidate's with its eval.json."""
    seeds = [model.parent for model in out.rglob(f"seed-*/{SAFETENSORS_FILE}")]
    return sorted(folder for folder in [*seeds, *(scores.parent for scores in out.rglob(f"{CHOOSE}/lr-*/eval.json"))]
                  if (folder / "eval.json").is_file())


# flags that choose runs or where they go, or how one is carried out (run_tools/steps.py's OPERATIONAL), not what it computes
SWEEP_ONLY = (*OPERATIONAL, "glue_tasks", "seeds", "out", "against_untrained")


def run_once(settings: FinetuneSettings, files: TaskFiles, metrics: tuple[str, ...], run_settings: FinetuneSettings, backbone,
             device, amp, marker: str = SAFETENSORS_FILE) -> dict:
    """The eval.json of the run in `files.out`: read back, said in one line, when it finished with
    `run_settings` (and no --overwrite); else that of the run, fine-tuned now."""
    report = None if settings.overwrite else finished_run(files.out, metrics, run_settings, marker)
    if report is None:
        return finetune(run_settings, files, backbone, device, amp)
    print(f"{files.name}: finished earlier with these settings, read from {files.out / 'eval.json'}", flush=True)
    return report


def finished_run(folder: Path, metrics: tuple[str, ...], run_settings: FinetuneSettings, marker: str = SAFETENSORS_FILE) -> dict | None:
    """The eval.json of a run that finished in `folder` with the same flags as `run_settings` (all
    but SWEEP_ONLY) and holds every one of `metrics`; None when `folder` holds no `marker` (the
    model, or eval.json for a run that keeps none). A run made with other flags, or one that
    did not finish, is refused in one line naming the flags: replacing it takes --overwrite."""
    if not (folder / marker).exists():
        return None
    report = read_record(folder / "eval.json")
    recorded = upgrade("eval.json args", report.get("args", {}))
    differ = [k for k, v in run_settings.recorded().items() if k not in SWEEP_ONLY and recorded.get(k) != v]
    if not report or differ or not all(metric in report for metric in metrics):
        why = f"made with other settings ({', '.join('--' + flag(k) for k in differ)})" if report and differ \
            else "whose run did not finish"
        raise FileExistsError(f"{folder} holds a {'model' if marker == SAFETENSORS_FILE else 'run'} {why}; pass --overwrite "
                              f"to replace it, or choose another --out")
    return report


def task_settings(settings: FinetuneSettings, seed: int, values: dict, recipe: Recipe, side: Side,
                  held_out: float | None = None) -> FinetuneSettings:
    """The command's settings for one run of `side`: the recipe's `values` wherever a flag was not
    given (`Recipe.applied`, as every fine-tune); `held_out`: the share of the training rows a run
    that chooses the lr is scored on."""
    return recipe.applied(settings, values, seed=seed, init=side.init, untrained_seed=side.untrained_seed, held_out=held_out)


def score_mismatched(task: GlueTask, glue_dir: Path, files: TaskFiles, report: dict, settings, device, amp,
                     dist: Distributed) -> dict:
    """MNLI's second dev set, scored by the model just saved: its accuracy joins eval.json as
    `accuracy_mismatched`, its predictions go to predictions_mismatched.tsv (the first process writes both)."""
    out = files.out
    classifier = load_classifier(out)
    classifier.model.to(device)
    dev = read_task(glue_dir / task.name / task.mismatched, columns=task.columns)
    gold = classifier.labels.encode(dev)
    predicted, scores = classifier.kind.predicted(classifier, dev, settings.batch_size, settings.max_len, amp)
    report = {**report, MISMATCHED: classification_metrics(predicted, gold, classifier.labels)["accuracy"]}
    if dist.is_main:
        write_json(out / "eval.json", report)
        write_table(out / "predictions_mismatched.tsv", *classifier.kind.table(dev, predicted, gold, classifier.labels, scores))
    print(f"{files.name}: dev accuracy on {task.mismatched} {report[MISMATCHED]:.4f}", flush=True)
    return report


RECORDED = ("lr", "layer_decay", "weight_decay", "dropout", "batch_size", "epochs", "steps", "max_len")  # a task's settings in glue.json


def summary(task: GlueTask, scores: dict[int, dict], run_settings: FinetuneSettings) -> dict:
    """Each metric's value per seed, its median and its range; the seed whose task score (the
    mean of its metrics) is the median (the lower of the two middle ones for an even count);
    and the settings the runs had (`run_settings`, one seed's flags)."""
    metrics = {metric: spread({seed: scores[seed][metric] for seed in scores}) for metric in task.metrics}
    by_score = sorted(scores, key=lambda seed: statistics.mean(scores[seed].values()))
    return {"metrics": metrics, "median_seed": by_score[(len(by_score) - 1) // 2],
            "recipe": {name: getattr(run_settings, name) for name in RECORDED}}


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
