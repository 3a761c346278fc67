"""Step 6 of the pipeline: example rows -> a padded batch of tensors -> a masked batch.

`example_features` turns one example row into token lists, `collate` pads a list of them
to the longest and makes LongTensors, and a `MaskingRecipe` (one variant's MLM settings)
corrupts a batch with `mask_tokens`. The batch a model receives:

    input_ids            [B, L]  masked token ids ([PAD] beyond each sequence)
    attention_mask       [B, L]  1 = real token, 0 = padding
    token_type_ids       [B, L]  segment ids: 0 for [CLS] A [SEP], 1 for B [SEP]
    special_tokens_mask  [B, L]  1 at [CLS], [SEP] and padding
    labels               [B, L]  original id where the MLM loss applies, -100 elsewhere
    sentence_label       [B]     NSP/SOP target (only for layouts that have one)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .examples import NO_LABEL, example_ids
from .masking import IGNORE_INDEX, check_mask_options, mask_tokens
from .storage import TokenStore
from ..tokenizers.base import Tokenizer


def example_features(store: TokenStore, row, tokenizer: Tokenizer) -> dict[str, np.ndarray | int]:
    """One example row -> input_ids, token_type_ids, special_tokens_mask, sentence_label."""
    ids, segments = example_ids(store, row, tokenizer)
    special = (ids[:, None] == list(tokenizer.special_ids)).any(axis=1)
    return {"input_ids": ids, "token_type_ids": segments, "special_tokens_mask": special, "sentence_label": int(row[4])}


def collate(features: list[dict], pad_id: int) -> dict[str, torch.Tensor]:
    """Pad to the longest sequence in the batch; padding is marked special so it is never masked."""
    longest = max(len(f["input_ids"]) for f in features)
    batch = {
        "input_ids": np.full((len(features), longest), pad_id, dtype=np.int64),
        "attention_mask": np.zeros((len(features), longest), dtype=np.int64),
        "token_type_ids": np.zeros((len(features), longest), dtype=np.int64),
        "special_tokens_mask": np.ones((len(features), longest), dtype=np.int64),
        "labels": np.full((len(features), longest), IGNORE_INDEX, dtype=np.int64),
    }
    for row, f in enumerate(features):
        n = len(f["input_ids"])
        batch["input_ids"][row, :n] = f["input_ids"]
        batch["attention_mask"][row, :n] = 1
        batch["token_type_ids"][row, :n] = f["token_type_ids"]
        batch["special_tokens_mask"][row, :n] = f["special_tokens_mask"]
        if "labels" in f:
            batch["labels"][row, :n] = f["labels"]
    tensors = {name: torch.from_numpy(array) for name, array in batch.items()}
    if features[0]["sentence_label"] != NO_LABEL:
        tensors["sentence_label"] = torch.tensor([f["sentence_label"] for f in features], dtype=torch.long)
    return tensors


@dataclass(frozen=True)
class MaskingRecipe:
    """A variant's MLM settings (the papers' masking recipes) bound to a tokenizer's ids.

    BERT: the defaults (15%). ELECTRA: replace_probs=(0.85, 0.0, 0.15). ALBERT: max_span=3 with
    whole_word (spans of words). The default runs pass their own mask_prob (Settings, 40%).
    whole_word needs a tokenizer that knows where words start (`word_starts`).
    """

    vocab_size: int
    mask_token_id: int
    special_ids: tuple[int, ...]
    mask_prob: float = 0.15
    replace_probs: tuple[float, float, float] = (0.8, 0.1, 0.1)
    max_span: int = 1
    word_start_table: torch.Tensor | None = None  # bool [vocab_size]; set for whole-word masking

    def __post_init__(self):
        check_mask_options(self.mask_prob, self.replace_probs, self.max_span)

    @classmethod
    def for_tokenizer(cls, tokenizer: Tokenizer, *, whole_word: bool = False, **options) -> "MaskingRecipe":
        if whole_word and not hasattr(tokenizer, "word_starts"):
            raise ValueError(f"whole-word masking needs to know where words start, which {type(tokenizer).__name__} does not provide; use whole_word=False")
        special = tuple(sorted(tokenizer.special_ids | {tokenizer.unk_id}))
        table = tokenizer.word_starts if whole_word else None
        return cls(tokenizer.vocab_size, tokenizer.mask_id, special, word_start_table=table, **options)

    def __call__(self, batch: dict[str, torch.Tensor], generator: torch.Generator) -> dict[str, torch.Tensor]:
        """Mask `batch["input_ids"]` in place of the original and add the MLM `labels`."""
        ids = batch["input_ids"]
        masked, labels = mask_tokens(
            ids,
            batch["special_tokens_mask"],
            vocab_size=self.vocab_size,
            mask_token_id=self.mask_token_id,
            mask_prob=self.mask_prob,
            generator=generator,
            replace_probs=self.replace_probs,
            word_starts=None if self.word_start_table is None else self.word_start_table.index_select(0, ids.flatten()).view_as(ids),
            max_span=self.max_span,
            special_ids=self.special_ids,
        )
        return {**batch, "input_ids": masked, "labels": labels}
