"""One question-answering fine-tune: SQuAD's files in, a span head trained, answers scored as SQuAD scores them.

    read        squad.py: SQuAD 1.1 or 2.0's JSON, or JSONL; every answer checked against its passage
    windows     windows.py: the question, then the passage in windows of --max-len tokens
                overlapping by --doc-stride; the gold start and end in each window ([CLS] where it
                does not hold the answer); how many answers could not be aligned to tokens
    train       heads.py:SpanExtractor on the windows, with the loop every fine-tune runs
                (training.py: schedule, checkpoints, --resume, --eval-every, torchrun)
    decode      span_decoding.py: the best span of each question over its windows
    score       scores of SQuAD's official scripts, under their keys: exact match and F1 (2.0: HasAns,
                NoAns, best_f1), and for 2.0 the --null-threshold that answering again would score best with
    OUT         the model, eval.json, predictions.json (the official layout, {id: answer}),
                nbest_predictions.json, and for SQuAD 2.0 null_odds.json

BERT's recipe (section 4.2) is the one every family released: the same AdamW, warm-up and
linear decay as any fine-tune, on windows of 384 tokens, for two or three epochs; each family's
own values are its recipe's SQuAD row (recipes.py).

With --teacher the head also learns the softened start and end distributions of a span
extractor already fine-tuned on SQuAD (soft_targets.py:SpanDistillation), DistilBERT's second
step of distillation. The teacher reads the student's own windows, which is why it must share
the student's tokenizer (teacher.py:load_span_teacher); its logits are computed once before
training and cached in OUT, as a sentence task's are.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import torch

from ..heads import SpanExtractor
from ..operations.distributed import Distributed
from ..operations.files import write_json
from ..operations.precision import Precision
from ..model import Encoder
from ..tokenizers.base import Tokenizer
from ..tokenizers.load import offsets_tokenizer
from .checkpoint import save_classifier
from .job import TaskFiles, TaskLoss, distillation_settings, task_config, task_loop
from .selection import Evaluations
from .settings import HEADLINE, FinetuneSettings
from .answering import Decoding, answer, qa_max_len, window_logits
from .soft_targets import SpanDistillation
from .teacher import TEACHER_FILE, cache_key, load_span_teacher, read_cache, write_cache
from .span_decoding import Decoded, best_spans, write_predictions
from .squad import QAExample, SquadData, is_squad, read_squad
from .tasks import subsample_rows
from .qa_scores import reanswered_threshold, squad_scores
from .training import claimed, done, in_shards, processes, task_streams, train_steps
from .windows import Window, question_windows, window_inputs


def asks_questions(task: str, train: Path) -> bool:
    """Whether a job answers questions (--task qa, or "auto" on SQuAD's files)."""
    return task == "qa" or (task == "auto" and is_squad(train))


def squad_version(train: Path) -> str:
    """Which SQuAD a training file is, and so which recipe row it takes: "2.0" when some of its
    questions have no answer, else "1.1"."""
    return "2.0" if read_squad(train).has_impossible else "1.1"


def refuse_for_questions(settings: FinetuneSettings, files: TaskFiles) -> None:
    """Flags of sentence tasks that a span head has no use for are refused, not ignored."""
    task = f"the question-answering task {files.name}" if settings.tasks else "question answering"
    if settings.pooling is not None:
        raise ValueError(f"--pooling is for sentence tasks; {task} reads every passage token's own vector, so drop it")
    if settings.transfer is not None:
        raise ValueError(f"--transfer gives a sentence task's teacher unlabelled texts; {task} distils on its training "
                         f"windows alone, so drop it")
    if settings.text_columns is not None:
        raise ValueError(f"--text-columns names a sentence task's columns; {task} reads question and context, so drop it")


def finetune_qa(settings: FinetuneSettings, files: TaskFiles, backbone: tuple[Encoder, Tokenizer], device: torch.device,
                amp: Precision) -> dict:
    """Train a span head on `files.train`'s questions, answer `files.dev`'s, write it all into
    `files.out` (held by this run alone meanwhile); return eval.json's contents."""
    dist = processes()
    with claimed(files.out, settings, dist):
        return answer_into(settings, files, backbone, device, amp, dist)


def answer_into(settings: FinetuneSettings, files: TaskFiles, backbone: tuple[Encoder, Tokenizer], device: torch.device,
                amp: Precision, dist: Distributed) -> dict:
    encoder, tokenizer = backbone
    train_examples, dev = read_squad(files.train), read_squad(files.dev)
    if files.max_train is not None and files.max_train < len(train_examples):
        keep = subsample_rows(len(train_examples), files.max_train)
        print(f"{files.name}: training on {files.max_train} of the {len(train_examples)} questions of {files.train.name} "
              f"(--max-train-examples: a random subsample, the same for every seed)", flush=True)
        train_examples = SquadData(train_examples.path, [train_examples[i] for i in keep])
    if dev.has_impossible and not train_examples.has_impossible:
        raise ValueError(f"{files.dev} holds SQuAD 2.0 questions without an answer but {files.train} has none, so the head "
                         f"would never learn to answer \"\"; train on SQuAD 2.0 data too, or score on SQuAD 1.1 data")
    probe = [text for example in train_examples[:16] for text in (example.question, example.context)]
    tokenizer = offsets_tokenizer(tokenizer, settings.init, probe)  # the model keeps it: answers map back to characters
    max_len = qa_max_len(settings.max_len, encoder)
    shape = dict(max_len=max_len, max_query_len=settings.max_query_len, doc_stride=settings.doc_stride)
    train_windows, alignment = question_windows(tokenizer, train_examples, labelled=True, **shape)
    dev_windows, _ = question_windows(tokenizer, dev, labelled=False, **shape)
    print(f"{files.name}: {len(train_examples)} training questions in {len(train_windows)} windows of {max_len} tokens "
          f"(--doc-stride {settings.doc_stride}); {alignment.line()}", flush=True)
    teacher_logits = None
    if settings.teacher:  # before the seed is set: the teacher draws no random numbers, the student's run stays the same
        settings = distillation_settings(settings, "qa")
        teacher_logits = span_teacher_logits(settings, tokenizer, train_examples, train_windows, max_len, device, amp, files.out)
    config = task_config(encoder.config, max_len, settings)
    loop = task_loop(settings, len(train_windows), files.out)

    torch.manual_seed(settings.seed)  # the head's initialisation and dropout
    model = SpanExtractor(config)
    model.reading = {"max_len": max_len, **Decoding.of(settings.recorded())._asdict(),
                     "with_null": train_examples.has_impossible}  # trained on SQuAD 2.0: it may answer ""
    model.encoder.load_state_dict(encoder.state_dict())
    model.to(device)
    started = time.perf_counter()
    segments = config.type_vocab_size >= 2
    with_null = model.reading["with_null"]

    by_question = [[] for _ in dev]  # each question's windows
    for window in dev_windows:
        by_question[window.example].append(window)

    def answer_rows(rows: list[int]) -> list[tuple]:  # (answer, n-best, null odds) of some dev questions
        windows = [window._replace(example=i) for i, row in enumerate(rows) for window in by_question[row]]
        found = answer(model, tokenizer, [dev[row] for row in rows], windows, Decoding.of(model.reading), settings.batch_size,
                       device, amp, with_null)
        return [(found.predictions[dev[row].id], found.nbest[dev[row].id], found.null_odds.get(dev[row].id)) for row in rows]

    def score() -> tuple[dict, Decoded]:  # the dev scores, and the answers the files hold
        ids, found = [example.id for example in dev], in_shards(len(dev), answer_rows, dist)
        answers = Decoded(*({qid: part[k] for qid, part in zip(ids, found)} for k in range(2)),
                          {qid: part[2] for qid, part in zip(ids, found)} if with_null else {})
        if not with_null:
            return squad_scores(dev, answers.predictions), answers
        reanswered = reanswered_threshold(dev, best_spans(answers), answers.null_odds)  # the threshold step
        return {**squad_scores(dev, answers.predictions, answers.null_odds), "reanswered": reanswered}, answers

    evaluations = Evaluations(model, score, files.metric or HEADLINE["qa"], settings.patience, dist, last_step=loop.steps)
    streams = task_streams(len(train_windows), settings.batch_size, loop.seed, settings.grad_accum, dist)
    batches = [(with_span_teacher(window_inputs(train_windows, rows, tokenizer, segments, labelled=True), teacher_logits, rows)
                for rows in stream) for stream in streams]
    objective = TaskLoss(model) if teacher_logits is None else SpanDistillation(model, settings.alpha, settings.temperature)
    train_loss = train_steps(objective, batches, streams, loop, settings, amp, files.out, evaluations, settings.recorded(), dist)
    kept = evaluations.keep_best()
    answers = kept.pop("predicted")

    report = dict(kept)
    report.update(task="qa", examples=len(dev), windows=len(dev_windows), with_null=with_null, steps=loop.steps, train_loss=train_loss,
                  unaligned={"answers": alignment.answers, "inexact": alignment.inexact, "lost": alignment.lost},
                  seconds=round(time.perf_counter() - started, 1), args=settings.recorded(), recipe=settings.recipe_description)
    if dist.is_main:
        if files.keep_model:
            save_classifier(model, tokenizer, None, files.out)
        write_predictions(files.out, answers)
        write_json(files.out / "eval.json", report)
    done(files.out, dist)
    kept_at = f" (step {report['kept_step']}, the best {report['selected_by']} of {len(report['evaluations'])} evaluations)" \
        if len(report["evaluations"]) > 1 else ""
    print(f"{files.name}: dev exact match {report['exact_match']:.2f}, F1 {report['f1']:.2f} on {len(dev)} questions"
          f"{threshold_words(report, settings.null_threshold, files.out)}{kept_at}; "
          f"{'model, ' if files.keep_model else ''}eval.json and predictions.json in {files.out}", flush=True)
    return report


def threshold_words(report: dict, threshold: float, out: Path) -> str:
    """For a model that may answer "" (SQuAD 2.0): the threshold its scores were made at, and the one
    that would score best if the dev questions were answered again with it (`reanswered_threshold`)."""
    best = report.get("reanswered")
    if best is None:
        return ""
    return (f" at --null-threshold {threshold:g} (the best threshold for these questions: {best['f1_thresh']}, F1 "
            f"{best['f1']:.2f}; python -m minibert predict {out} FILE --null-threshold {best['f1_thresh']} answers with it)")


def span_teacher_logits(settings: FinetuneSettings, tokenizer: Tokenizer, examples: SquadData, windows: list[Window],
                        max_len: int, device: torch.device, amp: Precision, out: Path) -> torch.Tensor:
    """The --teacher's start and end logits on every training window [W, 2, T] (T: the longest
    window; 0 past a window's end), read from OUT's cache when the teacher and windows are the same."""
    probe = [text for example in examples[:8] for text in (example.question, example.context)]
    teacher = load_span_teacher(settings.teacher, tokenizer, probe)
    if teacher.model.config.for_length(max_len) is None:
        raise ValueError(f"--teacher {teacher.path} reads at most {teacher.model.config.max_length} positions but the "
                         f"student's windows are {max_len} tokens; give --max-len {teacher.model.config.max_length} or less")
    digest = hashlib.sha256()
    for window in windows:
        digest.update(json.dumps([window.input_ids, window.token_type_ids]).encode())
    key = cache_key(teacher.path, max_len, digest.hexdigest())
    logits = read_cache(out / TEACHER_FILE, key)
    if logits is None or len(logits) != len(windows):
        teacher.model.to(device)
        starts, ends = window_logits(teacher.model, teacher.tokenizer, windows, settings.batch_size, device, amp)
        logits = torch.stack([starts, ends], dim=1)  # [W, 2, T]
        write_cache(out / TEACHER_FILE, key, logits)
        teacher.model.cpu()
    print(f"--teacher {teacher.path}: start and end logits on {len(windows)} training windows; loss alpha {settings.alpha:g}, "
          f"temperature {settings.temperature:g}", flush=True)
    return logits


def with_span_teacher(batch: dict, teacher_logits: torch.Tensor | None, rows) -> dict:
    """A batch of windows with its rows of the teacher's logits, cut to the batch's width [B, 2, width]."""
    if teacher_logits is None:
        return batch
    return {**batch, "teacher_logits": teacher_logits[list(rows), :, :batch["input_ids"].shape[1]]}
