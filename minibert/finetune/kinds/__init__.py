"""The kinds of task a fine-tune runs, as DATA: one table, `KINDS`, four entries (a second read of the chapter).

    kind            its rows                            its head (heads.py)         its predictions        its scores
    classification  a text or a pair, a class           SequenceClassifier (K)      a class, its prob.     accuracy (F1, MCC)
    regression      a text or a pair, a number          SequenceClassifier (1)      a score                Pearson, Spearman, MSE
    tokens          words, a tag each                   TokenClassifier             a tag per word         word accuracy (entity F1)
    qa              a question's windows over a passage SpanExtractor               an answer span         exact match, F1 (SQuAD's)

The fine-tuning job (job.py), the checkpoint (checkpoint.py), predict (predictions.py) and the
teacher (teacher.py) ask a kind what kind.py's `Kind` names, and never which kind it is. A fifth
kind (multiple choice, say) is one more class beside these, its head in heads.py, and one more
entry below; --task offers it from this table.

    kind.py            what every kind offers: `Kind` and its data, `Task`
    sentences.py       classification and regression: inputs, predictions, scores, --teacher's logits
    sentence_files.py  their files: GLUE's TSV, CSV, JSONL; columns, labels (`LabelMap`)
    scores.py          GLUE's metrics: accuracy, F1, MCC; Pearson, Spearman; entity F1
    tags.py            a tag per word: .conll and JSONL, each word read at its first sub-token
    spans.py           question answering: SQuAD's files in, windows, spans out
    squad.py           SQuAD's files, every answer checked; split by article
    windows.py         a question and its passage in windows of --max-len tokens; answers as tokens
    span_decoding.py   n-best decoding of the start and end logits, over a question's windows
    squad_scores.py    the official scripts' exact match and F1, SQuAD 2.0's keys and thresholds
"""

from __future__ import annotations

from pathlib import Path

from .kind import Kind, Task
from .sentences import CLASSIFICATION, REGRESSION
from .spans import SPANS
from .tags import TAGS

KINDS: dict[str, Kind] = {kind.name: kind for kind in (CLASSIFICATION, REGRESSION, TAGS, SPANS)}


def kind_of(task: str, train: Path) -> Kind:
    """--task's kind; for "auto", the training file's: the first kind that detects it (SQuAD's
    questions, tagged words), else a sentence task, whose labels then say classification or
    regression (`SentenceKind.read`)."""
    if task != "auto":
        return KINDS[task]
    return next((kind for kind in KINDS.values() if kind.detects(train)), CLASSIFICATION)


def kind_of_head(head: str, num_labels: int) -> Kind:
    """The kind of a fine-tuned model, by its head's name in config.json and its number of outputs (checkpoint.py)."""
    return next(kind for kind in KINDS.values() if kind.holds(head, num_labels))


def kind_of_model(model) -> Kind:
    """The kind of a task model, by its class and its number of outputs."""
    return next(kind for kind in KINDS.values() if isinstance(model, kind.model_class) and kind.holds(kind.head, model.num_labels))


__all__ = ["KINDS", "Kind", "Task", "kind_of", "kind_of_head", "kind_of_model"]
