"""The SentencePiece tokenizer: fixed special ids, byte fallback, caching, saving and loading."""

import pickle
import random
import subprocess
import sys
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from minibert.corpus.vocabulary import sample_sentences, train_tokenizer
from minibert.tokenizers import SPECIAL_TOKENS, SentencePieceTokenizer, load_tokenizer

WORDS = "the a model learns to predict hidden words from their context while reading many sentences of plain text".split()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    rng = random.Random(0)
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    documents = ["\n".join(" ".join(rng.choices(WORDS, k=rng.randint(4, 14))).capitalize() + "." for _ in range(8)) for _ in range(150)]
    path.write_text("\n\n".join(documents) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def tokenizer(corpus, cache):
    return train_tokenizer(corpus, vocab_size=400, cache_dir=cache)


def test_special_tokens_sit_at_fixed_ids(tokenizer):
    assert (tokenizer.pad_id, tokenizer.unk_id, tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id) == (0, 1, 2, 3, 4)
    assert [tokenizer.decode([i], skip_special_tokens=False) for i in (2, 3, 4)] == list(SPECIAL_TOKENS[2:])
    ids, segments = tokenizer.encode_pair("the model", "reads text")
    assert ids[0] == 2 and ids.count(3) == 2 and segments[-1] == 1
    assert tokenizer.tokenize_to_ids("predict [MASK] words").count(4) == 1  # [MASK] in text is the mask token


def test_byte_fallback_loses_no_character(tokenizer):
    text = "naïve café ☃ 日本語 model"
    ids = tokenizer.tokenize_to_ids(text)
    assert tokenizer.unk_id not in ids and tokenizer.decode(ids) == text


def test_word_starts_mark_pieces_that_begin_words(tokenizer):
    starts = tokenizer.word_starts
    ids = tokenizer.tokenize_to_ids("the model predicts")
    assert starts.shape == (tokenizer.vocab_size,) and starts[ids[0]]
    assert sum(bool(starts[i]) for i in ids) == 3


def test_training_is_cached_by_corpus_and_settings(corpus, cache, tokenizer):
    files = sorted(cache.iterdir())
    again = train_tokenizer(corpus, vocab_size=400, cache_dir=cache)
    assert sorted(cache.iterdir()) == files and again.tokenize_to_ids("hidden words") == tokenizer.tokenize_to_ids("hidden words")
    bpe = train_tokenizer(corpus, vocab_size=400, model_type="bpe", cache_dir=cache)
    assert len(list(cache.iterdir())) == len(files) + 1 and bpe.decode(bpe.tokenize_to_ids("plain text")) == "plain text"


def test_save_load_and_pickle_round_trip(tokenizer, tmp_path):
    tokenizer.save(tmp_path)
    assert (tmp_path / "tokenizer.model").is_file()
    for copy in (SentencePieceTokenizer.load(tmp_path), load_tokenizer(tmp_path), pickle.loads(pickle.dumps(tokenizer))):
        assert isinstance(copy, SentencePieceTokenizer)
        assert copy.tokenize_to_ids("reading many sentences") == tokenizer.tokenize_to_ids("reading many sentences")


def test_load_tokenizer_opens_a_wordpiece_vocabulary(tmp_path):
    (tmp_path / "vocab.txt").write_text("\n".join([*SPECIAL_TOKENS, "the", "model", "##s"]) + "\n", encoding="utf-8")
    tokenizer = load_tokenizer(tmp_path)
    assert type(tokenizer).__name__ == "WordPieceTokenizer" and tokenizer.tokenize_to_ids("the models") == [5, 6, 7]


def test_bad_settings_and_missing_files_fail_clearly(corpus, tmp_path):
    with pytest.raises(ValueError, match="vocab_size=100 is too small"):
        train_tokenizer(corpus, vocab_size=100, cache_dir=tmp_path)
    with pytest.raises(ValueError, match="model_type='word'"):
        train_tokenizer(corpus, vocab_size=400, model_type="word", cache_dir=tmp_path)
    with pytest.raises(FileNotFoundError, match="no tokenizer in"):
        load_tokenizer(tmp_path)


@given(st.integers(0, 60), st.integers(1, 20), st.integers(0, 3))
def test_the_sample_is_every_sentence_of_a_small_corpus_and_a_seeded_draw_of_a_large_one(count, size, seed):
    sentences = [f"sentence {i}" for i in range(count)]
    sample = sample_sentences(iter(sentences), size, seed)
    assert sample == sample_sentences(iter(sentences), size, seed)
    if count <= size:
        assert sample == sentences
    else:
        assert len(sample) == size and len(set(sample)) == size and set(sample) <= set(sentences)


def test_every_sentence_is_equally_likely_to_be_sampled():
    counts = Counter(s for seed in range(2000) for s in sample_sentences(iter(range(10)), 5, seed))
    assert all(850 < counts[i] < 1150 for i in range(10)), counts  # each about half the draws, 1000


def test_a_sampled_vocabulary_is_the_same_in_every_process(tmp_path):
    """More sentences than --tokenizer-sentences: a new process with the same corpus and seed
    learns the same vocabulary (SentencePiece's own sample differed from process to process)."""
    rng = random.Random(1)
    corpus = tmp_path / "large.txt"
    corpus.write_text("\n".join(" ".join(rng.choices(WORDS, k=rng.randint(4, 14))) for _ in range(3000)) + "\n", encoding="utf-8")
    learn = ("import hashlib, sys; from minibert.corpus.vocabulary import train_tokenizer; "
             "print(hashlib.sha256(train_tokenizer(sys.argv[1], vocab_size=400, cache_dir=sys.argv[2], "
             "max_sentences=1000).model_proto).hexdigest())")
    digests = {subprocess.run([sys.executable, "-c", learn, str(corpus), str(tmp_path / f"cache{i}")], capture_output=True,
                              text=True, check=True).stdout for i in range(2)}
    assert len(digests) == 1
