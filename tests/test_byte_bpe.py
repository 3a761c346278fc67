"""RoBERTa's byte-level BPE: the same ids as transformers' RobertaTokenizer (in transformers 5 the
only one, backed by the `tokenizers` library: the pure-Python "slow" RobertaTokenizer is gone),
as a `tokenizers.Tokenizer` assembled by hand from the same files, and, for pre-tokenization and
merges without the Rust code, as transformers' pure-Python GPT-2-style BPE (ClvpTokenizer's
`_tokenize`, with its English normalizer switched off) and GPT-2's pattern run by the `regex`
package. Vocabularies are trained here by the `tokenizers` library, with RoBERTa's specials
(<s> <pad> </s> <unk> at 0..3, <mask> last)."""

import json
import pickle

import pydoc_data.topics
import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

from minibert import fill_mask, from_pretrained, save_pretrained
from minibert.corpus.default_corpus import prose_paragraph
from minibert.finetune.kinds.sentence_files import read_task
from minibert.interop.tokenizers import ByteLevelBPETokenizer
from minibert.tokenizers import load_tokenizer
from minibert.interop.tokenizers.byte_bpe import byte_to_char, pretokenizer
from minibert.tokenizers.load import find_layout

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")
regex = pytest.importorskip("regex")
transformers.logging.set_verbosity_error()

SPECIALS = ["<s>", "<pad>", "</s>", "<unk>"]  # ids 0..3; <mask> is appended last, as in RoBERTa
SPECIAL_SPELLING = regex.compile("<s>|</s>|<pad>|<unk>|<mask>")
GPT2_PATTERN = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


def default_corpus_paragraphs() -> list[str]:
    """The prose of the Python manual's topics: the first documents of the default corpus."""
    topics = pydoc_data.topics.topics
    paragraphs = (prose_paragraph(block) for name in sorted(topics) for block in topics[name].split("\n\n"))
    return [p for p in paragraphs if p is not None]


def train_vocabulary(directory, lines, vocab_size):
    """vocab.json + merges.txt learned by the `tokenizers` library, <mask> added last."""
    trainer = tokenizers.ByteLevelBPETokenizer()
    trainer.train_from_iterator(lines, vocab_size=vocab_size, special_tokens=SPECIALS, show_progress=False)
    directory.mkdir(parents=True, exist_ok=True)
    trainer.save_model(str(directory))
    vocab = json.loads((directory / "vocab.json").read_text(encoding="utf-8"))
    vocab["<mask>"] = len(vocab)
    (directory / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    return directory


class Oracles:
    """Ours and the references, all on one vocabulary folder."""

    def __init__(self, directory, add_prefix_space=False):
        self.directory = directory
        self.ours = ByteLevelBPETokenizer.load(directory)
        self.ours.add_prefix_space = add_prefix_space
        self.ours.save(directory)  # tokenizer_config.json: <mask> with lstrip, add_prefix_space
        self.fast = transformers.AutoTokenizer.from_pretrained(str(directory))
        assert type(self.fast).__name__ == "RobertaTokenizer"
        self.rust = rust_tokenizer(directory, add_prefix_space)
        self.slow = transformers.ClvpTokenizer(str(directory / "vocab.json"), str(directory / "merges.txt"))
        self.slow._normalizer = lambda text: text  # plain GPT-2 BPE: no number spelling, no lowercasing

    def assert_same_as_slow(self, texts):
        """Ours == the pure-Python BPE on texts without typed special tokens (it does not look for them)."""
        plain = [text for text in texts if not SPECIAL_SPELLING.search(text)]
        assert plain
        for text in plain:
            assert self.ours.tokenize_to_ids(text) == self.slow.convert_tokens_to_ids(self.slow._tokenize(text)), text

    def assert_same(self, texts, pairs=None):
        """Ours == transformers == tokenizers on each text (or pair), special tokens included."""
        texts, pairs = list(texts), None if pairs is None else list(pairs)
        expected = self.fast(texts, pairs)["input_ids"] if pairs else self.fast(texts)["input_ids"]
        rust = [e.ids for e in (self.rust.encode_batch(list(zip(texts, pairs))) if pairs else self.rust.encode_batch(texts))]
        for n, text in enumerate(texts):
            ids, segments = self.ours.encode_pair(text, None if pairs is None else pairs[n])
            assert ids == expected[n] == rust[n], (text, None if pairs is None else pairs[n])
            assert segments == [0] * len(ids)


def rust_tokenizer(directory, add_prefix_space):
    """RoBERTa's tokenizer assembled from the `tokenizers` library's parts."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors

    tokenizer = Tokenizer(models.BPE.from_file(str(directory / "vocab.json"), str(directory / "merges.txt")))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens([*SPECIALS, AddedToken("<mask>", lstrip=True, special=True)])
    tokenizer.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0), add_prefix_space=add_prefix_space)
    return tokenizer


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """~1k pieces learned from the default corpus (always available)."""
    return Oracles(train_vocabulary(tmp_path_factory.mktemp("small"), default_corpus_paragraphs(), 1000))


@pytest.fixture(scope="module")
def learned() -> dict:
    """Vocabularies that need the datasets, learned once per module (`datasets_dir` is per test)."""
    return {}


@pytest.fixture
def large(learned, tmp_path_factory, datasets_dir):
    """As many pieces as WikiText-2's training text gives, up to RoBERTa's 50k (~48k; ~4 s to learn)."""
    if "large" not in learned:
        lines = (datasets_dir / "wikitext-2" / "train.txt").read_text(encoding="utf-8").splitlines()
        learned["large"] = Oracles(train_vocabulary(tmp_path_factory.mktemp("large"), lines, 50265))
    return learned["large"]


# --- the pieces ---------------------------------------------------------------------------


def test_byte_table_is_gpt2s():
    table = byte_to_char()
    from transformers.models.clvp.tokenization_clvp import bytes_to_unicode

    assert table == bytes_to_unicode()
    assert sorted(table.values()) == sorted(tokenizers.pre_tokenizers.ByteLevel.alphabet())
    assert (table[ord(" ")], table[ord("\n")], table[ord("a")]) == ("Ġ", "Ċ", "a")
    assert all(char.isprintable() and not char.isspace() for char in table.values())


FRAGMENTS = ["don't", "'S", "'s", "'ll", "I'm", "?'re", " ", "  ", "   ", "\n", "\n\n", "\t", "\r\n", " \t ", "\x00",
             "\x1c", "\x1f", "\x85", "\u00a0", "\u2009", "\u3000", "\u2028", "é", "e\u0301", "Å", "日本語", "한국어", "😀",
             "👩\u200d👩\u200d👧", "🇫🇷", "123", "3.14", "١٢٣", "Ⅻ", "½", "²", "$5", "...", "—", "«»", "word", "Word", "ǅ"]
TEXTS = st.lists(st.one_of(st.sampled_from(FRAGMENTS),
                           st.text(st.characters(exclude_categories=["Cs", "Cn"]), max_size=8)), max_size=12).map("".join)
MASKED_TEXTS = st.lists(st.one_of(TEXTS, st.sampled_from(["<mask>", " <mask>", "\n <mask>", "<s>", "</s>", "<pad>", "<unk>"])),
                        max_size=5).map("".join)


@settings(max_examples=300, deadline=None)
@given(TEXTS)
def test_pretokenization_equals_gpt2s_pattern(text):
    """Unassigned code points are left out: Python's unicodedata and the `regex` package may know
    different Unicode versions (a letter in one may be unassigned in the other)."""
    assert pretokenizer().findall(text) == GPT2_PATTERN.findall(text)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(MASKED_TEXTS)
def test_generated_text_gives_the_references_ids(small, text):
    small.assert_same([text])
    if not SPECIAL_SPELLING.search(text):
        small.assert_same_as_slow([text])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(TEXTS)
def test_decoding_gives_back_the_text(small, text):
    ids = small.ours.encode(text)
    assert small.ours.decode(ids) == text
    assert small.ours.decode_ids(small.ours.tokenize_to_ids(text)) == text


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.integers(5, 999), max_size=12))
def test_any_ids_decode_as_transformers_decodes_them(small, ids):
    """Any ids are some bytes, not always UTF-8: invalid bytes become U+FFFD, as there."""
    assert small.ours.decode_ids(ids) == small.fast.decode(ids, clean_up_tokenization_spaces=False)


def test_add_prefix_space_is_read_and_matches(small, tmp_path):
    for name in ("vocab.json", "merges.txt"):
        (tmp_path / name).write_bytes((small.directory / name).read_bytes())
    (tmp_path / "tokenizer_config.json").write_text('{"add_prefix_space": true}')
    assert ByteLevelBPETokenizer.load(tmp_path).add_prefix_space
    prefixed = Oracles(tmp_path, add_prefix_space=True)
    prefixed.assert_same(["Hello world", " Hello", "a <mask> b", "<mask>x", "x</s>y", "\nnew"], None)
    assert prefixed.ours.tokenize_to_ids("Hello") == prefixed.ours.tokenize_to_ids(" Hello")


# --- real text ------------------------------------------------------------------------------


def test_default_corpus_gives_the_references_ids(small):
    paragraphs = default_corpus_paragraphs()
    assert len(paragraphs) > 1000
    small.assert_same(paragraphs)
    small.assert_same_as_slow(paragraphs[:300])
    small.assert_same(paragraphs[:200], paragraphs[1:201])


def test_wikitext_valid_gives_the_references_ids(small, large, datasets_dir):
    lines = (datasets_dir / "wikitext-2" / "valid.txt").read_text(encoding="utf-8").splitlines(keepends=True)
    for oracles in (small, large):
        oracles.assert_same(lines)
    large.assert_same_as_slow(lines[:500])


def test_sst2_and_rte_dev_give_the_references_ids(large, datasets_dir):
    sst2 = read_task(datasets_dir / "sst2" / "dev.tsv")
    assert len(sst2) > 800 and sst2.pairs is None
    large.assert_same(sst2.texts)
    rte = read_task(datasets_dir / "rte" / "dev.tsv")
    assert len(rte) > 250
    large.assert_same(rte.texts, rte.pairs)


# --- layout, loading, pickling ----------------------------------------------------------------


def test_layouts_and_special_ids(small):
    ours = small.ours
    assert (ours.cls_id, ours.pad_id, ours.sep_id, ours.unk_id, ours.mask_id) == (0, 1, 2, 3, ours.vocab_size - 1)
    a, b = ours.tokenize_to_ids("A cat."), ours.tokenize_to_ids("It sat.")
    assert ours.join(a) == ([0, *a, 2], [0] * (len(a) + 2))
    assert ours.join(a, b) == ([0, *a, 2, 2, *b, 2], [0] * (len(a) + len(b) + 4))
    assert small.fast("A cat.", "It sat.")["input_ids"] == ours.encode_pair("A cat.", "It sat.")[0]
    assert (ours.num_special(False), ours.num_special(True)) == (2, 4)
    ids, _ = ours.encode_pair("one two three four five", "six seven eight", max_length=8)
    assert len(ids) == 8 and ids[0] == 0 and ids.count(2) == 3
    the, dot = ours.tokenize_to_ids("the"), ours.tokenize_to_ids(".")
    assert ours.tokenize_to_ids("the \t <mask>.") == [*the, ours.mask_id, *dot]  # the spaces went with the mask
    assert ours.piece(ours.tokenize_to_ids(" sat")[0]).startswith("Ġ")


def test_word_starts_mark_pieces_after_a_space_and_specials(small):
    ours, starts = small.ours, small.ours.word_starts
    assert starts.shape == (ours.vocab_size,) and starts.dtype == torch.bool
    assert all(starts[i] for i in (ours.cls_id, ours.sep_id, ours.pad_id, ours.mask_id, ours.unk_id))
    assert [bool(starts[i]) for i in ours.tokenize_to_ids(" walking elephants")] == \
           [ours.piece(i).startswith("Ġ") for i in ours.tokenize_to_ids(" walking elephants")]
    assert int(starts.sum()) == sum(p.startswith("Ġ") for p in ours.vocab) + 5


def test_the_loader_picks_byte_level_bpe(small, tmp_path):
    assert find_layout(small.directory) == ("vocab.json", "merges.txt")
    assert isinstance(load_tokenizer(small.directory), ByteLevelBPETokenizer)
    small.ours.save(tmp_path)  # a saved tokenizer loads again with the same ids
    text = "Saved and loaded: the same <mask>."
    assert load_tokenizer(tmp_path).encode(text) == small.ours.encode(text)


def test_pickling_round_trips_compactly_and_deterministically(small):
    ours = small.ours
    before = pickle.dumps(ours)
    ours.tokenize_to_ids("fills the cache " * 10)
    assert pickle.dumps(ours) == before  # the data cache keys tokenizers by their pickle
    copy = pickle.loads(before)
    text = default_corpus_paragraphs()[0]
    assert copy.encode(text) == ours.encode(text) and copy.add_prefix_space == ours.add_prefix_space
    files = sum((small.directory / name).stat().st_size for name in ("vocab.json", "merges.txt"))
    assert len(before) < 1.5 * files


BAD_FILES = {
    "vocab.json not an object": ({"vocab.json": "[1, 2]"}, "vocab.json"),
    "vocab.json not JSON": ({"vocab.json": "{"}, "vocab.json"),
    "a merge with three parts": ({"merges.txt": "#version: 0.2\nĠ t h\n"}, "merges.txt, line 2"),
    "a merge of one part": ({"merges.txt": "Ġt\n"}, "merges.txt, line 1"),
    "a merge the vocabulary lacks": ({"merges.txt": "#version: 0.2\nq q\n"}, "'qq'"),
    "no <mask>": ({"vocab.json": json.dumps({"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "q": 4})}, "<mask>"),
    "a special token not a string": ({"tokenizer_config.json": '{"mask_token": 5}'}, "mask_token"),
}


@pytest.mark.parametrize("case", BAD_FILES)
def test_bad_files_are_one_line_errors(small, tmp_path, case):
    replaced, named = BAD_FILES[case]
    for name in ("vocab.json", "merges.txt"):
        (tmp_path / name).write_bytes((small.directory / name).read_bytes())
    if "merges.txt" not in replaced and "vocab.json" in replaced:
        (tmp_path / "merges.txt").write_text("#version: 0.2\n")
    for name, content in replaced.items():
        (tmp_path / name).write_text(content, encoding="utf-8")
    with pytest.raises(ValueError) as error:
        load_tokenizer(tmp_path)
    message = str(error.value)
    assert "\n" not in message and named in message and str(tmp_path) in message


# --- fill-mask ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def roberta_dir(small, tmp_path_factory):
    """A tiny random RobertaForMaskedLM over the small vocabulary, saved as transformers saves it."""
    config = transformers.RobertaConfig(
        vocab_size=small.ours.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37,
        max_position_embeddings=64 + 2, initializer_range=0.5, pad_token_id=1, bos_token_id=0, eos_token_id=2)
    torch.manual_seed(0)
    directory = tmp_path_factory.mktemp("hf_roberta")
    transformers.RobertaForMaskedLM(config).eval().save_pretrained(directory)
    small.ours.save(directory)
    return directory


def test_fill_mask_equals_the_transformers_pipeline(roberta_dir):
    texts = ["The cat sat on the <mask> today.", "<mask> is the first word.", "It ends with a <mask>.",
             "Two <mask> in one <mask>, and [MASK] too."]
    pipe = transformers.pipeline("fill-mask", model=str(roberta_dir), tokenizer=str(roberta_dir), device="cpu")
    ours = fill_mask(roberta_dir, texts, top_k=5)
    for text, masks in zip(texts, ours):
        reference = pipe(text.replace("[MASK]", "<mask>"), top_k=5)
        reference = [reference] if isinstance(reference[0], dict) else reference
        assert len(masks) == len(reference) == text.count("<mask>") + text.count("[MASK]")
        for candidates, expected in zip(masks, reference):
            assert [c.token_id for c in candidates] == [e["token"] for e in expected]
            torch.testing.assert_close(torch.tensor([c.score for c in candidates]),
                                       torch.tensor([e["score"] for e in expected]), atol=1e-5, rtol=0)


def test_save_pretrained_writes_a_tokenizer_transformers_reads(roberta_dir, tmp_path):
    tokenizer = load_tokenizer(roberta_dir)
    save_pretrained(from_pretrained(roberta_dir, head="mlm"), tmp_path, format="hf", tokenizer=tokenizer)
    text = "Written again: the <mask> sat on the mat, didn't it?"
    auto = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    assert auto(text)["input_ids"] == load_tokenizer(tmp_path).encode(text) == tokenizer.encode(text)
