"""What every kind of task offers the fine-tuning job (job.py): the one interface the table (kinds/__init__.py) fills.

    read      how its files are read and checked, and become the rows the model trains on
              (examples, sentences of words, a question's windows over its passage): a `Task`
    inputs    how rows become model inputs, with their targets
    model     its head and loss (heads.py), and what its checkpoint records beside the weights
    predict   how the model's outputs become predictions (for spans, SQuAD's n-best decoding)
    scores    its scores, the one it is judged by (`headline`), and its output files
    recipe    which row of a recipe it takes (recipes.py)
    teach     what a --teacher's outputs on the training rows are, and the loss that reads them

A kind is a class with one instance in the table. The `Task` that `read` returns is handed back to
every other method: the job keeps it and never looks inside. The defaults below are those of the
kinds whose predictions are a row each in predictions.tsv (sentences, tags).
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, NamedTuple

import torch
from torch import nn
from tqdm import tqdm

from ...config import ModelConfig
from ...operations.files import read_record, write_atomic
from ...operations.precision import Precision
from ...tokenizers.base import Tokenizer

DEFAULT_MAX_LEN = 128  # tokens per example where --max-len is not given (question answering's windows: QA_MAX_LEN)
DEFAULT_BATCH_SIZE = 32  # rows per batch when predicting (fine-tuning predicts at its --batch-size)
DEFAULT_ALPHA, DEFAULT_TEMPERATURE = 0.5, 2.0  # --teacher: soft targets and labels weighed evenly, softened at T = 2


@dataclass
class Task:
    """One task's data as its kind read it: what the job trains on and scores."""

    kind: "Kind"
    tokenizer: Tokenizer
    config: ModelConfig  # the pretrained encoder's: whether inputs mark segment B, how long they may be
    max_len: int
    train: object  # the training rows (len: how many), as the kind's `inputs` reads them
    dev: object  # the rows dev predictions are made for (len: eval.json's `examples`)
    labels: object  # the names of the head's outputs (a LabelMap), saved with the model; None: they have none
    reading: dict | None  # how the model reads new data, saved with it (question answering's windows and decoding)
    train_targets: list | None = None  # each training row's target (class ids, scores, tags)
    dev_targets: list | None = None


class Prediction(NamedTuple):
    """One example's prediction (for a tagger: one word's)."""

    label: str | int | None  # the class or tag name; None for regression, and for a word cut by max_len
    score: float  # the probability of `label`; for regression the predicted value itself (NaN for a cut word)


class Kind:
    """One kind of task: its values are data; its methods, what it does differently."""

    name: str  # --task's value, eval.json's "task"
    headline: str  # the score printed, and the one the model kept is chosen by
    head: str  # config.json's name of the head (checkpoint.py)
    model_class: type[nn.Module]  # the task model: the encoder and its head (heads.py)
    adjective: str  # in a sentence: "a tagging model"
    formats: tuple[str, ...]  # the files it reads, by suffix
    rows_word: str  # what a row of its files is, in predict's line: "rows", "sentences"
    labelled = True  # the head's outputs have names (labels.json)
    pooled = False  # the head reads one pooled vector (--pooling, the recipe's pooling)
    teaches = True  # a --teacher can be distilled into this kind (soft_targets.py)
    predictions_file = "predictions.tsv"  # the dev predictions' file in OUT

    # --- a fine-tune: job.py ----------------------------------------------------------------------

    def detects(self, path: Path) -> bool:
        """--task auto: whether a training file holds this kind of task."""
        return False

    def refuse(self, settings, files) -> None:
        """Flags of other kinds, refused rather than ignored, before anything is trained."""

    def recipe_row(self, train: Path) -> str | None:
        """Which SQuAD row of a recipe this task takes (recipes.py); None: the sentence tasks' row."""
        return None

    def read(self, files, settings, backbone) -> Task:
        raise NotImplementedError

    def model(self, config: ModelConfig, task: Task, settings) -> nn.Module:
        """The task model: the encoder (weights loaded next) and a fresh head, as `build` makes one."""
        return self.build(config, {"num_labels": 1 if task.labels is None else len(task.labels), "pooling": settings.pooling})

    def inputs(self, task: Task, rows: list[int]) -> dict:
        """A training batch of `task.train`'s `rows`, with its targets."""
        raise NotImplementedError

    def predict(self, model: nn.Module, task: Task, rows: list[int], batch_size: int, device, amp: Precision) -> list:
        """The predictions of some of dev's rows, one entry a row: (prediction, how sure)."""
        return list(zip(*self.predictions(model, task.tokenizer, task.dev.rows(rows), batch_size, task.max_len, device, amp)))

    def predictions(self, model: nn.Module, tokenizer: Tokenizer, data, batch_size: int, max_len: int, device,
                    amp: Precision | None = None, what: str | None = None) -> tuple[list, list]:
        """Every row of `data` predicted, and how sure the model is; `what`: a progress bar so named."""
        raise NotImplementedError

    def scores(self, task: Task, predicted: list) -> dict:
        raise NotImplementedError

    def report(self, task: Task) -> dict:
        """What eval.json records of this kind beside its scores."""
        return {}

    def write(self, out: Path, task: Task, predicted: list) -> None:
        """The dev predictions' file(s) in OUT."""
        write_table(out / self.predictions_file, *self.table(task.dev, [p for p, _ in predicted], task.dev_targets, task.labels,
                                                           [s for _, s in predicted]))

    def table(self, data, predicted: list, gold: list | None, labels, sure: list) -> tuple[list[str], list[list[str]]]:
        """predictions.tsv's header and rows (the gold labels beside, on dev)."""
        raise NotImplementedError

    def result(self, report: dict, task: Task, files, settings) -> str:
        """The run's last line, from its scores: "dev accuracy 0.8125 on 872 examples"."""
        if files.held_out:
            return f"held-out {self.headline} {report[self.headline]:.4f} on {len(task.dev)} training examples set aside"
        return f"dev {self.headline} {report[self.headline]:.4f} on {len(task.dev)} examples"

    # --- a teacher: teacher.py loads it, the kind says what it gives ---------------------------------

    def distillation_settings(self, settings):
        """The settings with the --teacher loss's values filled in (eval.json records them)."""
        if not self.teaches:
            raise ValueError(f"--teacher distils sentence tasks (classification, regression) and question answering; "
                             f"a {self.adjective} task has no teacher here")
        temperature = DEFAULT_TEMPERATURE if settings.temperature is None else settings.temperature
        return settings.replace(alpha=DEFAULT_ALPHA if settings.alpha is None else settings.alpha, temperature=temperature)

    def teach(self, task: Task, teacher, settings, device, amp: Precision, cache) -> tuple[Task, torch.Tensor]:
        """The task (with --transfer, more rows) and the teacher's outputs on every training row."""
        raise NotImplementedError

    def distillation(self, model: nn.Module, settings) -> nn.Module:
        """The student's loss: batch -> (loss, metrics), reading the batch's `teacher_logits`."""
        raise NotImplementedError

    def teacher_rows(self, logits: torch.Tensor, rows: list[int], batch: dict) -> torch.Tensor:
        """The teacher's outputs for a batch of `rows`."""
        return logits[rows]

    # --- a fine-tuned model: checkpoint.py; new data: predictions.py ---------------------------------

    def holds(self, head: str, num_labels: int) -> bool:
        """Whether a fine-tuned model with this head and number of outputs is of this kind."""
        return head == self.head

    def build(self, config: ModelConfig, marker: dict) -> nn.Module:
        """The task model a checkpoint's marker describes, to load its weights into."""
        return self.model_class(config, marker["num_labels"])

    def marker(self, model: nn.Module, reading: dict | None) -> dict:
        """What config.json records of the head beside its name and outputs."""
        return {}

    def reading(self, marker: dict, model: nn.Module) -> dict | None:
        """How the model reads new data, as its fine-tune did (None: nothing beyond --max-len)."""
        return None

    def predicted(self, classifier, data, batch_size: int, max_len: int | None, amp: Precision | None,
                  what: str | None = None) -> tuple[list, list]:
        """`predictions` by a fine-tuned model (checkpoint.py:Classifier) on the device it is on, each row
        cut at `max_len` tokens (None: 128 or the model's limit)."""
        model = classifier.model
        max_len = check_max_len(max_len, model.config)
        return self.predictions(model, classifier.tokenizer, data, batch_size, max_len, next(model.parameters()).device, amp, what)

    def predict_rows(self, classifier, rows: list, batch_size: int, max_len: int | None, amp: Precision) -> list:
        """`Classifier.predict`: a prediction per Python row."""
        check_batch_size(batch_size)
        data = self.listed(rows)
        found = self.predicted(classifier, data, batch_size, max_len, amp) if len(data) else ([], [])
        return self.named(data, *found, classifier.labels)

    def listed(self, rows: list):
        """Python rows as the kind's files read them."""
        raise NotImplementedError

    def named(self, data, predicted: list, sure: list, labels) -> list:
        """Predictions as `Prediction`s, by name."""
        raise NotImplementedError

    def predict_file(self, classifier, folder: Path, file: Path, out: Path, text_columns: list[str] | None, batch_size: int,
                     max_len: int | None, amp: Precision, null_threshold: float | None) -> str:
        """`python -m minibert predict`: every row of `file` predicted into `out` as predictions.tsv, at the
        --max-len the model was fine-tuned with; the line that says so (`null_threshold`: None, or a
        threshold `check_null_threshold` let through)."""
        data = self.read_new(Path(file), text_columns)
        max_len = fine_tuned_max_len(folder) if max_len is None else max_len
        predicted, sure = self.predicted(classifier, data, batch_size, max_len, amp, what="predict")
        write_table(out, *self.table(data, predicted, None, classifier.labels, sure))
        return f"{len(data)} {self.rows_word} of {data.path} predicted into {out}"

    def read_new(self, file: Path, text_columns: list[str] | None):
        """A file of new rows to predict, read as the kind reads its dev file (labels ignored)."""
        raise NotImplementedError

    def check_null_threshold(self, classifier, folder: Path) -> None:
        """predict's --null-threshold is a SQuAD 2.0 model's: refused in one line for any other."""
        raise ValueError(f"--null-threshold sets when a model fine-tuned on SQuAD 2.0 answers \"\"; {folder} is no "
                         f"question-answering model: drop it")


def check_max_len(max_len: int | None, config: ModelConfig) -> int:
    """--max-len, or DEFAULT_MAX_LEN where the model's positions reach it (else their number)."""
    if max_len is None:
        return min(DEFAULT_MAX_LEN, config.max_length)  # what the model was pretrained on, at most
    if config.for_length(max_len) is None:
        raise ValueError(f"--max-len {max_len} exceeds the {config.max_length} positions of this model; use at most {config.max_length}")
    return max_len


def fine_tuned_max_len(folder: Path) -> int | None:
    """The --max-len the model in `folder` was fine-tuned with, as its eval.json records it (None: the
    default): rows cut where its fine-tune cut them are predicted as its fine-tune predicted them. A
    damaged eval.json is one line that says to pass --max-len."""
    report = read_record(folder / "eval.json", "pass --max-len to say where rows are cut")
    return report.get("args", {}).get("max_len")


def check_batch_size(batch_size: int) -> None:
    if batch_size < 1:
        raise ValueError(f"--batch-size {batch_size}: give a positive number of rows per batch")


@torch.no_grad()
def outputs(model: nn.Module, batches: Iterable[dict], device, amp: Precision | None = None, total: int | None = None,
            what: str | None = None):
    """The model's outputs on each batch of inputs, in eval mode, fp32 unless `amp` says otherwise;
    `what`: a progress bar of `total` rows with that name (tqdm)."""
    model.eval()
    with tqdm(total=total, desc=what, unit="example", dynamic_ncols=True, disable=what is None) as bar:
        for inputs in batches:
            with amp.autocast if amp else nullcontext():
                out = model(**{name: tensor.to(device) for name, tensor in inputs.items()})
            bar.update(len(inputs["input_ids"]))
            yield out


def in_batches(n: int, batch_size: int) -> Iterable[list[int]]:
    """0 .. n-1 in batches of `batch_size`, in order."""
    return (list(range(first, min(first + batch_size, n))) for first in range(0, n, batch_size))


def write_table(out: Path, header: list[str], rows: Iterable[list[str]]) -> None:
    """A predictions TSV: the header, then one line per row."""
    write_atomic(out, "".join("\t".join(row) + "\n" for row in [header, *rows]))
