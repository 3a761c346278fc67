"""A fine-tuned model run over examples: their model inputs, its logits batch by batch, and
the predictions read from them with how sure the model is.

Fine-tuning trains on these inputs and predicts its dev rows with these functions (job.py);
`Classifier.predict` (checkpoint.py) and `python -m minibert predict` (predictions.py) run the
same code on new rows, so that a model predicts its own dev file as its fine-tune did (at the
--max-len it was fine-tuned with: predictions.py reads it from the model's eval.json).

A sentence classifier reads [CLS] A [SEP] (B [SEP]); a tagger reads each word at its first
sub-token. A class's score is its softmax probability; a regression output is its own score.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import NamedTuple

import torch
from tqdm import tqdm

from ..config import ModelConfig
from ..heads import IGNORE_INDEX, SequenceClassifier, TokenClassifier
from ..operations.precision import Precision
from ..tokenizers.base import Tokenizer
from .tagged import TaggedData
from .tasks import LabelMap, TaskData

DEFAULT_MAX_LEN = 128
DEFAULT_BATCH_SIZE = 32  # rows per batch when predicting (fine-tuning predicts at its --batch-size)


class Prediction(NamedTuple):
    """One example's prediction (for a tagger: one word's)."""

    label: str | int | None  # the class or tag name; None for regression, and for a word cut by max_len
    score: float  # the probability of `label`; for regression the predicted value itself (NaN for a cut word)


def check_max_len(max_len: int | None, config: ModelConfig) -> int:
    if max_len is None:
        return min(DEFAULT_MAX_LEN, config.max_length)  # what the model was pretrained on, at most
    if config.for_length(max_len) is None:
        raise ValueError(f"--max-len {max_len} exceeds the {config.max_length} positions of this model; use at most {config.max_length}")
    return max_len


def model_inputs(tokenizer: Tokenizer, config: ModelConfig, data: TaskData, rows: list[int], max_len: int,
                 device="cpu") -> dict:
    """Token ids, attention mask and segment ids of some examples, as the model takes them.

    A pair is [CLS] A [SEP] B [SEP] with segment ids 0 on A and 1 on B. Models with no
    second segment embedding (RoBERTa, DistilBERT) tell A from B by the separators alone,
    so their segment ids stay 0.
    """
    pairs = None if data.pairs is None else [data.pairs[i] for i in rows]
    inputs = tokenizer.batch([data.texts[i] for i in rows], pairs, max_length=max_len)
    if config.type_vocab_size < 2:
        inputs["token_type_ids"].zero_()
    return {name: tensor.to(device) for name, tensor in inputs.items()}


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


def encode(tokenizer: Tokenizer, config: ModelConfig, data: TaskData | TaggedData, rows: list[int], max_len: int,
           targets: list | None = None) -> tuple[dict, list[list[int]] | None]:
    """The model inputs of some examples (with `labels` when `targets` are given), and for
    tagged sentences where each word starts."""
    if isinstance(data, TaggedData):
        return word_inputs(tokenizer, data, rows, max_len, targets)
    inputs = model_inputs(tokenizer, config, data, rows, max_len)
    if targets is not None:
        inputs["labels"] = torch.tensor([targets[row] for row in rows])  # class ids, or float scores for regression
    return inputs, None


def predict(model: SequenceClassifier | TokenClassifier, tokenizer: Tokenizer, data: TaskData | TaggedData, batch_size: int,
            max_len: int, device, amp: Precision | None = None) -> list:
    """The predicted label id (or score, for regression) of every example, in file order; for
    tagged sentences a list of tag ids per sentence, one per word within `max_len`. In fp32
    unless `amp` says otherwise."""
    return predict_with_scores(model, tokenizer, data, batch_size, max_len, device, amp)[0]


@torch.no_grad()
def predict_with_scores(model: SequenceClassifier | TokenClassifier, tokenizer: Tokenizer, data: TaskData | TaggedData,
                        batch_size: int, max_len: int, device, amp: Precision | None = None, progress: bool = False) -> tuple[list, list]:
    """`predict`'s predictions and beside them how sure the model is: the probability of each
    predicted class (of each word's tag), or for regression the score itself. `progress`: a
    bar counting the examples (tqdm)."""
    predicted, scores = [], []
    with tqdm(total=len(data), desc="predict", unit="example", dynamic_ncols=True, disable=not progress) as bar:
        for logits, starts in logit_batches(model, tokenizer, data, batch_size, max_len, device, amp):
            if model.num_labels == 1:  # regression: the output is the score
                values = logits.float().squeeze(-1).tolist()
                predicted += values
                scores += values
            else:
                ids = logits.argmax(-1)
                chosen = logits.float().softmax(-1).gather(-1, ids.unsqueeze(-1)).squeeze(-1)  # the predicted class's probability
                if starts is not None:  # [B, T] -> the tag at each word's first sub-token
                    predicted += [ids[i, first].tolist() for i, first in enumerate(starts)]
                    scores += [chosen[i, first].tolist() for i, first in enumerate(starts)]
                else:
                    predicted += ids.tolist()
                    scores += chosen.tolist()
            bar.update(len(logits))
    return predicted, scores


@torch.no_grad()
def logit_batches(model, tokenizer: Tokenizer, data: TaskData | TaggedData, batch_size: int, max_len: int, device,
                  amp: Precision | None = None):
    """The model's logits on `data`, batch by batch in file order (in eval mode, fp32 unless
    `amp` says otherwise): ([B, C] or [B, T, C] logits, where each word starts or None)."""
    amp = amp or Precision("fp32", torch.device(device))
    model.eval()
    for start in range(0, len(data), batch_size):
        rows = list(range(start, min(start + batch_size, len(data))))
        inputs, starts = encode(tokenizer, model.config, data, rows, max_len)
        with amp.autocast:
            yield model(**{name: tensor.to(device) for name, tensor in inputs.items()}).logits, starts


def predict_rows(model: SequenceClassifier | TokenClassifier, tokenizer: Tokenizer, labels: LabelMap | None, rows: list,
                 batch_size: int, max_len: int | None = None, amp: Precision | None = None) -> list:
    """`Classifier.predict`: a `Prediction` per text (or (a, b) pair), or a list of them per
    sentence of words for a tagger; on the model's device, cut at `max_len` tokens (None: fine-tuning's
    default, 128 or the model's limit; a model fine-tuned at another --max-len is given it again)."""
    check_batch_size(batch_size)
    data = listed_rows(model, rows)
    device = next(model.parameters()).device
    max_len = check_max_len(max_len, model.config)
    predicted, scores = predict_with_scores(model, tokenizer, data, batch_size, max_len, device, amp) if len(data) else ([], [])
    name = (lambda label_id: None) if labels is None else (lambda label_id: labels.names[label_id])
    if isinstance(data, TaggedData):  # words past max_len have no prediction
        return [[Prediction(name(tags[j]), sure[j]) if j < len(tags) else Prediction(None, math.nan) for j in range(len(words))]
                for words, tags, sure in zip(data.words, predicted, scores)]
    return [Prediction(name(p), score) for p, score in zip(predicted, scores)]


def listed_rows(model: SequenceClassifier | TokenClassifier, rows: list) -> TaskData | TaggedData:
    """Python rows as the file readers give them: lists of words for a tagger; texts, or (a, b)
    pairs of texts, for a sentence classifier."""
    where = Path("<rows>")
    if not isinstance(rows, list):
        raise ValueError(f"predict takes a list of rows, got {type(rows).__name__}; wrap one text as [text]")
    if isinstance(model, TokenClassifier):
        if not all(isinstance(words, (list, tuple)) and words and all(isinstance(w, str) for w in words) for words in rows):
            raise ValueError("a tagger predicts a tag per word: give each sentence as a list of its words, "
                             'e.g. [["EU", "rejects", "German", "call"]]')
        return TaggedData(where, [list(words) for words in rows], [[""] * len(words) for words in rows],
                          [[i] * len(words) for i, words in enumerate(rows, start=1)])
    lines = list(range(1, len(rows) + 1))
    if all(isinstance(text, str) for text in rows):
        return TaskData(where, list(rows), None, [""] * len(rows), lines)
    if all(isinstance(pair, tuple) and len(pair) == 2 and all(isinstance(t, str) for t in pair) for pair in rows):
        return TaskData(where, [a for a, _ in rows], [b for _, b in rows], [""] * len(rows), lines)
    raise ValueError("a sentence classifier takes a list of texts, or a list of (a, b) pairs of texts; not a mix")


def check_batch_size(batch_size: int) -> None:
    if batch_size < 1:
        raise ValueError(f"--batch-size {batch_size}: give a positive number of rows per batch")
