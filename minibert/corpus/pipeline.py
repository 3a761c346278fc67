"""The one call a training run makes: text files in, tokenizer and batch iterators out.

`build_pretraining_data` runs the whole pipeline of this package in order, reusing every
step that was already done for the same inputs (see `cache.py`):

    corpus files (or the default corpus)      documents.py, default_corpus.py
      -> tokenizer, trained or reused          vocabulary.py
      -> flat token arrays on disk             storage.py
      -> examples of the chosen layout         examples.py (cut, then laid out as token ids)
      -> static masks, if asked for            static_masks.py
      -> train / eval batch iterators          dataset.py, masking.py

Every setting is checked before any of that work starts, so a typo fails in
milliseconds, not after the corpus has been tokenized.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from .baselines import NeighbourCounts
from ..operations.files import publish_dir
from .cache import DEFAULT_DATA_DIR, fingerprint
from .cost import CorpusCost, corpus_cost
from .documents import PathLike, corpus_files, read_documents
from .fingerprint import corpus_key, full_hash
from ..data.dataset import MASKINGS, PretrainingBatches
from .default_corpus import default_corpus_path
from ..data.examples import LAYOUTS, Examples
from ..data.masking import Masking, check_count_options, check_mask_options, default_max_predictions
from ..training.evaluate import EVAL_SEED
from ..tokenizers import SentencePieceTokenizer, Tokenizer, has_tokenizer, load_tokenizer
from .vocabulary import MAX_SENTENCES, MIN_VOCAB_SIZE, MODEL_TYPES, tokenizer_path, train_tokenizer
from .stored_examples import build_static_masks, load_examples, open_static_masks, write_examples
from .storage import FORMAT_VERSION, TokenStore, build_token_store

# Held-out batches mask BERT's 15% of tokens whatever rate training uses, so that held-out
# accuracies of runs with different --mask-prob are measured on the same kind of task.
EVAL_MASK_PROB = 0.15
EVAL_COUNTING = dict(count="bernoulli", smoothing=0.0)  # held out: each token on its own at EVAL_MASK_PROB, whatever the run's count
# The held-out batches are cut, masked and batched the same way whatever --seed and --batch-size
# a run trains with (EVAL_SEED: training/evaluate.py, which seeds evaluation's own draws with it too),
# so that its curve can be held against another run's (runs/report.py).
EVAL_BATCH_SIZE = 32
PARALLEL_FROM_BYTES = 32 << 20  # below this, starting worker processes costs more than it saves
EXAMPLES_VERSION = 3  # part of the examples' cache key: bump when their files change
STATIC_MASKS_VERSION = 2  # part of the static masks' key: one mask per example, the copies rebuilt as examples


@dataclass
class PretrainingData:
    tokenizer: Tokenizer
    train: PretrainingBatches
    eval: PretrainingBatches | None
    store: TokenStore
    train_documents: range  # the documents the train batches come from; the rest are held out

    def baseline_counts(self) -> NeighbourCounts:
        """The unigram and neighbour-count guesses (baselines.py), fit on the training documents."""
        starts = self.store.document_token_offsets
        end = int(starts[self.train_documents.stop])
        return NeighbourCounts.fit(self.store.tokens[:end], starts[: self.train_documents.stop], self.tokenizer.vocab_size,
                                   never_guess=self.tokenizer.special_ids | {self.tokenizer.unk_id})


def build_pretraining_data(
    paths: PathLike | Sequence[PathLike] | None,
    *,
    vocab_size: int,
    seq_len: int,
    layout: str,
    masking: str,
    dupe_factor: int,
    mask_prob: float,
    replace_probs: Sequence[float],
    whole_word: bool,
    max_span: int,
    short_seq_prob: float,
    batch_size: int,
    seed: int,
    mask_count: str,
    max_predictions: int | None,
    mask_smoothing: float,
    data_dir: str | Path = DEFAULT_DATA_DIR,
    tokenizer_dir: str | Path | None = None,
    tokenizer_model: str = "unigram",
    eval_batch_size: int | None = None,
    eval_fraction: float = 0.05,
    rank: int = 0,
    world_size: int = 1,
    workers: int | None = None,
    text_field: str = "text",
    tokenizer_sentences: int = MAX_SENTENCES,
) -> PretrainingData:
    """Build (or reuse) everything between raw text and training batches.

    paths            .txt/.jsonl files or folders (see `documents.py`); None = the default
                     corpus built from CPython's own documentation.
    data_dir         cache folder for the default corpus, tokenizer, token arrays, masks.
    tokenizer_dir    a folder holding a tokenizer (`tokenizer.model` or `vocab.txt`) to use
                     as is; if it holds none, the trained tokenizer is saved there.
    vocab_size, tokenizer_model ("unigram" | "bpe")   SentencePiece training settings.
    seq_len          maximum example length in tokens, special tokens included.
    layout           "nsp" (BERT) | "sop" (ALBERT) | "full_sentences" (RoBERTa).
    masking          "static" (BERT: `dupe_factor` copies of the corpus, each cut anew into
                     its own examples, every example masked once: data/static_masks.py)
                     | "dynamic" (RoBERTa: a new mask every time; needs dupe_factor=1).
    mask_prob, replace_probs, whole_word, max_span   MLM options, see `masking.py`
                     (held-out batches always mask EVAL_MASK_PROB = 15% of tokens).
    mask_count, max_predictions, mask_smoothing   how many tokens a training mask chooses and
                     which (`masking.MASK_COUNTS`; the cap defaults to `default_max_predictions`;
                     the smoothing reads the training documents' token counts). Held-out
                     batches always choose token by token, uniformly, so that runs compare.
    short_seq_prob   chance that an example targets a shorter random length (BERT 0.1).
    batch_size       sequences per training batch per rank; eval_batch_size: per held-out
                     batch (EVAL_BATCH_SIZE unless given).
    eval_fraction    share of documents (the last ones) held out for evaluation; 0 = none.
    seed             fixes example building, masks and order; rank, world_size shard for DDP.
    workers          tokenizing processes (default: all cores for large corpora).
    text_field       the JSONL field or table column that holds the text.
    tokenizer_sentences   the sentences a trained tokenizer learns from (a seeded sample).

    The run's values come from its `Settings` (runs/run.py passes them all); this
    function keeps no defaults of its own for them.

    Returns PretrainingData(tokenizer, train, eval, store): `train` is an endless,
    resumable iterator of batches; `eval` (None when eval_fraction=0) one fixed pass.
    Size the model's embeddings by `tokenizer.vocab_size`: on a tiny corpus SentencePiece
    may learn fewer pieces than `vocab_size` asked for.
    """
    _check_settings(
        vocab_size=vocab_size, tokenizer_model=tokenizer_model, seq_len=seq_len, layout=layout, masking=masking,
        dupe_factor=dupe_factor, short_seq_prob=short_seq_prob, batch_size=batch_size, eval_batch_size=eval_batch_size,
        eval_fraction=eval_fraction, seed=seed, rank=rank, world_size=world_size,
    )
    check_mask_options(mask_prob, replace_probs, max_span)
    check_count_options(mask_count, max_predictions, mask_smoothing, max_span, whole_word)
    if mask_count == "batch" and masking == "static":
        raise ValueError("--mask-count batch draws one count per training batch, but static masks are drawn before there "
                         "are batches; use --masking dynamic (DistilBERT's) or another --mask-count")
    data_dir, replace_probs = Path(data_dir), tuple(replace_probs)
    files = [default_corpus_path(data_dir)] if paths is None else corpus_files(paths)
    tokenizer = _tokenizer(files, tokenizer_dir, vocab_size, tokenizer_model, data_dir, text_field, tokenizer_sentences)
    masks = dict(replace_probs=replace_probs, max_span=max_span, whole_word=whole_word)
    if workers is None and sum(f.stat().st_size for f in files) < PARALLEL_FROM_BYTES:
        workers = 1
    store = _token_store(files, tokenizer, data_dir, workers, text_field)

    min_eval = 2 if layout == "nsp" else 1  # NSP needs a second document to draw random segments from
    n_eval = 0 if eval_fraction == 0 else max(min_eval, round(eval_fraction * store.n_documents))
    if n_eval >= store.n_documents:
        raise ValueError(f"the corpus has {store.n_documents} document(s): too few to hold out {eval_fraction:.0%} of them for evaluation; a blank line ends a document in a .txt corpus, so separate documents with blank lines or add text (in Python, eval_fraction=0 holds none out)")
    split = store.n_documents - n_eval
    counting = dict(count=mask_count, smoothing=mask_smoothing,
                    token_counts=store.token_counts(range(0, split)) if mask_smoothing else None,
                    max_predictions=max_predictions or default_max_predictions(seq_len, mask_prob) if mask_count == "round" else None)
    train_masking = Masking.for_tokenizer(tokenizer, mask_prob=mask_prob, **masks, **counting)
    settings = dict(layout=layout, max_length=seq_len, short_seq_prob=short_seq_prob, seed=seed,
                    specials=(tokenizer.num_special(pair=False), tokenizer.num_special(pair=True)))
    # static masking: BERT's `dupe_factor` copies, each cut anew (its own pairs) and then masked once
    # (the loop is the chapter's: data/static_masks.py `dupe_factor_passes`, run by write_examples)
    copies = dupe_factor if masking == "static" else 1
    train_examples = _examples(store, tokenizer, range(0, split), settings, workers, copies)
    static = None
    if masking == "static":
        key = (settings, split, mask_prob, replace_probs, max_span, whole_word, dupe_factor, STATIC_MASKS_VERSION)
        key += (mask_count, counting["max_predictions"], mask_smoothing) if mask_count != "bernoulli" else ()
        directory = store.directory / f"masks-{fingerprint(*key)}"
        build = lambda d: build_static_masks(train_examples, train_masking, d, seed=seed)  # noqa: E731
        static = _cached_dir(directory, build, lambda d: open_static_masks(d, store.tokens.dtype))
    shard = dict(seed=seed, rank=rank, world_size=world_size)
    train = PretrainingBatches(train_examples, train_masking, batch_size=batch_size, static_masks=static, **shard)
    evaluation = None
    if n_eval:
        eval_examples = _examples(store, tokenizer, range(split, store.n_documents), {**settings, "seed": EVAL_SEED}, workers)
        evaluation = PretrainingBatches(eval_examples, Masking.for_tokenizer(tokenizer, mask_prob=EVAL_MASK_PROB, **masks, **EVAL_COUNTING),
                                        batch_size=eval_batch_size or EVAL_BATCH_SIZE, static_masks=None, repeat=False,
                                        seed=EVAL_SEED)
    return PretrainingData(tokenizer, train, evaluation, store, range(0, split))


def _check_settings(*, vocab_size, tokenizer_model, seq_len, layout, masking, dupe_factor, short_seq_prob, batch_size,
                    eval_batch_size, eval_fraction, seed, rank, world_size) -> None:
    def require(ok: bool, message: str) -> None:
        if not ok:
            raise ValueError(message)

    require(layout in LAYOUTS, f"layout={layout!r} is not one of {LAYOUTS}")
    require(masking in MASKINGS, f"masking={masking!r} is not one of {MASKINGS}")
    require(isinstance(dupe_factor, int) and dupe_factor >= 1, f"dupe_factor={dupe_factor} must be a positive integer (BERT used 10)")
    require(masking == "static" or dupe_factor == 1, f"dupe_factor={dupe_factor} only applies to static masking; dynamic masking draws new masks anyway, use dupe_factor=1")
    require(tokenizer_model in MODEL_TYPES, f"tokenizer_model={tokenizer_model!r} is not one of {MODEL_TYPES}")
    require(vocab_size >= MIN_VOCAB_SIZE, f"vocab_size={vocab_size} is too small; use at least {MIN_VOCAB_SIZE}")
    require(isinstance(seq_len, int) and 8 <= seq_len < 2**16, f"seq_len={seq_len} must be an integer in [8, 65535]")
    require(0.0 <= short_seq_prob <= 1.0, f"short_seq_prob={short_seq_prob} must be a probability (BERT used 0.1)")
    for name, size in (("batch_size", batch_size), ("eval_batch_size", eval_batch_size or 1)):
        require(isinstance(size, int) and size >= 1, f"{name}={size} must be a positive integer")
    require(0.0 <= eval_fraction < 1.0, f"eval_fraction={eval_fraction} must be in [0, 1)")
    require(isinstance(world_size, int) and world_size >= 1 and 0 <= rank < world_size, f"rank={rank}, world_size={world_size}: need 0 <= rank < world_size")
    require(isinstance(seed, int), f"seed={seed!r} must be an integer")


def _tokenizer(files, tokenizer_dir, vocab_size, model_type, data_dir, text_field, max_sentences) -> Tokenizer:
    if tokenizer_dir is not None and has_tokenizer(tokenizer_dir):
        return load_tokenizer(tokenizer_dir)
    tokenizer = train_tokenizer(files, vocab_size=vocab_size, model_type=model_type, cache_dir=data_dir,
                                text_field=text_field, max_sentences=max_sentences)
    if tokenizer_dir is not None:
        tokenizer.save(tokenizer_dir)
    return tokenizer


def plan_corpus(paths: PathLike | Sequence[PathLike], *, vocab_size: int, masking: str, dupe_factor: int, mask_prob: float,
                data_dir: str | Path = DEFAULT_DATA_DIR, tokenizer_dir: str | Path | None = None,
                tokenizer_model: str = "unigram", text_field: str = "text",
                tokenizer_sentences: int = MAX_SENTENCES) -> CorpusCost:
    """What building the data for this corpus will cost (cost.py), and whether it was built before.
    Reads the corpus and the cache; writes nothing."""
    files, data_dir = corpus_files(paths), Path(data_dir)
    if tokenizer_dir is not None and has_tokenizer(tokenizer_dir):
        try:
            tokenizer = load_tokenizer(tokenizer_dir)
        except (ValueError, OSError):  # a broken folder: its loader says so, with context, when the run reads it
            tokenizer = None
    else:
        path = tokenizer_path(files, vocab_size, tokenizer_model, data_dir, tokenizer_sentences, text_field=text_field)
        tokenizer = SentencePieceTokenizer(path.read_bytes()) if path.is_file() else None
    cached = tokenizer is not None and _token_store_dir(files, tokenizer, data_dir, text_field).is_dir()
    token_bytes = 2 if (tokenizer.vocab_size if tokenizer else vocab_size) < 2**16 else 4
    workers = 1 if sum(f.stat().st_size for f in files) < PARALLEL_FROM_BYTES else os.cpu_count() or 1
    return corpus_cost(files, data_dir, token_bytes=token_bytes, static_copies=dupe_factor if masking == "static" else 0,
                       mask_prob=mask_prob, workers=workers, cached=cached,
                       tokenizer_sentences=0 if tokenizer is not None else tokenizer_sentences)


def _token_store_dir(files, tokenizer, data_dir, text_field) -> Path:
    tokenizer_key = hashlib.blake2b(pickle.dumps(tokenizer), digest_size=8).hexdigest()
    corpus = corpus_key(files, text_field)
    return data_dir / f"tokens-{fingerprint(corpus, tokenizer_key, FORMAT_VERSION)}"


def _token_store(files, tokenizer, data_dir, workers, text_field) -> TokenStore:
    def build(directory: Path) -> None:
        build_token_store(read_documents(files, text_field), tokenizer, directory, workers=workers)
        meta = json.loads((directory / "meta.json").read_text())  # the corpus's every byte, for the record (fingerprint.py)
        (directory / "meta.json").write_text(json.dumps({**meta, "full_hash": full_hash(files)}, indent=1))

    return _cached_dir(_token_store_dir(files, tokenizer, data_dir, text_field), build, TokenStore)


def _examples(store: TokenStore, tokenizer: Tokenizer, documents: range, settings: dict, workers: int | None,
              copies: int = 1) -> Examples:
    """The examples of these documents, `copies` passes of them, cut and laid out once (cached
    beside the token arrays)."""
    key = (settings, documents.start, documents.stop, EXAMPLES_VERSION) + ((copies,) if copies > 1 else ())
    directory = store.directory / f"examples-{fingerprint(*key)}"
    build = lambda d: write_examples(store, tokenizer, documents, settings, d, workers, copies)  # noqa: E731
    return _cached_dir(directory, build, load_examples)


def _cached_dir(directory: Path, build, open_):
    if not directory.is_dir():
        publish_dir(build, directory)
    return open_(directory)
