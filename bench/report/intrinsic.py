"""Section 7 — each family's own evidence, where this machine can resolve it.

Sections 3–5 fine-tune on SST-2 and RTE, where minutes of pretraining barely register. The
papers argued their families with intrinsic evidence too, measured on held-out pretraining
tasks, and that evidence does resolve at this scale:

* RoBERTa ("training methodology can matter as much as architecture"): the same encoder
  trained with the papers' classic recipe (`variants.CLASSIC`) and with this project's, and
  with BERT's data recipe (static masks, NSP pairs) against RoBERTa's (dynamic masks, full
  sentences): held-out MLM accuracy at equal steps, and SST-2.
* ALBERT: (a) its table 5: models pretrained with no sentence task, NSP and SOP, each
  scored on held-out NSP pairs AND SOP pairs (`pair_tasks`); (b) the cost of sharing:
  factorized embeddings + one shared layer against the unshared encoder of the same shape.
* ELECTRA: its own diagnostic "ELECTRA 15%" (section 3.4): the same model with the
  discriminator's loss on the masked positions only, against full RTD — is learning from
  every token what makes it efficient? Both are scored where both were trained: replacement
  detection at the masked positions (`rtd_masked_auc`).

Every row is S steps of train.py's recipe for its variant; SST-2 rows are fine-tuned once
per pretraining seed (`FINETUNE_SEEDS`), the gaps paired by pretraining seed.
"""

from __future__ import annotations

import statistics
from functools import partial
from pathlib import Path

from minibert import ModelConfig
from minibert.variants import CLASSIC

from .budget import SST2, Budget
from .measure import count_parameters, describe_gap, describe_spread, dev_set, paired_gap, standard_error, verdict
from .pair_tasks import PROBE_PAIRS, pair_scores
from .recipes import finetune, mlm_run, pretrain_args
from .runner import Runner
from .transfer import setups as transfer_setups

NAME = "intrinsic"
TITLE = "7. Each family's own evidence: held-out pretraining tasks"
TASKS = ("SST-2",)
FINETUNE_SEEDS = 1  # SST-2 cannot tell these encoders apart at this scale (sections 3–5): one fine-tuning each
MODEST = 0.10  # ALBERT's "modest cost": it keeps at least 90% of the unshared model's held-out MLM accuracy
ALBERT_E = 64  # the albert variant's embedding_size (E)
ALBERT_SHAPE = ("--embedding-size", str(ALBERT_E), "--share-layers", "all")  # its E and its sharing
LABELS = {
    "mlm": "RoBERTa's data recipe (dynamic masks, full sentences), this project's training recipe",
    "untrained": "untrained",
    "classic": f"the same with the classic recipe (`{CLASSIC}`)",
    "bert-data": "BERT's data recipe (static masks, 10 copies; NSP pairs)",
    "nsp": "dynamic masks, NSP",
    "sop": "dynamic masks, SOP",
    "shared": f"ALBERT's shape: factorized embeddings (E={ALBERT_E}) + one layer shared by both depths",
    "electra": "ELECTRA: RTD on every token",
    "electra-masked": "ELECTRA 15%: RTD on the masked positions only",
}
SST2_ROWS = ("mlm", "untrained", "classic", "bert-data", "shared", "electra", "electra-masked")
ELECTRA_ROWS = ("electra", "electra-masked")
# The MLM rows take two pretraining seeds beyond the budget's: with three, Student's t (4.30 at
# two degrees of freedom) left the sharing, data-recipe and NSP/SOP intervals straddling their
# thresholds at gaps every seed agreed on. ELECTRA's rows, the costliest, keep the budget's.
EXTRA_SEEDS = 2
PAIR_ROWS = ("untrained", "mlm", "nsp", "sop")


def seeds(budget: Budget, key: str) -> tuple[int, ...]:
    """The pretraining seeds of one row: the budget's for ELECTRA's, EXTRA_SEEDS more for the others."""
    first = budget.pretrain_seeds
    return first if key in ELECTRA_ROWS else (*first, *range(max(first) + 1, max(first) + 1 + EXTRA_SEEDS))


def plan(budget: Budget) -> str:
    mlm = seeds(budget, "mlm")
    return (f"Every row pretrains for S steps at train.py's recipe for its variant (ELECTRA: `--variant electra`, "
            f"its discriminator the model above); the untrained row is section 3's. The MLM rows run pretraining "
            f"seeds {', '.join(map(str, mlm))}: {EXTRA_SEEDS} beyond the budget's, added after the budget's seeds left "
            "intervals straddling their thresholds at gaps every seed agreed on; the ELECTRA rows, the costliest, run "
            "the budget's. Pair tasks: each model's own "
            f"NSP/SOP head, and a logistic-regression probe on its frozen features trained on {PROBE_PAIRS:,} "
            "training-split pairs, scored on the same held-out NSP and SOP pairs (`bench/report/pair_tasks.py`).")


def runs_of(runner: Runner, budget: Budget) -> dict:
    """Each row's pretraining as a function of the seed."""
    S = budget.steps
    mlm = partial(mlm_run, runner, budget, S)
    pretrained, untrained = transfer_setups(runner, budget)

    def electra(name: str, *extra: str):
        return lambda seed: runner.pretrain(f"{name}-{S}-seed{seed}", pretrain_args(
            budget, runner.runs, "electra", S, *budget.model, *extra, seed=seed))

    return {
        "mlm": pretrained.pretrain,
        "untrained": untrained.pretrain,
        "classic": lambda seed: mlm(seed, "full_sentences", "dynamic", *CLASSIC.split(), name=f"classic-{S}"),
        "bert-data": lambda seed: mlm(seed, "nsp", "static", name=f"bert-data-{S}"),
        "nsp": lambda seed: mlm(seed, "nsp", name=f"nsp-{S}"),
        "sop": lambda seed: mlm(seed, "sop", name=f"sop-{S}"),
        "shared": lambda seed: mlm(seed, "full_sentences", "dynamic", *ALBERT_SHAPE, name=f"shared-{S}"),
        "electra": electra("electra"),
        "electra-masked": electra("electra-masked", "--rtd-tokens", "masked"),
    }


def compute(budget: Budget, runs: Path, jobs: int = 1) -> dict:
    runner = Runner(runs, jobs)
    pretrain = runs_of(runner, budget)
    everything = sorted({seed for key in pretrain for seed in seeds(budget, key)})
    keys = [(key, seed) for seed in everything for key in pretrain if seed in seeds(budget, key)]  # seed by seed
    done = dict(zip(keys, runner.parallel([partial(pretrain[key], seed) for key, seed in keys])))
    (first,) = budget.finetune_seeds[:FINETUNE_SEEDS]  # the rows below hold one SST-2 score per pretraining seed
    tuned_keys = [k for k in keys if k[0] in SST2_ROWS]
    tuned = runner.parallel([partial(finetune, runner, budget, "sst2", Path(done[k]["out"]).name, done[k], first, budget.pooling)
                             for k in tuned_keys])
    sst2 = dict(zip(tuned_keys, tuned))
    setups = {}
    for key in pretrain:
        rows = []
        for seed in seeds(budget, key):
            run = done[key, seed]
            row = {"seed": seed, **{k: run[k] for k in ("command", "out", "seconds", "final_eval", "evals", "config")},
                   "parameters": count_parameters(ModelConfig.from_dict(run["config"]))}
            if (key, seed) in sst2:
                row["sst2"] = {"accuracy": sst2[key, seed]["accuracy"], "command": sst2[key, seed]["command"]}
            if key in PAIR_ROWS:
                row["pairs"] = pair_scores(budget, runs, run["out"])
            rows.append(row)
        setups[key] = {"label": LABELS[key], "runs": rows}
    return {"setups": setups, "dev_examples": dev_set(SST2)["examples"], "run_seconds": runner.seconds}


# --- readings --------------------------------------------------------------------------------

def values(result: dict, key: str, read) -> list[float]:
    return [read(run) for run in result["setups"][key]["runs"]]


def mlm_accuracy(run: dict) -> float:
    return run["final_eval"]["eval_mlm_accuracy"]


def accuracy_within(run: dict, seconds: float) -> float:
    """The held-out MLM accuracy of the last evaluation `run` had reached within `seconds` of
    training: an equal-time reading that never credits a run with time it did not have."""
    reached = [e for e in run["evals"] if e.get("elapsed_s", 0) <= seconds]
    return reached[-1]["eval_mlm_accuracy"] if reached else 0.0


def equal_time(result: dict, a: str, b: str) -> dict:
    """A against B, A read at the training time B took (B's last evaluation), seed by seed."""
    rows = zip(result["setups"][a]["runs"], result["setups"][b]["runs"])
    pairs = [(accuracy_within(x, y["evals"][-1]["elapsed_s"]), mlm_accuracy(y)) for x, y in rows]
    return by_seed([x for x, _ in pairs], [y for _, y in pairs])


def by_seed(a: list[float], b: list[float]) -> dict:
    """paired_gap over one reading per pretraining seed (each pair shares its seed)."""
    return {**paired_gap(a, b), "unit": "pretraining seeds"}


def gap(result: dict, a: str, b: str, read) -> dict:
    return by_seed(values(result, a, read), values(result, b, read))


def against(result: dict, key: str, read, level: float) -> dict:
    """A setup's reading against a fixed level (chance), per pretraining seed."""
    return by_seed(values(result, key, read), [level] * len(result["setups"][key]["runs"]))


def head_on(task: str):
    return lambda run: run["pairs"]["head"][task]


def probe_on(task: str):
    return lambda run: run["pairs"]["probe"][task]


def masked_auc(run: dict) -> float:
    return run["final_eval"]["eval_rtd_masked_auc"]


def sst2(run: dict) -> float:
    return run["sst2"]["accuracy"]


def sharing(result: dict) -> dict:
    """ALBERT's shape against the unshared one: the parameter ratio, the MLM gap and its margin."""
    unshared = statistics.fmean(values(result, "mlm", mlm_accuracy))
    parameters = {k: result["setups"][k]["runs"][0]["parameters"] for k in ("mlm", "shared")}
    reading = gap(result, "shared", "mlm", mlm_accuracy)
    config = ModelConfig.from_dict(result["setups"]["mlm"]["runs"][0]["config"])
    factorized = count_parameters(config.replace(embedding_size=ALBERT_E))
    return {"ratio": parameters["shared"] / parameters["mlm"], "parameters": parameters, "gap": reading,
            "factorization": parameters["mlm"] - factorized, "sharing": factorized - parameters["shared"],
            "margin": -MODEST * unshared, "verdict": verdict(reading, -MODEST * unshared)}


def readings(result: dict) -> dict:
    """Every paired reading the claims and the text are made of, computed once."""
    return {
        "recipe": gap(result, "mlm", "classic", mlm_accuracy),
        "data": gap(result, "mlm", "bert-data", mlm_accuracy),
        "carries": against(result, "sop", head_on("nsp"), 0.5),
        "stays": against(result, "nsp", head_on("sop"), 0.5),
        "asymmetry": by_seed(values(result, "sop", head_on("nsp")), values(result, "nsp", head_on("sop"))),
        "sharing": sharing(result),
        "every": gap(result, "electra", "electra-masked", masked_auc),
        "every_sst2": gap(result, "electra", "electra-masked", sst2),
    }


def claims(result: dict) -> list[tuple[str, str, str]]:
    r = readings(result)
    shared = r["sharing"]
    return [
        ("RoBERTa: a better training recipe on the same encoder beats the classic one (held-out MLM accuracy, equal steps)",
         verdict(r["recipe"]), f"this project's − classic {describe_gap(r['recipe'])}"),
        ("RoBERTa: its data recipe (dynamic masks, full sentences) beats BERT's (static masks, NSP pairs) (held-out MLM accuracy, equal steps)",
         verdict(r["data"]), f"RoBERTa's − BERT's {describe_gap(r['data'])}"),
        ("ALBERT: SOP training carries over to NSP (the SOP head on held-out NSP pairs, above chance)",
         verdict(r["carries"]), f"accuracy − 50% {describe_gap(r['carries'])}"),
        ("ALBERT: NSP training does not carry over to SOP as SOP's carries over to NSP",
         verdict(r["asymmetry"]), f"SOP head on NSP pairs − NSP head on SOP pairs {describe_gap(r['asymmetry'])}"),
        (f"ALBERT: far fewer parameters at a modest cost (keeps ≥ {1 - MODEST:.0%} of the unshared model's held-out MLM accuracy)",
         shared["verdict"], f"{shared['ratio']:.0%} of the parameters; shared − unshared {describe_gap(shared['gap'])}, "
         f"the margin {100 * shared['margin']:.1f}"),
        ("ELECTRA: learning from every token beats learning from the masked ones (\"ELECTRA 15%\"; detection AUC at the masked positions, equal steps)",
         verdict(r["every"]), f"every token − masked only {describe_gap(r['every'])}"),
        ("ELECTRA: the same, on SST-2 (the paper's kind of measure; one fine-tuning per pretraining seed)",
         verdict(r["every_sst2"]), f"every token − masked only {describe_gap(r['every_sst2'])}"),
    ]


# --- the document ------------------------------------------------------------------------------

def median(result: dict, key: str, read) -> float:
    return statistics.median(values(result, key, read))


def spread_of(result: dict, key: str, read) -> str:
    return describe_spread(values(result, key, read))


def render(result: dict, plots: Path) -> str:
    setups = result["setups"]
    seconds = {k: statistics.median(r["seconds"] for r in s["runs"]) for k, s in setups.items()}
    lines = ["**MLM rows** (held-out MLM accuracy at BERT's 15% masking; median (range) over the pretraining seeds):", "",
             "| pretraining | encoder parameters | time (median) | held-out MLM acc. | SST-2 dev acc. |",
             "|---|---:|---:|---:|---:|"]
    for key in ("mlm", "classic", "bert-data", "nsp", "sop", "shared", "untrained"):
        setup, untrained = setups[key], key == "untrained"
        lines.append(f"| {setup['label']} | {setup['runs'][0]['parameters']:,} | {'–' if untrained else f'{seconds[key]:.0f} s'} | "
                     f"{'–' if untrained else spread_of(result, key, mlm_accuracy)} | "
                     f"{spread_of(result, key, sst2) if key in SST2_ROWS else '–'} |")
    r = readings(result)
    recipe, data, shared = r["recipe"], r["data"], r["sharing"]
    recipe_sst2, data_sst2 = gap(result, "mlm", "classic", sst2), gap(result, "mlm", "bert-data", sst2)
    lines += ["", f"**Claim: training methodology matters (RoBERTa) — {verdict(recipe)} for the training recipe, "
                  f"{verdict(data)} for the data recipe, on held-out MLM accuracy.** This project's recipe minus the classic "
                  f"one on the same encoder, at equal steps: {describe_gap(recipe)}; at equal training time (this project's "
                  f"run read at its last evaluation within the classic run's time): "
                  f"{describe_gap(equal_time(result, 'mlm', 'classic'))}; on SST-2 {describe_gap(recipe_sst2)}. RoBERTa's "
                  f"data recipe minus BERT's at equal steps: {describe_gap(data)}; at equal time "
                  f"{describe_gap(equal_time(result, 'mlm', 'bert-data'))}; on SST-2 {describe_gap(data_sst2)}. Medians of "
                  f"the runs' wall time: {seconds['mlm']:.0f} s, {seconds['classic']:.0f} s and {seconds['bert-data']:.0f} s "
                  "(one thread each, two runs at a time)"
                  + (": 40% masking runs the vocabulary projection at more positions than the classic 15%."
                     if seconds["mlm"] > seconds["classic"] else ".") + " Between the two data recipes sits NSP pairs with dynamic masks: of the "
                  f"{100 * data['mean']:.1f} points, the NSP layout (shorter segments, half of them paired with another "
                  f"document) accounts for {describe_gap(gap(result, 'mlm', 'nsp', mlm_accuracy))} and the static masks "
                  f"for {describe_gap(gap(result, 'nsp', 'bert-data', mlm_accuracy))}."]
    lines += ["", f"**Claim: the cost of sharing (ALBERT) — {shared['verdict']}.** ALBERT's shape keeps "
                  f"{shared['parameters']['shared']:,} of the unshared encoder's {shared['parameters']['mlm']:,} parameters "
                  f"({shared['ratio']:.0%}; at BERT-base's shape section 1 counts 11%); sharing saves parameters, not compute: "
                  "each depth still runs its layer. "
                  f"Shared minus unshared, held-out MLM accuracy: {describe_gap(shared['gap'])}; the claim's margin "
                  f"({MODEST:.0%} of the unshared model's accuracy) is {100 * shared['margin']:.1f} points. On SST-2: "
                  f"{describe_gap(gap(result, 'shared', 'mlm', sst2))}. Of the parameters saved, the factorized embedding "
                  f"table saves {shared['factorization']:,} and sharing (one layer for two depths) {shared['sharing']:,}."]
    lines += ["", *pair_table(result, r)]
    lines += ["", *electra_table(result, r)]
    lines += ["", *commands(result)]
    return "\n".join(lines)


def pair_table(result: dict, r: dict) -> list[str]:
    setups = result["setups"]
    pairs = setups["sop"]["runs"][0]["pairs"]["pairs"]
    lines = [f"**ALBERT's table 5, at this scale**: accuracy on {pairs['nsp']:,} held-out NSP pairs and {pairs['sop']:,} held-out "
             "SOP pairs (half of each are negatives; median (range) over the pretraining seeds). ALBERT-base's numbers, "
             "for comparison: none 54.9 / 52.4, NSP 90.5 / 52.0, SOP 78.9 / 86.5.", "",
             "| pretraining | own head on NSP pairs | own head on SOP pairs | probe on NSP pairs | probe on SOP pairs |",
             "|---|---:|---:|---:|---:|"]
    for key in PAIR_ROWS:
        has_head = bool(setups[key]["runs"][0]["pairs"]["head"])
        heads = [spread_of(result, key, head_on(t)) if has_head else "–" for t in ("nsp", "sop")]
        lines.append(f"| {setups[key]['label']} | {' | '.join(heads)} | "
                     f"{spread_of(result, key, probe_on('nsp'))} | {spread_of(result, key, probe_on('sop'))} |")
    carries, stays, asymmetry = r["carries"], r["stays"], r["asymmetry"]
    probe_sop = gap(result, "sop", "nsp", probe_on("sop"))
    return lines + ["", f"**Claim: SOP carries over to NSP, NSP does not carry over to SOP (ALBERT) — {verdict(carries)} "
                        f"that SOP carries over, {verdict(asymmetry)} that the two differ.** The SOP head on NSP pairs, minus "
                        f"chance: {describe_gap(carries)}. The NSP head on SOP pairs, minus chance: {describe_gap(stays)}. "
                        f"The difference: {describe_gap(asymmetry)}. What the features hold, read by the probe: the SOP "
                        f"model's minus the NSP model's on SOP pairs {describe_gap(probe_sop)}; the untrained encoder's "
                        "probe shows what the pairs give away with no pretraining at all (NSP's topic change shows in the "
                        "words alone)."]


def electra_table(result: dict, r: dict) -> list[str]:
    setups = result["setups"]
    steps = [e["step"] for e in setups["electra"]["runs"][0]["evals"]]
    lines = ["**ELECTRA 15% against ELECTRA** (medians over the pretraining seeds at each held-out evaluation; "
             "AUC = the chance that a replaced token scores above an original one, 0.5 = no skill):", "",
             "| step | " + " | ".join(f"{k}: {m}" for k in ("ELECTRA", "ELECTRA 15%")
                                       for m in ("AUC, every token", "AUC, masked positions", "generator acc.")) + " |",
             "|---:|" + "---:|" * 6]
    for i, step in enumerate(steps):
        cells = [statistics.median(run["evals"][i][f"eval_{m}"] for run in setups[k]["runs"])
                 for k in ("electra", "electra-masked") for m in ("rtd_auc", "rtd_masked_auc", "mlm_accuracy")]
        lines.append(f"| {step} | " + " | ".join(f"{c:.3f}" for c in cells) + " |")
    every, on_sst2 = r["every"], r["every_sst2"]
    overall = gap(result, "electra", "electra-masked", lambda run: run["final_eval"]["eval_rtd_auc"])
    seconds = {k: statistics.median(r["seconds"] for r in setups[k]["runs"]) for k in ("electra", "electra-masked")}
    electra_seeds = {run["seed"] for run in setups["electra"]["runs"]}
    untrained_sst2 = [sst2(run) for run in setups["untrained"]["runs"] if run["seed"] in electra_seeds]
    return lines + ["", f"**Claim: every token contributes (ELECTRA) — {verdict(every)} on the pretraining task, "
                        f"{verdict(on_sst2)} on SST-2.** Every token minus masked only, detection AUC at the masked "
                        f"positions (where both were trained): {describe_gap(every)}; over every token: "
                        f"{describe_gap(overall)} (ELECTRA 15% never learns the unmasked positions). On SST-2, the paper's "
                        f"kind of measure: {describe_gap(on_sst2)}, with one fine-tuning per pretraining seed (one standard "
                        f"error of a single accuracy on SST-2's {result['dev_examples']} dev sentences is "
                        f"{100 * standard_error(0.5, result['dev_examples']):.1f} points): ELECTRA "
                        f"{spread_of(result, 'electra', sst2)}, ELECTRA 15% {spread_of(result, 'electra-masked', sst2)}, "
                        f"the untrained encoder {describe_spread(untrained_sst2)} at the same seeds — at this scale "
                        "pretraining does not carry over to SST-2 (section 3), so read the gap beside the untrained encoder's "
                        "score. Same steps, same generator, same "
                        f"masking; {seconds['electra']:.0f} s and {seconds['electra-masked']:.0f} s (median). The paper's "
                        "own diagnostic: GLUE 85.0 against 82.4 for ELECTRA 15%."]


def commands(result: dict) -> list[str]:
    shown = []
    for setup in result["setups"].values():
        run = setup["runs"][0]
        shown += [run["command"], *([run["sst2"]["command"]] if "sst2" in run else [])]
    return ["Commands at the first seed (the others change `--seed` and the folder names):", "", "```",
            *dict.fromkeys(shown), "```"]
