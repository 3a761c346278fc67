"""Token-classification data: one tag per word (named entities, parts of speech).

Two formats, as the CoNLL shared tasks and the Hugging Face datasets write them:

    .conll   one word per line, the word first and its tag last (columns split on
             whitespace); a blank line ends a sentence; `-DOCSTART-` lines are skipped
    .jsonl   one sentence per line: {"tokens": ["EU", "rejects", ...], "tags": ["B-ORG", "O", ...]}

Tags are class names (a `LabelMap` fixes their ids from the training file). The words are
given already split, so the model's sub-tokens are aligned to them later: each word is
predicted at its first sub-token (BERT's NER setup, Devlin et al., 2019, section 5.3).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..corpus.documents import json_objects
from .tasks import TaskData, task_file

FORMATS = (".conll", ".jsonl")
DOCUMENT_START = "-DOCSTART-"


@dataclass
class TaggedData:
    """Sentences of words and their tags; `lines` gives each word's line, for error messages."""

    path: Path
    words: list[list[str]]
    tags: list[list[str]]
    lines: list[list[int]]

    def __len__(self) -> int:
        return len(self.words)

    def rows(self, rows: list[int]) -> "TaggedData":
        """The sentences at `rows`, in that order."""
        return TaggedData(self.path, *([values[i] for i in rows] for values in (self.words, self.tags, self.lines)))

    def flat(self) -> TaskData:
        """Every word as one example labelled with its tag (for `LabelMap`)."""
        return TaskData(self.path, [w for ws in self.words for w in ws], None, [t for ts in self.tags for t in ts],
                        [n for ns in self.lines for n in ns])


def is_tagged(path: str | Path) -> bool:
    """A .conll file, or a .jsonl file whose first record has "tokens": token classification."""
    path = Path(path)
    if path.suffix == ".conll":
        return True
    if path.suffix != ".jsonl" or not path.is_file():
        return False
    with path.open(encoding="utf-8-sig", errors="replace") as file:
        first = next(json_objects(path, file), None)
    return first is not None and "tokens" in first[1]


def read_tagged(path: str | Path, labelled: bool = True) -> TaggedData:
    """Read a .conll or .jsonl token-classification file (formats in the module docstring).
    `labelled=False`: the words alone, for predicting their tags (a .conll line may be just
    its word, a .jsonl record need not have "tags"; tags there are ignored, read as "")."""
    path = Path(path)
    with task_file(path, FORMATS, "token-classification data") as file:
        sentences = list(read_jsonl(path, file, labelled) if path.suffix == ".jsonl" else read_conll(path, file, labelled))
    if not sentences:
        raise ValueError(f"{path} holds no sentences; write one word and its tag per line (.conll) or "
                         f'{{"tokens": [...], "tags": [...]}} per line (.jsonl)')
    words, tags, lines = (list(column) for column in zip(*sentences))
    return TaggedData(path, words, tags, lines)


def read_conll(path: Path, file, labelled: bool = True):
    """Yield (words, tags, line numbers) per sentence."""
    sentence: list[tuple[str, str, int]] = []
    for number, line in enumerate(file, start=1):
        columns = line.split()
        if columns and columns[0] == DOCUMENT_START:
            continue
        if not columns:
            if sentence:
                yield tuple(map(list, zip(*sentence)))
            sentence = []
            continue
        if labelled and len(columns) < 2:
            raise ValueError(f"{path} line {number}: {line.strip()!r} has no tag; write the word, then its tag")
        sentence.append((columns[0], columns[-1] if labelled else "", number))
    if sentence:
        yield tuple(map(list, zip(*sentence)))


def read_jsonl(path: Path, file, labelled: bool = True):
    """Yield (words, tags, line numbers) per record."""
    for number, record in json_objects(path, file):
        words = record.get("tokens")
        tags = record.get("tags") if labelled else [""] * len(words) if isinstance(words, list) else None
        if not (isinstance(words, list) and isinstance(tags, list) and all(isinstance(x, str) for x in words + tags)):
            wanted = '"tokens" and "tags", two lists of strings' if labelled else '"tokens", a list of strings'
            raise ValueError(f"{path} line {number}: expected {wanted}")
        if len(words) != len(tags) or not words:
            raise ValueError(f"{path} line {number}: {len(words)} tokens but {len(tags)} tags; give every token one tag")
        yield words, tags, [number] * len(words)
