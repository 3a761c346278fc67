"""What every tokenizer backed by a SentencePiece model file shares.

Two kinds of SentencePiece vocabulary reach minibert: the ones we train ourselves
(`sentencepiece_tokenizer.py`) and the `spiece.model` of released ALBERT checkpoints
(`albert.py`). They differ in where the special tokens sit and in how text is
prepared before SentencePiece sees it; decoding, display, word starts and pickling are the
same, and live here.
"""

from __future__ import annotations

from typing import Sequence

import sentencepiece as spm
import torch

from .base import Tokenizer

WORD_START = "▁"  # SentencePiece's mark of a piece that begins a word (a space before it)


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
