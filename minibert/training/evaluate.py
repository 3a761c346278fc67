"""Held-out evaluation: the model's mean metrics on batches it never trains on.

The loop (loop.py) evaluates at step 0 (where learning starts from), every --eval-every
steps and at the end; each evaluation is a line above the progress bar and `eval_*` fields in
metrics.jsonl.
"""

from __future__ import annotations

import itertools
from contextlib import AbstractContextManager

import torch

EVAL_SEED = 0  # evaluation's own random draws (ELECTRA's samples), and the held-out split's (corpus/pipeline.py)


@torch.no_grad()
def evaluate(module, batches, count: int, device: torch.device, autocast: AbstractContextManager) -> dict[str, float]:
    """Mean metrics over the first `count` held-out batches, as `eval_*`, each forward pass under `autocast`.

    The same batches every time, and random draws (ELECTRA's samples) from a generator
    seeded for evaluation alone (EVAL_SEED, not the run's --seed), so numbers are comparable
    across steps and across runs, and evaluation does not change the run's own random stream.
    """
    module.eval()
    sums: dict[str, float] = {}
    seen = 0
    with torch.random.fork_rng(devices=[device.index] if device.type == "cuda" else []):
        torch.manual_seed(EVAL_SEED)
        for batch in itertools.islice(batches, count):
            batch = {name: tensor.to(device) for name, tensor in batch.items()}
            with autocast:
                loss, metrics = module(batch)
            for name, value in {"loss": loss, **metrics}.items():
                sums[name] = sums.get(name, 0.0) + float(value)
            seen += 1
    module.train()
    return {f"eval_{name}": value / seen for name, value in sums.items()}
