"""One fine-tuning job: a pretrained encoder, a fresh head, the training loop, the dev scores.

BERT's recipe (Devlin et al., 2019, section 4 and appendix A.3) is the same for every
GLUE task: put one K-way linear layer on the pooled [CLS] vector (one output for a
regression task such as STS-B; on every word's first sub-token for tagging, as for
CoNLL-2003 NER in section 5.3), train ALL parameters for a few epochs with Adam(W), a small
peak learning rate (2e-5 to 5e-5), batch 32, linear warm-up over the first 10% of steps and
linear decay to zero, then read the dev score. The steps are pretraining's own loop
(training/loop.py), so schedule, clipping, NaN policy, precision and the log are one code.
The lr, epochs and dropout are a recipe's (recipes.py: by default ELECTRA's for the encoder's
width, since a small encoder needs far more than BERT-base's lr), and the pooling follows the
checkpoint's pretraining (recipes.py:checkpoint_pooling).
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import NamedTuple

import torch
from torch import nn
from tqdm import tqdm

from ..tokenizers import load_tokenizer
from .tagged import TaggedData, is_tagged, read_tagged
from .tasks import Columns, LabelMap, TaskData, read_task, read_texts, regression_targets, task_of
from .teacher import TEACHER_FILE, cache_key, label_order, load_teacher, read_cache, write_cache
from ..tokenizers.base import Tokenizer
from ..heads import IGNORE_INDEX, SequenceClassifier, TokenClassifier
from ..config import ModelConfig
from ..model import Encoder
from ..pretrained import from_pretrained
from ..operations.files import write_atomic, write_json
from ..operations.tensor_files import CONFIG_FILE, read_json
from ..training.settings import LoopSettings
from ..operations.distributed import Distributed
from ..operations.precision import Precision
from .checkpoint import Classifier, is_classifier, load_classifier, save_classifier
from .scores import dev_scores
from .selection import Evaluations
from .settings import DEFAULT_ALPHA, DEFAULT_TEMPERATURE, HEADLINE, FinetuneSettings
from .training import claimed, done, in_shards, processes, task_streams, train_steps
from .soft_targets import TaskDistillation
from .inference import check_max_len, encode, logit_batches, predict_with_scores

CLIP = 1.0  # gradient-norm clip, as BERT's fine-tuning code does


class TaskFiles(NamedTuple):
    """One task of a run: its training and dev files, and the folder its model goes to."""

    name: str
    train: Path
    dev: Path | None  # None with `held_out`
    out: Path
    columns: Columns | None = None  # None: found by their names (tasks.py)
    labels: list | None = None  # the class names in id order (GLUE's); None: the training file's
    max_train: int | None = None  # train on this many examples, a random subsample (seed 0: the same rows for every --seed)
    held_out: float | None = None  # score on this share of the training rows (seed 0) and train on the rest; no dev file read
    keep_model: bool = True  # False: eval.json and predictions only (a run that only chooses a setting)
    metric: str | None = None  # the score that picks the model kept (selection.py); None: the kind's HEADLINE


def finetune(settings: FinetuneSettings, files: TaskFiles, backbone: tuple[Encoder, Tokenizer], device: torch.device,
             amp: Precision) -> dict:
    """Train on `files.train`, evaluate on `files.dev`, write everything into `files.out`, which
    this run holds alone meanwhile (training.py); return eval.json's contents. `settings` are the
    command's flags with a recipe's values (settings.py:FinetuneSettings.with_recipe): every length, rate and, for
    a sentence task, the pooling."""
    dist = processes()
    with claimed(files.out, settings, dist):
        return finetune_into(settings, files, backbone, device, amp, dist)


def finetune_into(settings: FinetuneSettings, files: TaskFiles, backbone: tuple[Encoder, Tokenizer], device: torch.device,
                  amp: Precision, dist: Distributed) -> dict:
    task = "tokens" if reads_words(settings.task, files.train) else settings.task
    if task == "tokens":
        refuse_sentence_flags(settings, files)
    task, train_data, dev, labels, train_targets, dev_targets = read_splits(task, files)
    encoder, tokenizer = backbone
    max_len = check_max_len(settings.max_len, encoder.config)
    teacher_logits = None
    if settings.teacher:  # before the seed is set: the teacher draws no random numbers, the student's run stays the same
        settings = distillation_settings(settings, task)
        train_data, train_targets, teacher_logits = distillation_rows(settings, task, train_data, train_targets, labels, max_len,
                                                                      device, files.out)
    config = task_config(encoder.config, max_len, settings)
    loop = task_loop(settings, len(train_data), files.out)
    steps = loop.steps

    torch.manual_seed(settings.seed)  # the head's initialisation and dropout
    outputs = 1 if labels is None else len(labels)  # regression: one output, the score
    if task == "tokens":
        model = TokenClassifier(config, outputs)
    else:
        model = SequenceClassifier(config, outputs, settings.pooling)
    model.encoder.load_state_dict(encoder.state_dict())
    model.to(device)
    started = time.perf_counter()
    objective = TaskLoss(model) if teacher_logits is None else TaskDistillation(model, settings.alpha, settings.temperature)

    def predict_rows(rows: list[int]) -> list[tuple]:  # (prediction, its score) of some dev rows
        return list(zip(*predict_with_scores(model, tokenizer, dev.rows(rows), settings.batch_size, max_len, device, amp)))

    def score() -> tuple[dict, tuple[list, list]]:  # the dev scores, and what predictions.tsv writes: each prediction and its score
        predicted, scores = map(list, zip(*in_shards(len(dev), predict_rows, dist))) if len(dev) else ([], [])
        return dev_scores(task, predicted, dev_targets, labels), (predicted, scores)

    evaluations = Evaluations(model, score, files.metric or HEADLINE[task], settings.patience, dist, last_step=steps)
    train_loss = train_task(objective, tokenizer, train_data, train_targets, loop, settings, max_len, amp, files.out, evaluations,
                            dist, teacher_logits)
    kept = evaluations.keep_best()
    predicted, scores = kept.pop("predicted")

    report = dict(kept)
    report.update(task=task, examples=len(dev), steps=steps, train_loss=train_loss, seconds=round(time.perf_counter() - started, 1),
                  args=settings.recorded(), recipe=settings.recipe_description)
    if dist.is_main:
        write_outputs(files.out, Classifier(model, tokenizer, labels) if files.keep_model else None, report,
                      prediction_rows(dev, predicted, dev_targets, labels, scores))
    done(files.out, dist)
    headline = HEADLINE[task]
    scored = f"held-out {headline} {report[headline]:.4f} on {len(dev)} training examples set aside" if files.held_out else \
        f"dev {headline} {report[headline]:.4f} on {len(dev)} examples"
    kept_at = f" (step {report['kept_step']}, the best {report['selected_by']} of {len(report['evaluations'])} evaluations)" \
        if len(report["evaluations"]) > 1 else ""
    print(f"{files.name}: {scored}{kept_at}; {'model, ' if files.keep_model else ''}eval.json and predictions.tsv in "
          f"{files.out}", flush=True)
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


def reads_words(task: str, train: Path) -> bool:
    """Whether a job tags words (--task tokens, or "auto" on a tagged training file) rather than reading sentences."""
    return task == "tokens" or (task == "auto" and is_tagged(train))


def refuse_sentence_flags(settings: FinetuneSettings, files: TaskFiles) -> None:
    """A tagging task refuses the flags of sentence tasks rather than ignore them: it reads every
    token's own vector (no --pooling) and is never subsampled (no --max-train-examples). `run`
    asks before anything is trained, and each job again."""
    task = f"the tagging task {files.name}" if settings.tasks else "a tagging task"
    if settings.pooling is not None:
        raise ValueError(f"--pooling is for sentence tasks; {task} reads every token's own vector, so drop it")
    if files.max_train is not None:
        raise ValueError(f"--max-train-examples subsamples sentence tasks; {task} is never subsampled, so drop it")


def read_splits(task: str, files: TaskFiles) -> tuple:
    """(task, train data, dev data, label map or None for regression, train targets, dev
    targets); "auto" becomes what the training labels say (`task_of`)."""
    if task == "tokens":
        train_data, dev = read_tagged(files.train), read_tagged(files.dev)
        labels = LabelMap.from_labels(train_data.flat().labels)
        return task, train_data, dev, labels, tag_ids(train_data, labels), tag_ids(dev, labels)
    train_data = read_task(files.train, columns=files.columns)
    if files.max_train is not None and files.max_train < len(train_data):
        print(f"{files.name}: training on {files.max_train} of the {len(train_data)} examples of {files.train.name} "
              f"(--max-train-examples: a random subsample, the same for every seed)", flush=True)
        train_data = train_data.subsample(files.max_train)
    if files.held_out is not None:  # scored on training rows set aside: the dev file is never opened
        train_data, dev = train_data.held_out(files.held_out)
    else:
        dev = read_task(files.dev, columns=files.columns)
    if (train_data.pairs is None) != (dev.pairs is None):
        kind = {True: "single texts", False: "sentence pairs"}
        raise ValueError(f"{train_data.path} holds {kind[train_data.pairs is None]} but {dev.path} "
                         f"{kind[dev.pairs is None]}; use two files of one task")
    task = task_of(train_data) if task == "auto" else task
    if task == "regression":
        return task, train_data, dev, None, regression_targets(train_data), regression_targets(dev)
    labels = LabelMap.from_labels(train_data.labels) if files.labels is None else LabelMap(files.labels)
    return task, train_data, dev, labels, labels.encode(train_data), labels.encode(dev)


def distillation_settings(settings: FinetuneSettings, task: str) -> FinetuneSettings:
    """A student's settings with the --teacher loss's values filled in (eval.json records them):
    --alpha's default, and --temperature's for classes and answer spans (a regression student takes none)."""
    if task == "tokens":
        raise ValueError("--teacher distils sentence tasks (classification, regression) and question answering; a tagging "
                         "task has no teacher here")
    if task == "regression" and settings.temperature is not None:
        raise ValueError("--temperature softens class distributions; a regression student matches the teacher's score "
                         "by squared error, so drop --temperature")
    temperature = DEFAULT_TEMPERATURE if settings.temperature is None else settings.temperature
    return settings.replace(alpha=DEFAULT_ALPHA if settings.alpha is None else settings.alpha,
                            temperature=None if task == "regression" else temperature)


def distillation_rows(settings: FinetuneSettings, task: str, data: TaskData, targets: list, labels: LabelMap | None,
                      max_len: int, device, out: Path) -> tuple[TaskData, list, torch.Tensor]:
    """What a student of `--teacher` trains on: the training rows, then the `--transfer`
    texts (labels left out: their target is IGNORE_INDEX, or NaN for regression), with the
    teacher's logits [N, C] on every row (teacher.py)."""
    teacher = load_teacher(settings.teacher)
    order = label_order(teacher, labels)  # a teacher of another task fails here, before anything is computed
    if settings.transfer:
        extra = read_texts(settings.transfer, Columns(tuple(settings.text_columns)) if settings.text_columns else None)
        if (extra.pairs is None) != (data.pairs is None):
            kind = {True: "single texts", False: "sentence pairs"}
            raise ValueError(f"--transfer {extra.path} holds {kind[extra.pairs is None]} but the task has "
                             f"{kind[data.pairs is None]}; give it texts shaped like the training examples")
        pairs = None if data.pairs is None else data.pairs + extra.pairs
        data = TaskData(data.path, data.texts + extra.texts, pairs, data.labels + extra.labels, data.lines + extra.lines)
        targets = targets + [IGNORE_INDEX if labels is not None else math.nan] * len(extra)
    max_len = min(max_len, teacher.model.config.max_length)
    key = cache_key(teacher.path, max_len, data.texts, data.pairs)
    logits = read_cache(out / TEACHER_FILE, key)
    if logits is None or len(logits) != len(data):
        teacher.model.to(device)
        parts = []
        with tqdm(total=len(data), desc="teacher", unit="example", dynamic_ncols=True) as bar:
            for batch, _ in logit_batches(teacher.model, teacher.tokenizer, data, settings.batch_size, max_len, device):
                parts.append(batch.float().cpu())
                bar.update(len(batch))
        logits = torch.cat(parts)  # [N, C] in the teacher's class order
        logits = logits if order is None else logits[:, order]  # -> the task's
        write_cache(out / TEACHER_FILE, key, logits)
    return data, targets, logits


def tag_ids(data: TaggedData, labels: LabelMap) -> list[list[int]]:
    """Every word's tag id, sentence by sentence."""
    flat = iter(labels.encode(data.flat()))
    return [[next(flat) for _ in words] for words in data.words]


def prediction_rows(data, predicted: list, gold: list | None, labels: LabelMap | None, scores: list | None = None) -> str:
    """predictions.tsv: one row per example (per word for tagging): the prediction, the gold
    label beside it when there is one, and for classes the predicted one's probability
    (`scores`; a regression prediction is its own score)."""
    show = (lambda score: f"{score:.6g}") if labels is None else (lambda label_id: f"{labels.names[label_id]}")
    columns = {"prediction": (predicted, show)}
    if gold is not None:
        columns["label"] = (gold, show)
    if scores is not None and labels is not None:
        columns["score"] = (scores, lambda probability: f"{probability:.6g}")
    if isinstance(data, TaggedData):  # one row per word; words past --max-len have no prediction: "-"
        header = ["sentence", "word"]
        rows = [[str(i), word, *(write(values[i][j]) if j < len(values[i]) else "-" for values, write in columns.values())]
                for i, words in enumerate(data.words) for j, word in enumerate(words)]
    else:
        header = ["index"]
        rows = [[str(i), *(write(values[i]) for values, write in columns.values())] for i in range(len(predicted))]
    return "".join("\t".join(row) + "\n" for row in [header + list(columns), *rows])


def write_outputs(out: Path, classifier: Classifier | None, report: dict, predictions: str) -> None:
    if classifier is not None:
        save_classifier(*classifier, out)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "eval.json", report)
    write_atomic(out / "predictions.tsv", predictions)


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


def train_task(objective: TaskLoss | TaskDistillation, tokenizer, data: TaskData | TaggedData, targets: list,
               loop: LoopSettings, settings: FinetuneSettings, max_len: int, amp: Precision, out: Path, evaluations: Evaluations,
               dist: Distributed, teacher_logits: torch.Tensor | None = None) -> float:
    """`loop.steps` steps of the pretraining loop with its run tools (training.py) on shuffled
    batches, a new order each epoch, split over `dist`'s processes and --grad-accum; dev scored by
    `evaluations`; each batch carries its rows of `teacher_logits` when there are any. Returns
    the mean loss of the last logged window: the last tenth of the steps."""
    streams = task_streams(len(data), settings.batch_size, loop.seed, settings.grad_accum, dist)
    batches = [(with_teacher(encode(tokenizer, objective.model.config, data, rows, max_len, targets)[0], teacher_logits, rows)
                for rows in stream) for stream in streams]
    return train_steps(objective, batches, streams, loop, settings, amp, out, evaluations, settings.recorded(), dist)


def with_teacher(batch: dict, teacher_logits: torch.Tensor | None, rows: list[int]) -> dict:
    return batch if teacher_logits is None else {**batch, "teacher_logits": teacher_logits[rows]}  # [B, C]
