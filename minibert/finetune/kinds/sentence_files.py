"""Sequence-classification and regression data for fine-tuning: GLUE-style TSV, CSV or JSONL.

Fine-tuning BERT (Devlin et al., 2019, section 4) feeds one text, or a pair of texts as
segments A and B, and classifies the pooled [CLS] vector. Every GLUE task fits that shape,
so one reader serves them all. A file holds named columns (TSV/CSV header, JSONL keys):

    sentence  label                      one text per example (`text` is accepted too)
    sentence1  sentence2  label          a pair per example (RTE, MRPC, ...; STS-B's `score` is a label too)

Any other column must be one a reader may pass over (PASSED_OVER: ids, genres, STS-B's
bookkeeping): an unread column that might be text (QNLI's `question` beside its `sentence`) is
an error, not a text silently dropped. `Columns` names the columns outright instead: the
`--text-columns A [B]` flag, or glue/tasks.py's table for GLUE's own files (MRPC's `#1 String`, CoLA's
file without a header line). TSV is split on tabs with no quote processing: GLUE's files are
not CSV-quoted, and RTE has sentences that begin with a quote character.

Labels are class *names*, or for a regression task (STS-B) numbers: `task_of` tells the two
apart, `regression_targets` reads the numbers. `LabelMap` fixes the order of class names
from the training file (sorted; names that all look like integers are sorted as integers, so
SST-2's "0"/"1" keep their meaning as ids 0/1), and is saved with the model so that dev, test
and later predictions map names to the same ids.
"""

from __future__ import annotations

import csv
import json
import re
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import torch

from ...corpus.documents import json_objects

FORMATS = (".tsv", ".csv", ".jsonl")
TEXT_COLUMNS = (("sentence1", "sentence2"), ("sentence",), ("text",))  # the first set a file has wins
LABELS = ("label", "score")  # the label column; STS-B names its similarity scores `score`
PASSED_OVER = ("index", "idx", "id", "qid", "qid1", "qid2", "pairID", "promptID", "genre",  # ids and genres (GLUE, MNLI, QQP)
               "filename", "year", "old_index", "source1", "source2")  # STS-B's bookkeeping
INTEGER = re.compile(r"[+-]?\d+")
NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


class Columns(NamedTuple):
    """The columns of a file named outright, rather than found among TEXT_COLUMNS and LABELS."""

    texts: tuple[str, ...]  # one text, or the two segments of a pair
    label: str | None = None  # None: the first of LABELS the file has
    names: tuple[str, ...] | None = None  # the column names of a file without a header line (CoLA's)


@dataclass
class TaskData:
    """The examples of one file; `lines` gives each example's line number, for error messages."""

    path: Path
    texts: list[str]
    pairs: list[str] | None  # second segments, or None for single-text tasks
    labels: list[str]
    lines: list[int]

    def __len__(self) -> int:
        return len(self.texts)

    def subsample(self, n: int | None, seed: int = 0) -> "TaskData":
        """`n` examples drawn at random (by `seed`), kept in file order; all of them when n is None or not smaller."""
        if n is None or n >= len(self):
            return self
        return self.rows(subsample_rows(len(self), n, seed))

    def held_out(self, share: float, seed: int = 0) -> tuple["TaskData", "TaskData"]:
        """(the rest, a held-out `share` of the examples drawn at random by `seed`), each in file
        order: disjoint, and together every example. At least one example on each side."""
        if len(self) < 2:
            raise ValueError(f"{self.path} has {len(self)} example; holding some out to choose a setting on needs two or more")
        n = min(len(self) - 1, max(1, round(share * len(self))))
        held = set(torch.randperm(len(self), generator=torch.Generator().manual_seed(seed))[:n].tolist())
        return self.rows([i for i in range(len(self)) if i not in held]), self.rows(sorted(held))

    def rows(self, rows: list[int]) -> "TaskData":
        """The examples at `rows`, in that order."""
        pick = lambda values: [values[i] for i in rows]  # noqa: E731
        return TaskData(self.path, pick(self.texts), None if self.pairs is None else pick(self.pairs), pick(self.labels), pick(self.lines))


def subsample_rows(total: int, n: int, seed: int = 0) -> list[int]:
    """`n` of `total` row indices drawn at random by `seed`, in file order (--max-train-examples)."""
    return sorted(torch.randperm(total, generator=torch.Generator().manual_seed(seed))[:n].tolist())


def read_task(path: str | Path, labelled: bool = True, columns: Columns | None = None) -> TaskData:
    """Read a .tsv, .csv or .jsonl classification file (columns described in the module
    docstring, or named by `columns`). `labelled=False`: the texts alone (a label column, if
    any, is not read; `labels` are empty strings), as for the unlabelled text a distillation
    teacher labels, or a GLUE test file."""
    path = Path(path)
    try:
        with task_file(path, FORMATS, "fine-tuning data") as file:
            names = columns.names if columns else None
            rows = read_jsonl(path, file) if path.suffix == ".jsonl" else read_table(path, file, names)
            header = next(rows, None)
            if header is None:
                raise ValueError(f"{path} is empty; it needs a header (or JSON keys) and one example per line")
            columns = pick_columns(path, header, labelled) if columns is None else named_columns(path, header, columns, labelled)
            records = [(line, select(path, line, row, columns, labelled)) for line, row in rows]
    except csv.Error as error:
        raise ValueError(f"{path} is not well-formed CSV ({error}); fix its quoting") from None
    if not records:
        raise ValueError(f"{path} has column names but no examples")
    lines = [line for line, _ in records]
    fields = list(zip(*(values for _, values in records)))
    texts = len(columns) - labelled
    pairs = list(fields[1]) if texts == 2 else None
    labels = [label.strip() for label in fields[-1]] if labelled else [""] * len(records)
    return TaskData(path, list(fields[0]), pairs, labels, lines)


def read_texts(path: str | Path, columns: Columns | None = None) -> TaskData:
    """Texts without labels: a .txt file of one text per line (blank lines skipped), or a
    task file in any of FORMATS (its text columns found, or named by `columns`), its label
    column ignored if it has one."""
    path = Path(path)
    if path.suffix != ".txt":
        return read_task(path, labelled=False, columns=columns)
    with task_file(path, (".txt",), "a text file") as file:
        numbered = [(number, line.strip()) for number, line in enumerate(file, start=1) if line.strip()]
    if not numbered:
        raise ValueError(f"{path} holds no text; write one text per line")
    return TaskData(path, [text for _, text in numbered], None, [""] * len(numbered), [number for number, _ in numbered])


@contextmanager
def task_file(path: Path, formats: tuple[str, ...], what: str):
    """The open file, once it is known to exist and to have one of `formats`; UTF-8 with a
    byte-order mark tolerated, and a byte that is not UTF-8 a one-line error naming it."""
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    if path.suffix not in formats:
        raise ValueError(f"{path}: unknown format {path.suffix!r}; {what} must be one of {', '.join(formats)}")
    try:
        with path.open(encoding="utf-8-sig", newline="") as file:
            yield file
    except UnicodeDecodeError as error:
        raise ValueError(f"{path} is not UTF-8 text (byte {error.start}: {error.reason}); save it as UTF-8") from None


def pick_columns(path: Path, header, labelled: bool = True) -> tuple[str, ...]:
    """The text column(s) and the label column (`labelled`), or an error naming what was
    found; a column left unread that is not PASSED_OVER (nor a label) is an error too."""
    for text_columns in TEXT_COLUMNS:
        for label in [(name,) for name in LABELS] if labelled else [()]:
            if all(c in header for c in (*text_columns, *label)):
                unread = [c for c in header if c not in (*text_columns, *LABELS, *PASSED_OVER)]
                if unread:
                    raise ValueError(
                        f"{path}: column{'s' * (len(unread) > 1)} {', '.join(unread)} would not be read (the text is "
                        f"{' + '.join(text_columns)}); name the text columns with --text-columns A [B], "
                        f"e.g. --text-columns {' '.join([*unread, *text_columns][:2])}")
                return (*text_columns, *label)
    expected = " or ".join(", ".join((*columns, *LABELS[:labelled])) for columns in TEXT_COLUMNS)
    raise ValueError(f"{path}: found columns {', '.join(header) or '(none)'}; expected {expected}")


def named_columns(path: Path, header, columns: Columns, labelled: bool = True) -> tuple[str, ...]:
    """The text column(s) `columns` names and its label column (`labelled`); a name the file
    lacks is an error listing the columns it has."""
    if not 1 <= len(columns.texts) <= 2:
        raise ValueError(f"--text-columns names one text column or the two of a pair, got {len(columns.texts)}")
    wanted = list(columns.texts)
    if labelled:
        wanted.append(columns.label or next((c for c in LABELS if c in header), LABELS[0]))
    missing = [c for c in wanted if c not in header]
    if missing:
        raise ValueError(f"{path}: no column {', '.join(missing)}; its columns are {', '.join(header) or '(none)'}")
    return tuple(wanted)


def select(path: Path, line: int, row: dict, columns: tuple[str, ...], labelled: bool = True) -> list[str]:
    missing = [c for c in columns if c not in row]
    if missing:
        raise ValueError(f"{path} line {line}: no {', '.join(missing)}; every example needs {', '.join(columns)}")
    if labelled and not row[columns[-1]].strip():
        raise ValueError(f"{path} line {line}: the label is empty; give every example its class")
    return [row[c] for c in columns]


def read_table(path: Path, file, names: tuple[str, ...] | None = None):
    """Yield the header's column names (or `names`, for a file without a header line), then
    (line number, {column: value}) per row."""
    if path.suffix == ".tsv":
        numbered = ((number, line.rstrip("\r\n").split("\t")) for number, line in enumerate(file, start=1))
    else:
        reader = csv.reader(file)
        numbered = ((reader.line_num, cells) for cells in reader)
    numbered = ((number, cells) for number, cells in numbered if any(c.strip() for c in cells))
    if names is None:
        first = next(numbered, None)
        if first is None:
            return
        names = [name.strip() for name in first[1]]
    yield list(names)
    for number, cells in numbered:
        if len(cells) != len(names):
            raise ValueError(
                f"{path} line {number}: {len(cells)} fields where the header has {len(names)} "
                f"({', '.join(names)}); fix the row (a stray or missing separator?)"
            )
        yield number, dict(zip(names, cells))


def read_jsonl(path: Path, file):
    """Yield the first record's keys, then (line number, record) with every value as a string."""
    first = True
    for number, record in json_objects(path, file):
        if first:
            yield list(record)
            first = False
        yield number, {key: json_string(path, number, key, value) for key, value in record.items()}


def json_string(path: Path, number: int, key: str, value) -> str:
    """A JSON value as text: strings as they are, numeric labels as they print (1, 3.8)."""
    if isinstance(value, str) or (key in LABELS and isinstance(value, (int, float)) and not isinstance(value, bool)):
        return str(value)
    if key in (*LABELS, *(c for columns in TEXT_COLUMNS for c in columns)):
        raise ValueError(
            f"{path} line {number}: {key!r} is {json.dumps(value)}; texts must be strings and labels "
            f"strings or numbers (class names, or regression targets)"
        )
    return ""  # a column nobody reads: its value does not matter


def task_of(data: TaskData) -> str:
    """'regression' when every label is a number and some have a fractional part (STS-B's
    similarity scores, 0.0 to 5.0); else 'classification', integer labels included (SST-2's 0/1)."""
    numbers = all(NUMBER.fullmatch(label) for label in data.labels)
    return "regression" if numbers and not all(INTEGER.fullmatch(label) for label in data.labels) else "classification"


def regression_targets(data: TaskData) -> list[float]:
    """Every label as a number; a label that is not one is an error naming its line."""
    for label, line in zip(data.labels, data.lines):
        if not NUMBER.fullmatch(label):
            raise ValueError(
                f"{data.path} line {line}: label {label!r} is not a number; a regression task needs a numeric "
                f"target per example (or pass --task classification)"
            )
    return [float(label) for label in data.labels]


class LabelMap:
    """Class names <-> ids 0..K-1, fixed by the training file and saved with the model."""

    def __init__(self, names: list[int | str]):
        if not isinstance(names, list) or not all(isinstance(n, (int, str)) and not isinstance(n, bool) for n in names):
            raise ValueError(f"label names must be a list of strings or integers, got {names!r}")
        if len(set(names)) < 2 or len(set(names)) != len(names):
            raise ValueError(f"a classification task needs at least 2 distinct labels, got {names}; check the label column")
        self.names = names
        self.ids = {name: i for i, name in enumerate(names)}
        self.numeric = all(isinstance(name, int) for name in names)

    @classmethod
    def from_labels(cls, labels: list[str]) -> "LabelMap":
        """Sorted class names; as integers when every name looks like one ("10" after "9")."""
        distinct = set(labels)
        if all(INTEGER.fullmatch(label) for label in distinct):
            return cls(sorted({int(label) for label in distinct}))
        return cls(sorted(distinct))

    def __len__(self) -> int:
        return len(self.names)

    def encode(self, data: TaskData) -> list[int]:
        """The id of every label in `data`; a label the training file never had is an error."""
        ids = []
        for label, line in zip(data.labels, data.lines):
            key = int(label) if self.numeric and INTEGER.fullmatch(label) else label
            if key not in self.ids:
                raise ValueError(
                    f"{data.path} line {line}: label {label!r} does not occur in the training file "
                    f"(its labels: {', '.join(map(str, self.names))}); fix the label or use matching files"
                )
            ids.append(self.ids[key])
        return ids
