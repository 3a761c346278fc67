"""A tag per word (named entities, parts of speech): the kind, and its files.

Two formats, as the CoNLL shared tasks and the Hugging Face datasets write them:

    .conll   one word per line, the word first and its tag last (columns split on
             whitespace); a blank line ends a sentence; `-DOCSTART-` lines are skipped
    .jsonl   one sentence per line: {"tokens": ["EU", "rejects", ...], "tags": ["B-ORG", "O", ...]}

Tags are class names (a `LabelMap` fixes their ids from the training file). The words are
given already split, so the model's sub-tokens are aligned to them later: each word is
predicted at its first sub-token (BERT's NER setup, Devlin et al., 2019, section 5.3), by the
classification layer at every token (heads.py:TokenClassifier); words past --max-len are left
out, and predictions.tsv says "-" for them. Scored by word accuracy, and CoNLL's entity F1 for
BIO tags (scores.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch

from ...corpus.documents import json_objects
from ...heads import IGNORE_INDEX, TokenClassifier
from ...tokenizers.base import Tokenizer
from .kind import Kind, Prediction, Task, check_max_len, in_batches, outputs
from .scores import tagging_metrics
from .sentence_files import LabelMap, TaskData, task_file

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


def word_inputs(tokenizer: Tokenizer, data: TaggedData, rows: list[int], max_len: int, tags: list[list[int]] | None = None) -> tuple[dict, list[list[int]]]:
    """Model inputs for sentences of given words, and the position of each word's first
    sub-token, where its tag is read. `tags` given: `labels` [B, T] holds each word's tag
    there and IGNORE_INDEX elsewhere. Words past `max_len` tokens are left out."""
    encoded, starts = [], []
    for row in rows:
        ids, first = [], []
        for word in data.words[row]:
            pieces = tokenizer.tokenize_word(word) or [tokenizer.unk_id]  # a word of only stripped characters
            if len(ids) + len(pieces) > max_len - tokenizer.num_special(pair=False):  # room for [CLS] and [SEP]
                break
            first.append(1 + len(ids))
            ids += pieces
        encoded.append(tokenizer.join(ids))
        starts.append(first)
    inputs = tokenizer.pad(encoded)
    if tags is not None:
        labels = torch.full_like(inputs["input_ids"], IGNORE_INDEX)
        for i, (row, first) in enumerate(zip(rows, starts)):
            labels[i, first] = torch.tensor(tags[row][:len(first)], dtype=torch.long)
        inputs["labels"] = labels
    return inputs, starts


class Tags(Kind):
    name = "tokens"
    headline = "accuracy"
    head = "token_classifier"
    model_class = TokenClassifier
    adjective = "tagging"
    formats = FORMATS
    rows_word = "sentences"
    teaches = False

    def detects(self, path: Path) -> bool:
        """A .conll file, or a .jsonl file whose first record has "tokens"."""
        if path.suffix == ".conll":
            return True
        if path.suffix != ".jsonl" or not path.is_file():
            return False
        with path.open(encoding="utf-8-sig", errors="replace") as file:
            first = next(json_objects(path, file), None)
        return first is not None and "tokens" in first[1]

    def refuse(self, settings, files) -> None:
        """A tagging task reads every token's own vector (no --pooling) and is never subsampled
        (no --max-train-examples)."""
        task = f"the tagging task {files.name}" if settings.tasks else "a tagging task"
        if settings.pooling is not None:
            raise ValueError(f"--pooling is for sentence tasks; {task} reads every token's own vector, so drop it")
        if files.max_train is not None:
            raise ValueError(f"--max-train-examples subsamples sentence tasks; {task} is never subsampled, so drop it")

    def read(self, files, settings, backbone) -> Task:
        train, dev = read_tagged(files.train), read_tagged(files.dev)
        labels = LabelMap.from_labels(train.flat().labels)
        encoder, tokenizer = backbone
        return Task(self, tokenizer, encoder.config, check_max_len(settings.max_len, encoder.config), train, dev, labels, None,
                    tag_ids(train, labels), tag_ids(dev, labels))

    def inputs(self, task: Task, rows: list[int]) -> dict:
        return word_inputs(task.tokenizer, task.train, rows, task.max_len, task.train_targets)[0]

    def predictions(self, model, tokenizer, data, batch_size, max_len, device, amp=None, what=None) -> tuple[list, list]:
        """Every sentence's tag ids, one per word within `max_len`, and each tag's probability."""
        batches = [word_inputs(tokenizer, data, rows, max_len) for rows in in_batches(len(data), batch_size)]
        predicted, sure = [], []
        for (_, starts), out in zip(batches, outputs(model, (inputs for inputs, _ in batches), device, amp, len(data), what)):
            ids = out.logits.argmax(-1)  # [B, T]
            chosen = out.logits.float().softmax(-1).gather(-1, ids.unsqueeze(-1)).squeeze(-1)  # the tag's probability
            predicted += [ids[i, first].tolist() for i, first in enumerate(starts)]  # [B, T] -> the tag at each word's first sub-token
            sure += [chosen[i, first].tolist() for i, first in enumerate(starts)]
        return predicted, sure

    def scores(self, task: Task, predicted: list) -> dict:
        return tagging_metrics([tags for tags, _ in predicted], task.dev_targets, task.labels)

    def table(self, data, predicted, gold, labels, sure) -> tuple[list[str], list[list[str]]]:
        """One row per word: sentence, word, prediction, the gold tag (dev), the tag's probability;
        "-" for a word past --max-len, which has no prediction."""
        columns = [(predicted, lambda tag: str(labels.names[tag])), *([(gold, lambda tag: str(labels.names[tag]))] if gold else []),
                   (sure, lambda probability: f"{probability:.6g}")]
        rows = [[str(i), word, *(write(values[i][j]) if j < len(values[i]) else "-" for values, write in columns)]
                for i, words in enumerate(data.words) for j, word in enumerate(words)]
        return ["sentence", "word", "prediction", *(["label"] if gold is not None else []), "score"], rows

    def listed(self, rows: list) -> TaggedData:
        if not isinstance(rows, list):
            raise ValueError(f"predict takes a list of rows, got {type(rows).__name__}; wrap one text as [text]")
        if not all(isinstance(words, (list, tuple)) and words and all(isinstance(w, str) for w in words) for words in rows):
            raise ValueError("a tagger predicts a tag per word: give each sentence as a list of its words, "
                             'e.g. [["EU", "rejects", "German", "call"]]')
        return TaggedData(Path("<rows>"), [list(words) for words in rows], [[""] * len(words) for words in rows],
                          [[i] * len(words) for i, words in enumerate(rows, start=1)])

    def named(self, data, predicted, sure, labels) -> list[list[Prediction]]:
        """A list of `Prediction`s per sentence, one per word; a word past --max-len gets none (None, NaN)."""
        return [[Prediction(labels.names[tags[j]], probability[j]) if j < len(tags) else Prediction(None, math.nan)
                 for j in range(len(words))] for words, tags, probability in zip(data.words, predicted, sure)]

    def read_new(self, file: Path, text_columns: list[str] | None) -> TaggedData:
        if text_columns:
            raise ValueError("--text-columns names a sentence classifier's columns; a tagger reads a .conll or .jsonl "
                             "file of words, so drop it")
        return read_tagged(file, labelled=False)


def tag_ids(data: TaggedData, labels: LabelMap) -> list[list[int]]:
    """Every word's tag id, sentence by sentence."""
    flat = iter(labels.encode(data.flat()))
    return [[next(flat) for _ in words] for words in data.words]


TAGS = Tags()
