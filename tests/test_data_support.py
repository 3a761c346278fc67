"""Helpers shared by the data-pipeline tests (no tests here).

`PositionTokenizer` reads the text "17 18 19" as the ids [17, 18, 19]. Corpora written
with `numbered_corpus` give every token the id 5 + its position in the corpus, so a
test can read off an example exactly which corpus tokens (and documents) it holds.
"""

from pathlib import Path

from hypothesis import strategies as st

from minibert.corpus.storage import TokenStore, build_token_store
from minibert.tokenizers.base import Tokenizer

FIRST_ID = 5  # ids 0-4 are the special tokens
DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"


class PositionTokenizer(Tokenizer):
    pad_id, unk_id, cls_id, sep_id, mask_id = range(5)

    def __init__(self, vocab_size: int = 4096):
        self._vocab_size = vocab_size

    @property
    def vocab_size(self) -> int:
        return self._vocab_size

    def tokenize_to_ids(self, text: str) -> list[int]:
        return [int(word) for word in text.split()]

    def decode_ids(self, ids) -> str:
        return " ".join(map(str, ids))


def numbered_corpus(sentence_lengths: list[list[int]]) -> list[list[str]]:
    """Documents (lists of sentence lengths) -> documents of sentences of consecutive ids."""
    documents, next_id = [], FIRST_ID
    for lengths in sentence_lengths:
        document = []
        for length in lengths:
            document.append(" ".join(str(i) for i in range(next_id, next_id + length)))
            next_id += length
        documents.append(document)
    return documents


def numbered_store(sentence_lengths: list[list[int]], directory, workers: int = 1) -> TokenStore:
    return build_token_store(numbered_corpus(sentence_lengths), PositionTokenizer(), directory, workers=workers)


# 2-8 documents of 1-8 sentences of 1-40 tokens each (at least 2 tokens, to make a pair)
documents = st.lists(st.integers(1, 40), min_size=1, max_size=8).filter(lambda lengths: sum(lengths) >= 2)
corpus_shapes = st.lists(documents, min_size=2, max_size=8)
