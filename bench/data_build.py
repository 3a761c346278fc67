"""Benchmark: tokenizing a corpus into flat token arrays — speed and peak memory.

    python bench/data_build.py                                  # WikiText-2 + a 100M-token synthetic corpus
    python bench/data_build.py --synthetic-tokens 10e6 30e6     # several sizes: memory must stay flat

For each corpus it reports the tokenizer training time, the build's tokens/s, and the
peak resident memory (VmHWM from /proc) of the building process and of its largest
worker. Each step runs in a fresh process, so one step's peak does not hide another's.
WikiText-2 is read from the `shared/datasets` folder beside the repository, if present.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import tempfile
import time
from pathlib import Path

import numpy as np

from minibert.corpus.vocabulary import train_tokenizer
from minibert.tokenizers import SentencePieceTokenizer
from minibert.corpus.documents import read_documents
from minibert.corpus.storage import build_token_store

WIKITEXT = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "wikitext-2" / "train.txt"


def peak_rss_mb() -> float:
    """Peak resident set of this process (VmHWM), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _child(queue, step, args):
    start = time.perf_counter()
    result = step(*args)
    seconds = time.perf_counter() - start
    workers_peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # largest finished child
    queue.put((result, seconds, peak_rss_mb(), workers_peak))


def in_fresh_process(step, *args):
    """Run `step(*args)` in a new process; return (result, seconds, peak MB, largest worker's peak MB)."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=_child, args=(queue, step, args))
    process.start()
    outcome = queue.get()
    process.join()
    return outcome


def train_tokenizer(corpus: Path, cache: Path, vocab_size: int) -> str:
    train_tokenizer(corpus, vocab_size=vocab_size, cache_dir=cache)
    return str(next(cache.glob("spm-*.model")))


def build_store(corpus: Path, model_file: str, out: Path, workers: int | None) -> int:
    tokenizer = SentencePieceTokenizer(Path(model_file).read_bytes())
    return len(build_token_store(read_documents(corpus), tokenizer, out, workers=workers).tokens)


def write_synthetic_corpus(path: Path, n_words: int, seed: int = 0) -> None:
    """Zipf-distributed pseudo-words, sentences of 6-30 words, documents of 4-40 sentences, streamed to disk."""
    rng = np.random.default_rng(seed)
    syllables = np.array(["ka", "lo", "mi", "ner", "ta", "vo", "su", "re", "pin", "dal", "os", "ek", "ul", "bra", "th", "ing"])
    words = np.array(["".join(rng.choice(syllables, size=rng.integers(1, 4))) for _ in range(20_000)])
    frequencies = 1.0 / np.arange(1, len(words) + 1)
    frequencies /= frequencies.sum()
    written = 0
    with open(path, "w", encoding="utf-8") as out:
        while written < n_words:
            lengths = rng.integers(6, 31, size=rng.integers(4, 41))
            ids = rng.choice(len(words), size=int(lengths.sum()), p=frequencies)
            sentences = np.split(words[ids], np.cumsum(lengths)[:-1])
            out.write("\n".join(" ".join(s).capitalize() + "." for s in sentences) + "\n\n")
            written += int(lengths.sum())


def bench(name: str, corpus: Path, workdir: Path, vocab_size: int, workers: int | None) -> None:
    model_file, train_seconds, train_peak, _ = in_fresh_process(train_tokenizer, corpus, workdir / f"{name}-tokenizer", vocab_size)
    n_tokens, seconds, peak, workers_peak = in_fresh_process(build_store, corpus, model_file, workdir / f"{name}-store", workers)
    size_mb = corpus.stat().st_size / 2**20
    print(
        f"{name:>16} | {size_mb:8.1f} MB text | {n_tokens / 1e6:8.2f} M tokens | tokenizer {train_seconds:6.1f} s, peak {train_peak:6.0f} MB"
        f" | build {seconds:6.1f} s = {n_tokens / seconds / 1e6:5.2f} M tokens/s, peak {peak:6.0f} MB (largest worker {workers_peak:5.0f} MB)",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--synthetic-tokens", type=float, nargs="*", default=[100e6], help="sizes of synthetic corpora, in tokens")
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--workers", type=int, default=None, help="tokenizing processes (default: all cores)")
    parser.add_argument("--workdir", type=Path, default=None, help="scratch folder (default: a temporary one)")
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"{cores} cores, workers={args.workers or cores}")
    with tempfile.TemporaryDirectory(dir=args.workdir) as scratch:
        workdir = Path(scratch)
        if WIKITEXT.is_file():
            bench("wikitext-2", WIKITEXT, workdir, args.vocab_size, args.workers)
        else:
            print(f"WikiText-2 not found at {WIKITEXT}; skipped")
        for n_tokens in args.synthetic_tokens:
            corpus = workdir / f"synthetic-{n_tokens:.0e}.txt"
            write_synthetic_corpus(corpus, int(n_tokens / 1.1))  # ~1.1 subword tokens per pseudo-word
            bench(f"synthetic {n_tokens / 1e6:.0f}M", corpus, workdir, args.vocab_size, args.workers)
            corpus.unlink()


if __name__ == "__main__":
    main()
