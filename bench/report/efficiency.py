"""Section 4 — sample efficiency: MLM against ELECTRA's RTD at equal pretraining FLOPs."""

from __future__ import annotations

import math
import statistics
from functools import partial
from pathlib import Path

from minibert.objectives.rtd import generator_config
from minibert.runs.flops import BatchShape, training_flops

from .budget import MLM_VARIANT, SST2, Budget
from .measure import (binary_entropy, describe_gap, describe_spread, dev_set, finetune_seeds, held_out, paired_gap,
                      save_plot, spread, standard_error, unigram_entropy, verdict)
from .recipes import Setup, commands_block, corpus_counts, measure, mlm_run, pretrain_args, recipe, report_config
from .runner import NotRun, Runner
from .transfer import setups as transfer_setups

NAME = "efficiency"
TITLE = "4. Sample efficiency at equal compute: MLM vs ELECTRA's RTD"
ELECTRA_SMALL_FLOPS = 1.4e18  # ELECTRA paper, table 1: ELECTRA-Small's (and BERT-Small's) pretraining compute
ELECTRA_SMALL_GLUE, BERT_SMALL_GLUE = 79.9, 75.1  # ELECTRA paper: GLUE dev at that compute
TASKS = ("SST-2",)
LABELS = {"mlm": "MLM (BERT-style, no NSP)", "rtd": "RTD (ELECTRA discriminator)"}


def plan(budget: Budget) -> str:
    return (f"Compute budgets: {', '.join(f'{f:g}' for f in budget.budgets)} × the FLOPs of S MLM steps; the largest "
            "MLM runs are section 3's.")


def per_step_flops(budget: Budget) -> dict[str, float]:
    """FLOPs of one training step of each objective, at each variant's own masking rate."""
    config = report_config(budget)
    shape = {kind: BatchShape.uniform(budget.batch_size, budget.seq_len, recipe(variant, "mask_prob"))
             for kind, variant in (("mlm", MLM_VARIANT), ("rtd", "electra"))}
    return {"mlm": training_flops(config, shape["mlm"], "mlm"),
            "rtd": training_flops(config, shape["rtd"], "rtd", generator_config(config, recipe("electra", "generator_fraction"),
                                                                              recipe("electra", "generator_heads")))}


def rtd_run(runner: Runner, budget: Budget, steps: int, seed: int) -> dict:
    return runner.pretrain(f"rtd-{steps}-seed{seed}", pretrain_args(budget, runner.runs, "electra", steps, *budget.model, seed=seed))


def compute(budget: Budget, runs: Path, jobs: int = 1) -> dict:
    runner = Runner(runs, jobs)
    per_step = per_step_flops(budget)
    dev = dev_set(SST2)
    setups = [s for s in transfer_setups(runner, budget) if s.key == "untrained"]
    points = []
    for fraction in budget.budgets:
        mlm_steps = max(1, round(fraction * budget.steps))
        rtd_steps = max(1, round(mlm_steps * per_step["mlm"] / per_step["rtd"]))
        setups += [Setup(f"mlm-{mlm_steps}", LABELS["mlm"], partial(mlm_run, runner, budget, mlm_steps)),
                   Setup(f"rtd-{rtd_steps}", LABELS["rtd"], partial(rtd_run, runner, budget, rtd_steps))]
        points += [{"objective": "mlm", "key": f"mlm-{mlm_steps}", "steps": mlm_steps, "budget": mlm_steps * per_step["mlm"]},
                   {"objective": "rtd", "key": f"rtd-{rtd_steps}", "steps": rtd_steps, "budget": mlm_steps * per_step["mlm"]}]
    measured = measure(runner, budget, setups, ("sst2",))
    vocab = report_config(budget).vocab_size
    for run in (r for point in points for r in measured[point["key"]]["runs"]):
        if run["vocab_size"] != vocab:
            raise NotRun(f"{run['out']} has a {run['vocab_size']}-token vocabulary, not the {vocab} the FLOPs assume")
    for point in points:
        run = measured[point["key"]]
        point.update(flops=point["steps"] * per_step[point["objective"]], sst2=run["scores"]["sst2"],
                     seconds=statistics.median(r["seconds"] for r in run["runs"]), final_evals=[r["final_eval"] for r in run["runs"]])
    out = measured["untrained"]["runs"][0]["out"]
    return {"run_seconds": runner.seconds, "per_step_flops": per_step, "points": points, "sst2_dev": dev,
            "unigram_entropy": unigram_entropy(corpus_counts(budget, runs, out)),
            "untrained": measured["untrained"]["scores"]["sst2"], "setups": measured}


def by_budget(result: dict) -> dict[float, dict[str, dict]]:
    pairs: dict[float, dict[str, dict]] = {}
    for p in result["points"]:
        pairs.setdefault(p["budget"], {})[p["objective"]] = p
    return pairs


def claims(result: dict) -> list[tuple[str, str, str]]:
    gaps = {b: paired_gap(pair["rtd"]["sst2"], pair["mlm"]["sst2"], finetune_seeds(result)) for b, pair in by_budget(result).items()}
    verdicts = {verdict(g) for g in gaps.values()}
    return [("ELECTRA's RTD beats MLM at equal pretraining FLOPs (SST-2)",
             verdicts.pop() if len(verdicts) == 1 else "mixed across budgets",
             "RTD − MLM " + "; ".join(f"{100 * g['mean']:+.1f} ({100 * g['low']:+.1f} to {100 * g['high']:+.1f})"
                                       for g in gaps.values()) + " points, smallest budget first")]


def notes(result: dict) -> list[str]:
    """What the points say, and what they cannot say at this scale."""
    budgets = by_budget(result)
    f = finetune_seeds(result)
    gaps = {b: paired_gap(pair["rtd"]["sst2"], pair["mlm"]["sst2"], f) for b, pair in budgets.items()}
    dev = result["sst2_dev"]
    readings = [f"at {b:.2g} FLOPs {describe_gap(g)}, {verdict(g)}" for b, g in gaps.items()]
    largest = max(budgets)
    untrained = paired_gap(budgets[largest]["mlm"]["sst2"], result["untrained"], f)
    rtd_untrained = paired_gap(budgets[largest]["rtd"]["sst2"], result["untrained"], f)
    auc = statistics.median(e["eval_rtd_auc"] for e in budgets[largest]["rtd"]["final_evals"] if "eval_rtd_auc" in e)
    return [
        f"**Claim: ELECTRA's RTD beats MLM at equal compute.** RTD minus MLM on SST-2 dev, paired by seed: "
        + "; ".join(readings) + f". One standard error of an accuracy on the {dev['examples']} dev sentences is "
        f"{100 * standard_error(0.5, dev['examples']):.1f} points. Against no pretraining, at the largest budget: MLM "
        f"{describe_gap(untrained)}; RTD {describe_gap(rtd_untrained)}."
        + (f" The discriminators fine-tune below an untrained encoder of the same shape beyond the noise, at a held-out "
           f"RTD AUC of {auc:.3f}: what their pretraining left in the weights fine-tunes worse than random weights do, "
           "which points at this recipe at this budget (an open question) rather than at ELECTRA's claim." if rtd_untrained["high"] < 0 else ""),
        "",
        *plateau_note(result),
        "",
        f"**Scale, honestly.** ELECTRA's claim (GLUE dev {ELECTRA_SMALL_GLUE} for ELECTRA-Small against {BERT_SMALL_GLUE} "
        f"for BERT-Small at the same {ELECTRA_SMALL_FLOPS:.2g} pretraining FLOPs) is about models that have learned a lot "
        f"of language. The largest budget here is {math.log10(ELECTRA_SMALL_FLOPS / largest):.0f} orders of magnitude "
        "smaller. The mechanism the paper credits is visible in the pretraining metrics: the discriminator gets a loss "
        "on every token instead of the masked share.",
    ]


def plateau_note(result: dict) -> list[str]:
    """Did pretraining get past the context-free baselines? (Both objectives first learn the
    token frequencies; using the context comes later, after a plateau.)"""
    pair = by_budget(result)[max(by_budget(result))]
    mlm = [e["eval_mlm_loss"] for e in pair["mlm"]["final_evals"] if "eval_mlm_loss" in e]
    rtd = [e for e in pair["rtd"]["final_evals"] if "eval_rtd_loss" in e]
    if not mlm or not rtd:
        return []
    rate = statistics.median(e.get("eval_replaced_fraction", 0.15) for e in rtd)
    rtd_loss = statistics.median(e["eval_rtd_loss"] for e in rtd)
    return [
        f"**Where pretraining got to.** At the largest budget the MLM models' held-out loss is "
        f"{statistics.median(mlm):.2f} nats (median over seeds), against {result['unigram_entropy']:.2f} for predicting "
        f"token frequencies with no context at all; the ELECTRA discriminators' RTD loss is {rtd_loss:.3f} against "
        f"{binary_entropy(rate):.3f} for always answering \"original\" at the replaced rate {rate:.3f}."
    ]


def plot(result: dict, plots: Path) -> None:
    import matplotlib.pyplot as plt

    fig, axis = plt.subplots(figsize=(6.4, 4.2))
    for kind, marker, shift in (("mlm", "o", 0.97), ("rtd", "s", 1.03)):
        pts = sorted((p for p in result["points"] if p["objective"] == kind), key=lambda p: p["flops"])
        middle = [spread(p["sst2"]) for p in pts]
        axis.errorbar([p["flops"] * shift for p in pts], [m["median"] for m in middle], marker=marker, capsize=3,
                      yerr=[[m["median"] - m["min"] for m in middle], [m["max"] - m["median"] for m in middle]],
                      label=LABELS[kind])
    untrained = spread(result["untrained"])
    axis.axhspan(untrained["min"], untrained["max"], color="grey", alpha=0.2)
    axis.axhline(untrained["median"], color="grey", linestyle="--", label="no pretraining (median, range)")
    axis.set_xscale("log")
    save_plot(fig, axis, plots / "sample_efficiency.png", "pretraining FLOPs",
              "SST-2 dev accuracy (median, range over seeds)", "Equal-compute pretraining, then SST-2 fine-tuning")


def render(result: dict, plots: Path) -> str:
    plot(result, plots)
    per_step = result["per_step_flops"]
    lines = [
        f"FLOPs per pretraining step: MLM {per_step['mlm']:.3g}, ELECTRA {per_step['rtd']:.3g} (generator and "
        "discriminator at train.py's defaults; `minibert.runs.flops.training_flops`: 3 × the forward matmuls, the MLM decoder "
        "at the masked positions only), so at each budget ELECTRA gets proportionally fewer steps. Each objective runs "
        "at train.py's default learning rate and masking rate.", "",
        "| budget (FLOPs) | objective | pretraining steps | FLOPs used | time (median) | held-out metrics (median) | SST-2 dev acc. |",
        "|---:|---|---:|---:|---:|---|---:|",
        f"| 0 | none (untrained encoder, same tokenizer) | 0 | 0 | – | – | {describe_spread(result['untrained'])} |",
    ]
    for p in sorted(result["points"], key=lambda p: (p["budget"], p["objective"])):
        metrics = {k: statistics.median(e[k] for e in p["final_evals"]) for k in ("eval_mlm_accuracy", "eval_rtd_auc")
                   if all(k in e for e in p["final_evals"])}
        lines.append(f"| {p['budget']:.3g} | {LABELS[p['objective']]} | {p['steps']} | {p['flops']:.3g} | "
                     f"{p['seconds']:.0f} s | {held_out(metrics, ('mlm_accuracy', 'rtd_auc'))} | {describe_spread(p['sst2'])} |")
    lines += ["", f"![SST-2 accuracy against pretraining FLOPs]({plots.name}/sample_efficiency.png)", "",
              "(For ELECTRA, \"mlm accuracy\" is the generator's.)", "", *notes(result), "",
              *commands_block([result["setups"][p["key"]] for p in result["points"]])]
    return "\n".join(lines)
