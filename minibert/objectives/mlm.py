"""Masked language modeling (BERT): recover the tokens that the masking hid.

A share of the tokens of a batch (`--mask-prob`: BERT's 15%, 40% in the default runs) is
selected by the data pipeline; their original ids are the `labels` (-100 elsewhere) and the
model sees [MASK], a random token or the token itself there. The loss is the cross-entropy
of the model's guess at the selected positions only: `MaskedLM.masked_lm_loss`, the same
function `MaskedLM.forward(labels=...)` calls. This objective exists beside that method
because `python train.py` runs one encoder pass for all objectives (`Pretrainer`), whose
output it reads here instead of calling the model again.

The MLM head belongs to the kept model (`MaskedLM.head`), not to this objective: it is the
part of pretraining that `from_pretrained(head="mlm")` loads again afterwards.
"""

from __future__ import annotations

import torch
from torch import nn

from ..data.masking import IGNORE_INDEX


def mlm_metrics(loss: torch.Tensor, logits: torch.Tensor, targets: torch.Tensor) -> dict[str, torch.Tensor]:
    """`mlm_loss` and `mlm_accuracy` (share of selected tokens guessed exactly)."""
    correct = (logits.argmax(-1) == targets).float()
    accuracy = correct.mean() if targets.numel() else correct.sum()
    return {"mlm_loss": loss.detach(), "mlm_accuracy": accuracy.detach()}


class MaskedLanguageModeling(nn.Module):
    """loss = weight · CE(model's prediction, original token) over the selected tokens."""

    reads_output = True  # uses the kept model's pass over the batch

    def __init__(self, weight: float = 1.0):
        super().__init__()
        self.weight = weight

    def needed_positions(self, batch):
        return batch["labels"] != IGNORE_INDEX  # the labelled positions

    def forward(self, model, batch, output):
        loss, logits, targets = model.masked_lm_loss(output.needed_hidden_state, batch["labels"])
        return self.weight * loss, mlm_metrics(loss, logits, targets)
