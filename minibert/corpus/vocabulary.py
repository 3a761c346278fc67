"""Step 2 of the pipeline: a subword vocabulary learned from the corpus (SentencePiece).

`train_tokenizer` learns minibert's own tokenizer (`minibert.tokenizers.SentencePieceTokenizer`:
the five special tokens at ids 0-4, byte fallback) from the corpus a run pretrains on.

Training is cached: the model file is named by a hash of the corpus bytes and every
setting, so a second run with the same inputs reuses it in milliseconds. Training reads
a random sample of at most `max_sentences` sentences (`sample_sentences`, drawn by the
run's seed): 50k sentences — a few MB of text — are plenty for a vocabulary of a few
thousand pieces, and keep training to seconds and memory bounded for any corpus.
"""

from __future__ import annotations

import io
import os
import random
from pathlib import Path
from typing import Iterable, Sequence

import sentencepiece as spm

from ..operations.files import publish_file
from ..tokenizers import SPECIAL_TOKENS, SentencePieceTokenizer
from .cache import DEFAULT_DATA_DIR, fingerprint
from .documents import PathLike, corpus_files, read_documents
from .fingerprint import corpus_key

MODEL_TYPES = ("unigram", "bpe")
MIN_VOCAB_SIZE = len(SPECIAL_TOKENS) + 256 + 64  # specials + byte pieces + room for characters
MAX_SENTENCES = 50_000  # the sentences SentencePiece trains on (--tokenizer-sentences)
MIN_SENTENCES = 1000
SAMPLER = "reservoir"  # in the cache key: a tokenizer trained on SentencePiece's own sample is never reused


def train_tokenizer(
    paths: PathLike | Sequence[PathLike],
    *,
    vocab_size: int,
    model_type: str = "unigram",
    cache_dir: str | Path = DEFAULT_DATA_DIR,
    max_sentences: int = MAX_SENTENCES,
    seed: int = 0,
    text_field: str = "text",
) -> SentencePieceTokenizer:
    """Learn a vocabulary from the corpus at `paths`, or reuse the cached one.

    `vocab_size` is an upper bound: on a tiny corpus SentencePiece may stop earlier.
    """
    if model_type not in MODEL_TYPES:
        raise ValueError(f"model_type={model_type!r} is not one of {MODEL_TYPES}")
    if vocab_size < MIN_VOCAB_SIZE:
        raise ValueError(f"vocab_size={vocab_size} is too small: 5 special tokens + 256 byte pieces need at least {MIN_VOCAB_SIZE}")
    files = corpus_files(paths)
    if not (isinstance(max_sentences, int) and max_sentences >= MIN_SENTENCES):
        raise ValueError(f"--tokenizer-sentences {max_sentences} is too few; use at least {MIN_SENTENCES} (the default is {MAX_SENTENCES})")
    path = tokenizer_path(files, vocab_size, model_type, cache_dir, max_sentences, seed, text_field)
    if not path.exists():
        proto = lambda: _train_model_proto(files, vocab_size, model_type, max_sentences, seed, text_field)  # noqa: E731
        publish_file(lambda tmp: tmp.write_bytes(proto()), path)
    return SentencePieceTokenizer(path.read_bytes())


def tokenizer_path(files: list[Path], vocab_size: int, model_type: str = "unigram", cache_dir: str | Path = DEFAULT_DATA_DIR,
                   max_sentences: int = MAX_SENTENCES, seed: int = 0, text_field: str = "text") -> Path:
    """Where the vocabulary learned from these files is cached (it may not exist yet)."""
    corpus = corpus_key(files, text_field)
    key = fingerprint(corpus, vocab_size, model_type, max_sentences, seed, spm.__version__, SAMPLER)
    return Path(cache_dir) / f"spm-{model_type}-{vocab_size}-{key}.model"


def sample_sentences(sentences: Iterable[str], size: int, seed: int) -> list[str]:
    """A uniform random sample of `size` sentences in one pass (reservoir sampling), the same for
    the same sentences and seed in every process; all of them, in order, when there are fewer.
    Drawn here rather than by SentencePiece, whose own sample of a corpus larger than `size`
    differs from one process to the next whatever the seed, and with it the vocabulary."""
    rng, sample = random.Random(seed), []
    for seen, sentence in enumerate(sentences):
        if seen < size:
            sample.append(sentence)
        elif (slot := rng.randrange(seen + 1)) < size:
            sample[slot] = sentence
    return sample


def _train_model_proto(files: list[Path], vocab_size: int, model_type: str, max_sentences: int, seed: int,
                       text_field: str) -> bytes:
    model = io.BytesIO()
    spm.set_random_generator_seed(seed)
    failed: list[Exception] = []  # a bad corpus file: its own one line, not SentencePiece's

    def sentences():
        try:
            yield from (sentence for document in read_documents(files, text_field) for sentence in document)
        except (ValueError, OSError) as error:
            failed.append(error)
            raise
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(sample_sentences(sentences(), max_sentences, seed)),
            model_writer=model,
            vocab_size=vocab_size,
            model_type=model_type,
            hard_vocab_limit=False,  # a tiny corpus yields a smaller vocabulary instead of failing
            pad_id=0, unk_id=1, bos_id=-1, eos_id=-1,
            pad_piece=SPECIAL_TOKENS[0], unk_piece=SPECIAL_TOKENS[1],
            user_defined_symbols=list(SPECIAL_TOKENS[2:]),  # [CLS] [SEP] [MASK] -> ids 2, 3, 4
            byte_fallback=True,
            input_sentence_size=max_sentences,
            shuffle_input_sentence=True,  # of the sample drawn above: SentencePiece's shuffle is seeded
            num_threads=os.cpu_count() or 1,
            minloglevel=2,
        )
    except Exception as error:
        if failed:
            raise failed[0] from None
        if not isinstance(error, RuntimeError):
            raise
        raise ValueError(f"SentencePiece training failed on {files[0]}...: {error}") from None
    return model.getvalue()
