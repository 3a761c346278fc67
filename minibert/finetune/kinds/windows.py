"""A question and its passage as the model reads them: windows of --max-len tokens.

BERT reads SQuAD as a pair (Devlin et al., 2019, section 4.2): the question is segment A, the
passage segment B, [CLS] A [SEP] B [SEP]. The question is cut at --max-query-len tokens. A
passage longer than the room left is read in several windows that overlap by --doc-stride
tokens, so that every answer lies well inside at least one of them; the n-th window starts
n × (room − doc_stride) tokens into the passage. That is transformers' `stride` (the
overlap), not google-research's run_squad, whose doc_stride is the step between starts.

Each window keeps, for every position, the characters of the passage it came from (None for
the question, the specials and padding): the tokenizer's offsets (`tokenize_with_offsets`).
They map a gold answer's characters to its first and last token when training
(`answer_tokens`), and a predicted span back to the passage's own text when answering
(span_decoding.py). A window that does not hold the whole answer, or a SQuAD 2.0 question
without one, points both positions at [CLS] (0), as BERT trains it. The model can only ever
answer whole tokens, so `aligned` asks whether the tokens covering a gold answer spell it as
SQuAD's scoring reads it: an answer that cuts a token ("1990" of "1990s") is not, and counting
them says how well a tokenizer's offsets serve the task.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import torch

from ...tokenizers.base import Tokenizer
from .squad import QAExample
from .squad_scores import normalize_answer

Span = tuple[int, int]

NO_ANSWER = 0  # [CLS]: where a window without the answer points its start and end


class Window(NamedTuple):
    """One window of one question's passage."""

    example: int  # the index of its question in the examples given
    input_ids: list[int]  # [CLS] question [SEP] passage tokens [SEP], in the tokenizer's layout
    token_type_ids: list[int]
    offsets: list[tuple[int, int] | None]  # per position: the passage characters (start, end) it came from, None outside the passage
    start: int = NO_ANSWER  # the gold answer's first position; NO_ANSWER where the window does not hold it
    end: int = NO_ANSWER


class Alignment(NamedTuple):
    """How the gold answers of the training questions met the tokens (printed by the fine-tune)."""

    answers: int  # questions with an answer
    inexact: int  # answers whose covering tokens hold more than the answer (say "1990" of "1990s"): trained on those tokens
    lost: int  # answers no token covers (only whitespace, say): their questions are left out of training

    def line(self) -> str:
        share = (self.inexact + self.lost) / max(1, self.answers)
        return (f"{self.inexact + self.lost} of {self.answers} training answers ({share:.2%}) could not be aligned to tokens "
                f"exactly: {self.inexact} trained on the tokens that cover them, {self.lost} left out (no token covers them)")


def question_windows(tokenizer: Tokenizer, examples: Sequence[QAExample], max_len: int, max_query_len: int, doc_stride: int,
                     labelled: bool) -> tuple[list[Window], Alignment]:
    """Every question's windows, in order; `labelled`: with the gold start and end (the first
    gold answer, as BERT trains), questions without a token span left out and counted."""
    passages: dict[str, tuple[list[int], list[tuple[int, int]]]] = {}  # a passage is shared by its questions: tokenized once
    windows, answers, inexact, lost = [], 0, 0, 0
    for index, example in enumerate(examples):
        if example.context not in passages:
            passages[example.context] = tokenizer.tokenize_with_offsets(example.context)
        passage, spans = passages[example.context]
        question = tokenizer.tokenize_to_ids(example.question)[:max_query_len]
        gold = None
        if labelled and example.answers:
            answers += 1
            text, start = example.answers[0]
            gold = answer_tokens(spans, start, start + len(text))
            if gold is None:
                lost += 1
                continue
            inexact += not aligned(example.context, spans, text, start)
        windows += cut(tokenizer, index, question, passage, spans, max_len, doc_stride, gold)
    return windows, Alignment(answers, inexact, lost)


def cut(tokenizer: Tokenizer, index: int, question: list[int], passage: list[int], spans: list[tuple[int, int]],
        max_len: int, doc_stride: int, gold: tuple[int, int] | None) -> list[Window]:
    """One question's windows over its passage tokens; `gold`: the answer's first and last
    passage token, each window's start and end then set (NO_ANSWER where it does not hold both)."""
    room = max_len - len(question) - tokenizer.num_special(pair=True)  # passage tokens per window
    step = room - doc_stride
    if step < 1:
        raise ValueError(f"--max-len {max_len} leaves {room} passage tokens beside a {len(question)}-token question, "
                         f"too few for --doc-stride {doc_stride} tokens of overlap; raise --max-len or lower --doc-stride "
                         f"or --max-query-len")
    windows = []
    for first in range(0, max(1, len(passage) - doc_stride), step):
        piece = passage[first:first + room]
        ids, segments = tokenizer.join(question, piece)
        before = len(ids) - len(piece) - 1  # positions ahead of the passage: [CLS] question [SEP] (RoBERTa: </s></s>)
        offsets = [None] * before + list(spans[first:first + len(piece)]) + [None] * (len(ids) - before - len(piece))
        start = end = NO_ANSWER
        if gold is not None and first <= gold[0] and gold[1] < first + len(piece):
            start, end = before + gold[0] - first, before + gold[1] - first
        windows.append(Window(index, ids, segments, offsets, start, end))
        if first + room >= len(passage):
            break
    return windows


def window_inputs(windows: Sequence[Window], rows: Sequence[int], tokenizer: Tokenizer, segments: bool,
                  labelled: bool) -> dict[str, torch.Tensor]:
    """Some windows as the model takes them, padded to the longest; `segments`: the model has a
    second segment embedding (RoBERTa and DistilBERT tell A from B by the separators alone, their
    segment ids stay 0); `labelled`: with `start_positions` and `end_positions` [B]."""
    chosen = [windows[row] for row in rows]
    inputs = tokenizer.pad([(w.input_ids, w.token_type_ids) for w in chosen])
    if not segments:
        inputs["token_type_ids"].zero_()
    if labelled:
        inputs["start_positions"] = torch.tensor([w.start for w in chosen])
        inputs["end_positions"] = torch.tensor([w.end for w in chosen])
    return inputs


def answer_tokens(spans: Sequence[Span], char_start: int, char_end: int) -> tuple[int, int] | None:
    """(first, last) token covering the characters char_start..char_end-1: the first token whose
    span ends after char_start, the last whose span starts before char_end. Tokens with an empty
    span (a lone word-boundary mark) stand for no character, so they never begin or end an
    answer. None when no token covers any of the characters."""
    covering = [n for n, (start, end) in enumerate(spans) if start < end and end > char_start and start < char_end]
    return (covering[0], covering[-1]) if covering else None


def aligned(context: str, spans: Sequence[Span], answer_text: str, answer_start: int) -> bool:
    """True when the tokens covering the answer spell it: their text in `context` equals
    `answer_text` after SQuAD's normalization, so predicting exactly those tokens scores as exact."""
    found = answer_tokens(spans, answer_start, answer_start + len(answer_text))
    if found is None:
        return False
    first, last = found
    return normalize_answer(context[spans[first][0]:spans[last][1]]) == normalize_answer(answer_text)
