"""AdamW with BERT's exclusions, and the learning-rate schedule.

Weight decay pulls weights towards zero, which regularises matrices; but biases and
LayerNorm gains only shift and scale, and decaying them just fights the normalisation.
They are exactly the 1-D parameters, so they form the no-decay group.

The schedule is BERT's: a linear warm-up from 0 to the peak (Adam's moment estimates are
noisy in the first steps, and big early updates can wreck post-LN training), then a linear
decay to 0 at the last step — or at the deadline of a --budget run. It is a pure function of
the step (or of the training time spent), so resuming only needs that number.

Both take plain numbers, so this module sits below the loop that calls them (loop.py) and
knows nothing of a run's settings.
"""

from __future__ import annotations

import torch
from torch import nn


def build_optimizer(model: nn.Module, *, lr: float, weight_decay: float) -> torch.optim.AdamW:
    """AdamW at peak `lr`, decaying the matrices by `weight_decay` and nothing else."""
    trainable = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in trainable if p.ndim >= 2], "weight_decay": weight_decay},
        {"params": [p for p in trainable if p.ndim < 2], "weight_decay": 0.0},  # biases, LayerNorm
    ]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.999), eps=1e-6)


def learning_rate(done: float, total: float, *, peak: float, warmup: float) -> float:
    """The `peak` lr scaled by warm-up and then linear decay to 0 at `total`.

    `done` and `total` count optimizer steps, or seconds under --budget (the schedule is
    then stretched to end at the deadline, as the academic-budget BERT recipe does). The
    warm-up covers the first `warmup` share of `total`; its first unit already gets 1/W of
    the peak, so no step is wasted at lr 0.
    """
    warmup_units = round(warmup * total)
    if done < warmup_units:
        return peak * min(1.0, (done + 1) / warmup_units)
    return peak * max(0.0, (total - done) / max(1, total - warmup_units))
