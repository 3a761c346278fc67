"""A fine-tuned model on disk: minibert's checkpoint format plus the head, its labels and how it reads.

The head is its kind's (kinds/: a `SequenceClassifier` for classes or one score, a
`TokenClassifier` for a tag per token, a `SpanExtractor` for an answer's start and end).

    config.json        the encoder's ModelConfig and a marker naming the head, its outputs, and what
                       its kind records of it (the pooling; how a question-answering model reads)
    model.safetensors  every parameter, under our names
    labels.json        the names of the outputs, in id order (classes and tags only)
    tokenizer          tokenizer.model (SentencePiece) or vocab.txt (WordPiece)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from ..operations.files import write_json
from ..operations.precision import Precision
from ..operations.tensor_files import CONFIG_FILE, SAFETENSORS_FILE, load_tensors, open_tensors, read_json, save_tensors
from ..pretrained import FORMAT_KEY, FORMAT_VERSION, stored_config
from ..tokenizers.base import Tokenizer
from ..tokenizers.load import load_tokenizer, tokenizer_file_names
from .kinds import KINDS, Kind, kind_of_head, kind_of_model
from .kinds.kind import DEFAULT_BATCH_SIZE
from .kinds.sentence_files import LabelMap

LABELS_FILE = "labels.json"
HEADS = {kind.head: kind.model_class for kind in KINDS.values()}  # the heads config.json may name, and their task models


@dataclass(frozen=True)
class Classifier:
    """A fine-tuned model: the task model, its tokenizer, the names of its outputs (None: a score,
    or an answer's start and end) and how it reads new data (its kind's; None for most). It
    unpacks and indexes as (model, tokenizer, labels)."""

    model: nn.Module
    tokenizer: Tokenizer
    labels: LabelMap | None
    reading: dict | None = None

    def __iter__(self):
        return iter(self[:])

    def __getitem__(self, index):
        return (self.model, self.tokenizer, self.labels)[index]

    @property
    def kind(self) -> Kind:
        return kind_of_model(self.model)

    def predict(self, rows: list, batch_size: int = DEFAULT_BATCH_SIZE, max_len: int | None = None, precision: str = "auto") -> list:
        """A `Prediction` (label, score) per text or (a, b) pair of `rows`; for a tagger, whose rows
        are sentences given as lists of words, a list of them per sentence, each row cut at
        `max_len` tokens (None: 128 or the model's limit; pass the --max-len it was fine-tuned with).
        A question-answering model takes (question, context) pairs and gives an `Answer` (text,
        score, start character) per pair, reading windows as its fine-tune did (kinds/spans.py).
        `precision` as predict's --precision: auto is bf16 autocast on a GPU or CPU with native bf16."""
        amp = Precision.of(precision, next(self.model.parameters()).device)
        return self.kind.predict_rows(self, rows, batch_size, max_len, amp)


def is_classifier(stored_config: dict) -> bool:
    marker = stored_config.get(FORMAT_KEY)
    return isinstance(marker, dict) and marker.get("head") in HEADS


def save_classifier(model: nn.Module, tokenizer: Tokenizer, labels: LabelMap | None, directory: str | Path,
                    reading: dict | None = None) -> Path:
    """minibert's checkpoint format with a task head: our parameter names, the head, its number of
    outputs and what its kind records in config.json, the label names in labels.json. config.json
    is written last, so a folder that has one holds a complete model. Files left by an earlier
    checkpoint are removed first: the loader would otherwise pick the wrong tokenizer, or label
    names for a model that has none."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for name in (CONFIG_FILE, LABELS_FILE, *tokenizer_file_names()):  # and an earlier model's tokenizer, if any
        (directory / name).unlink(missing_ok=True)
    save_tensors(model, {name: (name,) for name in model.state_dict()}, directory / SAFETENSORS_FILE)
    tokenizer.save(directory)
    if labels is not None:
        write_json(directory / LABELS_FILE, {"labels": labels.names})
    kind = kind_of_model(model)
    marker = {"format": FORMAT_VERSION, "head": kind.head, "num_labels": model.num_labels, **kind.marker(model, reading)}
    write_json(directory / CONFIG_FILE, {FORMAT_KEY: marker, **model.config.to_dict()})
    return directory


def load_classifier(directory: str | Path) -> Classifier:
    """A fine-tuned model, its tokenizer, label names (None for regression and question answering)
    and reading, as `save_classifier` wrote them."""
    directory = Path(directory)
    stored = read_json(directory / CONFIG_FILE)
    if not is_classifier(stored):
        raise ValueError(
            f"{directory} holds no fine-tuned classifier (its config.json names none of the heads {', '.join(HEADS)}); "
            f"load it with from_pretrained"
        )
    fields = dict(stored)
    marker = fields.pop(FORMAT_KEY)
    kind = kind_of_head(marker["head"], marker.get("num_labels"))
    labels = LabelMap(read_json(directory / LABELS_FILE).get("labels")) if kind.labelled else None
    if labels is not None and marker.get("num_labels") != len(labels):
        raise ValueError(
            f"{directory}: config.json says {marker.get('num_labels')} labels but {LABELS_FILE} names {len(labels)}; "
            f"the folder is inconsistent"
        )
    with torch.device("meta"):  # shapes only: the checkpoint's tensors become the parameters
        model = kind.build(stored_config(fields), marker)
    with open_tensors(directory) as tensors:
        load_tensors(model, {name: (name,) for name in model.state_dict()}, tensors, ())
    return Classifier(model.eval(), load_tokenizer(directory), labels, kind.reading(marker, model))

