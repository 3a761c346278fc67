"""A fine-tuned model on disk: minibert's checkpoint format plus the head and its labels.

The head is a `SequenceClassifier` (one output per class, or one score), a
`TokenClassifier` (a tag per token) or a `SpanExtractor` (an answer's start and end).

    config.json        the encoder's ModelConfig and a marker naming the head and its outputs
    model.safetensors  every parameter, under our names
    labels.json        the class names, in id order (classification and tagging only)
    tokenizer          tokenizer.model (SentencePiece) or vocab.txt (WordPiece)

One output means regression (a score, e.g. STS-B's similarity), which has no class names.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import torch

from ..tokenizers.load import load_tokenizer, tokenizer_file_names
from .answering import answer_rows
from .inference import DEFAULT_BATCH_SIZE, predict_rows
from .tasks import LabelMap
from ..tokenizers.base import Tokenizer
from ..heads import SequenceClassifier, SpanExtractor, TokenClassifier
from ..pretrained import FORMAT_KEY, FORMAT_VERSION, stored_config
from ..operations.files import write_json
from ..operations.precision import Precision
from ..operations.tensor_files import CONFIG_FILE, SAFETENSORS_FILE, load_tensors, open_tensors, read_json, save_tensors

HEADS = {"classifier": SequenceClassifier, "token_classifier": TokenClassifier, "span_extractor": SpanExtractor}  # as named in config.json
LABELS_FILE = "labels.json"


class Classifier(NamedTuple):
    model: SequenceClassifier | TokenClassifier | SpanExtractor
    tokenizer: Tokenizer
    labels: LabelMap | None  # None for regression and question answering

    def predict(self, rows: list, batch_size: int = DEFAULT_BATCH_SIZE, max_len: int | None = None, precision: str = "auto") -> list:
        """A `Prediction` (label, score) per text or (a, b) pair of `rows`; for a tagger, whose rows
        are sentences given as lists of words, a list of them per sentence (inference.py), each row cut
        at `max_len` tokens (None: 128 or the model's limit; pass the --max-len it was fine-tuned with).
        A question-answering model takes (question, context) pairs and gives an `Answer` (text,
        score, start character) per pair, reading windows of `max_len` (None: 384) tokens (answering.py).
        `precision` as predict's --precision: auto is bf16 autocast on a GPU or CPU with native bf16."""
        amp = Precision.of(precision, next(self.model.parameters()).device)
        if isinstance(self.model, SpanExtractor):
            return answer_rows(self.model, self.tokenizer, rows, batch_size, max_len, amp)
        return predict_rows(self.model, self.tokenizer, self.labels, rows, batch_size, max_len, amp)


def is_classifier(stored_config: dict) -> bool:
    marker = stored_config.get(FORMAT_KEY)
    return isinstance(marker, dict) and marker.get("head") in HEADS


def save_classifier(model: SequenceClassifier | TokenClassifier, tokenizer: Tokenizer, labels: LabelMap | None, directory: str | Path) -> Path:
    """minibert's checkpoint format with a classification (or regression) head: our parameter
    names, the head and its number of outputs in config.json, the label names in labels.json.
    config.json is written last, so a folder that has one holds a complete model. Files left
    by an earlier checkpoint are removed first: the loader would otherwise pick the wrong
    tokenizer, or label names for a model that has none."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for name in (CONFIG_FILE, LABELS_FILE, *tokenizer_file_names()):  # and an earlier model's tokenizer, if any
        (directory / name).unlink(missing_ok=True)
    save_tensors(model, {name: (name,) for name in model.state_dict()}, directory / SAFETENSORS_FILE)
    tokenizer.save(directory)
    if labels is not None:
        write_json(directory / LABELS_FILE, {"labels": labels.names})
    head = next(name for name, kind in HEADS.items() if isinstance(model, kind))
    marker = {"format": FORMAT_VERSION, "head": head, "num_labels": model.num_labels}
    if isinstance(model, SequenceClassifier):
        marker["pooling"] = model.pooling
    if isinstance(model, SpanExtractor):
        marker["reading"] = model.reading
    write_json(directory / CONFIG_FILE, {FORMAT_KEY: marker, **model.config.to_dict()})
    return directory


def load_classifier(directory: str | Path) -> Classifier:
    """A fine-tuned model, its tokenizer and label names (None for regression), as
    `save_classifier` wrote them."""
    directory = Path(directory)
    stored = read_json(directory / CONFIG_FILE)
    if not is_classifier(stored):
        raise ValueError(
            f"{directory} holds no fine-tuned classifier (its config.json names none of the heads {', '.join(HEADS)}); "
            f"load it with from_pretrained"
        )
    fields = dict(stored)
    marker = fields.pop(FORMAT_KEY)
    num_labels = marker.get("num_labels")
    has_labels = num_labels != 1 and marker["head"] != "span_extractor"  # a score, or an answer's start and end, has no names
    labels = LabelMap(read_json(directory / LABELS_FILE).get("labels")) if has_labels else None
    if labels is not None and num_labels != len(labels):
        raise ValueError(
            f"{directory}: config.json says {num_labels} labels but {LABELS_FILE} names {len(labels)}; the folder is inconsistent"
        )
    with torch.device("meta"):  # shapes only: the checkpoint's tensors become the parameters
        pooling = {"pooling": marker.get("pooling", "cls")} if marker["head"] == "classifier" else {}  # a marker naming no pooling: [CLS]
        model = HEADS[marker["head"]](stored_config(fields), num_labels, **pooling)
    with open_tensors(directory) as tensors:
        load_tensors(model, {name: (name,) for name in model.state_dict()}, tensors, ())
    if isinstance(model, SpanExtractor):
        model.reading = dict(marker.get("reading") or {})
    return Classifier(model.eval(), load_tokenizer(directory), labels)


def check_out(out: Path, overwrite: bool) -> None:
    """Refuse an --out that is a file, or that holds a model already (unless `overwrite`)."""
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"--out {out} is a file; choose a folder")
    if (out / SAFETENSORS_FILE).exists() and not overwrite:
        raise FileExistsError(f"{out} already holds a checkpoint; pass --overwrite to replace it, or choose another --out")
