"""Section 6 — distillation: a DistilBERT student against its teacher."""

from __future__ import annotations

import statistics
from pathlib import Path

import torch

from minibert import from_pretrained
from minibert.objectives.kd import teacher_layers

from .budget import REPO, SST2, Budget
from .measure import (count_parameters, describe_gap, describe_spread, dev_set, finetune_seeds, held_out,
                      interleaved_latency, paired_gap, random_inputs)
from .recipes import Setup, commands_block, measure, mlm_run, pretrain_args, recipe
from .runner import Runner
from .transfer import setups as transfer_setups

NAME = "distill"
TITLE = "6. Distillation: student against teacher"
TASKS = ("SST-2",)
BATCH = 8
RETAINED = 0.97  # DistilBERT's claim: 97% of BERT's GLUE score


def plan(budget: Budget) -> str:
    return ("Teacher: S MLM steps (section 3's run of the same seed); student: S distillation steps from it, at "
            f"train.py's distilbert learning rate {recipe('distilbert', 'lr'):g}.")


def student_run(runner: Runner, budget: Budget, seed: int) -> dict:
    teacher = mlm_run(runner, budget, budget.steps, seed)
    args = pretrain_args(budget, runner.runs, "distilbert", budget.steps, "--teacher", teacher["out"], seed=seed)
    return runner.pretrain(f"distil-{budget.steps}-seed{seed}", args)


def compute(budget: Budget, runs: Path, jobs: int = 1) -> dict:
    runner = Runner(runs, jobs)
    teacher, untrained = transfer_setups(runner, budget)
    student = Setup("student", "student (distilbert)", lambda seed: student_run(runner, budget, seed))
    measured = measure(runner, budget, [teacher, student, untrained], ("sst2",))
    torch.set_num_threads(1)
    outs = {role: measured[key]["runs"][0]["out"] for role, key in (("teacher", "mlm"), ("student", "student"))}
    models = {role: from_pretrained(REPO / out) for role, out in outs.items()}
    inputs = random_inputs(BATCH, budget.seq_len, models["teacher"].config.vocab_size)
    repeats = max(3, 3 * budget.latency_repeats[1])
    return {
        "parameters": {role: count_parameters(m.config) for role, m in models.items()},
        "layers": {role: m.config.num_layers for role, m in models.items()},
        "latency": interleaved_latency(models, inputs, repeats), "repeats": repeats, "batch": BATCH, "length": budget.seq_len,
        "setups": measured, "dev": dev_set(SST2), "run_seconds": runner.seconds,
    }


def retained(result: dict) -> tuple[list[float], str]:
    """The student's SST-2 score over its teacher's, pair by pair, and what that says of the claim:
    reproduced when every pair keeps RETAINED, not reproduced when none does."""
    setups = result["setups"]
    shares = [s / t for s, t in zip(setups["student"]["scores"]["sst2"], setups["mlm"]["scores"]["sst2"])]
    return shares, "reproduced" if min(shares) >= RETAINED else "not reproduced" if max(shares) < RETAINED else "inconclusive"


def claims(result: dict) -> list[tuple[str, str, str]]:
    shares, said = retained(result)
    return [(f"a DistilBERT student keeps {RETAINED:.0%} of its teacher's score (SST-2)", said,
             f"student / teacher median {statistics.median(shares):.1%} (range {min(shares):.1%}–{max(shares):.1%})")]


def notes(result: dict) -> list[str]:
    p, t, setups = result["parameters"], result["latency"], result["setups"]
    teacher, student = setups["mlm"]["scores"]["sst2"], setups["student"]["scores"]["sst2"]
    shares, said = retained(result)
    share = statistics.median(shares)
    over_untrained = paired_gap(teacher, setups["untrained"]["scores"]["sst2"], finetune_seeds(result))
    return [
        f"**Claim: the student keeps {RETAINED:.0%} of its teacher's score — {said} at this scale.** Student / teacher on SST-2 dev, pair by pair: median {share:.1%} (range {min(shares):.1%}–"
        f"{max(shares):.1%}); student minus teacher {describe_gap(paired_gap(student, teacher, finetune_seeds(result)))}. The teacher itself "
        f"against no pretraining: {describe_gap(over_untrained)}; a share of the teacher's score means something about "
        "distillation only where the teacher's score owes something to pretraining.",
        "",
        f"**Size and speed** follow from the architecture and hold at any scale: {result['layers']['student']} of "
        f"{result['layers']['teacher']} layers leave {p['student'] / p['teacher']:.0%} of the parameters (the embeddings "
        "stay whole; they are a larger share of a small model than of BERT-base, hence more than DistilBERT's 60%) and "
        f"run {t['teacher'] / t['student']:.2f}× faster. The student starts from the teacher's {picked(result['layers'])} (by "
        "DistilBERT's rule, which takes 0, 2, 4, 7, 9, 11 of BERT's 12) and learns from the teacher's soft targets "
        "(T = 2), MLM and the hidden-state cosine loss.",
    ]


def picked(layers: dict) -> str:
    """The teacher layers the student started from, as `teacher_layers` picks them: "layer 0"."""
    chosen = teacher_layers(layers["teacher"], layers["student"])
    return ("layer " if len(chosen) == 1 else "layers ") + ", ".join(map(str, chosen))


def render(result: dict, plots: Path) -> str:
    p, t, setups = result["parameters"], result["latency"], result["setups"]
    mlm = {key: held_out({"eval_mlm_accuracy": statistics.median(r["final_eval"]["eval_mlm_accuracy"]
                                                               for r in setups[key]["runs"])}, ("mlm_accuracy",), labelled=False)
           for key in ("mlm", "student")}
    seconds = {key: statistics.median(r["seconds"] for r in setups[key]["runs"]) for key in ("mlm", "student")}
    lines = [
        "| | teacher (bert) | student (distilbert) | student / teacher | DistilBERT paper |", "|---|---:|---:|---:|---|",
        f"| layers | {result['layers']['teacher']} | {result['layers']['student']} | | 6 of 12 |",
        f"| parameters | {p['teacher']:,} | {p['student']:,} | {p['student'] / p['teacher']:.1%} | 60% |",
        f"| inference, batch {result['batch']} × {result['length']}, 1 thread (ms, median of {result['repeats']}) | "
        f"{t['teacher'] * 1e3:.1f} | {t['student'] * 1e3:.1f} | {t['teacher'] / t['student']:.2f}× faster | 1.6× faster |",
        f"| pretraining time (median) | {seconds['mlm']:.0f} s | {seconds['student']:.0f} s | | |",
        f"| held-out MLM accuracy (median) | {mlm['mlm']} | {mlm['student']} | | |",
        f"| SST-2 dev accuracy, median (range) | {describe_spread(setups['mlm']['scores']['sst2'])} | "
        f"{describe_spread(setups['student']['scores']['sst2'])} | | 97% (of GLUE) |",
        f"| the same, untrained encoder | {describe_spread(setups['untrained']['scores']['sst2'])} | | | |",
        "", *notes(result), "", *commands_block([setups["mlm"], setups["student"]]),
    ]
    return "\n".join(lines)
