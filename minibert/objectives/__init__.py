"""The chapter's pretraining objectives, one idea per file, each an `Objective` (below): a small module called as

    loss, metrics = objective(model, batch, output)

    mlm.py          masked language modeling: the kept model's masked-LM loss on the shared pass
    sentence.py     NSP (BERT) and SOP (ALBERT): one 2-way head on [CLS]
    rtd.py          replaced token detection (ELECTRA): generator, sampling, corrupted batch
    kd.py           distillation from a teacher (DistilBERT): soft targets + MLM + hidden-state cosine

The training loop composes them: its `Pretrainer` (training/loop.py) is the kept model and its
objectives, summed over one encoder pass.

Fine-tuning has its own distillation loss, Hinton et al.'s soft targets from a fine-tuned
teacher (`train.py finetune --teacher`): minibert/finetune/soft_targets.py.

The heads of the models pretraining keeps, and their losses (the masked-LM loss, ELECTRA's
detection loss), are in minibert/heads.py: a loop of your own reaches the same code through
`minibert.MaskedLM` and `minibert.ReplacedTokenDetector`. Import the objectives from their
modules (`from minibert.objectives.mlm import ...`).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch


@runtime_checkable
class Objective(Protocol):
    """What `Pretrainer` (training/loop.py) asks of an objective. Each is an `nn.Module`, so that
    its own parts (a head, ELECTRA's generator, DistilBERT's teacher) move, train and save with
    the model; objectives do not subclass this: they have its members."""

    shares_pass: bool
    """True: the loss reads the kept model's encoder pass over the batch, which `Pretrainer`
    runs once for all the objectives that share it and passes as `output`. False: the objective
    runs what it needs itself (ELECTRA's discriminator reads the corrupted batch, not this one)
    and is called with `output=None`."""

    reads_pooler: bool
    """True: the loss reads the pooled [CLS] vector (NSP, SOP). A pooler that no objective reads
    gets no gradient, which distributed training must be told."""

    def needed_positions(self, batch: dict[str, torch.Tensor]) -> torch.Tensor | None:
        """The positions of `output` the loss reads, [B, T] bool, or None for every position.
        Asked only when `shares_pass`; the encoder's last layer computes the union of the
        sharing objectives' positions only, so a position no one asks for is not exact there."""

    def __call__(self, model, batch: dict[str, torch.Tensor], output) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """(loss, metrics) for the kept `model` on `batch`: the loss already weighted (the
        objective holds its weights), summed with the others' into the step's loss; metrics
        are detached scalars, logged under their own names (mlm_loss, rtd_auc, ...). As an
        `nn.Module`, the objective implements this as `forward`."""
