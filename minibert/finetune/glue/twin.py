"""Pretrained against untrained (`--glue --against-untrained`): what pretraining gains on GLUE.

The untrained twin of a checkpoint has its architecture (config), its tokenizer and the
weights its pretraining run started from: the run seeds every generator with --seed and then
builds its model (runs/run.py), so building an Encoder of the same config right after
seeding with the same seed gives exactly those weights. It is built in memory; the
checkpoint's folder is only read. The seed is the one the run's run.json records (a second
phase's: the first phase's); a folder without one (a Hugging Face checkpoint) gets seed 0, and
the command says so.

The gains: for each fine-tuning seed, the pretrained model's score minus its twin's (the two
share the head's initialisation and the batch order), then their median and range; the two
averages likewise, seed by seed. With several checkpoints (several pretraining seeds) each
checkpoint's median gain is one sample, and the command gives their mean with a 95%
t-interval: mean ± t(0.975, n - 1) · s / √n, s the samples' standard deviation.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

from ...model import Encoder
from ...operations.outdir import RUN_FILE
from ...operations.state import seed_everything
from ...tokenizers.base import Tokenizer

# t(0.975, df) for df = 1..30 (two-sided 95%); beyond 30, the Cornish-Fisher expansion around the normal's 1.959964
T975 = (12.706205, 4.302653, 3.182446, 2.776445, 2.570582, 2.446912, 2.364624, 2.306004, 2.262157, 2.228139,
        2.200985, 2.178813, 2.160369, 2.144787, 2.131450, 2.119905, 2.109816, 2.100922, 2.093024, 2.085963,
        2.079614, 2.073873, 2.068658, 2.063899, 2.059539, 2.055529, 2.051831, 2.048407, 2.045230, 2.042272)
INTERVAL = "95% t-interval over the pretraining seeds: mean ± t(0.975, n-1)·s/√n of the checkpoints' median gains"


def init_seed(init: Path) -> tuple[int, str]:
    """The seed the pretraining run of `init` initialised its weights from, and the line that says where it comes from."""
    folder, seed, record, source = Path(init), None, {}, None
    for _ in range(8):  # a later phase names the first (--continue-from), whose run initialised the weights
        try:
            settings = json.loads((folder / RUN_FILE).read_text(encoding="utf-8")).get("settings", {})
        except (OSError, ValueError, AttributeError):
            break
        if "seed" in settings:
            seed, record, source = settings["seed"], settings, folder / RUN_FILE
        if not settings.get("continue_from"):
            break
        folder = Path(settings["continue_from"])
    if seed is None:
        return 0, (f"untrained twin of {init}: no {RUN_FILE} records the seed its weights were initialised from (a Hugging "
                   f"Face folder has none), so seed 0")
    started = record.get("init") or record.get("teacher")
    note = f"; that run started from {started}'s weights, the twin from the random ones of seed {seed}" if started else ""
    return int(seed), f"untrained twin of {init}: its config and tokenizer, the weights of seed {seed} ({source}){note}"


def untrained_twin(backbone: tuple[Encoder, Tokenizer], seed: int) -> tuple[Encoder, Tokenizer]:
    """The encoder a pretraining run of `backbone`'s config starts from with `seed`, and the same tokenizer."""
    encoder, tokenizer = backbone
    seed_everything(seed)  # as runs/run.py does right before it builds its model
    return Encoder(encoder.config).eval(), tokenizer


def spread(values: dict) -> dict:
    """{median, min, max, seeds: {seed: value}} of values keyed by seed."""
    return {"median": statistics.median(values.values()), "min": min(values.values()), "max": max(values.values()),
            "seeds": {str(seed): value for seed, value in values.items()}}


def gains(pretrained: dict, untrained: dict) -> dict:
    """Pretrained minus untrained for every task's metric and both averages, seed by seed: their spread.
    Both are one side's glue.json contents (`tasks`, `seed_averages`)."""
    tasks = {}
    for name, task in pretrained["tasks"].items():
        tasks[name] = {metric: spread({seed: value - untrained["tasks"][name]["metrics"][metric]["seeds"][seed]
                                       for seed, value in scores["seeds"].items()})
                       for metric, scores in task["metrics"].items()}
    averages = {key: spread({seed: value - untrained["seed_averages"][key][seed] for seed, value in per_seed.items()})
                for key, per_seed in pretrained["seed_averages"].items() if per_seed}
    return {"tasks": tasks, "averages": averages}


def t975(df: int) -> float:
    """The 97.5% quantile of Student's t with `df` degrees of freedom."""
    if df <= len(T975):
        return T975[df - 1]
    z = 1.959964
    return z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df ** 2)


def interval(samples: dict[str, float]) -> dict:
    """Mean and 95% t-interval of one sample per checkpoint (None bounds for a single sample)."""
    values = list(samples.values())
    mean = statistics.mean(values)
    half = t975(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else None
    return {"mean": mean, "low": None if half is None else mean - half, "high": None if half is None else mean + half,
            "n": len(values), "checkpoints": samples}


def across(per_checkpoint: dict[str, dict]) -> dict:
    """The gains over pretraining seeds: each checkpoint's median gain (`gains`' output per checkpoint) as one sample."""
    first = next(iter(per_checkpoint.values()))
    return {"tasks": {name: {metric: interval({c: g["tasks"][name][metric]["median"] for c, g in per_checkpoint.items()})
                             for metric in metrics} for name, metrics in first["tasks"].items()},
            "averages": {key: interval({c: g["averages"][key]["median"] for c, g in per_checkpoint.items()})
                         for key in first["averages"]},
            "interval": INTERVAL}


AVERAGE_NAMES = {"electra_dev": "ELECTRA's dev average", "glue_score": "GLUE score"}


def gains_table(per_checkpoint: dict[str, dict], over: dict | None) -> str:
    """Pretrained minus untrained in points: per checkpoint the median (min-max) over fine-tuning seeds;
    with several, their mean and 95% t-interval over the pretraining seeds."""
    names = list(per_checkpoint)
    first = per_checkpoint[names[0]]
    head = ["task", "metric", *names, *(["mean", "95% interval"] if over else [])]
    lines = ["pretrained - untrained, points: median (min-max) over the fine-tuning seeds of the per-seed gains"
             + (f"; {INTERVAL}" if over else ""), "| " + " | ".join(head) + " |", "|---|---|" + "---:|" * (len(head) - 2)]

    def row(label: str, metric: str, cell, scale: float, summary: dict | None) -> str:
        cells = [f"{scale * g['median']:+.1f} ({scale * g['min']:+.1f} to {scale * g['max']:+.1f})" for g in map(cell, names)]
        if summary is not None:
            bounds = "-" if summary["low"] is None else f"{scale * summary['low']:+.1f} to {scale * summary['high']:+.1f}"
            cells += [f"{scale * summary['mean']:+.1f}", bounds]
        return f"| {label} | {metric} | " + " | ".join(cells) + " |"

    for task, metrics in first["tasks"].items():
        for metric in metrics:
            lines.append(row(task, metric, lambda c: per_checkpoint[c]["tasks"][task][metric], 100,
                             over["tasks"][task][metric] if over else None))
    for key in first["averages"]:
        lines.append(row(AVERAGE_NAMES[key], "average", lambda c: per_checkpoint[c]["averages"][key], 1,
                         over["averages"][key] if over else None))
    return "\n".join(lines)
