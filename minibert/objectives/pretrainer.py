"""The model a pretraining run trains: the kept model plus the objectives around it.

    total loss = Σ objective(model, batch, output)

Each objective is an `Objective` (objectives/__init__.py says what it has to offer).
`model` is the part that survives pretraining (a `MaskedLM`, or the discriminator
`ReplacedTokenDetector` for ELECTRA); objectives add what is thrown away afterwards (the
NSP/SOP head, ELECTRA's generator, DistilBERT's teacher). Objectives that read the kept
model's pass over the masked batch (MLM and SOP for ALBERT) share ONE encoder forward, and
its last layer runs only at the positions some objective reads. The loop only ever calls
`forward(batch)` and never knows which variant it runs.
"""

from __future__ import annotations

import functools

import torch
from torch import nn

from . import Objective


class Pretrainer(nn.Module):
    def __init__(self, model: nn.Module, objectives: dict[str, Objective]):
        super().__init__()
        if not objectives:
            raise ValueError("a pretraining run needs at least one objective")
        self.model = model
        self.objectives = nn.ModuleDict(objectives)
        self.readers = [objective for objective in objectives.values() if objective.reads_output]
        # a pooler that no objective reads gets no gradient: DDP must be told (operations/distributed.py)
        self.unused_parameters = model.encoder.pooler is not None and not any(o.reads_pooler for o in objectives.values())

    def forward(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        output = None
        if self.readers:  # one encoder pass, its last layer where any of them reads (None: everywhere)
            needed = [objective.needed_positions(batch) for objective in self.readers]  # each [B, T] bool, or None
            needed = None if any(n is None for n in needed) else functools.reduce(torch.logical_or, needed)
            output = self.model.encoder(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"], needed=needed)
        total, metrics = 0.0, {}
        for objective in self.objectives.values():
            loss, values = objective(self.model, batch, output)
            total = total + loss
            metrics.update(values)
        return total, metrics
