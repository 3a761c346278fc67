"""One fine-tuning job, of any kind: a pretrained encoder, a fresh head, the training loop, the dev scores.

BERT's recipe (Devlin et al., 2019, section 4 and appendix A.3) is the same for every task: put a
fresh head on the pretrained encoder, train ALL parameters for a few epochs with Adam(W), a
small peak learning rate, linear warm-up over the first 10% of the steps and linear decay to
zero, then read the dev score. What differs from one kind of task to another is data in kinds/
(its files, inputs, head, predictions, scores); this job asks its kind for those and never which
kind it is:

    read     the kind reads train and dev, and says what it trains on (kinds/)
    teacher  --teacher: the teacher's outputs on every training row, cached (teacher.py)
    model    the kind's head on the pretrained encoder, at --max-len, with the run's dropout
    train    pretraining's own loop (training/loop.py) with its run tools (run_tools/): batches
             in a new order each epoch, checkpoints, --resume, torchrun, dev scored every
             --eval-every steps and the best kept (run_tools/evaluations.py)
    write    the model (checkpoint.py), eval.json and the kind's predictions, then one line

The steps being pretraining's, schedule, clipping, NaN policy, precision and the log are one code.
The lr, epochs and dropout are a recipe's (recipes.py: by default ELECTRA's for the encoder's
width, since a small encoder needs far more than BERT-base's lr).
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import NamedTuple

import torch
from torch import nn

from ..config import ModelConfig
from ..model import Encoder
from ..operations.distributed import in_shards
from ..operations.files import write_json
from ..operations.precision import Precision
from ..operations.tensor_files import CONFIG_FILE, read_json
from ..pretrained import from_pretrained
from ..tokenizers import load_tokenizer
from ..tokenizers.base import Tokenizer
from ..training.settings import LoopSettings
from .checkpoint import is_classifier, load_classifier, save_classifier
from .kinds import Kind
from .kinds.sentence_files import Columns
from .run_tools.evaluations import Evaluations
from .run_tools.steps import claimed, done, processes, task_streams, train_steps
from .settings import FinetuneSettings
from .teacher import TeacherCache, load_teacher

CLIP = 1.0  # gradient-norm clip, as BERT's fine-tuning code does


class TaskFiles(NamedTuple):
    """One task of a run: its training and dev files, the folder its model goes to, and its kind."""

    name: str
    train: Path
    dev: Path | None  # None with `held_out`
    out: Path
    kind: Kind  # --task's, or the training file's (auto): a sentence task's labels then say classification or regression
    columns: Columns | None = None  # None: found by their names (sentence_files.py)
    labels: list | None = None  # the class names in id order (GLUE's); None: the training file's
    max_train: int | None = None  # train on this many examples, a random subsample (seed 0: the same rows for every --seed)
    held_out: float | None = None  # score on this share of the training rows (seed 0) and train on the rest; no dev file read
    keep_model: bool = True  # False: eval.json and predictions only (a run that only chooses a setting)
    metric: str | None = None  # the score that picks the model kept (run_tools/evaluations.py); None: the kind's headline


def finetune(settings: FinetuneSettings, files: TaskFiles, backbone: tuple[Encoder, Tokenizer], device: torch.device,
             amp: Precision) -> dict:
    """Train on `files.train`, evaluate on `files.dev`, write everything into `files.out`, which
    this run holds alone meanwhile (run_tools/steps.py); return eval.json's contents. `settings` are
    the command's flags with a recipe's values (recipes.py:Recipe.applied)."""
    dist = processes()
    with claimed(files.out, settings, dist):
        task = files.kind.read(files, settings, backbone)
        kind = task.kind  # a sentence task's labels say classification or regression
        teacher_logits = None
        if settings.teacher:  # before the seed is set: the teacher draws no random numbers, the student's run stays the same
            settings = kind.distillation_settings(settings)
            task, teacher_logits = kind.teach(task, load_teacher(settings.teacher), settings, device, amp, TeacherCache(files.out))
        config = task_config(task.config, task.max_len, settings)
        loop = task_loop(settings, len(task.train), files.out)

        torch.manual_seed(settings.seed)  # the head's initialisation and dropout
        model = kind.model(config, task, settings)
        model.encoder.load_state_dict(backbone[0].state_dict())
        model.to(device)
        started = time.perf_counter()
        objective = TaskLoss(model) if teacher_logits is None else kind.distillation(model, settings)

        def score() -> tuple[dict, list]:  # the dev scores, and the predictions the files hold
            predicted = in_shards(len(task.dev), lambda rows: kind.predict(model, task, rows, settings.batch_size, device, amp), dist)
            return kind.scores(task, predicted), predicted

        evaluations = Evaluations(model, score, files.metric or kind.headline, settings.patience, dist, last_step=loop.steps)
        streams = task_streams(len(task.train), settings.batch_size, loop.seed, settings.grad_accum, dist)
        batches = [(with_teacher(kind, kind.inputs(task, rows), teacher_logits, rows) for rows in stream) for stream in streams]
        recorded = settings.recorded()
        train_loss = train_steps(objective, batches, streams, loop, settings, amp, files.out, evaluations, recorded, dist)
        kept = evaluations.keep_best()
        predicted = kept.pop("predicted")

        report = dict(kept)
        report.update(task=kind.name, examples=len(task.dev), **kind.report(task), steps=loop.steps, train_loss=train_loss,
                      seconds=round(time.perf_counter() - started, 1), args=recorded, recipe=settings.recipe_description)
        if dist.is_main:
            if files.keep_model:
                save_classifier(model, task.tokenizer, task.labels, files.out, task.reading)
            files.out.mkdir(parents=True, exist_ok=True)
            kind.write(files.out, task, predicted)
            write_json(files.out / "eval.json", report)
        done(files.out, dist)
        kept_at = f" (step {report['kept_step']}, the best {report['selected_by']} of {len(report['evaluations'])} evaluations)" \
            if len(report["evaluations"]) > 1 else ""
        print(f"{files.name}: {kind.result(report, task, files, settings)}{kept_at}; {'model, ' if files.keep_model else ''}"
              f"eval.json and {kind.predictions_file} in {files.out}", flush=True)
        return report


def task_config(pretrained: ModelConfig, max_len: int, settings: FinetuneSettings) -> ModelConfig:
    """The pretrained encoder's config as a fine-tune runs it: at `max_len` (rotary positions:
    any length), with the run's dropout, on the reference path with --reference."""
    config = pretrained.for_length(max_len)
    if settings.dropout is not None:
        config = config.replace(hidden_dropout=settings.dropout, attention_dropout=settings.dropout)
    return config.replace(reference=True) if settings.reference else config


def task_loop(settings: FinetuneSettings, rows: int, out: Path) -> LoopSettings:
    """The training loop's settings for `rows` training rows (examples, or a question's windows):
    --steps or --epochs of batches, dev scored at the end or every --eval-every, a checkpoint
    at each evaluation (without --eval-every: each epoch)."""
    epoch = math.ceil(rows / settings.batch_size)  # steps per epoch
    steps = settings.steps or math.ceil(settings.epochs * epoch)
    every = {None: steps, "epoch": epoch}.get(settings.eval_every, settings.eval_every)  # no --eval-every: dev scored at the end
    return LoopSettings(steps=steps, lr=settings.lr, warmup=settings.warmup, weight_decay=settings.weight_decay, clip=CLIP,
                        seed=settings.seed, log_every=max(1, steps // 10), eval_every=every,
                        save_every=every if settings.eval_every else epoch, skip_nonfinite=settings.skip_nonfinite, out=str(out))


def with_teacher(kind, batch: dict, teacher_logits: torch.Tensor | None, rows: list[int]) -> dict:
    """A batch with its rows of the teacher's outputs, where there is a teacher."""
    return batch if teacher_logits is None else {**batch, "teacher_logits": kind.teacher_rows(teacher_logits, rows, batch)}


def load_backbone(init: str | Path) -> tuple[Encoder, Tokenizer]:
    """The pretrained encoder and its tokenizer (a fine-tuned classifier's encoder works too)."""
    init = Path(init)
    if not init.is_dir():
        raise FileNotFoundError(f"--init {init} is not a directory; pass a minibert checkpoint or a Hugging Face BERT-family folder")
    if is_classifier(read_json(init / CONFIG_FILE)):
        encoder = load_classifier(init).model.encoder
    else:
        encoder = from_pretrained(init, head=None)
    tokenizer = load_tokenizer(init)
    tokenizer.check_fits(encoder.config.vocab_size, str(init))
    return encoder, tokenizer


class TaskLoss(nn.Module):
    """A fine-tuning model as the training loop sees it: batch -> (loss, metrics), as a
    `Pretrainer` is for pretraining."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, batch: dict) -> tuple[torch.Tensor, dict]:
        return self.model(**batch).loss, {}
