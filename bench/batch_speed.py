"""Benchmark: what building a batch alone delivers, per variant's masking, on one core.

    python bench/batch_speed.py

A batch is built as training builds it (dataset.PretrainingBatches.batch: gather the rows, cut
to the longest, mask, or apply BERT's stored masks) from random examples of full length, at
BERT-base's shapes 256 x 128 and 64 x 512, one thread. Prints tokens/s per variant's masking
beside what one H100 consumes at BERT-base (docs/scale.md has the arithmetic).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from minibert.data.dataset import PretrainingBatches
from minibert.data.examples import Examples
from minibert.data.masking import Masking
from minibert.corpus.stored_examples import build_static_masks
from minibert.data.static_masks import StaticMasks
from minibert.variants import VARIANTS

H100_TOKENS_PER_SECOND = 0.7e6  # BERT-base at 40% of 989 TFLOP/s bf16 (docs/scale.md)
VOCAB, SPECIALS = 30522, dict(pad_id=0, unk_id=100, cls_id=101, sep_id=102, mask_id=103)


def examples(n: int, seq_len: int) -> Examples:
    rng = np.random.default_rng(0)
    ids = rng.integers(1000, VOCAB, (n, seq_len), dtype=np.uint16)
    ids[:, 0], ids[:, -1] = SPECIALS["cls_id"], SPECIALS["sep_id"]
    return Examples(ids, np.zeros((n, seq_len), np.uint8), np.full(n, seq_len, np.int32), rng.integers(0, 2, n, dtype=np.int8))


def masking_of(variant) -> tuple[Masking, bool]:
    s = variant.default_settings()
    word_start = np.zeros(VOCAB, bool)
    word_start[::3] = True  # a word every ~3 pieces, for whole-word masking
    specials = [0, 100, 101, 102, 103]
    masking = Masking(vocab_size=VOCAB, never_masked=specials, never_drawn=specials, mask_id=SPECIALS["mask_id"], mask_prob=0.15,
                      replace_probs=tuple(s.replace_probs), max_span=s.max_span,
                      word_starts=torch.from_numpy(word_start) if s.whole_word else None, count=s.mask_count, smoothing=s.mask_smoothing)
    return masking, s.masking == "static"


def main() -> None:
    torch.set_num_threads(1)
    print(f"{'variant':<11} {'masking':<28} {'shape':>9} {'tokens/s':>10} {'x H100':>7}")
    for name, variant in VARIANTS.items():
        masking, static = masking_of(variant)
        for batch, seq_len in ((256, 128), (64, 512)):
            data = examples(batch * 16, seq_len)
            with tempfile.TemporaryDirectory() as folder:
                masks = build_static_masks(data, masking, Path(folder), seed=0) if static else None
                batches = PretrainingBatches(data, masking, batch_size=batch, static_masks=masks, seed=0)
                stream = iter(batches)
                next(stream)
                start, count = time.perf_counter(), 0
                while time.perf_counter() - start < 2.0:
                    next(stream)
                    count += 1
                rate = count * batch * seq_len / (time.perf_counter() - start)
            kind = "static" if static else f"dynamic{' whole-word' if masking.word_starts is not None else ''}" \
                                            f"{f' spans<={masking.max_span}' if masking.max_span > 1 else ''}"
            print(f"{name:<11} {kind:<28} {batch:>4}x{seq_len:<4} {rate / 1e6:>8.2f}M {rate / H100_TOKENS_PER_SECOND:>6.1f}x", flush=True)


if __name__ == "__main__":
    main()
