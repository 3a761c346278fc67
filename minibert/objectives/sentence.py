"""The sentence-pair tasks: NSP (BERT) and SOP (ALBERT), one 2-way classifier on [CLS].

* NSP — next sentence prediction: is segment B the text that really followed A, or a
  segment from another document? RoBERTa found that dropping it does not hurt; ALBERT
  argued it is too easy, because "another document" usually means "another topic".
* SOP — sentence order prediction: A and B are always two consecutive segments of one
  document, swapped half of the time. Topic gives nothing away; only coherence does.

Both are the same code. A variant names "nsp" or "sop" among its objectives, and the
examples are cut to match (variants.example_layout, data/examples.py): that decides what
`sentence_label` means (1 = B is not A's continuation, or the two are swapped).
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import nn

from ..config import ModelConfig
from ..model import first_position_mask, init_weights

SENTENCE_TASKS = ("nsp", "sop")


class SentencePairHead(nn.Module):
    """Two classes from the pooled [CLS] vector (or the first token's state without a pooler)."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.classifier = nn.Linear(config.hidden_size, 2)

    def forward(self, pooled):
        return self.classifier(pooled)  # [B, H] -> [B, 2]


class SentencePairTask(nn.Module):
    """An `Objective`: loss = weight · CE(2-way logits from the pooled [CLS] vector, sentence_label)."""

    shares_pass = True
    reads_pooler = True  # the pooled [CLS] vector

    def __init__(self, config: ModelConfig, name: str, weight: float):
        super().__init__()
        if name not in SENTENCE_TASKS:
            raise ValueError(f"a sentence-pair task is one of {', '.join(SENTENCE_TASKS)}; got {name!r}")
        self.name = name  # "nsp" or "sop": only the metric names differ
        self.weight = weight
        self.head = SentencePairHead(config)
        init_weights(self.head, config)

    def needed_positions(self, batch):
        return first_position_mask(batch["input_ids"])  # the pooled [CLS] vector, or the first token's state

    def forward(self, model, batch, output):
        logits = self.head(output.sentence_vector())  # [B, H] -> [B, 2]
        labels = batch["sentence_label"]
        loss = F.cross_entropy(logits.float(), labels)
        accuracy = (logits.argmax(-1) == labels).float().mean()
        return self.weight * loss, {f"{self.name}_loss": loss.detach(), f"{self.name}_accuracy": accuracy.detach()}
