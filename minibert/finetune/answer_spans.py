"""An answer, given as characters of a context, found among the context's tokens — and back.

Extractive question answering (SQuAD) predicts an answer as a first and a last token of the
context; the gold answer comes as a character span. `answer_tokens` maps the gold span onto the
tokens that cover it, through each token's span in the original text (`tokenize_with_offsets`).
The model can only ever answer whole tokens, so `aligned` asks whether those tokens' text is the
answer as SQuAD's own scoring reads it: an answer that cuts a token ("1990" of "1990s") is not,
and counting them says how well a tokenizer's offsets serve the task.
"""

from __future__ import annotations

import re
import string
from typing import Sequence

Span = tuple[int, int]
ARTICLES = re.compile(r"\b(a|an|the)\b")
PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD's normalization of an answer before comparing: lower-case, punctuation and the
    articles a/an/the removed, whitespace collapsed (the official evaluation script's rules)."""
    text = "".join(char for char in text.lower() if char not in PUNCTUATION)
    return " ".join(ARTICLES.sub(" ", text).split())


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
