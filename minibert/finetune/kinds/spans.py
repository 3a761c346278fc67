"""Question answering: an answer span out of a passage, as BERT reads SQuAD (Devlin et al., 2019, section 4.2).

The kind's parts are files of their own (kinds/__init__.py's map): squad.py reads the questions,
windows.py cuts their passages into windows, span_decoding.py finds each question's best span
and writes its files, squad_scores.py scores them. The training is every fine-tune's, with the family's SQuAD row of its recipe (recipes.py). The
families' releases differ beyond that: ELECTRA's SQuAD head predicts the end given the start (beam
search) and adds an answerability classifier for 2.0, ALBERT v2's an answer-class head, RoBERTa's
2.0 an answerability classifier; minibert's is BERT's, for every family, and [CLS] says "no answer".
With --teacher the head also learns a SQuAD-tuned span extractor's start and end distributions on
the student's own windows (soft_targets.py:SpanDistillation). A model answers new questions as its
fine-tune answered dev: its checkpoint records how it read them (`Decoding`, `reading`).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

from ...heads import SpanExtractor
from ...operations.files import write_atomic, write_json
from ...operations.precision import Precision
from ...tokenizers.base import Tokenizer
from ...tokenizers.load import offsets_tokenizer
from ..soft_targets import SpanDistillation
from .kind import Kind, Task, check_max_len, in_batches, outputs
from .sentence_files import read_table, subsample_rows, task_file
from .span_decoding import Decoded, best_spans, decode_spans, write_predictions
from .squad import FORMATS, QAExample, SquadData, is_squad, read_squad
from .squad_scores import reanswered_threshold, squad_scores
from .windows import Window, question_windows, window_inputs

TABLES = (".tsv", ".csv")  # predict's other layout: question and context columns, as a task file has its columns
QA_MAX_LEN = 384  # BERT's and transformers' SQuAD windows


class Decoding(NamedTuple):
    """How a question's windows are cut and its answer chosen: the fine-tune's question-answering
    flags (settings.py takes their defaults from here), which the model's checkpoint records in its
    `reading` beside --max-len and whether it may answer "" (`predict --null-threshold` overrides one)."""

    max_query_len: int = 64
    doc_stride: int = 128
    n_best: int = 20
    max_answer_len: int = 30
    null_threshold: float = 0.0

    @classmethod
    def of(cls, values: dict) -> "Decoding":
        return cls(**{name: values[name] for name in cls._fields if values.get(name) is not None})


class Answer(NamedTuple):
    """One question's answer: its text, its probability among the n best, where it starts in the context (-1: none)."""

    text: str
    score: float
    start: int


@dataclass(kw_only=True)
class Questions(Task):
    questions: SquadData  # the training questions (a teacher is checked on some of them)
    windows: list[list[Window]]  # each dev question's windows
    unaligned: dict  # the training answers no token span spells exactly (windows.py:Alignment)


def qa_max_len(max_len: int | None, config) -> int:
    """The window length: --max-len (checked as every fine-tune's), else 384 where the model's
    positions reach it (rotary: any length), else the model's limit."""
    if max_len is not None:
        return check_max_len(max_len, config)
    return QA_MAX_LEN if config.for_length(QA_MAX_LEN) is not None else config.max_length


class Spans(Kind):
    name = "qa"
    headline = "f1"
    head = "span_extractor"
    model_class = SpanExtractor
    labelled = False
    adjective = "question-answering"
    formats = FORMATS
    rows_word = "questions"
    predictions_file = "predictions.json"

    def detects(self, path: Path) -> bool:
        return is_squad(path)

    def refuse(self, settings, files) -> None:
        """Flags of sentence tasks that a span head has no use for are refused, not ignored."""
        task = f"the question-answering task {files.name}" if settings.tasks else "question answering"
        if settings.pooling is not None:
            raise ValueError(f"--pooling is for sentence tasks; {task} reads every passage token's own vector, so drop it")
        if settings.transfer is not None:
            raise ValueError(f"--transfer gives a sentence task's teacher unlabelled texts; {task} distils on its training "
                             f"windows alone, so drop it")
        if settings.text_columns is not None:
            raise ValueError(f"--text-columns names a sentence task's columns; {task} reads question and context, so drop it")

    def recipe_row(self, train: Path) -> str:
        """Which SQuAD the training file is: "2.0" when some of its questions have no answer, else "1.1"."""
        return "2.0" if read_squad(train).has_impossible else "1.1"

    def read(self, files, settings, backbone) -> Questions:
        encoder, tokenizer = backbone
        train, dev = read_squad(files.train), read_squad(files.dev)
        if files.max_train is not None and files.max_train < len(train):
            keep = subsample_rows(len(train), files.max_train)
            print(f"{files.name}: training on {files.max_train} of the {len(train)} questions of {files.train.name} "
                  f"(--max-train-examples: a random subsample, the same for every seed)", flush=True)
            train = SquadData(train.path, [train[i] for i in keep])
        if dev.has_impossible and not train.has_impossible:
            raise ValueError(f"{files.dev} holds SQuAD 2.0 questions without an answer but {files.train} has none, so the head "
                             f"would never learn to answer \"\"; train on SQuAD 2.0 data too, or score on SQuAD 1.1 data")
        probe = [text for example in train[:16] for text in (example.question, example.context)]
        tokenizer = offsets_tokenizer(tokenizer, settings.init, probe)  # the model keeps it: answers map back to characters
        max_len = qa_max_len(settings.max_len, encoder.config)
        shape = dict(max_len=max_len, max_query_len=settings.max_query_len, doc_stride=settings.doc_stride)
        train_windows, alignment = question_windows(tokenizer, train, labelled=True, **shape)
        dev_windows, _ = question_windows(tokenizer, dev, labelled=False, **shape)
        print(f"{files.name}: {len(train)} training questions in {len(train_windows)} windows of {max_len} tokens "
              f"(--doc-stride {settings.doc_stride}); {alignment.line()}", flush=True)
        by_question = [[] for _ in dev]
        for window in dev_windows:
            by_question[window.example].append(window)
        reading = {"max_len": max_len, **Decoding.of(settings.recorded())._asdict(), "with_null": train.has_impossible}
        return Questions(self, tokenizer, encoder.config, max_len, train_windows, dev, None, reading, questions=train, windows=by_question,
                         unaligned=alignment._asdict())

    def inputs(self, task: Questions, rows: list[int]) -> dict:
        return window_inputs(task.train, rows, task.tokenizer, task.config.type_vocab_size >= 2, labelled=True)

    def predict(self, model, task: Questions, rows, batch_size, device, amp) -> list:
        """(answer, n-best list, null odds) of some dev questions."""
        windows = [window._replace(example=i) for i, row in enumerate(rows) for window in task.windows[row]]
        questions = [task.dev[row] for row in rows]
        start_logits, end_logits = window_logits(model, task.tokenizer, windows, batch_size, device, amp)
        found = decode_windows(questions, windows, start_logits, end_logits, Decoding.of(task.reading), task.reading["with_null"])
        return [(found.predictions[q.id], found.nbest[q.id], found.null_odds.get(q.id)) for q in questions]

    def scores(self, task: Questions, predicted: list) -> dict:
        answers = decoded(task, predicted)
        if not task.reading["with_null"]:
            return squad_scores(task.dev, answers.predictions)
        reanswered = reanswered_threshold(task.dev, best_spans(answers), answers.null_odds)  # the threshold step
        return {**squad_scores(task.dev, answers.predictions, answers.null_odds), "reanswered": reanswered}

    def report(self, task: Questions) -> dict:
        return {"windows": sum(map(len, task.windows)), "with_null": task.reading["with_null"], "unaligned": task.unaligned}

    def write(self, out: Path, task: Questions, predicted: list) -> None:
        write_predictions(out, decoded(task, predicted))

    def result(self, report: dict, task: Questions, files, settings) -> str:
        best = report.get("reanswered")  # SQuAD 2.0: the threshold its scores were made at, and the best one for them
        threshold = "" if best is None else (
            f" at --null-threshold {settings.null_threshold:g} (the best threshold for these questions: {best['f1_thresh']}, "
            f"F1 {best['f1']:.2f}; python -m minibert predict {files.out} FILE --null-threshold {best['f1_thresh']} "
            f"answers with it)")
        return f"dev exact match {report['exact_match']:.2f}, F1 {report['f1']:.2f} on {len(task.dev)} questions{threshold}"

    # --- a teacher ---------------------------------------------------------------------------------

    def teach(self, task: Questions, teacher, settings, device, amp, cache) -> tuple[Questions, torch.Tensor]:
        """The teacher's start and end logits on every training window [W, 2, T] (T: the longest
        window; 0 past a window's end): a span extractor fine-tuned on SQuAD that splits text as
        the student does (the same pieces with the same ids, the same split of a few training
        questions and passages), since its logits are per token of the student's own windows."""
        if teacher.kind is not self:
            raise ValueError(f"--teacher {teacher.path} is no question-answering model; a question-answering student distils "
                             f"from `train.py finetune`'s output on SQuAD data (a span extractor) with the student's tokenizer")
        own, student = teacher.tokenizer, task.tokenizer
        probe = [text for example in task.questions[:8] for text in (example.question, example.context)]
        same = (type(own) is type(student) and own.vocab_size == student.vocab_size
                and all(own.piece(i) == student.piece(i) for i in range(own.vocab_size))
                and all(own.tokenize_to_ids(text) == student.tokenize_to_ids(text) for text in probe))
        if not same:
            raise ValueError(f"--teacher {teacher.path} splits text with another tokenizer than the student's ({own.kind}, "
                             f"{own.vocab_size} tokens); its start and end logits are per token, so fine-tune the teacher "
                             f"from a checkpoint with the student's tokenizer")
        if teacher.model.config.for_length(task.max_len) is None:
            raise ValueError(f"--teacher {teacher.path} reads at most {teacher.model.config.max_length} positions but the "
                             f"student's windows are {task.max_len} tokens; give --max-len {teacher.model.config.max_length} or less")
        digest = hashlib.sha256()
        for window in task.train:
            digest.update(json.dumps([window.input_ids, window.token_type_ids]).encode())
        logits = cache.read(teacher.path, task.max_len, digest.hexdigest())
        if logits is None or len(logits) != len(task.train):
            teacher.model.to(device)
            starts, ends = window_logits(teacher.model, own, task.train, settings.batch_size, device, amp)
            logits = torch.stack([starts, ends], dim=1)  # [W, 2, T]
            cache.write(logits)
            teacher.model.cpu()
        print(f"--teacher {teacher.path}: start and end logits on {len(task.train)} training windows; loss alpha "
              f"{settings.alpha:g}, temperature {settings.temperature:g}", flush=True)
        return task, logits

    def distillation(self, model, settings) -> SpanDistillation:
        return SpanDistillation(model, settings.alpha, settings.temperature)

    def teacher_rows(self, logits: torch.Tensor, rows: list[int], batch: dict) -> torch.Tensor:
        """A batch's rows of the teacher's logits, cut to the batch's width [B, 2, width]."""
        return logits[list(rows), :, :batch["input_ids"].shape[1]]

    # --- a fine-tuned model ---------------------------------------------------------------------------

    def build(self, config, marker: dict) -> SpanExtractor:
        return SpanExtractor(config)

    def marker(self, model, reading: dict | None) -> dict:
        return {"reading": reading or {}}

    def reading(self, marker: dict, model) -> dict:
        return dict(marker.get("reading") or {})

    def predict_rows(self, classifier, rows: list, batch_size: int, max_len: int | None, amp) -> list[Answer]:
        """An Answer per (question, context) pair, read in windows of `max_len` (None: its fine-tune's)."""
        if not isinstance(rows, list) or not all(isinstance(row, tuple) and len(row) == 2 and all(isinstance(t, str) and t.strip()
                                                                                                  for t in row) for row in rows):
            raise ValueError('a question-answering model takes a list of (question, context) pairs of non-empty texts, '
                             'e.g. [("Who wrote it?", "The book was written by Ann.")]')
        examples = SquadData(Path("<rows>"), [QAExample(str(i), "", q, c, []) for i, (q, c) in enumerate(rows)])
        return list(answered(classifier.model, classifier.tokenizer, classifier.reading, examples, batch_size, max_len, amp).values())

    def predict_file(self, classifier, folder, file, out, text_columns, batch_size, max_len, amp, null_threshold) -> str:
        """Every question of `file` with its answer in `out`: predictions.json's layout for a .json
        `out`, else a TSV of id, answer, score (its probability among the n best) and its first
        character in the context (-1: none); "" past `null_threshold` (None: the model's own)."""
        if text_columns:
            raise ValueError("--text-columns names a sentence classifier's columns; a question-answering model reads "
                             "question and context columns, so drop it")
        answers = answered(classifier.model, classifier.tokenizer, classifier.reading, read_questions(Path(file)), batch_size,
                           max_len, amp, null_threshold)
        if out.suffix == ".json":
            write_json(out, {qid: found.text for qid, found in answers.items()})
        else:
            write_atomic(out, answer_table(answers))
        return f"{len(answers)} questions of {file} answered into {out}"

    def check_null_threshold(self, classifier, folder: Path) -> None:
        if not classifier.reading.get("with_null"):
            raise ValueError(f"--null-threshold sets when a model fine-tuned on SQuAD 2.0 answers \"\"; {folder} was fine-tuned "
                             f"on SQuAD 1.1 data, which has no unanswerable questions: drop it")


def decoded(task: Questions, predicted: list) -> Decoded:
    """The dev answers, their n-best lists and (2.0) null odds, by question id."""
    predictions, nbest, null_odds = (dict(zip([example.id for example in task.dev], part)) for part in zip(*predicted))
    return Decoded(predictions, nbest, null_odds if task.reading["with_null"] else {})


def answered(model: SpanExtractor, tokenizer: Tokenizer, reading: dict, examples: SquadData, batch_size: int,
             max_len: int | None = None, amp: Precision | None = None, null_threshold: float | None = None) -> dict[str, Answer]:
    """Each question's Answer by id, in the examples' order, read and decoded as its fine-tune did
    (`reading`, its checkpoint's: windows of --max-len, unless `max_len` says otherwise, and its
    decoding flags, unless `null_threshold` says otherwise); the model under `amp` (None: fp32)."""
    decoding = Decoding.of({**reading, "null_threshold": null_threshold})
    max_len = qa_max_len(reading.get("max_len") if max_len is None else max_len, model.config)
    device = next(model.parameters()).device
    windows, _ = question_windows(tokenizer, examples, max_len, decoding.max_query_len, decoding.doc_stride, labelled=False)
    start_logits, end_logits = window_logits(model, tokenizer, windows, batch_size, device, amp)
    found = decode_windows(examples, windows, start_logits, end_logits, decoding, with_null=bool(reading.get("with_null")))
    return {example.id: chosen(found, example.id) for example in examples}


def chosen(decoded: Decoded, question_id: str) -> Answer:
    """One question's Answer from its decoding: the prediction, with the probability and start
    of its n-best entry ("" for no answer: start -1)."""
    text = decoded.predictions[question_id]
    best = next((entry for entry in decoded.nbest[question_id] if entry["text"] == text), None)
    start = -1 if not text or best is None or best.get("start") is None else best["start"]
    return Answer(text, 0.0 if best is None else float(best["probability"]), start)


def answer_table(answers: dict[str, Answer]) -> str:
    """The answers as a TSV (id, answer, score, start). An answer holding a tab, a line break or a
    quote is quoted as the csv module and spreadsheets read it; every other field is as it is."""
    table = io.StringIO()
    writer = csv.writer(table, dialect="excel-tab", lineterminator="\n")
    writer.writerow(["id", "answer", "score", "start"])
    writer.writerows([qid, found.text, f"{found.score:.6g}", found.start] for qid, found in answers.items())
    return table.getvalue()


def decode_windows(examples: list[QAExample], windows: list[Window], start_logits: torch.Tensor, end_logits: torch.Tensor,
                   decoding: Decoding, with_null: bool = False) -> Decoded:
    """Every question's answer from its windows' logits [W, T] (window_logits'): their passage offsets
    as decode_spans takes them, then its decoding (by --n-best, --max-answer-len and, `with_null`
    (SQuAD 2.0), --null-threshold). Apart from the logits, so that a caller that shows them (the
    explorer) decodes the very numbers it shows."""
    offsets = np.full((len(windows), start_logits.shape[1], 2), -1, dtype=np.int64)  # [W, T, 2]: -1 outside the passage
    for row, window in enumerate(windows):
        inside = [i for i, span in enumerate(window.offsets) if span is not None]
        offsets[row, inside] = [window.offsets[i] for i in inside]
    return decode_spans(examples, [window.example for window in windows], offsets, start_logits, end_logits,
                        n_best=decoding.n_best, max_answer_len=decoding.max_answer_len, allow_null=with_null,
                        null_threshold=decoding.null_threshold)


def window_logits(model: SpanExtractor, tokenizer: Tokenizer, windows: list[Window], batch_size: int, device,
                  amp: Precision | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The start and end logits of every window [W, T] (T: the longest window; 0 past a window's
    end), in eval mode, fp32 unless `amp` says otherwise."""
    longest = max((len(window.input_ids) for window in windows), default=0)
    starts, ends = torch.zeros(len(windows), longest), torch.zeros(len(windows), longest)
    segments = model.config.type_vocab_size >= 2
    batches = [list(rows) for rows in in_batches(len(windows), batch_size)]
    inputs = (window_inputs(windows, rows, tokenizer, segments, labelled=False) for rows in batches)
    for rows, out in zip(batches, outputs(model, inputs, device, amp)):
        width = out.start_logits.shape[1]
        starts[rows[0]:rows[0] + len(rows), :width] = out.start_logits.float().cpu()  # [B, width] into [W, T]
        ends[rows[0]:rows[0] + len(rows), :width] = out.end_logits.float().cpu()
    return starts, ends


def read_questions(path: Path) -> SquadData:
    """The questions of a predict FILE: SQuAD's .json or .jsonl (answers optional), or a table
    with question and context columns (and id), read as a task's table is (sentence_files.py)."""
    if path.suffix in FORMATS:
        return read_squad(path, labelled=False)
    examples = []
    with task_file(path, (*FORMATS, *TABLES), "a question-answering model's questions") as file:
        rows = read_table(path, file)
        header = next(rows, [])
        missing = [name for name in ("question", "context") if name not in header]
        if missing:
            raise ValueError(f"{path} has no {' or '.join(missing)} column; name the columns question and context (and id)")
        for line, row in rows:
            question, context = row["question"].strip(), row["context"]
            if not question or not context.strip():
                raise ValueError(f"{path} line {line}: the {'question' if not question else 'context'} is empty; "
                                 f"fill it in or drop the row")
            examples.append(QAExample(row.get("id") or str(len(examples) + 1), "", question, context, []))
    if not examples:
        raise ValueError(f"{path} holds no questions")
    ids = [example.id for example in examples]
    if len(set(ids)) < len(ids):
        repeated = next(qid for qid in ids if ids.count(qid) > 1)
        raise ValueError(f"{path}: id {repeated!r} occurs twice; give every question its own id")
    return SquadData(path, examples)


SPANS = Spans()
