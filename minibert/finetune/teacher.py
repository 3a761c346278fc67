"""The teacher of task distillation (`finetune --teacher DIR`): a model already fine-tuned on
the task, and its outputs on the rows the student trains on (soft_targets.py is the loss
that reads them).

A question-answering student's teacher (`load_span_teacher`) is minibert's own span extractor
with the student's tokenizer: its logits are per token, so they are computed on the student's
own windows, and cached the same way.

A teacher is minibert's own fine-tuned classifier (the output of `train.py finetune`) or a
Hugging Face `*ForSequenceClassification` folder of the five families or RoFormer. Its tokenizer
is its own: teacher and student need not share a vocabulary, since what passes between them
is one row of class logits per example, not anything per token. Those logits are computed
once, before training, and cached in the run's folder (TEACHER_FILE), so epochs do not pay
for the teacher again and a re-run with the same teacher and rows does not either.

The Hugging Face heads differ by family, as export knows them (interop/huggingface/family.py:
SequenceHead): BERT and ALBERT put one linear layer on the pooler; RoBERTa, ELECTRA, DistilBERT
and RoFormer a dense layer, an activation (tanh, GELU, ReLU, the encoder's own), then the output
layer on the first token. The encoder is minibert's own import (interop/huggingface/).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import NamedTuple

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file
from torch import nn

from ..operations.files import publish_file
from ..heads import ClassifierOutput, SpanExtractor
from ..model import Encoder
from ..interop.huggingface import reference_plan
from ..interop.huggingface.families import FAMILIES
from ..pretrained import FORMAT_KEY, build_and_load
from ..operations.tensor_files import CONFIG_FILE, SAFETENSORS_FILE, open_tensors, read_json
from ..tokenizers import load_tokenizer
from ..tokenizers.base import Tokenizer
from .checkpoint import is_classifier, load_classifier
from .tasks import LabelMap, TaskData

TEACHER_FILE = "teacher_logits.safetensors"


class Teacher(NamedTuple):
    model: nn.Module  # inputs -> ClassifierOutput with logits [B, C] (C = 1: a score)
    tokenizer: Tokenizer
    labels: list[str] | None  # class names in the teacher's output order; None for regression
    path: Path


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


def load_teacher(directory: str | Path) -> Teacher:
    """A fine-tuned model in either format, with its tokenizer and class names, in eval mode."""
    directory = Path(directory)
    if not (directory / CONFIG_FILE).is_file():
        raise FileNotFoundError(f"--teacher {directory} holds no {CONFIG_FILE}; pass a folder written by "
                                f"`train.py finetune` or a Hugging Face *ForSequenceClassification folder")
    stored = read_json(directory / CONFIG_FILE)
    if is_classifier(stored):
        model, tokenizer, labels = load_classifier(directory)
        if not hasattr(model, "pooling"):
            kind = "question-answering" if isinstance(model, SpanExtractor) else "tagging"
            raise ValueError(f"--teacher {directory} is a {kind} model; a sentence task's teacher classifies (or scores) "
                             f"whole examples")
        names = None if labels is None else [str(name) for name in labels.names]
    else:
        model, names = reference_classifier(directory, stored)
        tokenizer = load_tokenizer(directory)
    tokenizer.check_fits(model.config.vocab_size, f"--teacher {directory}")
    return Teacher(model.eval(), tokenizer, names, directory)


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
        plan = reference_plan(stored, None, tensors)
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


def label_order(teacher: Teacher, labels: LabelMap | None) -> list[int] | None:
    """Which teacher output answers each of the task's classes (None for regression); a
    teacher of another task is a one-line error. Hugging Face's default names LABEL_0 ...
    say nothing, so they are read by position, and only for classes named 0 ... C-1."""
    where = f"--teacher {teacher.path}"
    if labels is None or teacher.labels is None:
        if labels is not None or teacher.labels is not None:
            kinds = ("a regression (one score)", "a classifier")
            raise ValueError(f"{where} is {kinds[teacher.labels is not None]} but the task is "
                             f"{'regression' if labels is None else 'classification'}; distil from a teacher of this task")
        return None
    ours = [str(name) for name in labels.names]
    if teacher.labels == [f"LABEL_{i}" for i in range(len(teacher.labels))]:
        if ours != [str(i) for i in range(len(ours))] or len(ours) != len(teacher.labels):
            raise ValueError(f"{where} names its {len(teacher.labels)} classes only LABEL_0 ...; the task's are "
                             f"{', '.join(ours)}: set id2label in its config.json to the class names")
        return list(range(len(ours)))
    if sorted(teacher.labels) != sorted(ours):
        raise ValueError(f"{where} predicts the classes {', '.join(teacher.labels)} but the task has "
                         f"{', '.join(ours)}; distil from a teacher fine-tuned on this task")
    return [teacher.labels.index(name) for name in ours]


def cache_key(teacher: Path, *rows) -> str:
    """What the cached logits depend on: the teacher's files, and what the rows are (JSON:
    a sentence task's length and texts, a question's windows)."""
    digest = hashlib.sha256()
    for name in (CONFIG_FILE, SAFETENSORS_FILE):
        file = teacher / name
        stat = file.stat() if file.is_file() else None
        digest.update(json.dumps([str(teacher.resolve() / name), stat and (stat.st_size, stat.st_mtime_ns)]).encode())
    digest.update(json.dumps(list(rows)).encode())
    return digest.hexdigest()


def load_span_teacher(directory: str | Path, tokenizer: Tokenizer, probe: list[str]) -> Teacher:
    """A question-answering teacher: minibert's own span extractor (`train.py finetune` on SQuAD),
    in eval mode. Its start and end logits are one per token of a window, so they line up with
    the student's only on the same windows: its tokenizer must be the student's, the same pieces
    with the same ids, and split the `probe` texts (a few training questions and passages) alike."""
    directory = Path(directory)
    stored = read_json(directory / CONFIG_FILE) if (directory / CONFIG_FILE).is_file() else {}
    marker = stored.get(FORMAT_KEY) if is_classifier(stored) else None
    if not isinstance(marker, dict) or marker.get("head") != "span_extractor":
        raise ValueError(f"--teacher {directory} is no question-answering model; a question-answering student distils "
                         f"from `train.py finetune`'s output on SQuAD data (a span extractor) with the student's tokenizer")
    model, own, _ = load_classifier(directory)
    same = (type(own) is type(tokenizer) and own.vocab_size == tokenizer.vocab_size
            and all(own.piece(i) == tokenizer.piece(i) for i in range(own.vocab_size))
            and all(own.tokenize_to_ids(text) == tokenizer.tokenize_to_ids(text) for text in probe))
    if not same:
        raise ValueError(f"--teacher {directory} splits text with another tokenizer than the student's ({own.kind}, "
                         f"{own.vocab_size} tokens); its start and end logits are per token, so fine-tune the teacher "
                         f"from a checkpoint with the student's tokenizer")
    return Teacher(model.eval(), own, None, directory)


def read_cache(path: Path, key: str) -> torch.Tensor | None:
    """The logits cached under `key` at `path`, or None (absent, another key, or unreadable)."""
    if not path.is_file():
        return None
    try:
        with safe_open(str(path), framework="pt") as file:
            return file.get_tensor("logits") if (file.metadata() or {}).get("key") == key else None
    except (SafetensorError, OSError):  # a damaged cache is recomputed, never trusted
        return None


def write_cache(path: Path, key: str, logits: torch.Tensor) -> None:
    publish_file(lambda tmp: save_file({"logits": logits.contiguous()}, str(tmp), metadata={"key": key}), path)
