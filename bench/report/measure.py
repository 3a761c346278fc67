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
from minibert.data.tasks import read_task

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


def dev_set(task: Path) -> dict:
    """A task's dev set: its size and its majority class (the score of always answering it)."""
    need(task / "dev.tsv", task.name)
    labels = read_task(REPO / task / "dev.tsv").labels
    label, count = Counter(labels).most_common(1)[0]
    return {"examples": len(labels), "majority_label": label, "majority": count / len(labels)}


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
