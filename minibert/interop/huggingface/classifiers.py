"""A Hugging Face *ForSequenceClassification folder computed by minibert: the teacher of a sentence task.

Fine-tuning's --teacher (finetune/teacher.py) takes a classifier another library fine-tuned, of the
five families or RoFormer, and reads it through this package's translation (pretrained.py's
`Translation.read_classifier`): our Encoder from the family's tables, then the family's head as
export knows it (family.py:SequenceHead): BERT and ALBERT put one linear layer on the pooler;
RoBERTa, ELECTRA, DistilBERT and RoFormer a dense layer, an activation (tanh, GELU, ReLU, the
encoder's own), then the output layer on the first token.
"""

from __future__ import annotations

from pathlib import Path

from torch import nn

from ...heads import ClassifierOutput
from ...model import Encoder
from ...operations.tensor_files import open_tensors
from ...pretrained import FOREIGN, TRANSLATIONS, build_and_load
from .families import FAMILIES


class ReferenceClassifier(nn.Module):
    """A Hugging Face sequence classifier computed by minibert: our Encoder, then the family's head."""

    def __init__(self, encoder: Encoder, head: nn.Sequential, reads_pooler: bool):
        super().__init__()
        self.encoder, self.head, self.config = encoder, head, encoder.config
        self.reads_pooler = reads_pooler
        self.num_labels = head[-1].out_features

    def forward(self, input_ids, attention_mask=None, token_type_ids=None) -> ClassifierOutput:
        out = self.encoder(input_ids, attention_mask, token_type_ids)
        first = out.pooler_output if self.reads_pooler else out.last_hidden_state[:, 0]  # [B, H]
        return ClassifierOutput(out.last_hidden_state, out.pooler_output, logits=self.head(first))


def reference_classifier(directory: Path, stored: dict) -> tuple[ReferenceClassifier, list[str] | None]:
    """A Hugging Face *ForSequenceClassification checkpoint and its class names (id2label;
    None for one output, a regression)."""
    model_type = stored.get("model_type")
    if model_type not in FAMILIES:
        raise ValueError(f"--teacher {directory}: model_type {model_type!r} is none of {', '.join(FAMILIES)}; "
                         f"a teacher is a fine-tuned classifier of one of those families or of minibert")
    sequence = FAMILIES[model_type].sequence_head
    reads_pooler = sequence.activation is None  # the pooler, then `out`; else `dense`, the activation, `out`
    names = (sequence.out,) if reads_pooler else (sequence.dense, sequence.out)
    with open_tensors(directory) as tensors:
        if not all(f"{name}.weight" in tensors.names() for name in names):
            raise ValueError(f"--teacher {directory} has no sequence-classification head ({', '.join(names)}); "
                             f"fine-tune it first (train.py finetune --init {directory}) and pass that folder")
        plan = TRANSLATIONS[FOREIGN].read_plan(stored, None, tensors)  # this package's reference_plan, as registered
        if reads_pooler and not plan[0].pooler:
            raise ValueError(f"--teacher {directory}: its head reads the pooler, which the checkpoint lacks")
        encoder = build_and_load(Encoder, plan, tensors, names)
        modules = []
        for name in names:
            weight, bias = tensors.take(f"{name}.weight").float(), tensors.take(f"{name}.bias").float()
            linear = nn.Linear(weight.shape[1], weight.shape[0])
            linear.load_state_dict({"weight": weight, "bias": bias})
            modules.append(linear)
        if not reads_pooler:
            modules.insert(1, sequence.dense_activation(plan[0]))
    head = nn.Sequential(*modules)
    outputs = head[-1].out_features
    id2label = stored.get("id2label") or {}
    names = [str(id2label.get(str(i), id2label.get(i, f"LABEL_{i}"))) for i in range(outputs)]
    return ReferenceClassifier(encoder, head, reads_pooler).eval(), None if outputs == 1 else names
