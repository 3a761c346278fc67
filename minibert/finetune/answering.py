"""A fine-tuned question-answering model on new questions: `python -m minibert predict QA FILE --out predictions.json`.

FILE is SQuAD's .json or the Hugging Face .jsonl (answers, where present, are ignored), or a
.tsv / .csv with `question` and `context` columns (and an `id` column, else the row number is
the id). Each question is read in the windows its fine-tune read (--max-len, --max-query-len,
--doc-stride, which the model keeps: SpanExtractor.reading) and decoded by the same --n-best and --max-answer-len
(and, for a model fine-tuned on SQuAD 2.0, --null-threshold): so a model answers its own dev
file as its fine-tune did. --out FILE.json is the official layout, {id: answer}; any other name
is a TSV of id, answer, score (the answer's probability among the n best) and the answer's
first character in the context (-1 for no answer). `--null-threshold X` answers again with
another threshold, as BERT's README tunes it on dev (the fine-tune prints the best one). In
Python, `Classifier.predict` takes (question, context) pairs and gives an `Answer` per pair.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

from ..heads import SpanExtractor
from ..operations.files import write_atomic, write_json
from ..tokenizers.base import Tokenizer
from ..model import Encoder
from ..operations.precision import Precision
from .inference import check_max_len
from .span_decoding import Decoded, decode_spans
from .squad import FORMATS, QAExample, SquadData, read_squad
from .tasks import read_table, task_file
from .windows import Window, question_windows, window_inputs

TABLES = (".tsv", ".csv")  # question and context columns, as a task file has its columns
QA_MAX_LEN = 384  # BERT's and transformers' SQuAD windows


class Decoding(NamedTuple):
    """How a question's windows are cut and its answer chosen: the fine-tune's question-answering
    flags (settings.py takes their defaults from here), which the model keeps (SpanExtractor.reading)."""

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


def answer_rows(model: SpanExtractor, tokenizer: Tokenizer, rows: list, batch_size: int, max_len: int | None = None,
                amp: Precision | None = None) -> list[Answer]:
    """`Classifier.predict` for a span extractor: an Answer per (question, context) pair of `rows`."""
    if not isinstance(rows, list) or not all(isinstance(row, tuple) and len(row) == 2 and all(isinstance(t, str) and t.strip()
                                                                                              for t in row) for row in rows):
        raise ValueError('a question-answering model takes a list of (question, context) pairs of non-empty texts, '
                         'e.g. [("Who wrote it?", "The book was written by Ann.")]')
    examples = SquadData(Path("<rows>"), [QAExample(str(i), "", q, c, []) for i, (q, c) in enumerate(rows)])
    return list(answered(model, tokenizer, examples, batch_size, max_len, amp).values())


def answered(model: SpanExtractor, tokenizer: Tokenizer, examples: SquadData, batch_size: int,
             max_len: int | None = None, amp: Precision | None = None, null_threshold: float | None = None) -> dict[str, Answer]:
    """Each question's Answer by id, in the examples' order, read and decoded as its fine-tune did
    (`model.reading`: its windows of --max-len, unless `max_len` says otherwise, and its decoding
    flags, unless `null_threshold` says otherwise); the model under `amp` (None: fp32)."""
    reading = model.reading
    decoding = Decoding.of({**reading, "null_threshold": null_threshold})
    max_len = qa_max_len(reading.get("max_len") if max_len is None else max_len, model)
    device = next(model.parameters()).device
    windows, _ = question_windows(tokenizer, examples, max_len, decoding.max_query_len, decoding.doc_stride, labelled=False)
    decoded = answer(model, tokenizer, examples, windows, decoding, batch_size, device, amp, with_null=bool(reading.get("with_null")))
    return {example.id: chosen(decoded, example.id) for example in examples}


def chosen(decoded: Decoded, question_id: str) -> Answer:
    """One question's Answer from its decoding: the prediction, with the probability and start
    of its n-best entry ("" for no answer: start -1)."""
    text = decoded.predictions[question_id]
    best = next((entry for entry in decoded.nbest[question_id] if entry["text"] == text), None)
    start = -1 if not text or best is None or best.get("start") is None else best["start"]
    return Answer(text, 0.0 if best is None else float(best["probability"]), start)


def answer_file(classifier, file: str | Path, out: Path, batch_size: int, max_len: int | None,
                amp: Precision | None = None, null_threshold: float | None = None) -> int:
    """Write every question of `file` with its answer into `out` (predictions.json's layout for a
    .json `out`, else a TSV), the model under `amp` (None: fp32), "" past `null_threshold` (None: the
    model's own). Returns how many questions were answered."""
    answers = answered(classifier.model, classifier.tokenizer, read_questions(Path(file)), batch_size, max_len, amp,
                       null_threshold)
    if out.suffix == ".json":
        write_json(out, {qid: found.text for qid, found in answers.items()})
    else:
        write_atomic(out, answer_table(answers))
    return len(answers)


def answer_table(answers: dict[str, Answer]) -> str:
    """The answers as a TSV (id, answer, score, start). An answer holding a tab, a line break or a
    quote is quoted as the csv module and spreadsheets read it; every other field is as it is."""
    table = io.StringIO()
    writer = csv.writer(table, dialect="excel-tab", lineterminator="\n")
    writer.writerow(["id", "answer", "score", "start"])
    writer.writerows([qid, found.text, f"{found.score:.6g}", found.start] for qid, found in answers.items())
    return table.getvalue()


def qa_max_len(max_len: int | None, model: SpanExtractor | Encoder) -> int:
    """The window length: --max-len (checked as every fine-tune's), else 384 where the model's
    positions reach it (rotary: any length), else the model's limit."""
    config = model.config
    if max_len is not None:
        return check_max_len(max_len, config)
    return QA_MAX_LEN if config.for_length(QA_MAX_LEN) is not None else config.max_length


def answer(model: SpanExtractor, tokenizer: Tokenizer, examples: list[QAExample], windows: list[Window], decoding: Decoding,
           batch_size: int, device, amp: Precision | None = None, with_null: bool = False) -> Decoded:
    """Every question's answer: the model over its windows, then the best span of each question
    (span_decoding.py, by --n-best, --max-answer-len and, `with_null` (SQuAD 2.0), --null-threshold)."""
    start_logits, end_logits = window_logits(model, tokenizer, windows, batch_size, device, amp)
    return decode_windows(examples, windows, start_logits, end_logits, decoding, with_null)


def decode_windows(examples: list[QAExample], windows: list[Window], start_logits: torch.Tensor, end_logits: torch.Tensor,
                   decoding: Decoding, with_null: bool = False) -> Decoded:
    """The answers from the windows' logits [W, T] (window_logits'): their passage offsets as
    decode_spans takes them, then its decoding. Apart from `answer`, so that a caller that
    shows the logits themselves (the explorer) decodes the very numbers it shows."""
    offsets = np.full((len(windows), start_logits.shape[1], 2), -1, dtype=np.int64)  # [W, T, 2]: -1 outside the passage
    for row, window in enumerate(windows):
        inside = [i for i, span in enumerate(window.offsets) if span is not None]
        offsets[row, inside] = [window.offsets[i] for i in inside]
    return decode_spans(examples, [window.example for window in windows], offsets, start_logits, end_logits,
                        n_best=decoding.n_best, max_answer_len=decoding.max_answer_len, allow_null=with_null,
                        null_threshold=decoding.null_threshold)


@torch.no_grad()
def window_logits(model: SpanExtractor, tokenizer: Tokenizer, windows: list[Window], batch_size: int, device,
                  amp: Precision | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The start and end logits of every window [W, T] (T: the longest window; 0 past a window's
    end), in eval mode, fp32 unless `amp` says otherwise."""
    amp = amp or Precision("fp32", torch.device(device))
    model.eval()
    longest = max((len(window.input_ids) for window in windows), default=0)
    starts, ends = torch.zeros(len(windows), longest), torch.zeros(len(windows), longest)
    segments = model.config.type_vocab_size >= 2
    for first in range(0, len(windows), batch_size):
        rows = range(first, min(first + batch_size, len(windows)))
        inputs = window_inputs(windows, rows, tokenizer, segments, labelled=False)
        with amp.autocast:
            out = model(**{name: tensor.to(device) for name, tensor in inputs.items()})
        width = inputs["input_ids"].shape[1]
        starts[first:first + len(rows), :width] = out.start_logits.float().cpu()  # [B, width] into [W, T]
        ends[first:first + len(rows), :width] = out.end_logits.float().cpu()
    return starts, ends


def read_questions(path: Path) -> SquadData:
    """The questions of a predict FILE: SQuAD's .json or .jsonl (answers optional), or a table
    with question and context columns (and id), read as a task's table is (tasks.py)."""
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
