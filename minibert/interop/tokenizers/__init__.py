"""The tokenizer layouts of released checkpoints, read from scratch (and ours written as one).

    albert.py           ALBERT's spiece.model (SentencePiece), with its do_lower_case and specials
    byte_bpe.py         RoBERTa's byte-level BPE: vocab.json + merges.txt
    json_import.py      any tokenizer.json of the family (JsonTokenizer): json_components.py its
                        steps on text, json_models.py its models (WordPiece, Unigram, BPE),
                        charsmap.py SentencePiece's character map, unigram.py the Viterbi search
    json_export.py      our SentencePiece model as a Hugging Face tokenizer.json

`minibert.tokenizers.load_tokenizer` is the one loader, and the order in which it looks for
each layout in a folder: the three layouts below register themselves there (between minibert's
own tokenizer.model, looked for first, and BERT's vocab.txt, last) when minibert is imported.
"""

from ...tokenizers.load import register_layout
from .albert import FILE_NAME as ALBERT_FILE, AlbertTokenizer
from .byte_bpe import MERGES_FILE, VOCAB_FILE as BPE_VOCAB_FILE, ByteLevelBPETokenizer
from .json_import import FILE_NAME as JSON_FILE, JsonTokenizer

# special-token names from tokenizer_config.json, as transformers 5 saves every family
register_layout((JSON_FILE,), "the tokenizers library's, as transformers 5 saves every family", JsonTokenizer.load, rank=1)
# switches (do_lower_case, keep_accents) from its tokenizer_config.json
register_layout((ALBERT_FILE,), "a released ALBERT's SentencePiece", AlbertTokenizer.load, rank=2)
# specials from tokenizer_config.json
register_layout((BPE_VOCAB_FILE, MERGES_FILE), "RoBERTa's byte-level BPE", ByteLevelBPETokenizer.load, rank=3)

__all__ = ["AlbertTokenizer", "ByteLevelBPETokenizer", "JsonTokenizer"]
