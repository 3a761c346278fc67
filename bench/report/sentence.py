"""Section 5 — masking and sentence tasks: static vs dynamic masking; NSP vs SOP vs none."""

from __future__ import annotations

import statistics
from dataclasses import replace
from functools import partial
from pathlib import Path

from .budget import RTE, SST2, Budget
from .measure import describe_gap, describe_spread, dev_set, finetune_seeds, held_out, paired_gap, verdict
from .recipes import Setup, commands_block, corpus_passes, measure, mlm_run
from .runner import Runner
from .transfer import setups as transfer_setups

NAME = "sentence"
TITLE = "5. Masking and sentence tasks: static vs dynamic; NSP vs SOP vs none"
TASKS = ("SST-2", "RTE")


def plan(budget: Budget) -> str:
    return "Each row pretrains for S steps; the first is section 3's MLM run."


def compute(budget: Budget, runs: Path, jobs: int = 1) -> dict:
    runner = Runner(runs, jobs)
    S = budget.steps
    dev = {"sst2": dev_set(SST2), "rte": dev_set(RTE)}
    mlm = partial(mlm_run, runner, budget, S)
    pretrained, untrained = transfer_setups(runner, budget)
    setups = [
        replace(pretrained, label="dynamic masking, no sentence task"),
        untrained,
        Setup("static", "static masking (one mask per sequence), no sentence task",
              lambda seed: mlm(seed, "full_sentences", "static", "--dupe-factor", "1", name=f"static-{S}")),
        Setup("nsp", "dynamic masking, NSP", lambda seed: mlm(seed, "nsp", name=f"nsp-{S}")),
        Setup("sop", "dynamic masking, SOP", lambda seed: mlm(seed, "sop", name=f"sop-{S}")),
    ]
    measured = measure(runner, budget, setups, ("sst2", "rte"))
    first = measured["mlm"]["runs"][0]["out"]
    return {"setups": measured, "dev": dev, "passes": corpus_passes(budget, runs, first), "run_seconds": runner.seconds}


def gap(result: dict, a: str, b: str, task: str) -> dict:
    return paired_gap(result["setups"][a]["scores"][task], result["setups"][b]["scores"][task], finetune_seeds(result))


def claims(result: dict) -> list[tuple[str, str, str]]:
    dynamic, sop = gap(result, "mlm", "static", "sst2"), gap(result, "sop", "nsp", "rte")
    return [("dynamic masking is at least as good as static (SST-2)", verdict(dynamic), f"dynamic − static {describe_gap(dynamic)}"),
            ("SOP helps a sentence-pair task more than NSP (RTE)", verdict(sop), f"SOP − NSP {describe_gap(sop)}")]


def notes(result: dict) -> list[str]:
    setups = result["setups"]
    heads = {task: statistics.median(r["final_eval"][f"eval_{task}_accuracy"] for r in setups[task]["runs"])
             for task in ("nsp", "sop")}
    static_mlm = paired_gap(*([r["final_eval"]["eval_mlm_accuracy"] for r in setups[k]["runs"]] for k in ("mlm", "static")))
    readings = {
        "dynamic": (gap(result, "mlm", "static", "sst2"), gap(result, "mlm", "static", "rte")),
        "sop_nsp": gap(result, "sop", "nsp", "rte"),
        "sop_none": gap(result, "sop", "mlm", "rte"),
        "nsp_none": gap(result, "nsp", "mlm", "rte"),
    }
    sst2_sentence = {k: gap(result, k, "mlm", "sst2") for k in ("nsp", "sop")}
    return [
        f"**Claim: dynamic masking is at least as good as static (RoBERTa) — {verdict(readings['dynamic'][0])} on SST-2, "
        f"{verdict(readings['dynamic'][1])} on RTE.** Dynamic minus static: SST-2 {describe_gap(readings['dynamic'][0])}; "
        f"RTE {describe_gap(readings['dynamic'][1])}; held-out MLM accuracy (one pair per pretraining seed) "
        f"{describe_gap(static_mlm)}. The static run draws one mask per sequence and S steps read the corpus about "
        f"{result['passes']:.1f} times, "
        + ("so each mask is seen about that often (RoBERTa's static baseline saw each mask 4 times over 40 epochs)."
           if result["passes"] >= 1.5 else "so hardly any mask is seen twice: at this budget the two recipes differ "
           "by design only in which tokens are masked, not in repetition, which is what RoBERTa's claim is about "
           "(its static baseline saw each mask 4 times over 40 epochs)."),
        "",
        f"**Claim: SOP helps a sentence-pair task more than NSP (ALBERT) — {verdict(readings['sop_nsp'])} on RTE.** "
        f"SOP minus NSP: {describe_gap(readings['sop_nsp'])}. SOP minus no sentence task: "
        f"{describe_gap(readings['sop_none'])}; NSP minus none: {describe_gap(readings['nsp_none'])}. Held out, the NSP "
        f"head reached {heads['nsp']:.3f} and the SOP head {heads['sop']:.3f} (median over seeds): NSP's negatives come "
        "from another document, so a change of topic gives them away, while SOP's are the same two segments swapped.",
        "",
        f"**A sentence task and SST-2.** NSP minus none on SST-2: {describe_gap(sst2_sentence['nsp'])}; SOP minus "
        f"none: {describe_gap(sst2_sentence['sop'])}. A sentence task is also the only pretraining signal that trains "
        "the [CLS] vector; these classifiers read the mean of the last layer instead (section 3), which MLM trains in "
        "every row." if result["budget"]["pooling"] == "mean" else
        f"**A sentence task and SST-2.** NSP minus none on SST-2: {describe_gap(sst2_sentence['nsp'])}; SOP minus "
        f"none: {describe_gap(sst2_sentence['sop'])}. A sentence task is the only pretraining signal that trains the "
        "[CLS] vector these classifiers read (section 3).",
    ]


def render(result: dict, plots: Path) -> str:
    lines = [
        "| pretraining | time (median) | held-out MLM acc. | held-out NSP / SOP acc. | SST-2 dev acc. | RTE dev acc. |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for key, setup in result["setups"].items():
        evals = [r["final_eval"] for r in setup["runs"]]
        median = {k: statistics.median(e[k] for e in evals) for k in evals[0] if k.startswith("eval_")
                  and all(k in e for e in evals)}
        seconds = statistics.median(r["seconds"] for r in setup["runs"])
        untrained = key == "untrained"
        lines.append(f"| {setup['label']} | {'–' if untrained else f'{seconds:.0f} s'} | "
                     f"{'–' if untrained else held_out(median, ('mlm_accuracy',), labelled=False)} | "
                     f"{held_out(median, ('nsp_accuracy', 'sop_accuracy'), labelled=False)} | "
                     f"{describe_spread(setup['scores']['sst2'])} | {describe_spread(setup['scores']['rte'])} |")
    rte = result["dev"]["rte"]
    lines += ["", f"Accuracies: median (range) over every pretraining × fine-tuning seed. RTE's majority class "
                  f"({rte['majority_label']!r}) scores {rte['majority']:.3f} on its {rte['examples']} dev pairs.", "",
              *notes(result), "", *commands_block([s for k, s in result["setups"].items() if k != "untrained"])]
    return "\n".join(lines)
