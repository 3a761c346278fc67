"""Predictions on new data: `python -m minibert predict CLF FILE --out predictions.tsv`.

FILE is read as the model's kind reads new rows (kinds/), as fine-tuning read its dev file, a
label column (or answers) ignored: a sentence classifier's .tsv, .csv or .jsonl, its columns
named by `--text-columns` or found by name; a tagger's .conll or .jsonl of words; a
question-answering model's SQuAD .json or .jsonl, or a .tsv / .csv with question and context
columns. The model runs over it as over dev, and the rows are written as the fine-tune wrote its
dev predictions, less the gold column: so a model's predictions on its own dev file are the ones
its fine-tune wrote. In Python, `Classifier.predict` does the same for a list of rows.
"""

from __future__ import annotations

from pathlib import Path

from ..operations.distributed import Distributed
from ..operations.precision import Precision, auto_line
from .checkpoint import load_classifier
from .kinds import kind_of_model
from .kinds.kind import DEFAULT_BATCH_SIZE, check_batch_size


def predict_file(classifier_dir: str | Path, file: str | Path, out: str | Path, text_columns: list[str] | None = None,
                 batch_size: int = DEFAULT_BATCH_SIZE, max_len: int | None = None, device: str = "auto",
                 overwrite: bool = False, precision: str = "auto", null_threshold: float | None = None) -> Path:
    """Write `out`: the prediction and score of every row of `file` (one row per word for a
    tagger; a question-answering model's answers), the model run under `precision` (--precision,
    as fine-tuning's: auto is bf16 autocast on a GPU or CPU with native bf16, said in one line). An
    existing `out` is refused unless `overwrite`. `null_threshold` (--null-threshold): a question-answering
    model fine-tuned on SQuAD 2.0 data answers again with it instead of its own."""
    out, folder = Path(out), Path(classifier_dir)
    check_new_file(out, overwrite)
    check_batch_size(batch_size)
    classifier = load_classifier(folder)
    kind = classifier.kind
    if null_threshold is not None:
        kind.check_null_threshold(classifier, folder)
    target = Distributed().device(device)
    amp = Precision.of(precision, target)  # fp16 on a CPU fails now, before any row is read
    if chose := auto_line(precision, target):
        print(chose, flush=True)
    classifier.model.to(target)
    said = kind.predict_file(classifier, folder, Path(file), out, text_columns, batch_size, max_len, amp, null_threshold)
    print(said, flush=True)
    return out


def predict(model, tokenizer, data, batch_size: int, max_len: int, device, amp: Precision | None = None) -> list:
    """The predicted label id (regression: the score) of every example of `data`, in file order;
    for a tagger's sentences a list of tag ids per sentence, one per word within `max_len`. In
    fp32 unless `amp` says otherwise."""
    return kind_of_model(model).predictions(model, tokenizer, data, batch_size, max_len, device, amp)[0]


def check_new_file(out: Path, overwrite: bool) -> None:
    if out.is_dir():
        raise FileExistsError(f"--out {out} is a folder; name the .tsv file to write")
    if out.exists() and not overwrite:
        raise FileExistsError(f"--out {out} already exists; pass --overwrite to replace it, or name another file")
