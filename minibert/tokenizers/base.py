"""The one tokenizer interface the rest of minibert talks to.

A BERT-family model only ever sees integer ids laid out as

    [CLS] segment A [SEP]                    (one text)
    [CLS] segment A [SEP] segment B [SEP]    (a pair; segment ids 0 ... 0 1 ... 1)

or, in RoBERTa's spelling, `<s> A </s>` and `<s> A </s></s> B </s>` (one segment type).
How a text becomes ids differs between families (WordPiece for BERT, SentencePiece for
ALBERT and the models we pretrain ourselves, byte-level BPE for RoBERTa), but the role of
each special token does not. So a concrete tokenizer implements only three things —
`tokenize_to_ids`, `decode_ids` and `vocab_size` (and `join`, if its layout is not BERT's;
`tokenize_with_offsets`, for tasks that point into the text) —
and inherits everything about special tokens, truncation and batching from this file.
Those rules live here and nowhere else.
"""

from __future__ import annotations

from typing import Callable, Sequence

import torch

# Fixed names of the special tokens. Each tokenizer knows their ids.
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
# Hugging Face's names for a tokenizer folder's settings and its special tokens' spellings (so a
# folder minibert saves loads there too); the spellings are read from both, in this order.
CONFIG_FILE = "tokenizer_config.json"
SPECIAL_TOKENS_MAP_FILE = "special_tokens_map.json"
SPECIAL_TOKEN_FILES = (CONFIG_FILE, SPECIAL_TOKENS_MAP_FILE)
SPECIAL_TOKEN_KEYS = ("pad_token", "unk_token", "cls_token", "sep_token", "mask_token", "bos_token", "eos_token")


def special_spellings(read: Callable[[str], dict | None]) -> dict[str, str]:
    """The special tokens' spellings a Hugging Face tokenizer folder names, {"mask_token": "<mask>", ...}.

    Both SPECIAL_TOKEN_FILES may name a role; where they disagree, special_tokens_map.json wins,
    as transformers reads them (tests/test_tokenizer_json.py checks it against AutoTokenizer).
    A spelling is a string or {"content": ...}. `read(name)` returns one file's JSON object, or
    None when the folder lacks it."""
    found: dict[str, str] = {}
    for name in SPECIAL_TOKEN_FILES:
        stored = read(name) or {}
        for key in SPECIAL_TOKEN_KEYS:
            value = stored.get(key)
            value = value.get("content") if isinstance(value, dict) else value
            if value is None:
                continue
            if not isinstance(value, str):
                raise ValueError(f"{name}: {key} must be a string, got {value!r}; fix or delete it")
            found[key] = value
    return found


def join_segments(
    ids_a: Sequence[int], ids_b: Sequence[int] | None, *, cls_id: int, sep_id: int
) -> tuple[list[int], list[int]]:
    """Lay out one or two segments as BERT expects and return (ids, segment_ids).

    Segment ids tell the model which sentence a token belongs to: 0 for [CLS], A and
    the first [SEP]; 1 for B and the final [SEP].
    """
    ids = [cls_id, *ids_a, sep_id]
    segments = [0] * len(ids)
    if ids_b is not None:
        ids += [*ids_b, sep_id]
        segments += [1] * (len(ids_b) + 1)
    return ids, segments


def truncate_pair(
    ids_a: list[int], ids_b: list[int] | None, max_tokens: int
) -> tuple[list[int], list[int] | None]:
    """Trim the longer segment (B on a tie) one token at a time until both fit in `max_tokens`.

    This is BERT's "longest first" rule: it keeps the two segments balanced, so a
    very long premise cannot push its hypothesis out of the window entirely.
    """
    ids_a = list(ids_a)
    ids_b = None if ids_b is None else list(ids_b)
    while len(ids_a) + (len(ids_b) if ids_b is not None else 0) > max_tokens:
        if ids_b is not None and len(ids_b) >= len(ids_a):
            ids_b.pop()
        else:
            ids_a.pop()
    return ids_a, ids_b


class Tokenizer:
    """Base class: special tokens, segment layout, truncation and batching.

    Subclasses set `pad_id, unk_id, cls_id, sep_id, mask_id` and implement
    `tokenize_to_ids` (text -> ids without special tokens), `decode_ids` and
    `vocab_size`.
    """

    kind = "a tokenizer"  # what splits the text, for display: "WordPiece", "byte-level BPE", ...
    pad_id: int
    unk_id: int
    cls_id: int
    sep_id: int
    mask_id: int

    # --- what a concrete tokenizer provides -------------------------------------
    @property
    def vocab_size(self) -> int:
        raise NotImplementedError

    def tokenize_to_ids(self, text: str) -> list[int]:
        """Text -> ids of its pieces, with no special tokens added."""
        raise NotImplementedError

    def decode_ids(self, ids: Sequence[int]) -> str:
        """Ids of ordinary pieces (no special tokens) -> text."""
        raise NotImplementedError

    def tokenize_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """Text -> the ids of `tokenize_to_ids(text)`, and for each its (start, end) span in `text`.

        The spans are how a character span (a question's answer) is found among tokens, and how
        tokens become text again: each covers the original characters its token was made of,
        before any lower-casing, accent stripping or Unicode normalization, without the space a
        word-boundary mark stands for (offsets.py). A layout that cannot give them says so here."""
        raise NotImplementedError(f"{type(self).__name__} ({self.kind}) does not give character offsets yet; "
                                  f"tokenize_with_offsets is implemented for WordPiece, SentencePiece and byte-level BPE vocabularies")

    @property
    def gives_offsets(self) -> bool:
        """Whether `tokenize_with_offsets` is implemented for this layout."""
        return type(self).tokenize_with_offsets is not Tokenizer.tokenize_with_offsets

    def tokenize_word(self, word: str) -> list[int]:
        """One word of a text that comes already split into words (a tagging task's) -> its ids,
        spelled as the word reads inside a sentence. Most tokenizers mark a word start themselves
        (SentencePiece's ▁) or need no mark (WordPiece); byte-level BPE overrides this."""
        return self.tokenize_to_ids(word)

    def piece(self, token_id: int) -> str:
        """One token as the vocabulary writes it ("▁cat", "##s", "[SEP]")."""
        return self.decode_ids([token_id])

    def token_text(self, token_id: int) -> str:
        """One token as the text it stands for ("cat" for SentencePiece's "▁cat"; a WordPiece
        continuation stays "##s"): what transformers' `tokenizer.decode([id])` shows, e.g. as
        the fill-mask pipeline's `token_str`. The piece is the vocabulary's view, this the reader's."""
        return self.decode_ids([token_id])

    def join(self, ids_a: Sequence[int], ids_b: Sequence[int] | None = None) -> tuple[list[int], list[int]]:
        """One or two segments laid out with this family's special tokens -> (ids, segment_ids).
        BERT's layout ([CLS] A [SEP] B [SEP], `join_segments`) unless a tokenizer says otherwise."""
        return join_segments(ids_a, ids_b, cls_id=self.cls_id, sep_id=self.sep_id)

    def num_special(self, pair: bool) -> int:
        """How many special tokens `join` adds to one text (BERT: 2) or a pair (BERT: 3)."""
        return len(self.join([], [] if pair else None)[0])

    # --- shared behaviour --------------------------------------------------------
    def check_fits(self, vocab_size: int, where: str, fix: str = "they are not one checkpoint") -> None:
        """A model with `vocab_size` embeddings must have a row for every id made here;
        `where` says whose tokenizer and model they are, `fix` what to do about it."""
        if self.vocab_size > vocab_size:
            raise ValueError(f"{where}: the tokenizer has {self.vocab_size} tokens but the model only {vocab_size} "
                             f"embeddings; {fix}")

    @property
    def special_ids(self) -> frozenset[int]:
        return frozenset((self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id)) - {self.unk_id}

    def encode(self, text: str, max_length: int | None = None) -> list[int]:
        """[CLS] text [SEP], truncated to at most `max_length` ids."""
        ids, _ = self.encode_pair(text, None, max_length=max_length)
        return ids

    def encode_pair(
        self, text_a: str, text_b: str | None, max_length: int | None = None
    ) -> tuple[list[int], list[int]]:
        """`join`'s layout of a and b ([CLS] a [SEP] b [SEP]) and its segment ids, longest-first truncated."""
        ids_a = self.tokenize_to_ids(text_a)
        ids_b = None if text_b is None else self.tokenize_to_ids(text_b)
        if max_length is not None:
            n_special = self.num_special(pair=ids_b is not None)
            if max_length < n_special:
                raise ValueError(f"max_length={max_length} leaves no room for the {n_special} special tokens; use at least {n_special}")
            ids_a, ids_b = truncate_pair(ids_a, ids_b, max_length - n_special)
        return self.join(ids_a, ids_b)

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        """Ids -> text. Padding and [CLS]/[SEP]/[MASK] are dropped unless asked for."""
        ids = [int(i) for i in ids]
        if skip_special_tokens:
            return self.decode_ids([i for i in ids if i not in self.special_ids])
        return self.decode_ids(ids)

    def special_tokens_mask(self, ids: Sequence[int]) -> list[bool]:
        """True where an id is [PAD], [CLS], [SEP] or [MASK] (never masked for MLM)."""
        special = self.special_ids
        return [int(i) in special for i in ids]

    def batch(
        self,
        texts: Sequence[str],
        pairs: Sequence[str] | None = None,
        max_length: int | None = None,
    ) -> dict[str, torch.Tensor]:
        """Encode many texts (or pairs), pad to the longest, return model inputs.

        Returns LongTensors `input_ids`, `attention_mask` (1 = real token) and
        `token_type_ids`, each [batch, longest].
        """
        if pairs is not None and len(pairs) != len(texts):
            raise ValueError(f"got {len(texts)} first segments but {len(pairs)} second segments; pass one pair per text")
        encoded = [
            self.encode_pair(t, None if pairs is None else pairs[i], max_length=max_length)
            for i, t in enumerate(texts)
        ]
        return self.pad(encoded)

    def pad(self, encoded: Sequence[tuple[Sequence[int], Sequence[int]]]) -> dict[str, torch.Tensor]:
        """(ids, segment_ids) pairs, already laid out with their special tokens -> the padded
        tensors of `batch`. For callers that build ids themselves (fill-mask inserts [MASK])."""
        longest = max((len(ids) for ids, _ in encoded), default=0)
        input_ids = torch.full((len(encoded), longest), self.pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(encoded), longest), dtype=torch.long)
        token_type_ids = torch.zeros((len(encoded), longest), dtype=torch.long)
        for row, (ids, segments) in enumerate(encoded):
            input_ids[row, : len(ids)] = torch.tensor(ids)
            attention_mask[row, : len(ids)] = 1
            token_type_ids[row, : len(ids)] = torch.tensor(segments)
        return {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
