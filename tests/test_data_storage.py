"""The tokenized corpus as flat, memory-mapped token arrays."""

import tempfile

import numpy as np
import pytest
from hypothesis import given, settings
from test_data_support import FIRST_ID, PositionTokenizer, corpus_shapes, numbered_corpus, numbered_store

from minibert.corpus.storage import TokenStore, build_token_store


@settings(max_examples=30, deadline=None)
@given(corpus_shapes)
def test_arrays_hold_the_corpus_in_order(shape):
    with tempfile.TemporaryDirectory() as directory:
        store = numbered_store(shape, directory)
        lengths = [n for document in shape for n in document]
        assert np.array_equal(store.tokens, np.arange(FIRST_ID, FIRST_ID + sum(lengths)))
        assert np.array_equal(store.sentence_offsets, np.concatenate([[0], np.cumsum(lengths)]))
        assert np.array_equal(store.document_offsets, np.concatenate([[0], np.cumsum([len(d) for d in shape])]))
        assert np.array_equal(store.document_token_offsets, np.concatenate([[0], np.cumsum([sum(d) for d in shape])]))
        assert store.n_documents == len(shape)


def test_parallel_build_equals_serial_build(tmp_path, monkeypatch):
    monkeypatch.setattr("minibert.corpus.storage.CHUNK_CHARACTERS", 2000)  # many chunks in flight
    shape = [[(d * 5 + s) % 30 + 1 for s in range(50)] for d in range(60)]
    serial = numbered_store(shape, tmp_path / "serial", workers=1)
    parallel = numbered_store(shape, tmp_path / "parallel", workers=2)
    for name in ("tokens", "sentence_offsets", "document_offsets", "document_token_offsets"):
        assert np.array_equal(getattr(serial, name), getattr(parallel, name)), name


def test_arrays_are_memory_mapped_and_sized_to_the_vocabulary(tmp_path):
    corpus = numbered_corpus([[3, 4], [5]])
    small = build_token_store(corpus, PositionTokenizer(vocab_size=65535), tmp_path / "small", workers=1)
    large = build_token_store(corpus, PositionTokenizer(vocab_size=70000), tmp_path / "large", workers=1)
    assert small.tokens.dtype == np.uint16 and large.tokens.dtype == np.uint32
    reopened = TokenStore(tmp_path / "small")
    assert isinstance(reopened.tokens.base, np.memmap) and np.array_equal(reopened.tokens, small.tokens)


def test_empty_sentences_and_documents_are_dropped(tmp_path):
    store = build_token_store([["", "5 6"], [""], ["7", "", "8 9"]], PositionTokenizer(), tmp_path, workers=1)
    assert store.tokens.tolist() == [5, 6, 7, 8, 9]
    assert store.sentence_offsets.tolist() == [0, 2, 3, 5] and store.document_offsets.tolist() == [0, 1, 3]
    assert store.document_token_offsets.tolist() == [0, 2, 5]


def test_a_corpus_without_tokens_fails_clearly(tmp_path):
    with pytest.raises(ValueError, match="no tokens"):
        build_token_store([[""]], PositionTokenizer(), tmp_path, workers=1)


def test_separators_mark_document_starts_inside_a_span(tmp_path):
    store = numbered_store([[2], [3], [2]], tmp_path)  # tokens 5 6 | 7 8 9 | 10 11
    assert store.tokens_between(0, 7, separator_id=3).tolist() == [5, 6, 3, 7, 8, 9, 3, 10, 11]
    assert store.tokens_between(2, 5, separator_id=3).tolist() == [7, 8, 9]  # starts at a document: no separator


@settings(max_examples=20, deadline=None)
@given(corpus_shapes)
def test_token_counts_count_the_named_documents_only(shape):
    """DistilBERT's smoothing weighs tokens by their training counts: the counts of documents
    first..stop-1 are those of exactly their tokens, read in pieces (COUNT_TOKENS) or not."""
    with tempfile.TemporaryDirectory() as directory:
        store = numbered_store(shape, directory)
        stop = max(1, len(shape) - 1)  # the last document held out
        end = int(store.document_token_offsets[stop])
        expected = np.bincount(store.tokens[:end], minlength=store.vocab_size)
        assert np.array_equal(store.token_counts(range(0, stop)), expected)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr("minibert.corpus.storage.COUNT_TOKENS", 3)
            assert np.array_equal(store.token_counts(range(0, stop)), expected)
