"""The sentence-pair tasks: NSP (BERT) and SOP (ALBERT), one 2-way classifier on [CLS].

* NSP — next sentence prediction: is segment B the text that really followed A, or a
  segment from another document? RoBERTa found that dropping it does not hurt; ALBERT
  argued it is too easy, because "another document" usually means "another topic".
* SOP — sentence order prediction: A and B are always two consecutive segments of one
  document, swapped half of the time. Topic gives nothing away; only coherence does.

Both are the same code: the data layout decides what `sentence_label` means.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import nn

from ..config import ModelConfig
from ..heads import SentencePairHead, cls_position, pooled_or_first
from ..model import init_weights


class SentencePairTask(nn.Module):
    """loss = weight · CE(2-way logits from the pooled [CLS] vector, sentence_label)."""

    reads_output = True

    def __init__(self, config: ModelConfig, name: str = "nsp", weight: float = 1.0):
        super().__init__()
        self.name = name  # "nsp" or "sop": only the metric names differ
        self.weight = weight
        self.head = SentencePairHead(config)
        init_weights(self.head, config)

    def needed_positions(self, batch):
        return cls_position(batch["input_ids"])  # the pooled [CLS] vector, or the first token's state

    def forward(self, model, batch, output):
        if "sentence_label" not in batch:
            raise ValueError(f"the {self.name.upper()} objective needs batches with a sentence_label; use the {self.name} example layout")
        logits = self.head(pooled_or_first(output))  # [B, H] -> [B, 2]
        labels = batch["sentence_label"]
        loss = F.cross_entropy(logits.float(), labels)
        accuracy = (logits.argmax(-1) == labels).float().mean()
        return self.weight * loss, {f"{self.name}_loss": loss.detach(), f"{self.name}_accuracy": accuracy.detach()}
