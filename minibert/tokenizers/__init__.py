"""The chapter's tokenizers: text -> ids, one interface for every vocabulary a BERT-family model may have.

Read in this order:

1. `base.py`                  the `Tokenizer` interface the rest of minibert talks to: special
                              tokens, the [CLS] A [SEP] B [SEP] layout, truncation, batching.
2. `sentencepiece_backed.py`  what every SentencePiece vocabulary shares;
   `sentencepiece_tokenizer.py`  minibert's own (`tokenizer.model`, learned by
                              `minibert/corpus/vocabulary.py`): what the default runs use.
3. `wordpiece.py`             BERT's WordPiece (BERT, DistilBERT, ELECTRA: `vocab.txt`).
   `offsets.py`               text rewritten by a tokenizer that still knows where each character
                              came from: each token's span in the original (`tokenize_with_offsets`).
4. `load.py`                  `load_tokenizer(folder)`: the one loader every command uses, and
                              the order in which it looks for each layout.

The layouts of other libraries' checkpoints (tokenizer.json, RoBERTa's byte-level BPE, ALBERT's
spiece.model) live in `minibert/interop/tokenizers/` and register themselves with `load.py`'s
`register_layout`: nothing here imports them.

Of this folder, only `base.py` is part of the chapter (what `python train.py` runs and a learner
reads, which imports no machinery: tests/test_imports.py): it is all that the examples are laid
out with (data/examples.py). The tokenizers themselves also save and load their files, atomically,
through `minibert/operations/files.py`, so they stand beside the chapter, read on their own.
"""

from .base import SPECIAL_TOKENS, Tokenizer
from .load import TOKENIZER_FILES, has_tokenizer, load_tokenizer
from .sentencepiece_tokenizer import SentencePieceTokenizer
from .wordpiece import WordPieceTokenizer

__all__ = [
    "SPECIAL_TOKENS",
    "SentencePieceTokenizer",
    "TOKENIZER_FILES",
    "Tokenizer",
    "WordPieceTokenizer",
    "has_tokenizer",
    "load_tokenizer",
]
