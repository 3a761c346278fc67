"""A fine-tuned classifier as its family's own transformers class, where one computes it exactly.

minibert's sequence classifier is one Linear on the first token's vector: through the pooler,
tanh(dense(x)), where the model has one, the vector itself where it has none
(heads.SequenceClassifier). transformers' classes put other heads on the first token:

    Bert-, AlbertForSequenceClassification       the pooler, then a Linear: ours as it is
    RobertaForSequenceClassification             dense, tanh, out_proj: ours, our pooler as its dense
    Electra-, DistilBert-, RoFormerFor...        dense, an activation, out_proj: ours without a pooler

The last row holds a plain Linear exactly because each activation these heads apply (GELU, its
tanh approximation, ReLU, SiLU) is z·s(z) with s(z) + s(−z) = 1, so act(z) − act(−z) = z: the
dense layer computes each label's w·x and −w·x, and out_proj subtracts the two (2 × num_labels
rows of the hidden size). A *ForTokenClassification is a Linear on every token in every family,
and so is a *ForQuestionAnswering (`qa_outputs`, its two outputs the start and end logits, as
heads.SpanExtractor's): ours as they are. What fits none of them (mean pooling, a pooler where
the family's head has another activation) is exported as custom code (custom_code.py).
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from .family import TOKEN_HEADS, Family


class TwoLayerHead(nn.Module):
    """transformers' dense, activation, out_proj on the first token (RoBERTa's, ELECTRA's,
    DistilBERT's, RoFormer's sequence classifier), as export writes it."""

    def __init__(self, dense: nn.Linear, activation, out_proj: nn.Linear):
        super().__init__()
        self.dense, self.activation, self.out_proj = dense, activation, out_proj

    def forward(self, first: torch.Tensor) -> torch.Tensor:
        return self.out_proj(self.activation(self.dense(first)))


class InFamilyLayout(nn.Module):
    """A fine-tuned model with its head as a family's task class holds it: the same encoder
    module, the head rewritten (what export's tensor tables name, not a model to train)."""

    def __init__(self, model: nn.Module, head: nn.Module):
        super().__init__()
        self.config, self.encoder, self.head, self.num_labels = model.config, model.encoder, head, model.num_labels


def misfit(model: nn.Module, family: Family | None, head: str) -> str | None:
    """Why no built-in class computes the fine-tuned `model` (holding `head`) exactly; None where
    `family`'s does. `family`: the first whose checkpoints hold its config with that head, or
    else its encoder alone (None: not even that)."""
    if getattr(model, "pooling", "cls") != "cls":
        return f"{model.pooling} pooling (--pooling {model.pooling}) fits none, as all read the first token"
    if family is None:
        return "no built-in family holds its encoder exactly"
    if head in TOKEN_HEADS:
        return None
    reason = family.mismatch(model.config, head)  # a pooler where the family's head has none, or the reverse
    wanted, rows = 2 * model.num_labels, model.config.hidden_size
    if reason is None and not family.sequence_head.needs_pooler and wanted > rows:
        reason = f"{family.architectures[head]} holds {model.num_labels} labels as {wanted} rows of its dense layer, which has {rows}"
    return reason


def in_family_layout(model: nn.Module, family: Family, head: str) -> nn.Module:
    """`model` as `family`'s task class computes it: itself where that is a Linear on the pooled
    vector or on every token (tags, an answer's start and end), else with a TwoLayerHead
    computing the same logits."""
    sequence = family.sequence_head
    if head in TOKEN_HEADS or sequence.activation is None:
        return model
    classifier = model.head.classifier
    if sequence.activation == "tanh":  # our pooler is its dense layer (the encoder keeps its own)
        return InFamilyLayout(model, TwoLayerHead(copy.deepcopy(model.encoder.pooler), sequence.dense_activation(model.config),
                                                  copy.deepcopy(classifier)))
    labels, rows = model.num_labels, model.config.hidden_size
    weight, eye, unused = classifier.weight.detach(), torch.eye(labels), rows - 2 * labels
    dense, out_proj = nn.Linear(rows, rows), nn.Linear(rows, labels)
    with torch.no_grad():
        dense.weight.copy_(torch.cat([weight, -weight, weight.new_zeros(unused, rows)]))  # w·x and −w·x
        dense.bias.zero_()
        out_proj.weight.copy_(torch.cat([eye, -eye, eye.new_zeros(labels, unused)], dim=1))
        out_proj.bias.copy_(classifier.bias)  # act(w·x) − act(−w·x) + b = w·x + b
    return InFamilyLayout(model, TwoLayerHead(dense, sequence.dense_activation(model.config), out_proj))


def label_fields(model: nn.Module, labels: list | None) -> dict:
    """config.json's keys for a fine-tuned model's outputs, as transformers' pipelines read them:
    id2label and label2id (LABEL_0 for a regression's one score), and problem_type "regression"."""
    names = labels if labels is not None else [f"LABEL_{i}" for i in range(model.num_labels)]
    fields = {"id2label": {str(i): str(name) for i, name in enumerate(names)},
              "label2id": {str(name): i for i, name in enumerate(names)}}
    return {**fields, "problem_type": "regression"} if model.num_labels == 1 else fields
