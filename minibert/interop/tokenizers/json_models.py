"""The models a `tokenizer.json` names: step 4 of its pipeline, a word -> its vocabulary ids.

A model is built from the file's `model` object through the table at the end (`MODELS`), and
each reuses the search minibert already has for its family: WordPiece's greedy longest match
(wordpiece.py), the Unigram Viterbi search (unigram.py), byte-level BPE merges (byte_bpe.py).
A model also tells which pieces begin a word, which whole-word masking needs. json_import.py
runs it between the pre-tokenizer and the post-processor.
"""

from __future__ import annotations

from typing import Callable

from .byte_bpe import ByteLevelBPETokenizer, byte_to_char
from .json_components import Spec
from .unigram import Unigram
from ...tokenizers.wordpiece import wordpiece


class Model:
    """A vocabulary (token -> id), how a word becomes ids, and how a piece that begins a word
    looks (`begins_word`)."""

    vocab: dict[str, int]
    unk_token: str | None
    kind: str  # for display

    def __call__(self, word: str) -> list[int]:
        raise NotImplementedError

    def use_specials(self, spellings: dict[str, str]) -> None:
        """Told the special tokens' spellings (role_token -> token) once they are known."""

    def begins_word(self, piece: str) -> bool:
        raise NotImplementedError


class WordPieceModel(Model):
    kind = "WordPiece"

    def __init__(self, spec: Spec):
        self.vocab = vocabulary(spec)
        self.unk_token = spec.require("unk_token", str)
        if self.unk_token not in self.vocab:
            raise ValueError(f"{spec.where}: the WordPiece unk_token {self.unk_token!r} is not in its vocabulary")
        self.prefix = spec.get("continuing_subword_prefix", "##")
        self.max_chars = spec.get("max_input_chars_per_word", 100)

    def __call__(self, word: str) -> list[int]:
        return [self.vocab[piece] for piece in wordpiece(word, self.vocab, self.unk_token, self.prefix, self.max_chars)]

    def begins_word(self, piece: str) -> bool:
        return not piece.startswith(self.prefix)


class UnigramModel(Model):
    kind = "Unigram"

    def __init__(self, spec: Spec):
        pieces = spec.require("vocab", list)
        if not all(isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) and isinstance(p[1], (int, float))
                   for p in pieces):
            raise ValueError(f"{spec.where}: a Unigram vocab must be a list of [piece, score] pairs")
        unk_id = spec.get("unk_id")
        if unk_id is not None and not (isinstance(unk_id, int) and 0 <= unk_id < len(pieces)):
            raise ValueError(f"{spec.where}: the Unigram unk_id {unk_id!r} is not an index into its {len(pieces)} pieces")
        self.segment = Unigram(pieces, unk_id, spec.get("byte_fallback", False, (True, False)))
        self.vocab = self.segment.ids
        self.unk_token = None if unk_id is None else pieces[unk_id][0]
        self.mark = "▁"

    def __call__(self, word: str) -> list[int]:
        return self.segment(word)

    def begins_word(self, piece: str) -> bool:
        return piece.startswith(self.mark)


class BPEModel(Model):
    """Byte-level BPE (RoBERTa): a word's UTF-8 bytes in GPT-2's alphabet, merged by rank —
    byte_bpe.py's `ByteLevelBPETokenizer` over the file's vocab and merges does it."""

    kind = "byte-level BPE"

    def __init__(self, spec: Spec):
        self.vocab, self.where = vocabulary(spec), spec.where
        for key, allowed in (("dropout", None), ("continuing_subword_prefix", ""), ("end_of_word_suffix", ""),
                             ("byte_fallback", False), ("ignore_merges", False)):
            spec.get(key, allowed, (allowed,))
        self.merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in spec.require("merges", list)]
        self.unk_token = spec.get("unk_token")
        self.bpe: ByteLevelBPETokenizer | None = None

    def use_specials(self, spellings: dict[str, str]) -> None:
        try:
            self.bpe = ByteLevelBPETokenizer(self.vocab, self.merges, **spellings)
        except ValueError as error:
            raise ValueError(f"{self.where}: {error}") from None

    def __call__(self, word: str) -> list[int]:
        return self.bpe.word_ids(word)

    def begins_word(self, piece: str) -> bool:
        return piece.startswith(byte_to_char()[ord(" ")])


def vocabulary(spec: Spec) -> dict[str, int]:
    vocab = spec.require("vocab", dict)
    if not all(isinstance(i, int) and i >= 0 for i in vocab.values()):
        raise ValueError(f"{spec.where}: the {spec.type} vocab must map tokens to non-negative integer ids")
    return vocab


MODELS: dict[str, tuple[Callable[[Spec], Model], str]] = {
    "WordPiece": (WordPieceModel, "unk_token continuing_subword_prefix max_input_chars_per_word vocab"),
    "Unigram": (UnigramModel, "unk_id vocab byte_fallback"),
    "BPE": (BPEModel, "dropout unk_token continuing_subword_prefix end_of_word_suffix fuse_unk byte_fallback ignore_merges vocab merges"),
}
