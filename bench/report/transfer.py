"""Section 3 — does pretraining help? The same encoder pretrained and untrained, fine-tuned alike."""

from __future__ import annotations

import math
import statistics
from functools import partial
from pathlib import Path

from minibert.heads import POOLINGS

from .budget import RTE, SST2, Budget
from .measure import (describe_gap, describe_spread, dev_set, finetune_seeds, labelled_set, paired_gap,
                      save_plot, standard_error, verdict)
from .recipes import (Setup, commands_block, measure, mlm_run, sst2_subsample, sst2_text, sst2_validation,
                      untrained_run)
from .runner import Runner

READS = {"cls": "[CLS] token", "mean": "mean of the last layer"}  # `--pooling`, in words

NAME = "transfer"
TITLE = "3. Does pretraining help? Pretrained against untrained"
TASKS = ("SST-2", "RTE")
LONGER = 4  # the longer pretraining, in S: about a quarter hour per run on one thread
AIM = 0.03  # the gap over an untrained encoder that would show pretraining clearly on SST-2
OWN = "untrained-own-protocol"  # the untrained encoder fine-tuned with the protocol best for it (`own_protocol`)
TEXT_OWN = "task-text-untrained-own-protocol"  # task-adaptive pretraining's untrained twin, fine-tuned so too


def plan(budget: Budget) -> str:
    return (f"Pretrained: S steps of MLM (dynamic masking, no sentence task), and {LONGER}S steps. Untrained: the same "
            "command for one step at lr 1e-12, so the same tokenizer, architecture and initialisation seed. "
            f"Task-adaptive: the same MLM on SST-2's training text with the labels dropped, S and {LONGER}S steps, "
            "beside its own untrained twin.")


def setups(runner: Runner, budget: Budget) -> list[Setup]:
    """The pretrained MLM encoder and its untrained twin (sections 4–6 reuse both)."""
    return [Setup("mlm", "pretrained (MLM, S steps)", partial(mlm_run, runner, budget, budget.steps)),
            Setup("untrained", "untrained", partial(untrained_run, runner, budget))]


def longer(runner: Runner, budget: Budget) -> Setup:
    """The same MLM run LONGER times as long: is S simply too little pretraining?"""
    return Setup("mlm-long", f"pretrained (MLM, {LONGER}S steps)", partial(mlm_run, runner, budget, LONGER * budget.steps))


def task_text(runner: Runner, budget: Budget) -> list[Setup]:
    """Task-adaptive pretraining: the same MLM, S and LONGER×S steps, on SST-2's own training
    text with the labels dropped (`sst2_text`), beside an untrained twin that shares its
    tokenizer. Does pretraining help once the corpus speaks the task's language?"""
    text = sst2_text(budget, runner.runs)
    return [Setup("task-text", "pretrained on SST-2's training text (MLM, S steps)",
                  partial(mlm_run, runner, budget, budget.steps, name=f"sst2text-{budget.steps}", data=text)),
            Setup("task-text-long", f"pretrained on SST-2's training text (MLM, {LONGER}S steps)",
                  partial(mlm_run, runner, budget, LONGER * budget.steps, name=f"sst2text-{LONGER * budget.steps}", data=text)),
            Setup("task-text-untrained", "untrained (tokenizer of SST-2's training text)",
                  partial(untrained_run, runner, budget, data=text, name="sst2text-untrained"))]


def protocols(budget: Budget) -> list[tuple[float, int]]:
    """The SST-2 fine-tuning protocols (peak lr, steps) compared before any dev score is read:
    each of the budget's lrs for its steps and a third of them."""
    return [(lr, steps) for lr in budget.sst2_lrs for steps in (budget.sst2_steps // 3, budget.sst2_steps)]


def protocol(runner: Runner, budget: Budget) -> dict:
    """Each protocol fine-tunes the first seed's pretrained and untrained encoders, with every
    fine-tuning seed, on the SST-2 subsample and scores them on held-out *training* sentences
    (`sst2_validation`): how the budget's lr and steps were chosen, without reading dev.
    {examples, rows: [{lr, steps, mlm, untrained}]}, each setup's mean {accuracy, train_loss}."""
    train, held_out = sst2_subsample(budget, runner.runs), sst2_validation(budget, runner.runs)
    encoders = {setup.key: setup.pretrain(budget.pretrain_seeds[0]) for setup in setups(runner, budget)}
    jobs = [(lr, steps, key, seed) for lr, steps in protocols(budget) for key in encoders for seed in budget.finetune_seeds]
    tuned = runner.parallel([partial(runner.finetune, f"protocol-{Path(encoders[key]['out']).name}-lr{lr:g}-steps{steps}-ft{seed}",
                                     encoders[key]["out"], train, held_out, steps, lr, budget.seq_len, seed, budget.pooling)
                             for lr, steps, key, seed in jobs])
    scores: dict = {}
    for (lr, steps, key, _), out in zip(jobs, tuned):
        scores.setdefault((lr, steps), {}).setdefault(key, []).append(out)
    rows = [{"lr": lr, "steps": steps, **{key: {name: statistics.fmean(out[name] for out in outs)
                                                for name in ("accuracy", "train_loss")} for key, outs in by_key.items()}}
            for (lr, steps), by_key in scores.items()]
    return {"examples": labelled_set(held_out)["examples"], "rows": rows}


def own_protocol(chosen: dict) -> tuple[float, int]:
    """The protocol (peak lr, steps) under which the *untrained* encoder scored best on the
    held-out sentences. The budget's protocol was chosen for the pretrained encoder; a baseline
    fine-tuned with its rival's protocol could lose for want of its own."""
    best = max(chosen["rows"], key=lambda row: row["untrained"]["accuracy"])
    return best["lr"], best["steps"]


def compute(budget: Budget, runs: Path, jobs: int = 1) -> dict:
    runner = Runner(runs, jobs)
    dev = {"sst2": dev_set(SST2), "rte": dev_set(RTE)}
    chosen = protocol(runner, budget)
    poolings = (budget.pooling, *(p for p in POOLINGS if p != budget.pooling))  # the report's first, then the other
    extra = {budget.pooling: [longer(runner, budget)]}  # under the report's pooling only (a quarter hour a run)
    measured = {p: measure(runner, budget, [*setups(runner, budget), *extra.get(p, [])], ("sst2", "rte"), p) for p in poolings}
    adaptive = task_text(runner, budget)
    measured[budget.pooling].update(measure(runner, budget, adaptive, ("sst2",)))  # SST-2's text: SST-2 only
    own = own_protocol(chosen)
    if own != (budget.sst2_lr, budget.sst2_steps):  # the untrained baselines at their own best, lest the protocol handicap them
        said = f"at the untrained encoder's best protocol (lr {own[0]:g}, {own[1]} steps)"
        untrained = {setup.key: setup for setup in (*setups(runner, budget), *adaptive)}  # the same pretraining runs
        twins = [Setup(OWN, f"untrained, {said}", untrained["untrained"].pretrain),
                 Setup(TEXT_OWN, f"untrained (tokenizer of SST-2's training text), {said}",
                       untrained["task-text-untrained"].pretrain)]
        measured[budget.pooling].update(measure(runner, budget, twins, ("sst2",), protocol=own))
    return {"protocol": chosen, "by_pooling": measured, "pooling": budget.pooling, "dev": dev, "run_seconds": runner.seconds}


def pretraining_runs(result: dict) -> list[dict]:
    """The pretrained encoders' runs, one per seed (the same under either pooling)."""
    return result["by_pooling"][result["pooling"]]["mlm"]["runs"]


def findings(result: dict, pooling: str, key: str = "mlm") -> dict:
    """The claim's two readings under one pooling, for one pretrained setup (`key`): the paired
    gap on SST-2, and RTE against its majority class."""
    setups = result["by_pooling"][pooling]
    mlm, untrained = setups[key]["scores"], setups["untrained"]["scores"]
    majority = result["dev"]["rte"]["majority"]
    f = finetune_seeds(result)
    return {"sst2": paired_gap(mlm["sst2"], untrained["sst2"], f), "rte": paired_gap(mlm["rte"], untrained["rte"], f),
            "rte_majority": paired_gap(mlm["rte"], [majority] * len(mlm["rte"]), f)}


def own_gap(result: dict) -> dict:
    """Pretrained (the budget's protocol) minus untrained at its own best protocol, on SST-2."""
    setups = result["by_pooling"][result["pooling"]]
    return paired_gap(setups["mlm"]["scores"]["sst2"], setups[OWN]["scores"]["sst2"], finetune_seeds(result))


def own_sentence(result: dict) -> str:
    """The main claim read once more, against the untrained encoder at its own best protocol."""
    setups = result["by_pooling"][result["pooling"]]
    if OWN not in setups:
        return "The untrained encoder's best protocol on the held-out sentences is the pretrained one's too."
    own = own_gap(result)
    return (f"The budget's protocol was chosen for the pretrained encoder on the held-out sentences; against the untrained "
            f"encoder fine-tuned with its own best (the row \"{setups[OWN]['label']}\"), pretrained minus untrained is "
            f"{describe_gap(own)} ({against_aim(own)}).")


def task_text_gaps(result: dict) -> dict:
    """Task-adaptive pretraining's paired gaps on SST-2: each length against the untrained twin
    that shares its tokenizer ("S", "long"); at S against MLM on WikiText-2 (which corpus, at
    equal steps); the two untrained twins (which tokenizer); LONGER×S against WikiText-2's
    untrained encoder; and, when measured, LONGER×S against its twin at the untrained encoder's
    best protocol ("long_own")."""
    setups, f = result["by_pooling"][result["pooling"]], finetune_seeds(result)
    if "task-text" not in setups:
        return {}
    sst2 = {key: setup["scores"]["sst2"] for key, setup in setups.items()}
    return {"S": paired_gap(sst2["task-text"], sst2["task-text-untrained"], f),
            "long": paired_gap(sst2["task-text-long"], sst2["task-text-untrained"], f),
            "corpus": paired_gap(sst2["task-text"], sst2["mlm"], f),
            "twins": paired_gap(sst2["task-text-untrained"], sst2["untrained"], f),
            "long_wikitext": paired_gap(sst2["task-text-long"], sst2["untrained"], f),
            **({"long_own": paired_gap(sst2["task-text-long"], sst2[TEXT_OWN], f)} if TEXT_OWN in sst2 else {})}


def against_aim(gap: dict) -> str:
    """The verdict on "pretrained beats untrained", and whether a reproduced gap reached the aim."""
    said = verdict(gap)
    return f"{said}, below the {100 * AIM:.0f}-point aim" if said == "reproduced" and gap["mean"] < AIM else said


def claims(result: dict) -> list[tuple[str, str, str]]:
    """(claim, verdict, the numbers that decide it) for the summary at the top of the document."""
    found = findings(result, result["pooling"])
    rows = [(f"a pretrained encoder beats the same shape untrained on SST-2 (aim: ≥ {100 * AIM:.0f} points)",
             against_aim(found["sst2"]), f"pretrained − untrained {describe_gap(found['sst2'])}"),
            ("a pretrained encoder scores above RTE's majority class", verdict(found["rte_majority"]),
             f"pretrained − majority {describe_gap(found['rte_majority'])}")]
    if OWN in result["by_pooling"][result["pooling"]]:
        own = own_gap(result)
        rows.append(("the same, against the untrained encoder at its own best fine-tuning protocol", against_aim(own),
                     f"pretrained − untrained {describe_gap(own)}"))
    if "mlm-long" in result["by_pooling"][result["pooling"]]:
        long = findings(result, result["pooling"], "mlm-long")
        rows += [(f"the same with {LONGER}× the pretraining ({LONGER}S steps): SST-2 above untrained", against_aim(long["sst2"]),
                  f"pretrained − untrained {describe_gap(long['sst2'])}"),
                 (f"the same with {LONGER}× the pretraining: RTE above its majority class", verdict(long["rte_majority"]),
                  f"pretrained − majority {describe_gap(long['rte_majority'])}")]
    adaptive = task_text_gaps(result)
    for name, gap in (("S", adaptive.get("S")), (f"{LONGER}S", adaptive.get("long"))):
        if gap:
            rows.append((f"pretrained on SST-2's own training text ({name} steps, labels dropped) beats its untrained twin "
                         f"on SST-2 (aim: ≥ {100 * AIM:.0f} points)", against_aim(gap), f"pretrained − untrained {describe_gap(gap)}"))
    if "long_own" in adaptive:
        rows.append((f"the same at {LONGER}S, against the twin at the untrained encoder's best fine-tuning protocol",
                     against_aim(adaptive["long_own"]), f"pretrained − untrained {describe_gap(adaptive['long_own'])}"))
    return rows


def plot(result: dict, plots: Path) -> None:
    """Held-out MLM accuracy against wall-clock time, one line per seed, with the two
    context-free baselines a model must beat."""
    import matplotlib.pyplot as plt

    fig, axis = plt.subplots(figsize=(6.4, 4.2))
    runs = pretraining_runs(result)
    setups = result["by_pooling"][result["pooling"]]
    for key, name, style in (("mlm", "S steps", "-"), ("mlm-long", f"{LONGER}S steps", ":")):
        for run in setups[key]["runs"] if key in setups else []:
            points = [(e["elapsed_s"] / 60, e["eval_mlm_accuracy"]) for e in run["evals"] if "eval_mlm_accuracy" in e]
            axis.plot(*zip(*points), marker="o", linestyle=style, label=f"MLM {name}, pretraining seed {run['seed']}")
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


def protocol_lines(result: dict, budget_lr: float, budget_steps: int) -> list[str]:
    """The protocol table, and whether the budget's protocol is within one standard error of the
    pretrained encoder's best (closer than that, the held-out sentences cannot rank them)."""
    rows, examples = result["protocol"]["rows"], result["protocol"]["examples"]
    lines = ["| peak lr | steps | pretrained: held-out acc. (last train loss) | untrained: held-out acc. (last train loss) "
             "| pretrained − untrained |", "|---:|---:|---:|---:|---:|"]
    for row in rows:
        cells = [f"{row[key]['accuracy']:.3f} ({row[key]['train_loss']:.2f})" for key in ("mlm", "untrained")]
        gap = 100 * (row["mlm"]["accuracy"] - row["untrained"]["accuracy"])
        lines.append(f"| {row['lr']:g} | {row['steps']} | {cells[0]} | {cells[1]} | {gap:+.1f} points |")
    best = max(rows, key=lambda row: row["mlm"]["accuracy"])
    noise = standard_error(best["mlm"]["accuracy"], examples)
    ours = next((row for row in rows if math.isclose(row["lr"], budget_lr) and row["steps"] == budget_steps), None)
    chosen = ours is not None and ours["mlm"]["accuracy"] >= best["mlm"]["accuracy"] - noise
    choice = (f"The report fine-tunes SST-2 at lr {budget_lr:g} for {budget_steps} steps, within one standard error "
              f"({100 * noise:.1f} points on {examples:,} sentences) of the pretrained encoder's best protocol here"
              if chosen else
              f"The pretrained encoder's best protocol here is lr {best['lr']:g} for {best['steps']} steps, more than one "
              f"standard error ({100 * noise:.1f} points) above the budget's lr {budget_lr:g} for {budget_steps} steps: "
              "change `Budget` and re-run")
    shortest = min(rows, key=lambda row: (row["steps"], row["lr"]))
    loss = {key: shortest[key]["train_loss"] for key in ("mlm", "untrained")}
    gaps = {name: 100 * (row["mlm"]["accuracy"] - row["untrained"]["accuracy"]) for name, row in (("short", shortest), ("best", best))}
    return ["**The fine-tuning protocol, chosen before dev was read.** The first pretraining seed's encoders, "
            "fine-tuned with every fine-tuning seed on the SST-2 subsample and scored on held-out *training* sentences "
            "that share no four words in a row with it (10 words or more, like dev's whole sentences; SST-2's training "
            "phrases are cut from the same reviews, and a held-out set that kept the overlapping ones scored 5–6 points "
            "above dev); means over the fine-tuning seeds:", "",
            *lines, "",
            f"{choice}. At lr {shortest['lr']:g} for {shortest['steps']} steps the last train loss is {loss['mlm']:.2f} "
            f"for the pretrained encoder and {loss['untrained']:.2f} for the untrained one"
            + (" (the pretrained one is further from fitting the subsample)" if round(loss["mlm"], 2) > round(loss["untrained"], 2) else "")
            + f"; pretrained minus untrained is {gaps['short']:+.1f} points there and {gaps['best']:+.1f} at the "
            "pretrained encoder's best protocol.", ""]


def longer_note(result: dict) -> list[str]:
    """What LONGER× the pretraining changes: held-out MLM accuracy, and the two claims again."""
    setups = result["by_pooling"][result["pooling"]]
    if "mlm-long" not in setups:
        return []
    long = findings(result, result["pooling"], "mlm-long")
    against_s = paired_gap(setups["mlm-long"]["scores"]["sst2"], setups["mlm"]["scores"]["sst2"], finetune_seeds(result))
    accuracy = {key: statistics.median(r["final_eval"]["eval_mlm_accuracy"] for r in setups[key]["runs"])
                for key in ("mlm", "mlm-long")}
    minutes = statistics.median(r["seconds"] for r in setups["mlm-long"]["runs"]) / 60
    return [f"**{LONGER}× the pretraining.** {minutes:.0f} minutes per run raise held-out MLM accuracy from "
            f"{accuracy['mlm']:.3f} to {accuracy['mlm-long']:.3f}. On SST-2, pretrained minus untrained is then "
            f"{describe_gap(long['sst2'])} ({verdict(long['sst2'])}), and {LONGER}S minus S steps is "
            f"{describe_gap(against_s)}. On RTE, pretrained minus the majority class is "
            f"{describe_gap(long['rte_majority'])} ({verdict(long['rte_majority'])}).", ""]


def task_text_note(result: dict) -> list[str]:
    """Task-adaptive pretraining: what MLM on SST-2's own training text gives, beside WikiText-2."""
    gaps = task_text_gaps(result)
    if not gaps:
        return []
    return [f"**Pretraining on the task's own text.** Task-adaptive pretraining (Gururangan et al., 2020) runs the same "
            "MLM on SST-2's training sentences with their labels dropped (dev is never read), with its own tokenizer and "
            f"an untrained twin that shares it. Pretrained minus that twin on SST-2: {describe_gap(gaps['S'])} at S steps "
            f"({against_aim(gaps['S'])}) and {describe_gap(gaps['long'])} at {LONGER}S ({against_aim(gaps['long'])}). "
            f"At S steps, SST-2's text minus WikiText-2 as the corpus: {describe_gap(gaps['corpus'])} "
            f"({verdict(gaps['corpus'])}); the two untrained twins, which differ only in their tokenizer, differ by "
            f"{describe_gap(gaps['twins'])}, so against the untrained encoder with WikiText-2's tokenizer, {LONGER}S steps "
            f"on SST-2's text gain {describe_gap(gaps['long_wikitext'])} ({against_aim(gaps['long_wikitext'])})."
            + (f" Against its twin fine-tuned with the untrained encoder's best protocol: {describe_gap(gaps['long_own'])} "
               f"({against_aim(gaps['long_own'])})." if "long_own" in gaps else "")
            + " Its held-out MLM accuracy is measured on SST-2's text (whose held-out phrases share words with the "
            "training ones), not comparable with WikiText-2's.", ""]


def render(result: dict, plots: Path) -> str:
    plot(result, plots)
    dev, pooling = result["dev"], result["pooling"]
    other = next(p for p in result["by_pooling"] if p != pooling)
    found, cls_found = findings(result, pooling), findings(result, other)
    rte_dev = dev["rte"]
    budget = result["budget"]
    lines = [*protocol_lines(result, budget["sst2_lr"], budget["sst2_steps"]),
             "| encoder | classifier reads | held-out MLM acc. (median) | pretraining time (median) | SST-2 dev acc. | RTE dev acc. |",
             "|---|---|---:|---:|---:|---:|"]
    for name, setups in result["by_pooling"].items():
        for key, setup in setups.items():
            trained = "untrained" not in key
            mlm = statistics.median(r["final_eval"]["eval_mlm_accuracy"] for r in setup["runs"]) if trained else None
            seconds = statistics.median(r["seconds"] for r in setup["runs"])
            shown = f"{mlm:.3f} | {seconds:.0f} s" if trained else "– | –"
            rte = describe_spread(setup["scores"]["rte"]) if "rte" in setup["scores"] else "–"
            lines.append(f"| {setup['label']} | {READS[name]} | {shown} | {describe_spread(setup['scores']['sst2'])} | {rte} |")
    se = {task: 100 * standard_error(0.5, dev[task]["examples"]) for task in ("sst2", "rte")}
    by = result["by_pooling"]
    switch = {key: paired_gap(by[pooling][key]["scores"]["sst2"], by[other][key]["scores"]["sst2"], finetune_seeds(result))
              for key in ("mlm", "untrained")}
    lines += [
        "",
        "Scores are the median (and range) over every pretraining seed × fine-tuning seed; the rows share both seeds "
        "pair by pair.",
        "",
        f"![held-out MLM accuracy over time]({plots.name}/mlm_over_time.png)",
        "",
        f"**Claim: a pretrained encoder beats the same shape untrained on SST-2 — {against_aim(found['sst2'])} at this "
        f"scale** (classifier on the {READS[pooling]}). Pretrained minus untrained: {describe_gap(found['sst2'])}; the "
        f"aim was at least +{100 * AIM:.0f} points. {own_sentence(result)} Beside the seeds, the dev set itself samples: "
        f"one standard error is {se['sst2']:.1f} points on its {dev['sst2']['examples']} sentences.",
        "",
        f"**Claim: pretrained RTE above its majority class ({rte_dev['majority']:.3f}, always "
        f"{rte_dev['majority_label']!r}) — {verdict(found['rte_majority'])} at this scale.** Pretrained minus "
        f"majority: {describe_gap(found['rte_majority'])}; pretrained minus untrained: {describe_gap(found['rte'])}. "
        f"One standard error on its {rte_dev['examples']} pairs is {se['rte']:.1f} points.",
        "",
        *context_note(result, found["sst2"]),
        "",
        *longer_note(result),
        *task_text_note(result),
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
