"""Sentence tasks, two kinds: one text or a pair of texts, and a class (classification) or a number (regression).

BERT's GLUE setup (Devlin et al., 2019, section 4): the text is [CLS] A [SEP] (B [SEP]) and a
linear layer on the pooled vector gives one output per class (cross-entropy), or one output, the
score, for a regression task such as STS-B (squared error). A class's score is its softmax
probability; a regression output is its own score. The files are sentence_files.py's; the scores
GLUE's (scores.py); predictions.tsv holds each example's prediction, its gold label and its score.

With --teacher the student also learns the teacher's class distribution on every training row
(or its score), and on the --transfer texts, which have no label (soft_targets.py:TaskDistillation).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import torch

from ...config import ModelConfig
from ...heads import IGNORE_INDEX, SequenceClassifier
from ...tokenizers.base import Tokenizer
from ..soft_targets import TaskDistillation
from .kind import Kind, Prediction, Task, check_max_len, in_batches, outputs
from .scores import classification_metrics, regression_metrics
from .sentence_files import FORMATS, Columns, LabelMap, TaskData, read_task, read_texts, regression_targets, task_of


def model_inputs(tokenizer: Tokenizer, config: ModelConfig, data: TaskData, rows: list[int], max_len: int,
                 device="cpu") -> dict:
    """Token ids, attention mask and segment ids of some examples, as the model takes them.

    A pair is [CLS] A [SEP] B [SEP] with segment ids 0 on A and 1 on B. Models with no
    second segment embedding (RoBERTa, DistilBERT) tell A from B by the separators alone,
    so their segment ids stay 0.
    """
    pairs = None if data.pairs is None else [data.pairs[i] for i in rows]
    inputs = tokenizer.batch([data.texts[i] for i in rows], pairs, max_length=max_len)
    if config.type_vocab_size < 2:
        inputs["token_type_ids"].zero_()
    return {name: tensor.to(device) for name, tensor in inputs.items()}


def logits_of(model, tokenizer: Tokenizer, data: TaskData, batch_size: int, max_len: int, device, amp=None, what=None):
    """The model's logits [B, C] on every example of `data`, batch by batch in file order."""
    batches = (model_inputs(tokenizer, model.config, data, rows, max_len) for rows in in_batches(len(data), batch_size))
    return (out.logits for out in outputs(model, batches, device, amp, len(data), what))


class SentenceKind(Kind):
    """Classification (`regression` False) or regression: one of the two sentence kinds of the table."""

    model_class = SequenceClassifier
    head = "classifier"
    pooled = True
    formats = FORMATS
    rows_word = "rows"

    def __init__(self, name: str, headline: str, regression: bool):
        self.name, self.headline, self.regression = name, headline, regression
        self.labelled = not regression
        self.adjective = name

    def read(self, files, settings, backbone) -> Task:
        """Train and dev (or training rows set aside), their labels as ids or scores; --task auto
        takes regression where every training label is a number with a fraction."""
        train = read_task(files.train, columns=files.columns)
        if files.max_train is not None and files.max_train < len(train):
            print(f"{files.name}: training on {files.max_train} of the {len(train)} examples of {files.train.name} "
                  f"(--max-train-examples: a random subsample, the same for every seed)", flush=True)
            train = train.subsample(files.max_train)
        if files.held_out is not None:  # scored on training rows set aside: the dev file is never opened
            train, dev = train.held_out(files.held_out)
        else:
            dev = read_task(files.dev, columns=files.columns)
        if (train.pairs is None) != (dev.pairs is None):
            kind = {True: "single texts", False: "sentence pairs"}
            raise ValueError(f"{train.path} holds {kind[train.pairs is None]} but {dev.path} "
                             f"{kind[dev.pairs is None]}; use two files of one task")
        chosen = SENTENCE_KINDS[task_of(train)] if settings.task == "auto" else self
        encoder, tokenizer = backbone
        read = dict(tokenizer=tokenizer, config=encoder.config, max_len=check_max_len(settings.max_len, encoder.config),
                    train=train, dev=dev, reading=None)
        if chosen.regression:
            return Task(chosen, **read, labels=None, train_targets=regression_targets(train), dev_targets=regression_targets(dev))
        labels = LabelMap.from_labels(train.labels) if files.labels is None else LabelMap(files.labels)
        return Task(chosen, **read, labels=labels, train_targets=labels.encode(train), dev_targets=labels.encode(dev))

    def inputs(self, task: Task, rows: list[int]) -> dict:
        inputs = model_inputs(task.tokenizer, task.config, task.train, rows, task.max_len)
        inputs["labels"] = torch.tensor([task.train_targets[row] for row in rows])  # class ids, or float scores for regression
        return inputs

    def predictions(self, model, tokenizer, data, batch_size, max_len, device, amp=None, what=None) -> tuple[list, list]:
        """Every example's predicted class id (regression: its score) and how sure the model is: the
        predicted class's probability (regression: the score itself)."""
        predicted, sure = [], []
        for logits in logits_of(model, tokenizer, data, batch_size, max_len, device, amp, what):
            if model.num_labels == 1:  # regression: the output is the score
                values = logits.float().squeeze(-1).tolist()
                predicted, sure = predicted + values, sure + values
            else:
                ids = logits.argmax(-1)
                predicted += ids.tolist()
                sure += logits.float().softmax(-1).gather(-1, ids.unsqueeze(-1)).squeeze(-1).tolist()  # the class's probability
        return predicted, sure

    def scores(self, task: Task, predicted: list) -> dict:
        ids = [p for p, _ in predicted]
        return regression_metrics(ids, task.dev_targets) if self.regression else classification_metrics(ids, task.dev_targets, task.labels)

    def table(self, data, predicted, gold, labels, sure) -> tuple[list[str], list[list[str]]]:
        """Index, prediction, the gold label (dev) and for classes the predicted one's probability."""
        show = (lambda score: f"{score:.6g}") if labels is None else (lambda label_id: f"{labels.names[label_id]}")
        header = ["index", "prediction", *(["label"] if gold is not None else []), *(["score"] if labels is not None else [])]
        rows = [[str(i), show(p), *([show(gold[i])] if gold is not None else []), *([f"{s:.6g}"] if labels is not None else [])]
                for i, (p, s) in enumerate(zip(predicted, sure))]
        return header, rows

    # --- a teacher ---------------------------------------------------------------------------------

    def distillation_settings(self, settings):
        if not self.regression:
            return super().distillation_settings(settings)
        if settings.temperature is not None:
            raise ValueError("--temperature softens class distributions; a regression student matches the teacher's score "
                             "by squared error, so drop --temperature")
        return super().distillation_settings(settings).replace(temperature=None)

    def teach(self, task: Task, teacher, settings, device, amp, cache) -> tuple[Task, torch.Tensor]:
        """The training rows, then the --transfer texts (labels left out: their target is IGNORE_INDEX,
        or NaN for regression), with the teacher's logits [N, C] on every row, computed by the teacher
        with its own tokenizer (teacher and student need not share one: only class logits pass)."""
        if not teacher.kind.pooled:
            raise ValueError(f"--teacher {teacher.path} is a {teacher.kind.adjective} model; a sentence task's teacher "
                             f"classifies (or scores) whole examples")
        order = label_order(teacher, task.labels)  # a teacher of another task fails here, before anything is computed
        data, targets = task.train, task.train_targets
        if settings.transfer:
            extra = read_texts(settings.transfer, Columns(tuple(settings.text_columns)) if settings.text_columns else None)
            if (extra.pairs is None) != (data.pairs is None):
                kind = {True: "single texts", False: "sentence pairs"}
                raise ValueError(f"--transfer {extra.path} holds {kind[extra.pairs is None]} but the task has "
                                 f"{kind[data.pairs is None]}; give it texts shaped like the training examples")
            pairs = None if data.pairs is None else data.pairs + extra.pairs
            data = TaskData(data.path, data.texts + extra.texts, pairs, data.labels + extra.labels, data.lines + extra.lines)
            targets = targets + [IGNORE_INDEX if task.labels is not None else math.nan] * len(extra)
        max_len = min(task.max_len, teacher.model.config.max_length)
        logits = cache.read(teacher.path, max_len, data.texts, data.pairs)
        if logits is None or len(logits) != len(data):
            teacher.model.to(device)
            parts = [batch.float().cpu() for batch in logits_of(teacher.model, teacher.tokenizer, data, settings.batch_size, max_len,
                                                                device, what="teacher")]
            logits = torch.cat(parts)  # [N, C] in the teacher's class order
            logits = logits if order is None else logits[:, order]  # -> the task's
            cache.write(logits)
        return dataclasses.replace(task, train=data, train_targets=targets), logits

    def distillation(self, model, settings) -> TaskDistillation:
        return TaskDistillation(model, settings.alpha, settings.temperature)

    # --- a fine-tuned model -------------------------------------------------------------------------

    def holds(self, head: str, num_labels: int) -> bool:
        return head == self.head and (num_labels == 1) == self.regression

    def build(self, config: ModelConfig, marker: dict) -> SequenceClassifier:
        return SequenceClassifier(config, marker["num_labels"], marker.get("pooling", "cls"))  # a marker naming no pooling: [CLS]

    def marker(self, model: SequenceClassifier, reading: dict | None) -> dict:
        return {"pooling": model.pooling}

    def listed(self, rows: list) -> TaskData:
        """Texts, or (a, b) pairs of texts."""
        if not isinstance(rows, list):
            raise ValueError(f"predict takes a list of rows, got {type(rows).__name__}; wrap one text as [text]")
        where, lines = Path("<rows>"), list(range(1, len(rows) + 1))
        if all(isinstance(text, str) for text in rows):
            return TaskData(where, list(rows), None, [""] * len(rows), lines)
        if all(isinstance(pair, tuple) and len(pair) == 2 and all(isinstance(t, str) for t in pair) for pair in rows):
            return TaskData(where, [a for a, _ in rows], [b for _, b in rows], [""] * len(rows), lines)
        raise ValueError("a sentence classifier takes a list of texts, or a list of (a, b) pairs of texts; not a mix")

    def named(self, data, predicted, sure, labels) -> list[Prediction]:
        return [Prediction(None if labels is None else labels.names[p], score) for p, score in zip(predicted, sure)]

    def read_new(self, file: Path, text_columns: list[str] | None) -> TaskData:
        return read_texts(file, Columns(tuple(text_columns)) if text_columns else None)


def label_order(teacher, labels: LabelMap | None) -> list[int] | None:
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


CLASSIFICATION = SentenceKind("classification", "accuracy", regression=False)
REGRESSION = SentenceKind("regression", "pearson", regression=True)
SENTENCE_KINDS = {kind.name: kind for kind in (CLASSIFICATION, REGRESSION)}
