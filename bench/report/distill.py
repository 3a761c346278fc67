"""Section 5 — distillation: a DistilBERT student against its teacher."""

from __future__ import annotations

from pathlib import Path

import torch

from minibert import from_pretrained

from .budget import REPO, STUDENT_LR, Budget
from .measure import count_parameters, held_out, interleaved_latency, random_inputs
from .recipes import finetune_sst2, mlm_run, pretrain_args, untrained_run
from .runner import Runner

NAME = "distill"
TITLE = "5. Distillation: student against teacher"
TASKS = ("SST-2",)
BATCH = 8


def plan(budget: Budget) -> str:
    return f"Teacher: S MLM steps (section 3's largest MLM run); student: S distillation steps at lr {STUDENT_LR:g}."


def compute(budget: Budget, runs: Path) -> dict:
    runner = Runner(runs)
    S = budget.steps
    teacher = mlm_run(runner, budget, S)  # section 3's largest MLM run
    student = runner.pretrain(f"distil-{S}", pretrain_args(budget, runs, "distilbert", S, "--teacher", teacher["out"], lr=STUDENT_LR))
    tuned = {"teacher": finetune_sst2(runner, budget, f"mlm-{S}", teacher),
             "student": finetune_sst2(runner, budget, f"distil-{S}", student)}
    untrained = finetune_sst2(runner, budget, "untrained", untrained_run(runner, budget))  # as in section 3
    torch.set_num_threads(1)
    models = {role: from_pretrained(REPO / run["out"]) for role, run in (("teacher", teacher), ("student", student))}
    inputs = random_inputs(BATCH, budget.seq_len, models["teacher"].config.vocab_size)
    repeats = max(3, 3 * budget.latency_repeats[1])
    return {
        "parameters": {role: count_parameters(m.config) for role, m in models.items()},
        "layers": {role: m.config.num_layers for role, m in models.items()},
        "latency": interleaved_latency(models, inputs, repeats), "repeats": repeats, "batch": BATCH, "length": budget.seq_len,
        "sst2": {role: t["accuracy"] for role, t in tuned.items()}, "untrained_sst2": untrained["accuracy"],
        "run_seconds": runner.seconds, "final_eval": {"teacher": teacher["final_eval"], "student": student["final_eval"]},
        "seconds": {"teacher": teacher["seconds"], "student": student["seconds"]},
        "commands": [teacher["command"], student["command"], tuned["teacher"]["command"], tuned["student"]["command"]],
    }


def notes(result: dict) -> list[str]:
    p, t = result["parameters"], result["latency"]
    mlm = {role: result["final_eval"][role].get("eval_mlm_accuracy", 0.0) for role in ("teacher", "student")}
    return [
        f"**Reading.** Size and speed follow from the architecture and hold at any scale: "
        f"{result['layers']['student']} of {result['layers']['teacher']} layers leave "
        f"{p['student'] / p['teacher']:.0%} of the parameters (the embeddings stay whole; they are a larger share of a "
        f"small model than of BERT-base, hence more than DistilBERT's 60%) and run {t['teacher'] / t['student']:.2f}× "
        "faster. The student starts from every other teacher layer and learns from the teacher's soft targets "
        "(T = 2), MLM and the hidden-state cosine loss"
        + (" for S more steps from the teacher's weights, which is likely why its held-out MLM accuracy ends above "
           "the teacher's." if mlm["student"] > mlm["teacher"] else "."),
        "",
        "**Scale, honestly.** \"97% of BERT\" is a GLUE macro score of a student distilled for days from a "
        "well-trained BERT-base. Here the teacher itself has had minutes of pretraining and is still on the "
        "context-free plateau (section 3), and the same fine-tuning from an untrained encoder scores "
        f"{result['untrained_sst2']:.3f}: whatever the ratio of the two accuracies, it says nothing about distillation.",
    ]


def render(result: dict, plots: Path) -> str:
    p, t, acc, ev = result["parameters"], result["latency"], result["sst2"], result["final_eval"]
    mlm = {role: held_out(ev[role], ("mlm_accuracy",), labelled=False) for role in ("teacher", "student")}
    lines = [
        "| | teacher (bert) | student (distilbert) | student / teacher | DistilBERT paper |", "|---|---:|---:|---:|---|",
        f"| layers | {result['layers']['teacher']} | {result['layers']['student']} | | 6 of 12 |",
        f"| parameters | {p['teacher']:,} | {p['student']:,} | {p['student'] / p['teacher']:.1%} | 60% |",
        f"| inference, batch {result['batch']} × {result['length']}, 1 thread (ms, median of {result['repeats']}) | {t['teacher'] * 1e3:.1f} "
        f"| {t['student'] * 1e3:.1f} | {t['teacher'] / t['student']:.2f}× faster | 1.6× faster |",
        f"| pretraining time | {result['seconds']['teacher']:.0f} s | {result['seconds']['student']:.0f} s | | |",
        f"| held-out MLM accuracy | {mlm['teacher']} | {mlm['student']} | | |",
        f"| SST-2 dev accuracy | {acc['teacher']:.3f} | {acc['student']:.3f} | {acc['student'] / acc['teacher']:.1%} | 97% (of GLUE) |",
        "", *notes(result), "", "Commands:", "", "```", *result["commands"], "```",
    ]
    return "\n".join(lines)
