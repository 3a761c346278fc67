"""Machinery: minibert's models and tokenizers in and out of other libraries' layouts (interop).

    huggingface/    Hugging Face checkpoints of the five families (and RoFormer) read and
                    written: one name-map table per family, the export's own read-back check
    tokenizers/     the tokenizer layouts of released checkpoints: tokenizer.json (WordPiece,
                    Unigram, byte-level BPE), RoBERTa's vocab.json + merges.txt, ALBERT's
                    spiece.model; and our SentencePiece model written as a tokenizer.json

Nothing here is needed to read how the models work: skip it on a first read (docs/reading.md).
The core never imports this package: importing it (minibert/__init__.py does) registers
Hugging Face's layout with `minibert.from_pretrained` / `save_pretrained` and the released
tokenizer layouts with `minibert.tokenizers.load_tokenizer`.
"""

from . import huggingface, tokenizers
