"""Pretraining data: from raw text to masked training batches, one step per module.

Read in this order — each step consumes what the previous one produced:

1. `corpus.py`         text files -> a stream of documents, each a list of sentences
                       (`default_corpus.py`: the English prose shipped with CPython,
                       used when no corpus is given).
2. `vocabulary.py`     learn a subword vocabulary from that corpus, with the special
                       tokens [PAD] [UNK] [CLS] [SEP] [MASK] at ids 0-4 (the tokenizers
                       themselves, and their one interface, live in `minibert/tokenizers/`).
3. `storage.py`        tokenize once, in parallel and streaming, into flat token arrays
                       on disk, read back with np.memmap (any corpus size, flat memory).
4. `examples.py`       cut the arrays into examples of one layout — NSP pairs (BERT),
                       SOP pairs (ALBERT) or packed full sentences (RoBERTa) — and lay
                       them out once as token ids, segment ids and sentence labels.
5. `masking.py`        `Masking`: choose `mask_prob` of the tokens (BERT 15%; each default
                       run's in variants.py) in tokens, words or spans, and apply the
                       80/10/10 rule;
   `static_masks.py`   BERT's masks drawn once and stored (`dupe_factor` copies).
6. `dataset.py`        serve batches in a seeded, resumable, DDP-sharded order, with
                       static or dynamic (RoBERTa) masks.

`pipeline.build_pretraining_data` runs steps 1-6 (caching each in `data/`) and is the
only call a training run needs; `baselines.py` holds the guesses a model must beat.
"""

from .masking import Masking
from .pipeline import PretrainingData, build_pretraining_data
from .vocabulary import train_tokenizer

__all__ = [
    "Masking",
    "PretrainingData",
    "build_pretraining_data",
    "train_tokenizer",
]
