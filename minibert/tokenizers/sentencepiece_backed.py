"""What every tokenizer backed by a SentencePiece model file shares.

Two kinds of SentencePiece vocabulary reach minibert: the ones we train ourselves
(`sentencepiece_tokenizer.py`) and the `spiece.model` of released ALBERT checkpoints
(`albert.py`). They differ in where the special tokens sit and in how text is
prepared before SentencePiece sees it; decoding, display, word starts and pickling are the
same, and live here.
"""

from __future__ import annotations

import unicodedata
from typing import Sequence

import sentencepiece as spm
import torch

from .base import Tokenizer
from .offsets import Aligned, Span, trim_spaces

WORD_START = "▁"  # SentencePiece's mark of a piece that begins a word (a space before it)


def without_deleted(text: str, span: Span, kept: set[int]) -> Span:
    """`span` without the control and format characters at its end that the normalizer deleted
    (those whose index is not in `kept`, the characters some normalized character begins at).
    SentencePiece says only where each normalized character begins, so a character seems to run
    up to the next one, over whatever the normalizer deleted after it (nmt_nfkc deletes control
    characters and zero-width spaces); those belong to no token. One it kept (a soft hyphen
    inside an unknown piece, say) stays. A span is never emptied: a kept one is its own token."""
    start, end = span
    while end - start > 1 and unicodedata.category(text[end - 1]) in ("Cc", "Cf") and end - 1 not in kept:
        end -= 1
    return start, end


class SentencePieceBacked(Tokenizer):
    """A `Tokenizer` over a SentencePiece model; subclasses set the special ids and `tokenize_to_ids`."""

    def __init__(self, model_proto: bytes):
        self._model_proto = model_proto
        self._sp = spm.SentencePieceProcessor(model_proto=model_proto)

    @property
    def model_proto(self) -> bytes:
        """The serialized SentencePiece model: what `tokenizer.model` holds, and what an export reads."""
        return self._model_proto

    @property
    def vocab_size(self) -> int:
        return self._sp.get_piece_size()

    def decode_ids(self, ids: Sequence[int]) -> str:
        return self._sp.decode([int(i) for i in ids])

    def piece(self, token_id: int) -> str:
        """The piece itself, ▁ included: decoding "▁" alone would show nothing."""
        return self._sp.id_to_piece(int(token_id))

    def token_text(self, token_id: int) -> str:
        """"cat" for "▁cat", "" for "▁"; a special token is its spelling ("[PAD]", which
        SentencePiece would decode to nothing), as in transformers' `decode([id])`."""
        token_id = int(token_id)
        return self.piece(token_id) if token_id in self.special_ids | {self.unk_id} else self._sp.decode([token_id])

    def piece_spans(self, text: str, prepared: Aligned, pieces: Sequence[str], ids: Sequence[int]) -> list[Span]:
        """The original spans of the pieces SentencePiece cut `prepared.text` into (`pieces`, with
        their `ids`), where `prepared` is a stretch of `text` as the tokenizer prepared it.

        SentencePiece tells where each character of its own normalization came from
        (`normalize(..., with_offsets=True)`: each normalized character's first input character),
        so the pieces are walked along the normalized text. A character the normalizer expands
        ("ﬁ" -> "fi") or composes ("e" + U+0301 -> "é") covers its whole input, and so do the
        byte-fallback pieces that spell one character. A ▁ (for a space, or the one added
        before the first word) is left out of its piece's span; a piece that is nothing
        else gets an empty span where the next character begins. Every ▁ of the normalized text
        is such a mark: the normalizer makes one of each space, and of what it takes for one
        (a zero-width space, a ▁ typed in the text)."""
        normalized, starts = self._sp.normalize(prepared.text, with_offsets=True)
        starts = list(starts)
        ends, later = [0] * len(normalized), starts[-1]
        for i in range(len(normalized) - 1, -1, -1):  # a character runs to where a later one begins
            if starts[i] < starts[i + 1]:
                later = starts[i + 1]
            ends[i] = starts[i + 1] if normalized[i] == WORD_START else later
        norm = Aligned(normalized, [prepared.source(a, b) for a, b in zip(starts, ends)], prepared.stop)
        kept = {prepared.source(a, a + 1)[0] for a in starts[:-1] if a < len(prepared.text)}  # original characters the normalizer kept
        spans: list[Span] = []
        at, bytes_left = 0, 0
        for piece, token_id in zip(pieces, ids):
            if self._sp.is_byte(token_id):  # one UTF-8 byte of the character at `at`
                bytes_left = bytes_left or len(normalized[at].encode("utf-8"))
                spans.append(norm.source(at, at + 1))
                bytes_left -= 1
                at += not bytes_left
                continue
            if not normalized.startswith(piece, at):
                raise ValueError(f"SentencePiece's piece {piece!r} is not the normalized text at {at} "
                                 f"({normalized[at:at + 20]!r}); cannot give its offsets")
            begin = at
            while begin < at + len(piece) and normalized[begin] == WORD_START:
                begin += 1
            at += len(piece)
            spans.append(without_deleted(text, trim_spaces(text, norm.source(begin, at)), kept))
        if at != len(normalized):
            raise ValueError(f"SentencePiece's pieces cover {at} of {len(normalized)} normalized characters; cannot give offsets")
        return spans

    @property
    def word_starts(self) -> torch.Tensor:
        """Bool [vocab_size]: True for pieces that begin a word (SentencePiece marks them ▁)
        and for the special tokens.

        Whole-word masking uses it to mask all pieces of a word together.
        """
        sp, special = self._sp, self.special_ids | {self.unk_id}
        return torch.tensor([sp.id_to_piece(i).startswith(WORD_START) or i in special for i in range(self.vocab_size)])

    # Picklable (by its model bytes and settings), so tokenizing worker processes can receive it.
    def settings(self) -> dict:
        """The keyword arguments besides `model_proto` that rebuild this tokenizer."""
        return {}

    def __getstate__(self) -> dict:
        return {"model_proto": self._model_proto, **self.settings()}

    def __setstate__(self, state: dict) -> None:
        self.__init__(**state)
