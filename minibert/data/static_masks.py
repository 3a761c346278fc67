"""BERT's *static* masking: every mask drawn once, when the examples are built, and stored.

BERT's preprocessing (create_pretraining_data.py:create_training_instances) runs its whole
example builder `dupe_factor` (10) times over the corpus: each pass draws its own target
lengths, A/B cut points and random next sentences, then masks its examples, and all passes
are written to disk. Training then reads the same copies every epoch, so the text shows up
in 10 fixed cuts, each with its own fixed mask. Here the copies are examples like any other
(corpus/stored_examples.py `write_examples(copies=...)`, examples.py's `copy`), and each gets
one mask. (RoBERTa §4.1 found that drawing a new mask each time a sequence is served —
*dynamic* masking — is as good or slightly better and needs no copies; that path lives in
`dataset.py` and stores nothing.)

Stored here, per example (copy c of the corpus: the rows of pass c), are only the masked
positions and the ids shown there — about `mask_prob` of the tokens:

    mask_offsets.bin    int64 [n_copies + 1]: copy c's entries are [o[c], o[c+1])
    mask_positions.bin  uint16: masked positions within the copy's input_ids
    mask_ids.bin        the id shown at each masked position ([MASK], random, or itself)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np
import torch

from .examples import Examples
from .masking import IGNORE_INDEX, Masking

STATIC_DUPE_FACTOR = 10  # BERT: the corpus stored 10 times, each copy with its own masks
EXAMPLES_PER_CHUNK = 1024


@dataclass
class StaticMasks:
    """The stored masks (corpus/stored_examples.py reads and writes them); `apply(copies, batch)`
    masks a batch of those copies and adds `labels`."""

    offsets: np.ndarray  # int64 [n_copies + 1]: example c's entries are [offsets[c], offsets[c + 1])
    positions: np.ndarray  # the masked positions within each copy's input_ids
    ids: np.ndarray  # the id shown at each masked position

    @property
    def n_copies(self) -> int:
        return len(self.offsets) - 1
    def apply(self, copies: np.ndarray, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The batch of these examples [B], with each one's stored mask."""
        starts, counts = self.offsets[copies], self.offsets[copies + 1] - self.offsets[copies]  # [B]
        # Each copy's entries, the ranges [start, start + count) laid end to end, without a loop:
        # the r-th entry overall is the k-th of copy i, r = (the counts before copy i) + k, so
        # subtracting the counts before copy i (cumsum - counts) and adding its start gives start + k.
        entries = np.repeat(starts - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())
        rows = torch.from_numpy(np.repeat(np.arange(len(copies)), counts))
        positions = torch.from_numpy(self.positions[entries].astype(np.int64))
        original = batch["input_ids"]
        labels = torch.full_like(original, IGNORE_INDEX)
        labels[rows, positions] = original[rows, positions]
        masked = original.clone()
        masked[rows, positions] = torch.from_numpy(self.ids[entries].astype(np.int64))
        return {**batch, "input_ids": masked, "labels": labels}


def draw_static_masks(examples: Examples, masking: Masking, *, seed: int) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Mask every example once, in order, with one seeded generator: chunk by chunk, each example's
    count of masked positions [n], then their positions and the ids shown there."""
    generator = torch.Generator().manual_seed(seed)
    for first in range(0, len(examples), EXAMPLES_PER_CHUNK):
        rows = slice(first, min(first + EXAMPLES_PER_CHUNK, len(examples)))
        masked, labels = masking(torch.from_numpy(examples.input_ids[rows].astype(np.int64)), generator)
        chosen = labels != IGNORE_INDEX  # [n, T] the masked positions
        yield chosen.sum(dim=1).numpy(), chosen.nonzero()[:, 1].numpy(), masked[chosen].numpy()
