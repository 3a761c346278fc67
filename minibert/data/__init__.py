"""The chapter's data: how a corpus becomes what BERT-family pretraining learns from.

Read in this order, each consuming what the one before produced:

1. `examples.py`      cut a tokenized corpus into examples of one layout: NSP pairs (BERT),
                      SOP pairs (ALBERT) or packed full sentences (RoBERTa); each laid out
                      as token ids, segment ids and a sentence label.
2. `masking.py`       `Masking`: choose the positions to predict (tokens, whole words or
                      spans) and apply the 80/10/10 rule.
3. `static_masks.py`  BERT's static masking: the corpus cut into `dupe_factor` copies (the
                      dupe-factor loop), every example masked once, up front.
4. `dataset.py`       batches in a seeded, resumable, sharded order, with static or dynamic
                      (RoBERTa) masks.

Machinery, not here: reading corpus files, learning the vocabulary, tokenizing into arrays on
disk, caching and worker processes live in `minibert/corpus/` (`corpus.pipeline.build_pretraining_data`
runs it all and hands these modules their inputs).
"""

from .masking import Masking

__all__ = ["Masking"]
