"""Masked language modeling (BERT §3.1): recover the tokens that the masking hid.

The data pipeline selects a share of each batch's tokens (`--mask-prob`: BERT's 15%; each
default run's in variants.py) and shows the model [MASK], a random token or the token itself
there (data/masking.py); their original ids are the `labels` (-100 elsewhere). The loss is the
cross-entropy of the model's guess at those positions only.

    MaskedLanguageModeling   the pretraining objective: reads the encoder pass it shares with
                             NSP/SOP (training/loop.py's Pretrainer) and takes the kept model's
                             masked-LM loss there (`MaskedLM.masked_lm_loss`)
    mlm_metrics              what a run logs of it: mlm_loss and mlm_accuracy

The head and its loss belong to the kept model, not to the objective (heads.py: `MaskedLMHead`,
the decoder tied to the word embeddings, and `MaskedLMHead.loss`, the decoder at the masked
positions only, fused with its softmax in `LinearCrossEntropy`): they are the part of
pretraining that `from_pretrained(head="mlm")` loads again, and the loss a loop of your own
gets from `MaskedLM(...)(ids, labels=labels)`.
"""

from __future__ import annotations

import torch
from torch import nn

from ..data.masking import IGNORE_INDEX


def mlm_metrics(loss: torch.Tensor, logits: torch.Tensor, targets: torch.Tensor) -> dict[str, torch.Tensor]:
    """`mlm_loss` and `mlm_accuracy` (share of masked tokens guessed exactly)."""
    accuracy = (logits.argmax(-1) == targets).float().sum() / max(1, len(targets))  # 0 when nothing was masked
    return {"mlm_loss": loss.detach(), "mlm_accuracy": accuracy.detach()}


class MaskedLanguageModeling(nn.Module):
    """An `Objective`: loss = weight · CE(the model's prediction, the original token) over the masked tokens."""

    shares_pass = True  # uses the kept model's pass over the batch
    reads_pooler = False

    def __init__(self, weight: float):
        super().__init__()
        self.weight = weight

    def needed_positions(self, batch):
        return batch["labels"] != IGNORE_INDEX  # the masked positions

    def forward(self, model, batch, output):
        loss, logits, targets = model.masked_lm_loss(output.last_hidden_state, batch["labels"])  # logits [masked, V]
        return self.weight * loss, mlm_metrics(loss, logits, targets)
