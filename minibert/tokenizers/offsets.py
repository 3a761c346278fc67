"""Where each token came from: text rewritten by a tokenizer that still knows its original characters.

Extractive question answering needs each token's span in the text the user gave: the gold
answer is a character span, so the tokens that cover it are found through the spans, and a
predicted pair of tokens becomes an answer by cutting the original text at their spans. But
no tokenizer cuts the original text: it cuts a rewritten one (lower-cased, accents stripped,
NFKC, control characters dropped, whitespace collapsed, bytes spelled as characters). An
`Aligned` string is such a rewritten text that carries, for each of its characters, the span
of the original it came from, so every rewrite keeps the way back. A character the rewrite
expands ("ﬁ" -> "fi") gives each of its outputs its own whole span; a character the rewrite
drops leaves no trace, so no token covers it.

The conventions are those of transformers' `offset_mapping`: a token's span covers the
characters it was made of; the word-boundary mark a tokenizer adds for a space (SentencePiece's
▁, byte-level BPE's Ġ) is not part of the span (`trim_spaces`).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Callable, Iterator

Span = tuple[int, int]


class Aligned:
    """`text`, and for each of its characters the (start, end) span of the original it came
    from; `stop` is where the original ends (the place of an empty span after the last character)."""

    __slots__ = ("text", "spans", "stop")

    def __init__(self, text: str, spans: list[Span], stop: int):
        assert len(text) == len(spans), "one span per character"
        self.text, self.spans, self.stop = text, spans, stop

    @classmethod
    def original(cls, text: str, start: int = 0) -> "Aligned":
        """Text not rewritten yet: character i came from start + i."""
        return cls(text, [(start + i, start + i + 1) for i in range(len(text))], start + len(text))

    def __len__(self) -> int:
        return len(self.text)

    def slice(self, a: int, b: int) -> "Aligned":
        return Aligned(self.text[a:b], self.spans[a:b], self.spans[b][0] if b < len(self) else self.stop)

    def source(self, a: int, b: int) -> Span:
        """The original span of characters a..b-1; an empty range is an empty span where a begins."""
        if b > a:
            return self.spans[a][0], self.spans[b - 1][1]
        at = self.spans[a][0] if a < len(self) else self.stop
        return at, at

    def pieces(self, lengths: list[int]) -> Iterator[Span]:
        """The original spans of consecutive pieces of these lengths, from the start."""
        at = 0
        for length in lengths:
            yield self.source(at, at + length)
            at += length

    def find(self, pattern: re.Pattern) -> Iterator["Aligned"]:
        """The stretches `pattern` matches, e.g. the words between whitespace."""
        for match in pattern.finditer(self.text):
            yield self.slice(*match.span())

    def rewrite(self, whole: Callable[[str], str]) -> "Aligned":
        """The text as `whole` rewrites it, each output character credited to the input it came from.

        The output is `whole(text)`, exactly: ids must not change because offsets are asked for.
        What came from where is learnt by rewriting each cluster (a character with the combining
        marks right after it in the original text) alone; lower-casing a final sigma or reordering marks changes characters
        but not how many each cluster gives. Only if the counts disagree with the whole (a rewrite
        that looks further than one cluster) does every output character get the whole span. A
        mark that outlives the character it sat on (cleaning deletes U+FFFD, say) is credited to
        itself alone, where the cluster's characters rewrite one by one to the same output.
        """
        out = whole(self.text)
        # a mark joins the character before it only where it sat on it in the original text, not
        # across a character deleted between them (BERT's cleaning drops U+FFFD, say)
        starts = [i for i, char in enumerate(self.text)
                  if i == 0 or not unicodedata.combining(char) or self.spans[i - 1][1] != self.spans[i][0]]
        bounds = list(zip(starts, [*starts[1:], len(self.text)]))
        lengths = [len(whole(self.text[a:b])) for a, b in bounds]
        if sum(lengths) != len(out):
            return Aligned(out, [self.source(0, len(self))] * len(out), self.stop)
        spans: list[Span] = []
        for (a, b), length in zip(bounds, lengths):
            spans += self.outliving_marks(whole, a, b) or [self.source(a, b)] * length
        return Aligned(out, spans, self.stop)

    def outliving_marks(self, whole: Callable[[str], str], a: int, b: int) -> list[Span]:
        """The spans of cluster a..b's output where `whole` deletes its base character but keeps its
        marks, and each character rewrites alone to the same output: each output character its
        own input's. [] for every other cluster (almost all: the base is rewritten, not deleted)."""
        if b - a < 2 or whole(self.text[a]) or unicodedata.combining(self.text[a]):
            return []
        alone = [whole(char) for char in self.text[a:b]]
        if "".join(alone) != whole(self.text[a:b]):
            return []
        return [self.source(i, i + 1) for i, chars in zip(range(a, b), alone) for _ in chars]

    def collapse_whitespace(self) -> "Aligned":
        """`" ".join(text.split())`, each joining space credited to the first space of its run."""
        words = [(match.span()) for match in re.finditer(r"\S+", self.text)]
        text, spans = [], []
        for n, (a, b) in enumerate(words):
            if n:
                text.append(" ")
                spans.append(self.spans[words[n - 1][1]])
            text.append(self.text[a:b])
            spans += self.spans[a:b]
        return Aligned("".join(text), spans, self.stop)

    def replace(self, old: str, new: str) -> "Aligned":
        """`text.replace(old, new)`, each new character credited to the whole `old` it replaces."""
        text, spans, at = [], [], 0
        for match in re.finditer(re.escape(old), self.text):
            a, b = match.span()
            text.append(self.text[at:a] + new)
            spans += self.spans[at:a] + [self.source(a, b)] * len(new)
            at = b
        text.append(self.text[at:])
        spans += self.spans[at:]
        return Aligned("".join(text), spans, self.stop)


def trim_spaces(text: str, span: Span, spaces: str | None = None) -> Span:
    """`span` without the whitespace at either end (only the characters in `spaces` if given):
    the space a word-boundary mark stands for belongs to no token's text."""
    start, end = span
    is_space = str.isspace if spaces is None else spaces.__contains__
    while start < end and is_space(text[start]):
        start += 1
    while end > start and is_space(text[end - 1]):
        end -= 1
    return start, end


def special_matches(pattern: re.Pattern, text: str) -> Iterator[tuple[int, int, str | None]]:
    """`text` cut by a pattern of typed special tokens: (start, end, token) for each match and
    (start, end, None) for each non-empty stretch between, in order."""
    at = 0
    for match in pattern.finditer(text):
        if match.start() > at:
            yield at, match.start(), None
        yield match.start(), match.end(), match.group()
        at = match.end()
    if at < len(text):
        yield at, len(text), None
