"""Serve masked batches — in a seeded, resumable, sharded order.

`PretrainingBatches` is what the training loop iterates. It owns four decisions:

* **order** — each epoch visits every example once (under static masking, the examples of
  all BERT's `dupe_factor` copies of the corpus, each copy cut and masked on its own), in a
  permutation drawn from (seed, epoch): the same seed always gives the same sequence of batches.
* **sharding** — under DDP, rank k of n takes every n-th example of that permutation, so the
  ranks' shards are disjoint and equally long (no rank waits at the end of an epoch).
* **masking** — *static* (BERT): each example carries the mask stored for it when the
  examples were built (`static_masks.py`), identical every epoch; *dynamic* (RoBERTa):
  a fresh mask is drawn for every batch served, from a generator seeded by
  (seed, epoch, rank, batch) — new every epoch, yet exactly reproducible.
* **resuming** — the whole state is (epoch, position): `state_dict()` saved with a
  checkpoint and `load_state_dict()` after a restart continue with exactly the batch
  that would have come next, masks included.

For evaluation, `repeat=False`: one pass in corpus order, with the masks of epoch 0 —
the same batches every time, so evaluation losses are comparable across training.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np
import torch

from .examples import Examples
from .masking import Masking
from .static_masks import StaticMasks

MASKINGS = ("static", "dynamic")  # BERT's masks stored with each example, or RoBERTa's drawn anew for every batch


class PretrainingBatches:
    """An iterator of masked batches, each a dict of LongTensors:

        input_ids       [B, T]  what the model sees: the masked token ids ([PAD] after each sequence)
        attention_mask  [B, T]  1 = real token, 0 = padding
        token_type_ids  [B, T]  segment ids: 0 for [CLS] A [SEP], 1 for B [SEP]
        labels          [B, T]  the original id where the MLM loss applies, -100 elsewhere
        sentence_label  [B]     the NSP/SOP target (only for the pair layouts)

    T is the longest example of the batch.
    """

    def __init__(self, examples: Examples, masking: Masking, *, batch_size: int, static_masks: StaticMasks | None,
                 seed: int, rank: int = 0, world_size: int = 1, repeat: bool = True):
        if not 0 <= rank < world_size:
            raise ValueError(f"rank={rank} must be in [0, world_size={world_size})")
        self.examples, self.masking, self.static_masks = examples, masking, static_masks
        self.n_examples = len(examples)
        if static_masks is not None and static_masks.n_examples != self.n_examples:
            raise ValueError(f"{static_masks.n_examples} static masks for {self.n_examples} examples: build them from these examples")
        self.batch_size, self.seed, self.rank, self.world_size, self.repeat = batch_size, seed, rank, world_size, repeat
        self.examples_per_rank = self.n_examples // world_size
        if self.examples_per_rank == 0 or (repeat and self.examples_per_rank < batch_size):
            raise ValueError(f"{self.n_examples} examples cannot fill one batch of {batch_size} on each of {world_size} ranks; lower batch_size or use a larger corpus")
        self.epoch = self.position = 0

    def __len__(self) -> int:
        """Batches per epoch on this rank (training drops the last, incomplete batch)."""
        full, rest = divmod(self.examples_per_rank, self.batch_size)
        return full + (rest > 0 and not self.repeat)

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        if not self.repeat:
            yield from self.epoch_batches(epoch=0)
            return
        while True:  # training: epoch after epoch, from where a resumed run stopped (`position`)
            rows, batches = self.rows_of_epoch(self.epoch), len(self)
            while self.position < batches:
                position, self.position = self.position, self.position + 1  # a checkpoint taken now resumes after it
                yield self.batch(self.epoch, position, rows[position * self.batch_size : (position + 1) * self.batch_size])
            self.epoch, self.position = self.epoch + 1, 0

    def epoch_batches(self, epoch: int) -> Iterator[dict[str, torch.Tensor]]:
        """The batches of one epoch on this rank, in serving order (held-out batches: every evaluation reads the same)."""
        rows = self.rows_of_epoch(epoch)
        for position in range(len(self)):
            yield self.batch(epoch, position, rows[position * self.batch_size : (position + 1) * self.batch_size])

    def rows_of_epoch(self, epoch: int) -> np.ndarray:
        """This rank's examples for `epoch` (their rows in `Examples`), in serving order."""
        order = np.random.default_rng([self.seed, epoch]).permutation(self.n_examples) if self.repeat else np.arange(self.n_examples)
        return order[self.rank :: self.world_size][: self.examples_per_rank]

    def batch(self, epoch: int, position: int, rows: np.ndarray) -> dict[str, torch.Tensor]:
        """Batch number `position` of `epoch`, of the examples at `rows` [B]: cut to the longest, masked."""
        lengths = torch.from_numpy(self.examples.lengths[rows].astype(np.int64))  # [B]
        longest = int(lengths.max())
        batch = {"input_ids": torch.from_numpy(self.examples.input_ids[rows, :longest].astype(np.int64)),  # [B, T]
                 "attention_mask": (torch.arange(longest) < lengths[:, None]).long(),
                 "token_type_ids": torch.from_numpy(self.examples.token_type_ids[rows, :longest].astype(np.int64))}
        if self.examples.sentence_label is not None:
            batch["sentence_label"] = torch.from_numpy(self.examples.sentence_label[rows].astype(np.int64))  # [B]
        if self.static_masks is not None:  # BERT: the mask stored for each example
            return self.static_masks.apply(rows, batch)
        # RoBERTa: a new mask every time, from a generator seeded by where the batch is served.
        # SeedSequence hashes the four numbers into one 64-bit seed, so that nearby tuples get
        # unrelated generators (a sum such as seed + position would give seed 0's batch 1 the
        # mask of seed 1's batch 0). `>> 1` keeps 63 of its bits, a non-negative int64 seed: the
        # bits that every run's dynamic masks, and so the default runs' recorded curves, come from.
        key = np.random.SeedSequence([self.seed, epoch, self.rank, position]).generate_state(1, np.uint64)[0]
        batch["input_ids"], batch["labels"] = self.masking(batch["input_ids"], torch.Generator().manual_seed(int(key) >> 1))
        return batch

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "position": self.position, "seed": self.seed, "examples": self.n_examples, "world_size": self.world_size}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Continue exactly where `state_dict()` was taken (same data, seed and world size)."""
        for key in ("seed", "examples", "world_size"):
            if state[key] != self.state_dict()[key]:
                raise ValueError(f"cannot resume: the saved data order has {key}={state[key]} but this one has {self.state_dict()[key]}; rebuild with the same corpus and settings")
        self.epoch, self.position = state["epoch"], state["position"]
