"""What a masked-LM must beat: two guesses that use no learned model at all.

MLM training first learns token frequencies — the loss sits near the corpus's unigram
entropy and the model guesses "the" everywhere — and only later learns to read the
context (the "early plateau", Chang & Bergen 2022). A held-out accuracy means little
without the two numbers that separate those phases, computed on the very same positions:

    unigram      always guess the most frequent token of the training text. A model at
                 this level has learned frequencies, not language.
    neighbours   guess from the tokens right beside the mask, by counting the training
                 text: the token seen most often between the same left and right
                 neighbours (l ? r); if that pair never occurred, the most frequent
                 token after l; then the most frequent before r; then the unigram
                 guess. A lookup table, no learning: a model below it has not learned
                 to use context as well as counting does.

A neighbour is "known" only if the model sees it too: a [MASK]ed, special ([CLS],
[SEP], [PAD]) or out-of-sequence neighbour is unknown, and a randomly replaced one is
taken at face value, exactly as the model must. Counts never span two documents; ties go
to the smallest id, so the guesses are deterministic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np
import torch

from ..data.masking import IGNORE_INDEX

MAX_FIT_TOKENS = 20_000_000  # counts from the first 20M training tokens: plenty for a baseline


def most_frequent_after(context: np.ndarray, token: np.ndarray, vocab_size: int) -> tuple[np.ndarray, np.ndarray]:
    """For each distinct `context` value: the `token` seen most often with it (ties: smallest id).
    Returns (sorted distinct contexts, their most frequent token)."""
    pairs, counts = np.unique(context.astype(np.int64) * vocab_size + token, return_counts=True)
    contexts, tokens = pairs // vocab_size, pairs % vocab_size
    order = np.lexsort((tokens, -counts, contexts))  # by context, then count (high first), then id
    contexts, tokens = contexts[order], tokens[order]
    first = np.ones(len(contexts), dtype=bool)
    first[1:] = contexts[1:] != contexts[:-1]
    return contexts[first], tokens[first]


def lookup(table: tuple[np.ndarray, np.ndarray], keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(found, guess) for each key in a `most_frequent_after` table."""
    contexts, tokens = table
    if len(contexts) == 0:
        return np.zeros(len(keys), dtype=bool), np.zeros(len(keys), dtype=np.int64)
    at = np.minimum(np.searchsorted(contexts, keys), len(contexts) - 1)
    return contexts[at] == keys, tokens[at]


@dataclass
class NeighbourCounts:
    """The counting tables of both baselines, fit on training documents."""

    vocab_size: int
    unigram: int  # the most frequent token
    both: tuple[np.ndarray, np.ndarray]  # (l * V + r) -> most frequent token between l and r
    after: tuple[np.ndarray, np.ndarray]  # l -> most frequent token after l
    before: tuple[np.ndarray, np.ndarray]  # r -> most frequent token before r

    @classmethod
    def fit(cls, tokens: np.ndarray, document_starts: np.ndarray, vocab_size: int,
            never_guess: Iterable[int] = ()) -> "NeighbourCounts":
        """`tokens`: the training documents back to back; `document_starts`: where each begins.
        Tokens in `never_guess` (special tokens) are never predicted."""
        tokens = np.asarray(tokens[:MAX_FIT_TOKENS], dtype=np.int64)
        n = len(tokens)
        starts = np.zeros(n + 1, dtype=bool)  # starts[j]: a document begins at token j
        starts[np.asarray(document_starts, dtype=np.int64)[(document_starts > 0) & (document_starts < n)]] = True
        guessable = ~np.isin(tokens, list(never_guess))
        if not guessable.any():
            raise ValueError("the training text has no token to count: the baselines need a non-empty corpus")
        V = vocab_size
        counts = np.bincount(tokens[guessable], minlength=V)
        # Bigrams (j, j+1) and trigrams (j, j+1, j+2) inside one document, middle token guessable.
        pair = ~starts[1:n]
        after_ok = pair & guessable[1:]  # l = tokens[j], x = tokens[j+1]
        before_ok = pair & guessable[:-1]  # x = tokens[j], r = tokens[j+1]
        both_ok = pair[:-1] & pair[1:] & guessable[1:-1]  # l, x, r = tokens[j], tokens[j+1], tokens[j+2]
        return cls(
            vocab_size=V,
            unigram=int(counts.argmax()),
            both=most_frequent_after(tokens[:-2][both_ok] * V + tokens[2:][both_ok], tokens[1:-1][both_ok], V),
            after=most_frequent_after(tokens[:-1][after_ok], tokens[1:][after_ok], V),
            before=most_frequent_after(tokens[1:][before_ok], tokens[:-1][before_ok], V),
        )

    def guess(self, input_ids: torch.Tensor, positions: torch.Tensor, unknown_ids: Iterable[int]) -> np.ndarray:
        """The neighbour-count guess at `positions` ([N, 2] batch/column indices) of `input_ids`
        [B, T] as the model sees them; neighbours in `unknown_ids` ([MASK], specials) are unknown."""
        ids = input_ids.cpu().numpy().astype(np.int64)
        rows, cols = positions[:, 0].cpu().numpy(), positions[:, 1].cpu().numpy()
        T = ids.shape[1]
        unknown = list(unknown_ids)

        def neighbour(offset: int) -> tuple[np.ndarray, np.ndarray]:
            at = cols + offset
            inside = (at >= 0) & (at < T)
            token = ids[rows, np.clip(at, 0, T - 1)]
            return inside & ~np.isin(token, unknown), token

        left_known, left = neighbour(-1)
        right_known, right = neighbour(+1)
        guess = np.full(len(rows), self.unigram, dtype=np.int64)
        # Fill from the weakest evidence to the strongest, so the strongest found one wins.
        for known, (found, token) in (
            (right_known, lookup(self.before, right)),
            (left_known, lookup(self.after, left)),
            (left_known & right_known, lookup(self.both, left * self.vocab_size + right)),
        ):
            use = known & found
            guess[use] = token[use]
        return guess


def mlm_baselines(counts: NeighbourCounts, batches: Iterable[dict[str, torch.Tensor]],
                  unknown_ids: Iterable[int]) -> dict[str, float]:
    """The accuracy of both guesses at the masked positions of `batches` (the held-out
    batches a run evaluates on), as `baseline_unigram_accuracy` and `baseline_neighbour_accuracy`."""
    unknown = list(unknown_ids)
    correct_unigram = correct_neighbour = total = 0
    for batch in batches:
        labels = batch["labels"]
        positions = (labels != IGNORE_INDEX).nonzero()
        targets = labels[positions[:, 0], positions[:, 1]].numpy()
        correct_unigram += int((targets == counts.unigram).sum())
        correct_neighbour += int((counts.guess(batch["input_ids"], positions, unknown) == targets).sum())
        total += len(targets)
    if total == 0:
        return {}
    return {"baseline_unigram_accuracy": correct_unigram / total, "baseline_neighbour_accuracy": correct_neighbour / total}
