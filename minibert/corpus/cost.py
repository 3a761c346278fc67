"""What a corpus of one's own will cost, said before any of the work starts.

A run with `--data` trains a vocabulary on the corpus, tokenizes all of it into flat arrays
(storage.py) and lays the examples out (examples.py), each cached on disk. Before that begins,
`python train.py` prints one line — the corpus size, about how many tokens, the disk the
arrays need against the free disk, and about how long the work takes — and refuses, in one
line and before anything is written, a corpus the disk cannot hold.

The figures are estimates from one corpus and one machine, and the line says so: the
constants below come from `python bench/data_build.py` on WikiText-2's train split (its text
size, tokens, tokenizer and build times, and the size of the arrays it writes; an 8,000-piece
SentencePiece unigram vocabulary, this project's 2-core machine). Run it again to fit them to
another corpus or machine.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

BYTES_PER_TOKEN = 3.69  # text bytes per token (other languages and vocabularies differ)
TOKENIZER_SECONDS = 13.0  # SentencePiece on its sample of 50,000 sentences (--tokenizer-sentences): grows with the sample
TOKENIZER_SENTENCES = 50_000
SENTENCE_BYTES = 130  # WikiText-2's train split: about 130 bytes of text a sentence
BUILD_BYTES_PER_SECOND = 4.4e6  # text tokenized per second by one worker process
ARRAY_BYTES_PER_TOKEN = 2.21  # tokens.bin (uint16 below 65,536 pieces) and the offsets
EXAMPLE_BYTES_PER_TOKEN = 3.3  # examples: ids (2 bytes) and segment ids (1) per position, padding and pairs' repeats
MARGIN = 1.2  # room asked for beyond the estimate


@dataclass
class CorpusCost:
    files: int
    text_bytes: int
    tokens: float
    disk_bytes: float  # what the token arrays, examples and static masks need
    free_bytes: int  # on the disk that holds the cache
    seconds: float
    cached: bool  # the corpus was tokenized before: nothing to build
    tokenizer_sentences: int = 0  # the sample a tokenizer trains on (0: one is given or cached)
    tokenizer_seconds: float = 0.0

    def line(self) -> str:
        if self.cached:
            return (f"corpus: {size(self.text_bytes)} in {self.files} file(s), tokenized before: its arrays are in the cache")
        return (f"corpus: {size(self.text_bytes)} in {self.files} file(s), about {self.tokens / 1e6:.1f}M tokens; the token "
                f"arrays and examples need about {size(self.disk_bytes)} of disk ({size(self.free_bytes)} free) and about "
                f"{duration(self.seconds)} to build{self.tokenizer_part()} (estimates from WikiText-2's figures, minibert/corpus/cost.py)")

    def tokenizer_part(self) -> str:
        if not self.tokenizer_sentences:
            return ""
        return f", {duration(self.tokenizer_seconds)} of it the tokenizer on up to {self.tokenizer_sentences:,} sentences"

    def check_room(self, cache: Path) -> None:
        """A corpus the disk cannot hold: one line, before anything is written."""
        if not self.cached and self.disk_bytes * MARGIN > self.free_bytes:
            raise ValueError(f"the corpus needs about {size(self.disk_bytes * MARGIN)} of disk for its token arrays and "
                             f"examples, and {cache} has {size(self.free_bytes)} free; free some space or pass --cache-dir "
                             f"on a larger disk")


def corpus_cost(files: list[Path], cache: Path, *, token_bytes: int, static_copies: int, mask_prob: float, workers: int,
                cached: bool, tokenizer_sentences: int = TOKENIZER_SENTENCES) -> CorpusCost:
    """The estimate for these files, cached in `cache` (its nearest existing folder's disk)."""
    text = sum(f.stat().st_size for f in files)
    tokens = text / BYTES_PER_TOKEN
    examples = max(1, static_copies) * EXAMPLE_BYTES_PER_TOKEN  # each static copy stores its own examples
    per_token = ARRAY_BYTES_PER_TOKEN + (token_bytes - 2) + examples + static_copies * mask_prob * (2 + token_bytes)
    existing = next(p for p in (cache, *cache.parents) if p.exists())
    tokenizer = TOKENIZER_SECONDS * min(tokenizer_sentences, text / SENTENCE_BYTES) / TOKENIZER_SENTENCES
    seconds = tokenizer + text / (BUILD_BYTES_PER_SECOND * max(1, workers))
    return CorpusCost(len(files), text, tokens, tokens * per_token, shutil.disk_usage(existing).free, seconds, cached,
                      tokenizer_sentences, tokenizer)


def size(count: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count:.0f} bytes"


def duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
