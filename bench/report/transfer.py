"""Section 3 — does pretraining help? The same encoder pretrained and untrained, fine-tuned alike."""

from __future__ import annotations

import statistics
from functools import partial
from pathlib import Path

from minibert.heads import POOLINGS

from .budget import RTE, SST2, Budget
from .measure import describe_gap, describe_spread, dev_set, paired_gap, save_plot, standard_error, verdict
from .recipes import Setup, commands_block, measure, mlm_run, untrained_run
from .runner import Runner

READS = {"cls": "[CLS] token", "mean": "mean of the last layer"}  # `--pooling`, in words

NAME = "transfer"
TITLE = "3. Does pretraining help? Pretrained against untrained"
TASKS = ("SST-2", "RTE")


def plan(budget: Budget) -> str:
    return ("Pretrained: S steps of MLM (dynamic masking, no sentence task). Untrained: the same command for one step "
            "at lr 1e-12, so the same tokenizer, architecture and initialisation seed.")


def setups(runner: Runner, budget: Budget) -> list[Setup]:
    """The pretrained MLM encoder and its untrained twin (sections 4–6 reuse both)."""
    return [Setup("mlm", "pretrained (MLM, S steps)", partial(mlm_run, runner, budget, budget.steps)),
            Setup("untrained", "untrained", partial(untrained_run, runner, budget))]


def compute(budget: Budget, runs: Path, jobs: int = 1) -> dict:
    runner = Runner(runs, jobs)
    dev = {"sst2": dev_set(SST2), "rte": dev_set(RTE)}
    poolings = (budget.pooling, *(p for p in POOLINGS if p != budget.pooling))  # the report's first, then the other
    measured = {p: measure(runner, budget, setups(runner, budget), ("sst2", "rte"), p) for p in poolings}
    return {"by_pooling": measured, "pooling": budget.pooling, "dev": dev, "run_seconds": runner.seconds}


def pretraining_runs(result: dict) -> list[dict]:
    """The pretrained encoders' runs, one per seed (the same under either pooling)."""
    return result["by_pooling"][result["pooling"]]["mlm"]["runs"]


def findings(result: dict, pooling: str) -> dict:
    """The claim's two readings under one pooling: the paired gap on SST-2, and RTE against its
    majority class."""
    setups = result["by_pooling"][pooling]
    mlm, untrained = setups["mlm"]["scores"], setups["untrained"]["scores"]
    majority = result["dev"]["rte"]["majority"]
    return {"sst2": paired_gap(mlm["sst2"], untrained["sst2"]), "rte": paired_gap(mlm["rte"], untrained["rte"]),
            "rte_majority": paired_gap(mlm["rte"], [majority] * len(mlm["rte"]))}


def claims(result: dict) -> list[tuple[str, str, str]]:
    """(claim, verdict, the numbers that decide it) for the summary at the top of the document."""
    found = findings(result, result["pooling"])
    return [("a pretrained encoder beats the same shape untrained on SST-2 (aim: ≥ 3 points)", verdict(found["sst2"]),
             f"pretrained − untrained {describe_gap(found['sst2'])}"),
            ("a pretrained encoder scores above RTE's majority class", verdict(found["rte_majority"]),
             f"pretrained − majority {describe_gap(found['rte_majority'])}")]


def plot(result: dict, plots: Path) -> None:
    """Held-out MLM accuracy against wall-clock time, one line per seed, with the two
    context-free baselines a model must beat."""
    import matplotlib.pyplot as plt

    fig, axis = plt.subplots(figsize=(6.4, 4.2))
    runs = pretraining_runs(result)
    for run in runs:
        points = [(e["elapsed_s"] / 60, e["eval_mlm_accuracy"]) for e in run["evals"] if "eval_mlm_accuracy" in e]
        axis.plot(*zip(*points), marker="o", label=f"MLM, pretraining seed {run['seed']}")
    for key, label, style in (("baseline_neighbour_accuracy", "neighbour-count baseline", "--"),
                              ("baseline_unigram_accuracy", "unigram baseline (always the commonest token)", ":")):
        values = [e[key] for run in runs for e in run["evals"] if key in e]
        if values:
            axis.axhline(statistics.median(values), color="grey", linestyle=style, label=label)
    save_plot(fig, axis, plots / "mlm_over_time.png", "wall-clock minutes (one thread)",
              "held-out MLM accuracy (15% masked)", "Pretraining: held-out MLM accuracy over time")


def context_note(result: dict, gap: dict) -> list[str]:
    """Did pretraining learn context (beyond the neighbour-count baseline), and did it carry over?"""
    runs = pretraining_runs(result)
    final = statistics.median(r["final_eval"]["eval_mlm_accuracy"] for r in runs)
    neighbours = [e["baseline_neighbour_accuracy"] for r in runs for e in r["evals"] if "baseline_neighbour_accuracy" in e]
    if not neighbours:
        return []
    learned = final > statistics.median(neighbours)
    minutes = statistics.median(r["seconds"] for r in runs) / 60
    return [
        f"**What pretraining learned.** Held out, the pretrained encoders predict {final:.3f} of the masked tokens, "
        f"against {statistics.median(neighbours):.3f} for the neighbour-count baseline (the commonest token between "
        f"the same two neighbours, in the training corpus){': they use the context' if learned else ''}. "
        + ("That is what about " f"{minutes:.0f} minutes of pretraining buys; " if learned else "")
        + ("it carries over to SST-2 beyond the noise." if gap["low"] > 0 else
           "it does not carry over to SST-2 from this many labelled sentences: an untrained encoder of the same "
           "shape, fine-tuned alike, learns the task as well or better." if gap["high"] < 0 else
           "whether it carries over to SST-2 the seeds cannot tell.")
    ]


def render(result: dict, plots: Path) -> str:
    plot(result, plots)
    dev, pooling = result["dev"], result["pooling"]
    other = next(p for p in result["by_pooling"] if p != pooling)
    found, cls_found = findings(result, pooling), findings(result, other)
    rte_dev = dev["rte"]
    lines = ["| encoder | classifier reads | held-out MLM acc. (median) | pretraining time (median) | SST-2 dev acc. | RTE dev acc. |",
             "|---|---|---:|---:|---:|---:|"]
    for name, setups in result["by_pooling"].items():
        for key, setup in setups.items():
            trained = key != "untrained"
            mlm = statistics.median(r["final_eval"]["eval_mlm_accuracy"] for r in setup["runs"]) if trained else None
            seconds = statistics.median(r["seconds"] for r in setup["runs"])
            shown = f"{mlm:.3f} | {seconds:.0f} s" if trained else "– | –"
            lines.append(f"| {setup['label']} | {READS[name]} | {shown} | {describe_spread(setup['scores']['sst2'])} | "
                         f"{describe_spread(setup['scores']['rte'])} |")
    se = {task: 100 * standard_error(0.5, dev[task]["examples"]) for task in ("sst2", "rte")}
    by = result["by_pooling"]
    switch = {key: paired_gap(by[pooling][key]["scores"]["sst2"], by[other][key]["scores"]["sst2"]) for key in ("mlm", "untrained")}
    lines += [
        "",
        "Scores are the median (and range) over every pretraining seed × fine-tuning seed; the rows share both seeds "
        "pair by pair.",
        "",
        f"![held-out MLM accuracy over time]({plots.name}/mlm_over_time.png)",
        "",
        f"**Claim: a pretrained encoder beats the same shape untrained on SST-2 — {verdict(found['sst2'])} at this "
        f"scale** (classifier on the {READS[pooling]}). Pretrained minus untrained: {describe_gap(found['sst2'])}; the "
        f"aim was at least +3 points. Beside the seeds, the dev set itself samples: one standard error is "
        f"{se['sst2']:.1f} points on its {dev['sst2']['examples']} sentences.",
        "",
        f"**Claim: pretrained RTE above its majority class ({rte_dev['majority']:.3f}, always "
        f"{rte_dev['majority_label']!r}) — {verdict(found['rte_majority'])} at this scale.** Pretrained minus "
        f"majority: {describe_gap(found['rte_majority'])}; pretrained minus untrained: {describe_gap(found['rte'])}. "
        f"One standard error on its {rte_dev['examples']} pairs is {se['rte']:.1f} points.",
        "",
        *context_note(result, found["sst2"]),
        "",
        f"**Which vector the classifier reads.** No MLM loss reads the last layer at the [CLS] position ([CLS] is "
        "never masked), so pretraining without a sentence task leaves that vector untrained, and a classifier on it "
        f"starts from nothing pretraining learned. With the classifier on the {READS[other]} instead, pretrained minus "
        f"untrained on SST-2 is {describe_gap(cls_found['sst2'])} ({verdict(cls_found['sst2'])}). Switching from the "
        f"{READS[other]} to the {READS[pooling]} moves the pretrained encoder by {describe_gap(switch['mlm'])} and the "
        f"untrained one by {describe_gap(switch['untrained'])}. The other sections fine-tune with `--pooling "
        f"{pooling}`.",
        "",
        *commands_block([s for setups in by.values() for s in setups.values()]),
    ]
    return "\n".join(lines)
