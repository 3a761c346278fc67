"""What the sections measure beside the runs: parameter counts, latency, the machine, the
dev sets' sizes and majority classes, and the statistics that say what a gap means."""

from __future__ import annotations

import math
import os
import platform
import statistics
import time
from collections import Counter
from pathlib import Path

import torch

from minibert import Encoder, ModelConfig
from minibert.finetune.kinds.sentence_files import read_task

from .budget import REPO
from .recipes import need


def count_parameters(config: ModelConfig) -> int:
    """Parameters of the backbone, counted on the meta device (no memory, no time)."""
    with torch.device("meta"):
        return sum(p.numel() for p in Encoder(config).parameters())


def interleaved_latency(models: dict[str, torch.nn.Module], inputs: dict, repeats: int) -> dict[str, float]:
    """Median seconds per forward of each model, timed in alternating order so that the
    other load on the machine hits every model alike. Two untimed calls warm each up."""
    times: dict[str, list[float]] = {name: [] for name in models}
    order = list(models)
    with torch.inference_mode():
        for name in order:
            for _ in range(2):
                models[name](**inputs)
        for i in range(repeats):
            for name in (order if i % 2 == 0 else order[::-1]):
                start = time.perf_counter()
                models[name](**inputs)
                times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def random_inputs(batch: int, length: int, vocab: int, seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (batch, length), generator=g)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def machine() -> dict:
    """What the numbers were measured on, read from the machine itself."""
    cpu = platform.processor() or "unknown CPU"
    if Path("/proc/cpuinfo").is_file():
        names = [line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                 if line.startswith("model name")]
        cpu = names[0] if names else cpu
    return {"cpu": cpu, "cores": os.cpu_count(), "arch": platform.machine(), "torch": torch.__version__,
            "load_average": os.getloadavg()[0]}


def describe_machine(m: dict) -> str:
    return (f"{m['cpu']} ({m['cores']} cores, {m['arch']}), torch {m['torch']}, "
            f"load average {m['load_average']:.1f} when the section started")


def labelled_set(path: Path) -> dict:
    """A labelled task file: its size and its majority class (the score of always answering it)."""
    labels = read_task(REPO / path).labels
    label, count = Counter(labels).most_common(1)[0]
    return {"examples": len(labels), "majority_label": label, "majority": count / len(labels)}


def dev_set(task: Path) -> dict:
    """A task's dev set, as `labelled_set`."""
    need(task / "dev.tsv", task.name)
    return labelled_set(task / "dev.tsv")


def standard_error(accuracy: float, examples: int) -> float:
    """The sampling error of an accuracy measured on `examples` items (binomial)."""
    return math.sqrt(accuracy * (1 - accuracy) / examples)


def gap_noise(examples: int) -> float:
    """Two standard errors of a difference of two accuracies near 50% on `examples` items:
    a gap smaller than this is noise."""
    return 2 * math.sqrt(2) * standard_error(0.5, examples)


def unigram_entropy(counts: Counter) -> float:
    """The MLM loss (nats) of a model that ignores the context and predicts token frequencies."""
    total = sum(counts.values())
    return -sum(n / total * math.log(n / total) for n in counts.values())


def binary_entropy(p: float) -> float:
    """The RTD loss (nats) of a discriminator that ignores the context: always the base rate p."""
    return -p * math.log(p) - (1 - p) * math.log(1 - p)


def held_out(final_eval: dict, names: tuple[str, ...], labelled: bool = True) -> str:
    """Some held-out metrics of a run's last evaluation: 'name value, ...' (values only when
    not `labelled`), or '–' when the run evaluated none of them."""
    shown = [(f"{name.replace('_', ' ')} " if labelled else "") + f"{final_eval['eval_' + name]:.3f}"
             for name in names if "eval_" + name in final_eval]
    return ", ".join(shown) or "–"


# Two-sided 95% quantiles of Student's t by degrees of freedom (beyond 30: the normal's 1.96).
T_975 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26, 10: 2.23, 12: 2.18,
         15: 2.13, 20: 2.09, 25: 2.06, 30: 2.04}


def t_975(df: int) -> float:
    return T_975[max(k for k in T_975 if k <= df)] if df <= 30 else 1.96


def finetune_seeds(result: dict) -> int:
    """How many fine-tunings of each pretrained model a section's score lists hold in a row."""
    return len(result["budget"]["finetune_seeds"])


def spread(scores: list[float]) -> dict:
    """Median and range of one setup's scores over its seeds (how the cramming paper reports GLUE)."""
    return {"median": statistics.median(scores), "min": min(scores), "max": max(scores), "n": len(scores)}


def paired_gap(a: list[float], b: list[float], per_seed: int = 1) -> dict:
    """A against B where the i-th scores share their seeds (same pretraining and fine-tuning
    seed, so the same data order, head initialisation and masks): the mean of the paired
    differences with a 95% t-interval, and how many pairs favour A. The gap "exceeds the
    noise" when the interval excludes zero (`verdict`).

    `per_seed` = F when the lists hold F fine-tunings of each pretrained model in a row
    (`recipes.measure`'s order). Fine-tunings of one pretrained model are not independent
    draws of what pretraining does, so the unit is then the pretraining seed: each seed's F
    differences are averaged first, and the interval has (number of pretraining seeds − 1)
    degrees of freedom — wider than treating all pairs as independent, and honest about it."""
    if len(a) != len(b) or len(a) < 2 * per_seed or len(a) % per_seed:
        raise ValueError(f"a paired comparison needs two equal lists of at least 2 × {per_seed} scores, "
                         f"a multiple of {per_seed}; got {len(a)} and {len(b)}")
    pairs = [x - y for x, y in zip(a, b)]
    gaps = [statistics.fmean(pairs[i:i + per_seed]) for i in range(0, len(pairs), per_seed)]
    mean, n = statistics.fmean(gaps), len(gaps)
    half = t_975(n - 1) * statistics.stdev(gaps) / math.sqrt(n)
    return {"mean": mean, "low": mean - half, "high": mean + half, "n": n, "ahead": sum(g > 0 for g in gaps),
            "behind": sum(g < 0 for g in gaps), "unit": "pretraining seeds" if per_seed > 1 else "pairs"}


def verdict(gap: dict, level: float = 0.0) -> str:
    """A claim "A beats B" read from paired_gap(A, B): reproduced when the interval lies above
    zero, not reproduced when it lies below (B is ahead beyond the noise), else inconclusive.
    `level`: the claim is "A − B is at least `level`" instead (a margin, e.g. a modest cost)."""
    return "reproduced" if gap["low"] > level else "not reproduced" if gap["high"] < level else "inconclusive"


def describe_gap(gap: dict) -> str:
    """'+1.2 points (95% interval -0.3 to +2.7; 2 of 3 pretraining seeds ahead)'."""
    return (f"{100 * gap['mean']:+.1f} points (95% interval {100 * gap['low']:+.1f} to {100 * gap['high']:+.1f}; "
            f"{gap['ahead']} of {gap['n']} {gap.get('unit', 'pairs')} ahead)")


def describe_spread(scores: list[float]) -> str:
    """'0.712 (0.690–0.731)': median and range over the seeds."""
    s = spread(scores)
    return f"{s['median']:.3f} ({s['min']:.3f}–{s['max']:.3f})"


def save_plot(fig, axis, path: Path, xlabel: str, ylabel: str, title: str) -> None:
    """Label a line plot with a legend, write it as PNG and free it (the sections' plots)."""
    import matplotlib.pyplot as plt

    axis.set_xlabel(xlabel)
    axis.set_ylabel(ylabel)
    axis.set_title(title)
    axis.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
