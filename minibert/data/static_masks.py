"""BERT's *static* masking: every mask drawn once, when the examples are built, and stored.

BERT's preprocessing masked each example `dupe_factor` (10) times with different random
masks and wrote all copies to disk; training then read the same copies every epoch, so a
sequence showed up with one of 10 fixed masks. (RoBERTa §4.1 found that drawing a new
mask each time a sequence is served — *dynamic* masking — is as good or slightly better
and needs no copies; that path lives in `dataset.py` and stores nothing.)

Stored here, per example copy (copy c = number c // n_examples of example c % n_examples), are only
the masked positions and the ids shown there — about `mask_prob` of the tokens:

    mask_offsets.bin    int64 [n_copies + 1]: copy c's entries are [o[c], o[c+1])
    mask_positions.bin  uint16: masked positions within the copy's input_ids
    mask_ids.bin        the id shown at each masked position ([MASK], random, or itself)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from .examples import Examples
from .masking import IGNORE_INDEX, Masking
from .storage import ArrayWriter, open_array

COPIES_PER_CHUNK = 1024


class StaticMasks:
    """Read-only stored masks; `apply(copies, batch)` masks a batch of those copies and adds `labels`."""

    def __init__(self, directory: str | Path, id_dtype: np.dtype):
        directory = Path(directory)
        self.offsets = open_array(directory / "mask_offsets.bin", np.int64)
        self.positions = open_array(directory / "mask_positions.bin", np.uint16)
        self.ids = open_array(directory / "mask_ids.bin", id_dtype)

    @property
    def n_copies(self) -> int:
        return len(self.offsets) - 1

    def apply(self, copies: np.ndarray, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The batch of these example copies [B], with each copy's stored mask."""
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


def build_static_masks(examples: Examples, masking: Masking, directory: str | Path, *, copies: int, seed: int) -> StaticMasks:
    """Mask `copies` copies of every example once, in order, with one seeded generator."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    offsets = ArrayWriter(directory / "mask_offsets.bin", np.int64)
    positions = ArrayWriter(directory / "mask_positions.bin", np.uint16)
    ids = ArrayWriter(directory / "mask_ids.bin", examples.input_ids.dtype)
    offsets.append([0])
    generator = torch.Generator().manual_seed(seed)
    n_copies = len(examples) * copies
    for first in range(0, n_copies, COPIES_PER_CHUNK):
        rows = np.arange(first, min(first + COPIES_PER_CHUNK, n_copies)) % len(examples)
        masked, labels = masking(torch.from_numpy(examples.input_ids[rows].astype(np.int64)), generator)
        chosen = labels != IGNORE_INDEX  # the masked positions
        offsets.append(positions.length + np.cumsum(chosen.sum(dim=1).numpy()))
        positions.append(chosen.nonzero()[:, 1].numpy())
        ids.append(masked[chosen].numpy())
    for writer in (offsets, positions, ids):
        writer.close()
    return StaticMasks(directory, examples.input_ids.dtype)
