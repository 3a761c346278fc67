"""Machinery: corpus files in, the chapter's data structures out, cached on disk.

None of it is a paper's idea; it makes the data step work at any corpus size.

    pipeline.py         `build_pretraining_data`: the one call a run makes; every step cached
    documents.py        text files -> documents, each a list of sentences
    formats.py          compressed text, Parquet, Arrow and `datasets` folders read as a stream
    default_corpus.py   the English prose shipped with CPython, when no corpus is given
    vocabulary.py       a SentencePiece vocabulary learned from the corpus
    storage.py          the corpus tokenized once, in worker processes, into flat arrays on disk
    stored_examples.py  the examples (data/examples.py) and static masks (data/static_masks.py)
                        written block by block and memory-mapped back
    cache.py, fingerprint.py   cache names from what a step was built from; the corpus's key
    cost.py             what a corpus will cost, said before any work starts
    baselines.py        the unigram and neighbour guesses a masked LM must beat
"""
