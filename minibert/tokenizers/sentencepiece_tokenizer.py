"""minibert's own tokenizer: a SentencePiece model learned from the pretraining corpus.

The models we pretrain ourselves get their own vocabulary, learned from their own corpus
(`minibert/corpus/vocabulary.py` trains it), as ALBERT's did: a SentencePiece *unigram* model
(or BPE). Three settings make it fit the rest of minibert, the first two given to the trainer
(`vocabulary.py`), the third applied here when encoding:

* the special tokens sit at fixed ids — [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4 — so
  the masking and padding code never has to look them up;
* byte fallback: a character never seen in training is spelled as its UTF-8 bytes
  (<0xE2> <0x98> <0x83>) instead of collapsing to [UNK], so no character is lost;
* a [MASK] typed in a text absorbs the space before it (what Hugging Face calls `lstrip`, as
  ALBERT's and RoBERTa's masks do): "a new [MASK]." is ▁a ▁new [MASK] . — the ids of
  "a new list." with the word ▁list masked, as pretraining masks it — where SentencePiece alone
  would give the space a piece of its own (▁a ▁new ▁ [MASK] .), one the model never saw before a mask.

A checkpoint folder keeps it as `tokenizer.model`; exported to Hugging Face it becomes a
`tokenizer.json` (minibert/interop/tokenizers/json_export.py).
"""

from __future__ import annotations

from pathlib import Path

from ..operations.files import write_atomic
from .base import SPECIAL_TOKENS
from .offsets import Aligned, Span
from .sentencepiece_backed import SentencePieceBacked


class SentencePieceTokenizer(SentencePieceBacked):
    """A trained SentencePiece model behind minibert's `Tokenizer` interface."""

    pad_id, unk_id, cls_id, sep_id, mask_id = range(len(SPECIAL_TOKENS))
    FILE_NAME = "tokenizer.model"
    kind = "SentencePiece"

    def __init__(self, model_proto: bytes):
        super().__init__(model_proto)
        pieces = tuple(self._sp.id_to_piece(i) for i in range(len(SPECIAL_TOKENS)))
        if pieces != SPECIAL_TOKENS:
            raise ValueError(f"SentencePiece model has {pieces} at ids 0-4, not {SPECIAL_TOKENS}; train it with minibert.corpus.vocabulary.train_tokenizer")
        # A space before [MASK] becomes what SentencePiece prefixes to "[MASK]" alone: ▁ (or its bytes).
        self._space_before_mask = self._sp.encode(SPECIAL_TOKENS[self.mask_id])[:-1]

    def tokenize_to_ids(self, text: str) -> list[int]:
        ids = self._sp.encode(text)
        return ids if self.mask_id not in ids else without_space_before(ids, self.mask_id, self._space_before_mask)

    def tokenize_with_offsets(self, text: str) -> tuple[list[int], list[Span]]:
        ids = self._sp.encode(text)
        spans = self.piece_spans(text, Aligned.original(text), self._sp.encode(text, out_type=str), ids)
        if self.mask_id in ids:
            kept = without_space_before(list(zip(ids, spans)), self.mask_id, self._space_before_mask, key=lambda pair: pair[0])
            ids, spans = [i for i, _ in kept], [span for _, span in kept]
        return ids, spans

    # --- saving, loading ------------------------------------------------------------
    def save(self, directory: str | Path) -> Path:
        """Write `tokenizer.model` into `directory` (e.g. a checkpoint folder), atomically."""
        return write_atomic(Path(directory) / self.FILE_NAME, self._model_proto)

    @classmethod
    def load(cls, directory: str | Path) -> "SentencePieceTokenizer":
        path = Path(directory) / cls.FILE_NAME
        if not path.is_file():
            raise FileNotFoundError(f"no {cls.FILE_NAME} in {directory}; save a tokenizer there first")
        return cls(path.read_bytes())


def without_space_before(ids: list, token_id: int, space: list[int], key=lambda i: i) -> list:
    """`ids` with the `space` ids dropped wherever they come right before `token_id`; `key`
    reads the id of an item, where the items carry more (an id and its span)."""
    kept: list = []
    for item in ids:
        if key(item) == token_id and space and [key(i) for i in kept[-len(space):]] == space:
            del kept[-len(space):]
        kept.append(item)
    return kept
