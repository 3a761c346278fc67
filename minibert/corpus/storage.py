"""Step 3 of the pipeline: the tokenized corpus as flat token arrays on disk.

Pretraining reads the corpus many times, so it is tokenized once and stored as three
flat arrays — the layout Megatron-LM and fairseq use for corpora of billions of tokens:

    tokens.bin            every token id of the corpus, end to end (uint16 if the
                          vocabulary fits, else uint32)
    sentence_offsets.bin  int64 [n_sentences + 1]: sentence i is tokens[o[i]:o[i+1]]
    document_offsets.bin  int64 [n_documents + 1]: document j is sentences d[j]..d[j+1]-1
    document_token_offsets.bin  the same boundaries counted in tokens

The build streams: worker processes (one per core) tokenize chunks of documents while
the main process appends their results to the files, with a bounded number of chunks in
flight — so memory stays flat whether the corpus holds a million tokens or a billion.
Training opens the arrays with `np.memmap`: the operating system pages in only the
tokens a batch touches, and nothing is loaded into RAM up front.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sys
from collections import deque
from pathlib import Path
from typing import Callable, Iterable, Iterator

import numpy as np

from ..operations.files import read_json_object
from ..tokenizers.base import Tokenizer

CHUNK_CHARACTERS = 1 << 20  # documents are sent to workers in chunks of about 1 MB of text
FORMAT_VERSION = 1  # part of the cache key: bump when the files below change
COUNT_TOKENS = 1 << 24  # token_counts reads the corpus 16M tokens at a time


class ArrayWriter:
    """Append numpy arrays to a raw binary file, one after another (a growing flat array)."""

    def __init__(self, path: Path, dtype: np.dtype):
        self.dtype = np.dtype(dtype)
        self.length = 0
        self._file = open(path, "wb")

    def append(self, values) -> None:
        values = np.asarray(values, dtype=self.dtype)
        self._file.write(values.tobytes())
        self.length += values.size

    def close(self) -> None:
        self._file.close()


def open_array(path: Path, dtype: str | np.dtype) -> np.ndarray:
    """Map a flat array written by `ArrayWriter` read-only; an empty file gives an empty array."""
    if path.stat().st_size == 0:
        return np.zeros(0, dtype=dtype)
    return np.asarray(np.memmap(path, dtype=dtype, mode="r"))  # a plain ndarray view: slices skip memmap's bookkeeping


class TokenStore:
    """Read-only, memory-mapped view of a stored corpus (the arrays described above)."""

    def __init__(self, directory: str | Path):
        directory = Path(directory)
        meta = read_json_object(directory / "meta.json", "delete the folder: it is rebuilt from the corpus")
        self.directory = directory
        self.vocab_size = meta["vocab_size"]
        self.tokens = open_array(directory / "tokens.bin", meta["token_dtype"])
        self.sentence_offsets = open_array(directory / "sentence_offsets.bin", np.int64)
        self.document_offsets = open_array(directory / "document_offsets.bin", np.int64)
        self.document_token_offsets = open_array(directory / "document_token_offsets.bin", np.int64)

    @property
    def n_documents(self) -> int:
        return len(self.document_offsets) - 1

    def token_counts(self, documents: range) -> np.ndarray:
        """How often each id occurs in `documents` [vocab_size], int64: the counts DistilBERT's
        frequency-smoothed masking weighs tokens by (its scripts/token_counts.py counts its
        training data the same way). One pass over the memory-mapped tokens, COUNT_TOKENS at a
        time, so memory stays flat whatever the corpus size."""
        start, stop = (int(self.document_token_offsets[d]) for d in (documents.start, documents.stop))
        counts = np.zeros(self.vocab_size, dtype=np.int64)
        for first in range(start, stop, COUNT_TOKENS):
            counts += np.bincount(self.tokens[first:min(first + COUNT_TOKENS, stop)], minlength=self.vocab_size)
        return counts

    def tokens_between(self, start: int, end: int, separator_id: int) -> np.ndarray:
        """tokens[start:end], with `separator_id` inserted where a new document begins inside.

        RoBERTa's FULL-SENTENCES inputs may cross document boundaries; the separator
        tells the model that the text before and after it are unrelated.
        """
        starts = self.document_token_offsets
        inner = starts[np.searchsorted(starts, start, side="right") : np.searchsorted(starts, end, side="left")]
        return np.insert(self.tokens[start:end].astype(np.int64), inner - start, separator_id)


def build_token_store(
    documents: Iterable[list[str]],
    tokenizer: Tokenizer,
    directory: str | Path,
    *,
    workers: int | None = None,
) -> TokenStore:
    """Tokenize a stream of documents (lists of sentences) into the arrays of a `TokenStore`."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    token_dtype = np.uint16 if tokenizer.vocab_size < 2**16 else np.uint32
    tokens = ArrayWriter(directory / "tokens.bin", token_dtype)
    sentences = ArrayWriter(directory / "sentence_offsets.bin", np.int64)
    documents_out = ArrayWriter(directory / "document_offsets.bin", np.int64)
    document_tokens = ArrayWriter(directory / "document_token_offsets.bin", np.int64)
    for writer in (sentences, documents_out, document_tokens):
        writer.append([0])
    for chunk_tokens, sentence_lengths, document_sizes in _tokenized_chunks(documents, tokenizer, workers):
        sentence_ends, document_ends = np.cumsum(sentence_lengths), np.cumsum(document_sizes)  # within the chunk
        documents_out.append(sentences.length - 1 + document_ends)
        document_tokens.append(tokens.length + sentence_ends[document_ends - 1])
        sentences.append(tokens.length + sentence_ends)
        tokens.append(chunk_tokens)
    for writer in (tokens, sentences, documents_out, document_tokens):
        writer.close()
    if tokens.length == 0:
        raise ValueError("the corpus produced no tokens; check that it contains text")
    meta = {
        "vocab_size": tokenizer.vocab_size,
        "token_dtype": np.dtype(token_dtype).name,
        "n_tokens": tokens.length,
        "n_sentences": sentences.length - 1,
        "n_documents": documents_out.length - 1,
    }
    (directory / "meta.json").write_text(json.dumps(meta, indent=1))
    return TokenStore(directory)


def _tokenized_chunks(documents: Iterable[list[str]], tokenizer: Tokenizer, workers: int | None):
    """Yield `_tokenize_chunk` results in corpus order, using `workers` processes."""
    yield from in_workers(_tokenize_chunk, tokenizer, _document_chunks(documents), workers)


def in_workers(function: Callable, job, items: Iterable, workers: int | None) -> Iterator:
    """`function(job, item)` for each item, in order, computed by `workers` processes (None: one
    per core) with at most two items per worker in flight — so memory stays bounded whatever
    the number of items. `job` is handed to each worker once (forked, where the platform can)."""
    if workers is None:
        workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if workers <= 1:
        for item in items:
            yield function(job, item)
        return
    # fork is fast and shares what is loaded (the tokenizer); other platforms re-import it
    context = multiprocessing.get_context("fork" if sys.platform == "linux" else "spawn")
    with context.Pool(workers, initializer=_set_worker_job, initargs=(function, job)) as pool:
        in_flight: deque = deque()
        for item in items:
            in_flight.append(pool.apply_async(_run_in_worker, (item,)))
            if len(in_flight) >= 2 * workers:  # bounded: never more than 2 items per worker in memory
                yield in_flight.popleft().get()
        while in_flight:
            yield in_flight.popleft().get()


def _document_chunks(documents: Iterable[list[str]]) -> Iterator[list[list[str]]]:
    chunk, size = [], 0
    for document in documents:
        chunk.append(document)
        size += sum(map(len, document))
        if size >= CHUNK_CHARACTERS:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


def _tokenize_chunk(tokenizer: Tokenizer, chunk: list[list[str]]):
    """Documents -> (all token ids, tokens per sentence, sentences per document), empties dropped."""
    ids, sentence_lengths, document_sizes = [], [], []
    for document in chunk:
        n_sentences = 0
        for sentence in document:
            sentence_ids = tokenizer.tokenize_to_ids(sentence)
            if sentence_ids:
                ids += sentence_ids
                sentence_lengths.append(len(sentence_ids))
                n_sentences += 1
        if n_sentences:
            document_sizes.append(n_sentences)
    return np.array(ids, dtype=np.int64), np.array(sentence_lengths, dtype=np.int64), np.array(document_sizes, dtype=np.int64)


_worker_job: tuple | None = None


def _set_worker_job(function: Callable, job) -> None:
    """A worker's start. Ctrl-C reaches the whole process group: the main process alone answers
    it (leaving the pool ends the workers), so the user reads its one line, not each worker's traceback."""
    global _worker_job
    _worker_job = (function, job)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _run_in_worker(item):
    function, job = _worker_job
    return function(job, item)
