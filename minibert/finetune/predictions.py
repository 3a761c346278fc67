"""Predictions on new data: `python -m minibert predict CLF FILE --out predictions.tsv`.

A question-answering model reads questions and their passages instead (answering.py). Otherwise
FILE is read as fine-tuning reads a dev file, its label column (if any) ignored: a sentence
classifier's .tsv, .csv or .jsonl with the columns `--text-columns` names, or found by name
(tasks.py); a tagger's .conll or .jsonl of words (tagged.py). The model runs over it as over
dev (inference.py, in batches, with a progress bar), and the rows are written as the
fine-tune's predictions.tsv is (job.py's `prediction_rows`) less the gold label column: so a
model's predictions on its own dev file are the ones its fine-tune wrote. In Python,
`Classifier.predict` does the same for a list of texts, pairs or sentences of words.
"""

from __future__ import annotations

from pathlib import Path

from ..heads import SpanExtractor, TokenClassifier
from ..operations.distributed import Distributed
from ..operations.files import read_record, write_atomic
from ..operations.precision import Precision, auto_line
from .answering import answer_file
from .checkpoint import Classifier, load_classifier
from .inference import DEFAULT_BATCH_SIZE, check_batch_size, check_max_len, predict_with_scores
from .job import prediction_rows
from .tagged import TaggedData, read_tagged
from .tasks import Columns, TaskData, read_texts


def predict_file(classifier_dir: str | Path, file: str | Path, out: str | Path, text_columns: list[str] | None = None,
                 batch_size: int = DEFAULT_BATCH_SIZE, max_len: int | None = None, device: str = "auto",
                 overwrite: bool = False, precision: str = "auto", null_threshold: float | None = None) -> Path:
    """Write `out`: the prediction and score of every row of `file` (one row per word for a
    tagger), as predictions.tsv lays them out, the model run under `precision` (--precision, as
    fine-tuning's: auto is bf16 autocast on a GPU or CPU with native bf16, said in one line). An
    existing `out` is refused unless `overwrite`. `null_threshold` (--null-threshold): a question-answering
    model fine-tuned on SQuAD 2.0 data answers again with it instead of its own."""
    out = Path(out)
    check_new_file(out, overwrite)
    check_batch_size(batch_size)
    model, tokenizer, labels = classifier = load_classifier(classifier_dir)
    if null_threshold is not None and not (isinstance(model, SpanExtractor) and model.reading.get("with_null")):
        kind = "was fine-tuned on SQuAD 1.1 data, which has no unanswerable questions" if isinstance(model, SpanExtractor) \
            else "is no question-answering model"
        raise ValueError(f"--null-threshold sets when a model fine-tuned on SQuAD 2.0 answers \"\"; {classifier_dir} {kind}: "
                         f"drop it")
    target = Distributed().device(device)
    amp = Precision.of(precision, target)  # fp16 on a CPU fails now, before any row is read
    if chose := auto_line(precision, target):
        print(chose, flush=True)
    if isinstance(model, SpanExtractor):  # questions and their passages in, answers out (answering.py)
        if text_columns:
            raise ValueError("--text-columns names a sentence classifier's columns; a question-answering model reads "
                             "question and context columns, so drop it")
        model.to(target)
        answered = answer_file(classifier, file, out, batch_size, max_len, amp, null_threshold)
        print(f"{answered} questions of {file} answered into {out}", flush=True)
        return out
    data = read_rows(classifier, file, text_columns)
    max_len = fine_tuned_max_len(Path(classifier_dir)) if max_len is None else max_len
    max_len = check_max_len(max_len, model.config)
    predicted, scores = predict_with_scores(model.to(target), tokenizer, data, batch_size, max_len, target, amp, progress=True)
    write_atomic(out, prediction_rows(data, predicted, None, labels, scores))
    print(f"{len(data)} {'sentences' if isinstance(data, TaggedData) else 'rows'} of {data.path} predicted into {out}", flush=True)
    return out


def fine_tuned_max_len(classifier_dir: Path) -> int | None:
    """The --max-len the model was fine-tuned with, as its eval.json records it (None: the default):
    rows cut where its fine-tune cut them are predicted as its fine-tune predicted them. A damaged
    eval.json is one line that says to pass --max-len."""
    report = read_record(classifier_dir / "eval.json", "pass --max-len to say where rows are cut")
    return report.get("args", {}).get("max_len")


def read_rows(classifier: Classifier, file: str | Path, text_columns: list[str] | None) -> TaskData | TaggedData:
    """The rows of `file` as the classifier reads them: words for a tagger, texts (or pairs) otherwise."""
    if isinstance(classifier.model, TokenClassifier):
        if text_columns:
            raise ValueError("--text-columns names a sentence classifier's columns; a tagger reads a .conll or .jsonl "
                             "file of words, so drop it")
        return read_tagged(file, labelled=False)
    return read_texts(file, Columns(tuple(text_columns)) if text_columns else None)


def check_new_file(out: Path, overwrite: bool) -> None:
    if out.is_dir():
        raise FileExistsError(f"--out {out} is a folder; name the .tsv file to write")
    if out.exists() and not overwrite:
        raise FileExistsError(f"--out {out} already exists; pass --overwrite to replace it, or name another file")
