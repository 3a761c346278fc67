"""WordPieceTokenizer: BERT's tokenization rules, and ids identical to the reference.

Two kinds of test:
- a hand-written tiny vocabulary pins down each rule (greedy longest match,
  `##` continuations, [UNK] for unmatched or over-long words, basic tokenization);
  these need neither the datasets nor the reference libraries;
- a realistic 16k WordPiece vocabulary, trained once per session with the
  `tokenizers` library on WikiText-2 + SST-2 (no internet, so no real
  bert-base vocab.txt), compares our ids with the slow Python `BertTokenizer`
  of transformers and with the Rust `tokenizers` BertWordPiece pipeline
  (the engine behind `BertTokenizerFast`), for uncased and cased vocabularies;
  on generated text the reference is the Rust one, which deletes what Google's
  code deletes, over the code points on which the two Unicode tables agree.
"""

from __future__ import annotations

import string
import unicodedata
from itertools import islice
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minibert.tokenizers.wordpiece import WordPieceTokenizer, basic_tokenize

DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

# Hand-made inputs that exercise every rule of basic tokenization.
EDGE_CASES = [
    "Café naïve RÉSUMÉ Ångström façade",
    "“Curly” ‘quotes’ — and… «guillemets»",
    "emoji 😀👍🏽 family 👨\u200d👩\u200d👧 flag 🇫🇷",
    "中文字符 mixed with English 日本語 かな カナ 한국어",
    "tabs\tand\nnew\r\nlines\x0bvertical\x0cfeed",
    "non\u00a0breaking\u2009thin\u3000ideographic\u202fspaces",
    "",
    "   ",
    "\t\n",
    "x" * 100,
    "x" * 101,
    "supercalifragilistic" * 6,
    "ctrl\x00\x07\x1b[0m\u200b\ufeff\ufffd chars",
    "[MASK] is [CLS]x[SEP] [mask] [UNK]",
    "line\u2028separator\u2029paragraph",
    "İstanbul straße ﬁne ǅ",
    "$5.00 + 3^2 = `x` @user #tag ~home {a|b}",
    "don't won't y'all rock'n'roll",
]
# Texts that NFC normalisation changes: the slow reference NFC-normalises first, the
# original BERT and the fast reference do not (nor do we). This matters only when
# accents are kept (cased), so cased ids are compared with the fast reference alone.
NFC_SENSITIVE = ["e\u0301 decomposed acute", "\uf900 compatibility ideograph", "Ω ohm sign"]
# A word-final capital sigma: str.lower (ours, the original BERT, the slow reference)
# gives "ς", the fast reference lowercases letter by letter and gives "σ".
FINAL_SIGMA = ["ΟΔΟΣ ΣΟΦΟΣ"]


# --- a tiny hand-written vocabulary: the rules themselves ---------------------------

TINY_VOCAB = [*SPECIALS, "un", "##aff", "##able", "aff", "able", "!", "'", "don", "t",
              "cafe", "café", "ab", "abc", "##d", "##ce", "a", "##a", "中", "文", "the", "[", "]", "mask", "x"]


@pytest.fixture(scope="module")
def tiny() -> WordPieceTokenizer:
    return WordPieceTokenizer(TINY_VOCAB)


@pytest.mark.parametrize(
    ("extra", "text", "pieces"),
    [
        ([], "unaffable", ["un", "##aff", "##able"]),          # continuations carry ##
        (["##affable"], "unaffable", ["un", "##affable"]),     # longest match wins
        ([], "abcd", ["abc", "##d"]),
        ([], "abce", ["[UNK]"]),      # greedy took "abc"; no backtracking to ab + ##ce
        ([], "d", ["[UNK]"]),         # a ## piece never starts a word
        ([], "un! unx aff", ["un", "!", "[UNK]", "aff"]),  # one bad character spoils only its word
        ([], "a" * 100, ["a"] + ["##a"] * 99),
        ([], "a" * 101, ["[UNK]"]),   # over 100 characters: [UNK] without trying
    ],
)
def test_greedy_longest_match_first(extra, text, pieces):
    assert WordPieceTokenizer(TINY_VOCAB + extra).tokens(text) == pieces


@pytest.mark.parametrize(
    ("text", "lowercase", "words"),
    [
        ("Don't stop!", True, ["don", "'", "t", "stop", "!"]),
        ("Café  NAÏVE", True, ["cafe", "naive"]),
        ("Café  NAÏVE", False, ["Café", "NAÏVE"]),
        ("中文abc", True, ["中", "文", "abc"]),
        ("a\tb\nc\u00a0d\u3000e\u2028f", True, ["a", "b", "c", "d", "e", "f"]),
        ("x\x00y\u200bz\ufffd \x07w", True, ["xyz", "w"]),
        ("a\u0378b \ufdd0 x\ue000y", True, ["a\u0378b", "\ufdd0", "x\ue000y"]),  # unassigned, private use: kept
        ("“hi”", True, ["“", "hi", "”"]),
        ("$5^2`~", True, ["$", "5", "^", "2", "`", "~"]),
        ("ΟΔΟΣ", True, ["οδος"]),  # Python's lowercasing knows the final sigma
        ("", True, []),
    ],
)
def test_basic_tokenization(text, lowercase, words):
    assert basic_tokenize(text, lowercase) == words


def test_accents_and_case_survive_only_when_cased(tiny):
    assert tiny.tokens("Café") == ["cafe"]
    assert WordPieceTokenizer(TINY_VOCAB, lowercase=False).tokens("café Café") == ["café", "[UNK]"]


def test_special_token_strings_in_text_become_special_ids(tiny):
    # Exact, case-sensitive match on the raw text, as in the references.
    assert tiny.tokens("the [MASK]!") == ["the", "[MASK]", "!"]
    assert tiny.tokens("the[MASK]x") == ["the", "[MASK]", "x"]
    assert tiny.tokens("[mask]") == ["[", "mask", "]"]


def test_encode_pair_decode_and_batch(tiny):
    cls, sep, pad = tiny.cls_id, tiny.sep_id, tiny.pad_id
    ids = tiny.encode("unaffable")
    assert ids[0] == cls and ids[-1] == sep and len(ids) == 5
    ids, segments = tiny.encode_pair("the", "don't")
    assert tiny.decode(ids, skip_special_tokens=False) == "[CLS] the [SEP] don ' t [SEP]"
    assert segments == [0, 0, 0, 1, 1, 1, 1]
    assert tiny.decode(ids) == "the don ' t"
    assert tiny.encode("a" * 50, max_length=6) == [cls, tiny.token_to_id["a"]] + [tiny.token_to_id["##a"]] * 3 + [sep]
    batch = tiny.batch(["the", "unaffable !"], pairs=["a", ""], max_length=6)
    assert batch["input_ids"].tolist() == [
        [cls, tiny.token_to_id["the"], sep, tiny.token_to_id["a"], sep, pad],
        tiny.encode_pair("unaffable !", "", max_length=6)[0],
    ]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 1, 1, 0], [1] * 6]
    assert batch["token_type_ids"].tolist() == [[0, 0, 0, 1, 1, 0], [0, 0, 0, 0, 0, 1]]
    assert tiny.special_tokens_mask(ids) == [i in (cls, sep) for i in ids]


@settings(max_examples=150, deadline=None)
@given(text=st.text(max_size=60), lowercase=st.booleans())
def test_any_text_gives_vocabulary_pieces_framed_by_cls_sep(text, lowercase):
    tokenizer = WordPieceTokenizer(TINY_VOCAB, lowercase=lowercase)
    pieces = tokenizer.tokens(text)
    assert all(p in tokenizer.token_to_id and p.strip() == p and p for p in pieces)
    ids = tokenizer.encode(text)
    assert ids == [tokenizer.cls_id, *tokenizer.tokenize_to_ids(text), tokenizer.sep_id]
    assert all(0 <= i < tokenizer.vocab_size for i in ids)
    # Extra whitespace between words changes nothing.
    assert tokenizer.tokens("\t " + text.replace(" ", " \n\u00a0") + "  ") == pieces


@settings(max_examples=150, deadline=None)
@given(
    words=st.lists(st.sampled_from(["un", "unaffable", "aff", "able", "Don't!", "the", "abcd", "aaa", "CAFÉ", "中文"])),
    gaps=st.sampled_from([" ", "\t", "\n ", "\u00a0"]),
)
def test_decode_inverts_wordpiece(tiny, words, gaps):
    text = gaps.join(words)
    assert tiny.decode(tiny.encode(text)) == " ".join(basic_tokenize(text, lowercase=True))


def test_ids_are_line_numbers_of_vocab_file(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_bytes(("\r\n".join(TINY_VOCAB) + "\r\n").encode("utf-8"))
    tokenizer = WordPieceTokenizer.from_file(path)
    assert tokenizer.vocab_size == len(TINY_VOCAB)
    assert tokenizer.token_to_id == {t: i for i, t in enumerate(TINY_VOCAB)}
    assert (tokenizer.pad_id, tokenizer.unk_id, tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id) == (0, 1, 2, 3, 4)


@pytest.mark.parametrize("lowercase", [True, False])
def test_save_then_load_keeps_vocab_and_casing(tmp_path, lowercase):
    saved = WordPieceTokenizer(TINY_VOCAB, lowercase=lowercase).save(tmp_path / "tok")
    for loaded in (WordPieceTokenizer.from_file(saved), WordPieceTokenizer.from_file(saved / "vocab.txt")):
        assert loaded.id_to_token == TINY_VOCAB and loaded.lowercase is lowercase
    assert WordPieceTokenizer.from_file(saved, lowercase=not lowercase).lowercase is not lowercase


def test_bad_inputs_give_clear_errors(tmp_path, tiny):
    with pytest.raises(FileNotFoundError, match="vocab.txt"):
        WordPieceTokenizer.from_file(tmp_path / "missing.txt")
    with pytest.raises(FileNotFoundError, match="no WordPiece vocabulary"):
        WordPieceTokenizer.from_file(tmp_path)  # a directory without vocab.txt
    no_mask = tmp_path / "no_mask.txt"
    no_mask.write_text("\n".join(t for t in TINY_VOCAB if t != "[MASK]") + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"no_mask.txt.*\[MASK\]"):
        WordPieceTokenizer.from_file(no_mask)
    with pytest.raises(ValueError, match="newline"):
        WordPieceTokenizer([*TINY_VOCAB, "a\nb"])
    with pytest.raises(TypeError, match="lowercase"):
        WordPieceTokenizer(TINY_VOCAB, lowercase="yes")
    with pytest.raises(TypeError, match="str"):
        tiny.encode(None)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tiny.decode([len(TINY_VOCAB)])
    saved = tiny.save(tmp_path / "bad_config")
    (saved / "tokenizer_config.json").write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(ValueError, match="tokenizer_config.json"):
        WordPieceTokenizer.from_file(saved)


# --- a realistic vocabulary: ids identical to the references ------------------------


def slow_reference_class():
    """The pure-Python BertTokenizer (transformers 5 moved it to BertTokenizerLegacy)."""
    transformers = pytest.importorskip("transformers")
    try:
        from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy
    except ImportError:
        return transformers.BertTokenizer
    return BertTokenizerLegacy


def training_text():
    """WikiText-2 train paragraphs and SST-2 train sentences, plus the edge cases so their characters get pieces."""
    with (DATASETS / "wikitext-2" / "train.txt").open(encoding="utf-8") as lines:
        yield from islice((line for line in lines if line.strip()), 12_000)  # half of it: enough, and quick
    with (DATASETS / "sst2" / "train.tsv").open(encoding="utf-8") as rows:
        next(rows)
        for row in rows:
            yield row.split("\t")[0]
    yield from (EDGE_CASES + NFC_SENSITIVE + FINAL_SIGMA) * 3


@pytest.fixture(scope="session")
def references(tmp_path_factory):
    """{lowercase: (ours, slow reference, fast reference)} on a 16k vocabulary trained for that casing."""
    if not DATASETS.is_dir():
        pytest.skip("shared datasets folder not found")
    tokenizers = pytest.importorskip("tokenizers")
    slow_class = slow_reference_class()
    out = {}
    for lowercase in (True, False):
        trainer = tokenizers.BertWordPieceTokenizer(lowercase=lowercase)
        trainer.train_from_iterator(training_text(), vocab_size=16000, min_frequency=2,
                                    special_tokens=SPECIALS, show_progress=False)
        directory = tmp_path_factory.mktemp(f"wordpiece_lowercase_{lowercase}")
        trainer.save_model(str(directory))
        vocab = str(directory / "vocab.txt")
        out[lowercase] = (
            WordPieceTokenizer.from_file(vocab, lowercase=lowercase),
            slow_class(vocab, do_lower_case=lowercase),
            tokenizers.BertWordPieceTokenizer(vocab, lowercase=lowercase),
        )
    return out


@pytest.fixture(scope="session")
def sentences():
    """SST-2 dev sentences and WikiText-2 validation paragraphs: 1,872 real texts."""
    if not DATASETS.is_dir():
        pytest.skip("shared datasets folder not found")
    sst2 = (DATASETS / "sst2" / "dev.tsv").read_text(encoding="utf-8").splitlines()[1:]
    wiki = (DATASETS / "wikitext-2" / "valid.txt").read_text(encoding="utf-8").splitlines()
    return [row.split("\t")[0] for row in sst2] + [line for line in wiki if line.strip()][:1000]


@pytest.mark.parametrize("lowercase", [True, False])
def test_ids_match_references_on_real_sentences(references, sentences, lowercase):
    ours, slow, fast = references[lowercase]
    assert len(sentences) >= 1000
    expected = [e.ids for e in fast.encode_batch(sentences)]
    got = [ours.encode(s) for s in sentences]
    assert sum(len(ids) for ids in got) > 50_000  # real work, not a tokenizer of nothing
    assert got == expected
    assert got == [slow.encode(s) for s in sentences]


@pytest.mark.parametrize("lowercase", [True, False])
def test_edge_cases_match_references(references, lowercase):
    ours, slow, fast = references[lowercase]
    for text in EDGE_CASES + NFC_SENSITIVE:
        ids = ours.encode(text)
        assert ids == fast.encode(text).ids, text
        if lowercase or text not in NFC_SENSITIVE:
            assert ids == slow.encode(text), text
    for text in FINAL_SIGMA:
        assert ours.encode(text) == slow.encode(text), text
    assert ours.tokens("x" * 101) == ["[UNK]"]
    assert ours.unk_id not in ours.encode("中文字符 😀 Café")  # the edge-case characters really are in the vocabulary


@pytest.mark.parametrize("lowercase", [True, False])
def test_decode_matches_reference(references, sentences, lowercase):
    ours, slow, _ = references[lowercase]
    for text in sentences[::10] + EDGE_CASES:
        ids = ours.encode(text)[1:-1]
        assert ours.decode(ids, skip_special_tokens=False) == slow.convert_tokens_to_string(slow.convert_ids_to_tokens(ids)), text


@pytest.mark.parametrize("lowercase", [True, False])
def test_pair_truncation_matches_reference(references, lowercase):
    """Longest-first truncation of RTE premise/hypothesis pairs, segment ids included (ties trim the second segment, as in BERT)."""
    ours, slow, _ = references[lowercase]
    rows = (DATASETS / "rte" / "dev.tsv").read_text(encoding="utf-8").splitlines()[1:]
    pairs = [row.split("\t")[1:3] for row in rows][:120]
    for max_length in (16, 64):
        for a, b in pairs:
            expected = slow(a, b, truncation="longest_first", max_length=max_length, return_token_type_ids=True)
            assert ours.encode_pair(a, b, max_length=max_length) == (expected["input_ids"], expected["token_type_ids"]), (a, b)


# --- any text: ids identical to the reference that deletes what Google's code deletes ------------
# Google's tokenization.py deletes control and format characters only (wordpiece.py's
# CONTROL_CATEGORIES); of the references, the Rust one keeps unassigned code points as it does,
# the slow Python one deletes them. So generated text is compared with the Rust one, leaving out:
# - the code points on which Python's `unicodedata` and the Rust library's Unicode tables
#   disagree (`tables_disagree`): each library knows a different Unicode version;
# - where the Rust library's rules depart from Google's whatever the tables say: it deletes
#   private use (Co) too, its sixth CJK block starts at U+2B920, not U+2B820, and it lowercases
#   letter by letter, so a word-final "Σ" does not become "ς" (FINAL_SIGMA).
RUST_CJK_GAP = range(0x2B820, 0x2B920)


def isolated_by_bert_pre_tokenizer(pre_tokenizer, chars: list[str]) -> set[str]:
    """The characters the Rust BertPreTokenizer cuts out as words of their own (its punctuation):
    each character between two "x", so only a character cut on both sides is a piece of length 1
    at its own (odd) offset. Chunks of 256 keep the Rust splitting quick."""
    isolated = set()
    for start in range(0, len(chars), 256):
        text = "x" + "x".join(chars[start:start + 256]) + "x"
        isolated.update(text[a:b] for _, (a, b) in pre_tokenizer.pre_tokenize_str(text) if b - a == 1 and a % 2)
    return isolated


@pytest.fixture(scope="session")
def tables_disagree() -> frozenset[str]:
    """The code points on which Python's `unicodedata` and the Rust `tokenizers` library's Unicode
    tables disagree. The rule: ask each library, for every code point but the surrogates (and "|",
    the separator below), each question BERT's basic tokenization asks of a character (the Rust
    side by running its BertNormalizer and BertPreTokenizer, with the Rust library's own rules;
    the Python side from `unicodedata` under the same rules), and keep the code point when any
    answer differs:
    - deleted as control, format or private use (categories Cc Cf Co, besides NUL and U+FFFD)?
    - made a space as whitespace (categories Zs Zl Zp, besides tab, newline, return)?
    - its lowercase?
    - its canonical decomposition (NFD) less the nonspacing marks (Mn), as accents are stripped?
    - cut off as punctuation (category P*, or ASCII punctuation)?
    Each text question is asked of all characters at once, joined by "|", which none changes.
    """
    normalizers = pytest.importorskip("tokenizers.normalizers")
    pre_tokenizers = pytest.importorskip("tokenizers.pre_tokenizers")
    chars = [chr(cp) for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF and chr(cp) != "|"]
    categories = list(map(unicodedata.category, chars))
    text = "|".join(chars)

    def rust(**step) -> str:
        options = {"clean_text": False, "handle_chinese_chars": False, "strip_accents": False, "lowercase": False, **step}
        return normalizers.BertNormalizer(**options).normalize_str(text)

    deleted = {c for c, cat in zip(chars, categories) if cat in ("Cc", "Cf", "Co")} - set("\t\n\r") | {"\x00", "\ufffd"}
    spaces = {c for c, cat in zip(chars, categories) if cat in ("Zs", "Zl", "Zp")} | set("\t\n\r")
    cleaned = {ord(c): " " for c in spaces} | {ord(c): None for c in deleted}
    marks = {ord(c): None for c, cat in zip(chars, categories) if cat == "Mn"}
    answers = [  # (Python's, the Rust library's)
        (text.translate(cleaned), rust(clean_text=True)),
        (text.lower(), rust(lowercase=True)),  # "|" is not a letter, so no "Σ" here is word-final
        (unicodedata.normalize("NFD", text).translate(marks), rust(strip_accents=True)),
    ]
    disagree = set()
    for python, rust_answer in answers:
        python, rust_answer = python.split("|"), rust_answer.split("|")
        assert len(python) == len(rust_answer) == len(chars), "a step changed the separator"
        disagree.update(c for c, ours, theirs in zip(chars, python, rust_answer) if ours != theirs)
    punctuation = {c for c, cat in zip(chars, categories) if cat[0] == "P"} | (set(string.punctuation) - {"|"})
    disagree |= punctuation ^ isolated_by_bert_pre_tokenizer(pre_tokenizers.BertPreTokenizer(), chars)
    # A few hundred code points, new in one Unicode version or the other; far more means a rule is missing above.
    assert len(disagree) < len(chars) // 100, f"{len(disagree)} code points disagree"
    return frozenset(disagree)


def rules_agree(char: str, lowercase: bool, tables_disagree: frozenset[str]) -> bool:
    """True where the Rust reference and Google's rules treat `char` alike (the list above)."""
    return (char not in tables_disagree and unicodedata.category(char) != "Co" and ord(char) not in RUST_CJK_GAP
            and not (lowercase and char == "Σ"))


# Any text but lone surrogates (a Rust string cannot hold one), with the categories this
# comparison is about drawn often: unassigned, control, format.
ANY_TEXT = st.text(st.one_of(st.characters(exclude_categories=["Cs"]), st.characters(categories=["Cn", "Cc", "Cf"])),
                   max_size=40)


@settings(max_examples=200, deadline=None)
@given(text=ANY_TEXT, lowercase=st.booleans())
def test_any_text_matches_the_reference_that_follows_google(references, tables_disagree, text, lowercase):
    ours, _, fast = references[lowercase]
    text = "".join(c for c in text if rules_agree(c, lowercase, tables_disagree))
    assert ours.encode(text) == fast.encode(text).ids


@pytest.mark.parametrize("lowercase", [True, False])
def test_saved_directory_loads_in_transformers(references, sentences, tmp_path, lowercase):
    ours, slow, _ = references[lowercase]
    loaded = slow_reference_class().from_pretrained(str(ours.save(tmp_path)))
    for text in sentences[:50] + EDGE_CASES[:4]:
        assert loaded.encode(text) == ours.encode(text)
