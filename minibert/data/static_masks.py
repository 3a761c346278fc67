"""BERT's *static* masking: the corpus cut `dupe_factor` times, every example masked once, up front.

Two words, one idea each: a *copy* is one pass of the example builder over the corpus, cut
and masked on its own (the dupe factor counts copies); an *example* is one sequence, a row of
`Examples` (each copy's examples follow the previous copy's, in one table).

BERT's preprocessing (create_pretraining_data.py:create_training_instances) runs its whole
example builder `dupe_factor` (10) times over the corpus: each pass draws its own target
lengths, A/B cut points and random next sentences, then masks its examples, and all passes
are written to disk. Training then reads the same examples every epoch, so the text shows up
in 10 fixed cuts, each with its own fixed masks. Here that loop is `dupe_factor_passes` below
(corpus/stored_examples.py's `write_examples` runs its items in worker processes; examples.py's
`copy` gives each copy its own generator), and each example gets one mask (`draw_static_masks`).
(RoBERTa §4.1 found that drawing a new mask each time a sequence is served — *dynamic*
masking — is as good or slightly better and needs no copies; that path lives in `dataset.py`
and stores nothing.)

Stored here, per example, are only the masked positions and the ids shown there — about
`mask_prob` of the tokens:

    mask_offsets.bin    int64 [n_examples + 1]: example i's entries are [o[i], o[i+1])
    mask_positions.bin  uint16: masked positions within the example's input_ids
    mask_ids.bin        the id shown at each masked position ([MASK], random, or itself)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np
import torch

from .examples import Examples
from .masking import IGNORE_INDEX, Masking

STATIC_DUPE_FACTOR = 10  # BERT: 10 copies of the corpus, each cut and masked on its own
EXAMPLES_PER_CHUNK = 1024


def dupe_factor_passes(blocks: list[range], dupe_factor: int) -> list[tuple[int, int, range]]:
    """BERT's dupe-factor loop, `for _ in range(dupe_factor)` around its example builder: the
    corpus (its documents in `blocks`, consecutive runs cut independently) cut `dupe_factor`
    times, one copy after the other. Each item (copy, block number, documents) is one
    `build_examples(..., block=number, copy=copy)` call, with a generator of its own, so each
    copy draws its own target lengths, A/B cut points and random next sentences. Without
    static masking there is one copy.

    The plain loop these items stand for (corpus/stored_examples.py:write_examples runs it,
    the items in worker processes, and then corpus/stored_examples.py:build_static_masks):

        examples = []
        for copy in range(dupe_factor):                          # BERT's 10 passes
            for number, documents in enumerate(blocks):          # one block after the other
                spans = build_examples(store, layout, documents=documents, block=number,
                                       copy=copy, ...)           # this copy's own cut
                examples += Examples.from_spans(store, spans, tokenizer, max_length)
        generator = torch.Generator().manual_seed(seed)          # draw_static_masks
        for example in examples:                                 # every copy's examples
            masked_ids, labels = masking(example, generator)     # its one mask, stored

    So two copies of one document differ in their cut (the generator of (block, copy)) and
    in their masks (each example masked on its own); training then reads these files."""
    return [(copy, number, documents) for copy in range(dupe_factor) for number, documents in enumerate(blocks)]


@dataclass
class StaticMasks:
    """The stored masks, one per example (corpus/stored_examples.py reads and writes them);
    `apply(rows, batch)` masks the batch of the examples at those rows and adds `labels`."""

    offsets: np.ndarray  # int64 [n_examples + 1]: example i's entries are [offsets[i], offsets[i + 1])
    positions: np.ndarray  # the masked positions within each example's input_ids
    ids: np.ndarray  # the id shown at each masked position

    @property
    def n_examples(self) -> int:
        return len(self.offsets) - 1

    def apply(self, rows: np.ndarray, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The batch of the examples at `rows` [B], with each one's stored mask."""
        starts, counts = self.offsets[rows], self.offsets[rows + 1] - self.offsets[rows]  # [B]
        # Each example's entries, the ranges [start, start + count) laid end to end, without a loop:
        # the r-th entry overall is the k-th of the batch's example b, r = (the counts before b) + k,
        # so subtracting the counts before b (cumsum - counts) and adding its start gives start + k.
        entries = np.repeat(starts - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())
        in_batch = torch.from_numpy(np.repeat(np.arange(len(rows)), counts))  # each entry's example b
        positions = torch.from_numpy(self.positions[entries].astype(np.int64))
        original = batch["input_ids"]
        labels = torch.full_like(original, IGNORE_INDEX)
        labels[in_batch, positions] = original[in_batch, positions]
        masked = original.clone()
        masked[in_batch, positions] = torch.from_numpy(self.ids[entries].astype(np.int64))
        return {**batch, "input_ids": masked, "labels": labels}


def draw_static_masks(examples: Examples, masking: Masking, *, seed: int, generator: torch.Generator | None = None,
                      first_chunk: int = 0) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Mask every example once, in order, with one seeded generator: chunk by chunk, each example's
    count of masked positions [n], then their positions and the ids shown there. (`generator` as it
    stood when chunk `first_chunk` began: the same masks from there on; the explorer redraws one.)"""
    generator = generator if generator is not None else torch.Generator().manual_seed(seed)
    for first in range(first_chunk * EXAMPLES_PER_CHUNK, len(examples), EXAMPLES_PER_CHUNK):
        rows = slice(first, min(first + EXAMPLES_PER_CHUNK, len(examples)))
        masked, labels = masking(torch.from_numpy(examples.input_ids[rows].astype(np.int64)), generator)
        chosen = labels != IGNORE_INDEX  # [n, T] the masked positions
        yield chosen.sum(dim=1).numpy(), chosen.nonzero()[:, 1].numpy(), masked[chosen].numpy()
