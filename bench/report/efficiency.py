"""Section 3 — sample efficiency: MLM against ELECTRA's RTD at equal pretraining FLOPs."""

from __future__ import annotations

import math
from pathlib import Path

from minibert.flops import OBJECTIVES, BatchShape, training_flops

from .budget import GENERATOR_FRACTION, MASK_PROB, PRETRAIN_LR, SST2, Budget
from .measure import binary_entropy, dev_set, gap_noise, held_out, standard_error, unigram_entropy
from .recipes import corpus_counts, finetune_sst2, mlm_run, pretrain_args, report_config, untrained_run
from .runner import NotRun, Runner

NAME = "efficiency"
TITLE = "3. Sample efficiency at equal compute: MLM vs ELECTRA's RTD"
ELECTRA_SMALL_FLOPS = 1.4e18  # ELECTRA paper, table 1: ELECTRA-Small's (and BERT-Small's) pretraining compute
ELECTRA_SMALL_GLUE, BERT_SMALL_GLUE = 79.9, 75.1  # ELECTRA paper: GLUE dev at that compute
TASKS = ("SST-2",)
LABELS = {"mlm": "MLM (BERT-style, no NSP)", "rtd": "RTD (ELECTRA discriminator)"}


def plan(budget: Budget) -> str:
    return f"Compute budgets: {', '.join(f'{f:g}' for f in budget.budgets)} × the FLOPs of S MLM steps."


def compute(budget: Budget, runs: Path) -> dict:
    runner = Runner(runs)
    config = report_config(budget)
    shape = BatchShape.uniform(budget.batch_size, budget.seq_len, MASK_PROB)
    per_step = {kind: training_flops(config, shape, kind, GENERATOR_FRACTION) for kind in OBJECTIVES}
    dev = dev_set(SST2)
    untrained = untrained_run(runner, budget)
    baseline = finetune_sst2(runner, budget, "untrained", untrained)
    points = []
    for fraction in budget.budgets:
        mlm_steps = max(1, round(fraction * budget.steps))
        rtd_steps = max(1, round(mlm_steps * per_step["mlm"] / per_step["rtd"]))
        runs_of = {
            "mlm": (mlm_steps, mlm_run(runner, budget, mlm_steps)),
            "rtd": (rtd_steps, runner.pretrain(f"rtd-{rtd_steps}", pretrain_args(
                budget, runs, "electra", rtd_steps, *budget.model, "--generator-fraction", str(GENERATOR_FRACTION)))),
        }
        for kind, (steps, run) in runs_of.items():
            if run["config"]["vocab_size"] != config.vocab_size:
                raise NotRun(f"{run['out']} has a {run['config']['vocab_size']}-token vocabulary, not the {config.vocab_size} the FLOPs assume")
            tuned = finetune_sst2(runner, budget, f"{kind}-{steps}", run)
            points.append({"objective": kind, "steps": steps, "flops": steps * per_step[kind], "sst2": tuned["accuracy"],
                           "budget": mlm_steps * per_step["mlm"],
                           "pretrain_command": run["command"], "pretrain_seconds": run["seconds"],
                           "finetune_command": tuned["command"], "final_eval": run["final_eval"]})
    return {"run_seconds": runner.seconds, "per_step_flops": per_step, "points": points, "sst2_dev": dev,
            "unigram_entropy": unigram_entropy(corpus_counts(budget, runs, untrained["out"])),
            "untrained": {"sst2": baseline["accuracy"], "commands": [untrained["command"], baseline["command"]]}}


def notes(result: dict) -> list[str]:
    """What the points say, and what they cannot say at this scale."""
    by_budget: dict[float, dict[str, float]] = {}
    for p in result["points"]:
        by_budget.setdefault(p["budget"], {})[p["objective"]] = p["sst2"]
    gaps = [pair["rtd"] - pair["mlm"] for pair in by_budget.values()]
    dev = result["sst2_dev"]
    noise = gap_noise(dev["examples"])
    ahead = sum(g > 0 for g in gaps)
    clear = sum(abs(g) > noise for g in gaps)
    best = max(p["sst2"] for p in result["points"])
    majority = (f" (the share of the majority class in dev is {dev['majority']:.3f}: a model that always answers "
                f"label {dev['majority_label']})." if best < dev["majority"] + 0.01 else ".")
    return [
        f"**Reading.** RTD scored higher than MLM at {ahead} of {len(gaps)} budgets (gaps "
        f"{', '.join(f'{100 * g:+.1f}' for g in gaps)} points); {clear} of the gaps exceed ±{100 * noise:.1f} points, twice "
        f"the standard error of a difference of two accuracies on {dev['examples']} sentences. The best fine-tuned model "
        f"reached {best:.3f} against {result['untrained']['sst2']:.3f} without pretraining" + majority,
        "",
        *plateau_note(result),
        "",
        f"**Scale, honestly.** ELECTRA's claim (GLUE dev {ELECTRA_SMALL_GLUE} for ELECTRA-Small against {BERT_SMALL_GLUE} "
        f"for BERT-Small at the same {ELECTRA_SMALL_FLOPS:.2g} pretraining FLOPs) is about models that have learned a lot "
        f"of language. The largest budget here is {math.log10(ELECTRA_SMALL_FLOPS / max(by_budget)):.0f} orders of "
        "magnitude smaller, with one pretraining seed and one fine-tuning seed per point: at this scale the encoders "
        "have learned little beyond token frequencies, so whether they fine-tune better than an untrained encoder at "
        "all is the first question, and an ELECTRA-vs-BERT ordering within the noise is no evidence either way. The "
        f"mechanism the paper credits is visible in the pretraining metrics: the discriminator gets a loss on every "
        f"token instead of the masked {MASK_PROB:.0%}.",
    ]


def plateau_note(result: dict) -> list[str]:
    """Did pretraining get past the context-free baselines? (Both objectives first learn the
    token frequencies; using the context comes later, after a plateau.)"""
    largest = max(p["budget"] for p in result["points"])
    final = {p["objective"]: p["final_eval"] for p in result["points"] if p["budget"] == largest}
    mlm, rtd = final["mlm"], final["rtd"]
    if "eval_mlm_loss" not in mlm or "eval_rtd_loss" not in rtd:
        return []
    rate = rtd.get("eval_replaced_fraction", MASK_PROB)
    return [
        f"**Where pretraining got to.** At the largest budget the MLM model's held-out loss is {mlm['eval_mlm_loss']:.2f} nats, "
        f"against {result['unigram_entropy']:.2f} for predicting token frequencies with no context at all; the ELECTRA "
        f"discriminator's RTD loss is {rtd['eval_rtd_loss']:.3f} against {binary_entropy(rate):.3f} for always answering "
        f"\"original\" at the replaced rate {rate:.3f}. "
        + ("Both are still on the plateau where a model knows the statistics of single tokens but does not yet use the "
           "context, so their encoders hold nothing SST-2 can use that an untrained one lacks."
           if mlm["eval_mlm_loss"] > result["unigram_entropy"] - 0.3 and rtd["eval_rtd_loss"] > binary_entropy(rate) - 0.03
           else "At least one objective has moved clearly past that baseline, i.e. learned to use the context."),
    ]


def plot(result: dict, plots: Path) -> None:
    import matplotlib.pyplot as plt

    fig, axis = plt.subplots(figsize=(6.4, 4.2))
    for kind, marker in (("mlm", "o"), ("rtd", "s")):
        pts = sorted((p for p in result["points"] if p["objective"] == kind), key=lambda p: p["flops"])
        errors = [standard_error(p["sst2"], result["sst2_dev"]["examples"]) for p in pts]
        axis.errorbar([p["flops"] for p in pts], [p["sst2"] for p in pts], yerr=errors, marker=marker, capsize=3, label=LABELS[kind])
    axis.axhline(result["untrained"]["sst2"], color="grey", linestyle="--", label="no pretraining")
    axis.set_xscale("log")
    axis.set_xlabel("pretraining FLOPs")
    axis.set_ylabel("SST-2 dev accuracy (± 1 s.e.)")
    axis.set_title("Equal-compute pretraining, then SST-2 fine-tuning")
    axis.legend()
    fig.tight_layout()
    fig.savefig(plots / "sample_efficiency.png", dpi=110)
    plt.close(fig)


def render(result: dict, plots: Path) -> str:
    plot(result, plots)
    per_step = result["per_step_flops"]
    lines = [
        f"FLOPs per pretraining step: MLM {per_step['mlm']:.3g}, ELECTRA {per_step['rtd']:.3g} (generator at "
        f"{GENERATOR_FRACTION:g} of the width + discriminator; `minibert.flops.training_flops`: 3 × the forward matmuls, "
        f"the MLM decoder at the masked {MASK_PROB:.0%} only), so at each budget ELECTRA gets proportionally fewer steps. "
        f"Both use peak lr {PRETRAIN_LR:g}, as the ELECTRA paper gives BERT-Small and ELECTRA-Small the same.", "",
        "| budget (FLOPs) | objective | pretraining steps | FLOPs used | time | held-out metrics at the end | SST-2 dev acc. |",
        "|---:|---|---:|---:|---:|---|---:|",
        f"| 0 | none (untrained encoder, same tokenizer) | 0 | 0 | – | – | {result['untrained']['sst2']:.3f} |",
    ]
    for p in sorted(result["points"], key=lambda p: (p["budget"], p["objective"])):
        shown = held_out(p["final_eval"], ("mlm_accuracy", "rtd_accuracy"))
        lines.append(f"| {p['budget']:.3g} | {LABELS[p['objective']]} | {p['steps']} | {p['flops']:.3g} | {p['pretrain_seconds']:.0f} s "
                     f"| {shown} | {p['sst2']:.3f} |")
    lines += ["", f"![SST-2 accuracy against pretraining FLOPs]({plots.name}/sample_efficiency.png)", "",
              "(For ELECTRA, \"mlm accuracy\" is the generator's; \"rtd accuracy\" is the discriminator's over all "
              "real tokens, most of which are originals.)", "", *notes(result), "", "Commands:", "", "```",
              *result["untrained"]["commands"]]
    for p in result["points"]:
        lines += [p["pretrain_command"], p["finetune_command"]]
    lines.append("```")
    return "\n".join(lines)
