"""Section 2 — latency: DistilBERT against BERT-base (tight latency)."""

from __future__ import annotations

from pathlib import Path

import torch

from minibert import Encoder, ModelConfig

from .budget import Budget
from .measure import count_parameters, interleaved_latency, random_inputs

NAME = "latency"
TITLE = "2. Latency: DistilBERT against BERT-base (tight latency)"
TASKS = ()
MODELS = ("bert-base", "distilbert-base")
THREADS = (1, 2)
BATCHES = (1, 8)  # paired with Budget.latency_repeats
LENGTH, VOCAB = 128, 30522
PAPER_SECONDS = (668, 410)  # DistilBERT paper: a pass over STS-B on CPU at batch 1, BERT-base vs DistilBERT


def plan(budget: Budget) -> str:
    return (f"{' / '.join(map(str, budget.latency_repeats))} timed forward passes per model at batch "
            f"{' / '.join(map(str, BATCHES))}, with {' and '.join(map(str, THREADS))} threads; weights and inputs from seed 0.")


def compute(budget: Budget, runs: Path, jobs: int = 1) -> dict:
    torch.manual_seed(0)
    models = {name: Encoder(ModelConfig.preset(name, hidden_dropout=0.0, attention_dropout=0.0)).eval() for name in MODELS}
    rows = []
    for threads in THREADS:
        torch.set_num_threads(threads)
        for batch, repeats in zip(BATCHES, budget.latency_repeats):
            median = interleaved_latency(models, random_inputs(batch, LENGTH, VOCAB), repeats)
            rows.append({"threads": threads, "batch": batch, "repeats": repeats, **{name: median[name] for name in MODELS}})
    bert = models["bert-base"]
    return {
        "parameters": {name: count_parameters(models[name].config) for name in MODELS},
        "layers": {name: models[name].config.num_layers for name in MODELS},
        "embedding_parameters": sum(p.numel() for p in bert.embeddings.parameters()),
        "rows": rows, "length": LENGTH, "attention": bert.config.attention_backend,
    }


def render(result: dict, plots: Path) -> str:
    p, layers = result["parameters"], result["layers"]
    size = p["distilbert-base"] / p["bert-base"]
    speedups = [r["bert-base"] / r["distilbert-base"] for r in result["rows"]]
    bert, student = layers["bert-base"], layers["distilbert-base"]
    paper = PAPER_SECONDS[0] / PAPER_SECONDS[1]
    lines = [
        f"Random weights, eval mode, `torch.inference_mode()`, length {result['length']}, no padding, "
        f"attention backend `{result['attention']}`. The two models are timed in alternating order (warm-up 2 calls "
        "each); the table gives the median. Other jobs may share the machine (see the load average below), so the "
        "absolute times are noisy; the alternating order protects the ratio.", "",
        "| threads | batch | timed calls each | bert-base (ms) | distilbert-base (ms) | speed-up | DistilBERT is faster by |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["rows"]:
        speedup = r["bert-base"] / r["distilbert-base"]
        lines.append(f"| {r['threads']} | {r['batch']} | {r['repeats']} | {r['bert-base'] * 1e3:.0f} | {r['distilbert-base'] * 1e3:.0f} "
                     f"| {speedup:.2f}× | {speedup - 1:.0%} |")
    lines += [
        "", "| | bert-base | distilbert-base | ratio | claim |", "|---|---:|---:|---:|---|",
        f"| parameters | {p['bert-base']:,} | {p['distilbert-base']:,} | {size:.1%} ({1 - size:.0%} smaller) | 40% smaller |",
        "", f"**Reading.** Size: half the layers go but the embeddings ({result['embedding_parameters'] / 1e6:.1f}M of "
        f"BERT-base's {p['bert-base'] / 1e6:.1f}M) stay, so {student} of {bert} layers is {1 - size:.0%} smaller, not "
        f"{1 - student / bert:.0%} — the claim holds by construction. Speed: the embeddings cost almost no compute, so "
        f"{student} of {bert} layers should run close to {bert / student:.0f}× as fast; the encoder alone measured "
        f"{min(speedups):.2f}× to {max(speedups):.2f}× here. The paper's \"60% faster\" ({PAPER_SECONDS[0]} s against "
        f"{PAPER_SECONDS[1]} s, {paper:.2f}×) timed a full pass over STS-B on CPU at batch size 1, a whole-pipeline "
        "number that includes work the layer count does not shrink.",
    ]
    return "\n".join(lines)
