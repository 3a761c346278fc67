"""The teacher of task distillation (`finetune --teacher DIR`): a model already fine-tuned on the
task, and its outputs on the rows the student trains on, cached in the run's folder.

A teacher is minibert's own fine-tuned model (the output of `train.py finetune`), of whatever
kind: the student's kind says which teachers it takes and what their outputs are (kinds/: a
sentence task's class logits per example, computed with the teacher's own tokenizer; a
question's start and end logits per token of the student's own windows). A Hugging Face
`*ForSequenceClassification` folder of the five families or RoFormer teaches a sentence task
too: its reader is Hugging Face's translation (pretrained.py:TRANSLATIONS, which
minibert/interop/huggingface/ registers on import), so fine-tuning never imports interop.

The outputs are computed once, before training, and cached in OUT (TEACHER_FILE), so epochs
do not pay for the teacher again and a re-run with the same teacher and rows does not either.
The loss that reads them is soft_targets.py's.
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
from ..operations.tensor_files import CONFIG_FILE, SAFETENSORS_FILE, read_json
from ..pretrained import FOREIGN, TRANSLATIONS
from ..tokenizers import load_tokenizer
from ..tokenizers.base import Tokenizer
from .checkpoint import is_classifier, load_classifier
from .kinds import KINDS, Kind

TEACHER_FILE = "teacher_logits.safetensors"


class Teacher(NamedTuple):
    model: nn.Module  # inputs -> its kind's outputs (a sentence classifier's logits [B, C]; C = 1: a score)
    tokenizer: Tokenizer
    labels: list[str] | None  # class names in the teacher's output order; None: it has none (a score, a span)
    path: Path
    kind: Kind


def load_teacher(directory: str | Path) -> Teacher:
    """A fine-tuned model in either format, with its tokenizer and class names, in eval mode."""
    directory = Path(directory)
    if not (directory / CONFIG_FILE).is_file():
        raise FileNotFoundError(f"--teacher {directory} holds no {CONFIG_FILE}; pass a folder written by "
                                f"`train.py finetune` or a Hugging Face *ForSequenceClassification folder")
    stored = read_json(directory / CONFIG_FILE)
    if is_classifier(stored):
        classifier = load_classifier(directory)
        model, tokenizer, kind = classifier.model, classifier.tokenizer, classifier.kind
        names = None if classifier.labels is None else [str(name) for name in classifier.labels.names]
    else:
        model, names = TRANSLATIONS[FOREIGN].read_classifier(directory, stored)
        tokenizer, kind = load_tokenizer(directory), KINDS["regression" if names is None else "classification"]
    tokenizer.check_fits(model.config.vocab_size, f"--teacher {directory}")
    return Teacher(model.eval(), tokenizer, names, directory, kind)


class TeacherCache:
    """A teacher's outputs in OUT/TEACHER_FILE, under a key of what they depend on: `read` gives
    them when the key is the same (else None), `write` stores new ones under that key."""

    def __init__(self, out: Path):
        self.path, self.key = Path(out) / TEACHER_FILE, None

    def read(self, teacher: Path, *rows) -> torch.Tensor | None:
        """The outputs cached for `teacher`'s files and `rows` (JSON: a sentence task's length and
        texts, a digest of a question's windows), or None (absent, another key, or unreadable)."""
        digest = hashlib.sha256()
        for name in (CONFIG_FILE, SAFETENSORS_FILE):
            file = teacher / name
            stat = file.stat() if file.is_file() else None
            digest.update(json.dumps([str(teacher.resolve() / name), stat and (stat.st_size, stat.st_mtime_ns)]).encode())
        digest.update(json.dumps(list(rows)).encode())
        self.key = digest.hexdigest()
        if not self.path.is_file():
            return None
        try:
            with safe_open(str(self.path), framework="pt") as file:
                return file.get_tensor("logits") if (file.metadata() or {}).get("key") == self.key else None
        except (SafetensorError, OSError):  # a damaged cache is recomputed, never trusted
            return None

    def write(self, logits: torch.Tensor) -> None:
        publish_file(lambda tmp: save_file({"logits": logits.contiguous()}, str(tmp), metadata={"key": self.key}), self.path)
