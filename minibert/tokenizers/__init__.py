"""Tokenizers: text -> ids, one interface for every vocabulary a BERT-family model may have.

Read in this order:

1. `base.py`                  the `Tokenizer` interface the rest of minibert talks to: special
                              tokens, the [CLS] A [SEP] B [SEP] layout, truncation, batching.
2. `wordpiece.py`             BERT's WordPiece (BERT, DistilBERT, ELECTRA: `vocab.txt`).
3. `sentencepiece_backed.py`  what every SentencePiece vocabulary shares;
   `sentencepiece_tokenizer.py`  minibert's own (`tokenizer.model`, learned by
                              `minibert/data/vocabulary.py`); `albert.py` a released ALBERT's
                              (`spiece.model`).
4. `byte_bpe.py`              RoBERTa's byte-level BPE (`vocab.json` + `merges.txt`).
5. `json_export.py`           our SentencePiece model as a Hugging Face `tokenizer.json`;
   `json_import.py`           any `tokenizer.json` of the family read (WordPiece, Unigram,
                              byte-level BPE): `json_components.py` its steps on text,
                              `json_models.py` its models (word -> ids), `charsmap.py`
                              SentencePiece's character map, `unigram.py` the unigram model's
                              Viterbi search.
6. `load.py`                  `load_tokenizer(folder)`: the one loader every command uses, and
                              the order in which it looks for each layout.
"""

from .albert import AlbertTokenizer
from .base import SPECIAL_TOKENS, Tokenizer
from .byte_bpe import ByteLevelBPETokenizer
from .json_import import JsonTokenizer
from .load import TOKENIZER_FILES, has_tokenizer, load_tokenizer
from .sentencepiece_tokenizer import SentencePieceTokenizer
from .wordpiece import WordPieceTokenizer

__all__ = [
    "SPECIAL_TOKENS",
    "AlbertTokenizer",
    "JsonTokenizer",
    "ByteLevelBPETokenizer",
    "SentencePieceTokenizer",
    "TOKENIZER_FILES",
    "Tokenizer",
    "WordPieceTokenizer",
    "has_tokenizer",
    "load_tokenizer",
]
