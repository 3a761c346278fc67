"""A released ALBERT's spiece.model through `load_tokenizer`: the same ids as transformers'
AlbertTokenizer on generated and real text (single texts and pairs), ALBERT's rule for a number
followed by a comma, and a tiny random AlbertForMaskedLM with that tokenizer through
from_pretrained, `train.py --init` and fill-mask.

The spiece.model is trained here with the options of ALBERT's own (its README's spm_train line):
<pad>=0 <unk>=1, [CLS] [SEP] [MASK] as control symbols at 2-4, a few user-defined punctuation
pieces; numbers are not split from what follows them, so pieces like "▁14," exist and the rule
has something to do. The installed transformers builds AlbertTokenizer from a spiece.model's
pieces, scores and character map (reading the file needs protobuf, so the test reads them itself);
it does not apply the number-comma rule, so where that rule fires the test checks the rule's
own invariants instead. Nor does it count the information separators U+001C-U+001F as
whitespace, as ALBERT's preparation (Python's str.split) does; the generated text leaves them out."""

import io
import pickle
import random
import re

import pytest
import sentencepiece as spm
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

from minibert import fill_mask, from_pretrained
from minibert.tokenizers import load_tokenizer
from minibert.interop.tokenizers.albert import AlbertTokenizer
from minibert.interop.tokenizers.json_export import normalizer_spec
from minibert.runs.cli import main as train
from tiny_run import strip_model_flags, tiny_args, write_corpus

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

SPECIALS = ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
CHUNKS = [*"abcdefghijklmnopqrstuvwxyz ABCXYZ0123456789,,,,.;:'\"`()-–£€éèüñçÅØßæœıİΣσςﬁ²½ⅧＡｂ",
          "\u0301", "\u0308", "  ", "\t", "\n", "\u00a0", "\u2028", "\u200b", "\x85",
          "``", "''", "[MASK]", "[CLS]", "<unk>", "1990,", "3,000", " 7, ", " 14, ", "café ", "the ", "cat "]
TEXT = st.lists(st.sampled_from(CHUNKS), max_size=30).map("".join)


def pair(oracle, a: str, b: str) -> list[list[int]]:
    encoded = oracle(a, b, return_token_type_ids=True)
    return [encoded["input_ids"], encoded["token_type_ids"]]


def number_comma(piece: str) -> bool:
    return len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit()


def rule_fires(oracle, *texts: str) -> bool:
    """True where SentencePiece's pieces (transformers' here) hold a number glued to a comma."""
    return any(number_comma(piece) for text in texts for piece in oracle.tokenize(text))


@pytest.fixture(scope="module")
def albert_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("albert_spiece")
    rng = random.Random(0)
    corpus = write_corpus(directory / "corpus.txt").read_text().split("\n")
    corpus += [f"In {rng.randint(1800, 2020)}, about {rng.randint(1, 99)},{rng.randint(100, 999)} people, "
               f"{rng.randint(1, 20)}, {rng.randint(1, 20)}, or {rng.randint(1, 9)} came to the Café Noël." for _ in range(2000)]
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(line for line in corpus if line), model_writer=model, vocab_size=400, model_type="unigram",
        split_by_number=False, pad_id=0, unk_id=1, bos_id=-1, eos_id=-1, control_symbols=SPECIALS[2:],
        user_defined_symbols=list("()\"-.–£€"), minloglevel=2,
    )
    (directory / "spiece.model").write_bytes(model.getvalue())
    (directory / "corpus.txt").unlink()
    return directory


@pytest.fixture(scope="module")
def oracle(albert_dir):
    """transformers' AlbertTokenizer on that spiece.model, as its from_pretrained builds it."""
    proto = (albert_dir / "spiece.model").read_bytes()
    sp = spm.SentencePieceProcessor(model_proto=proto)
    assert any(number_comma(sp.id_to_piece(i)) for i in range(sp.get_piece_size()))  # the rule has work to do
    vocab = [(sp.id_to_piece(i), sp.get_score(i)) for i in range(sp.get_piece_size())]
    return transformers.AlbertTokenizer(vocab=vocab, _spm_precompiled_charsmap=normalizer_spec(proto)["charsmap"])


def test_special_tokens_sit_where_albert_has_them(albert_dir):
    tokenizer = load_tokenizer(albert_dir)
    assert isinstance(tokenizer, AlbertTokenizer)
    assert [tokenizer.piece(i) for i in (tokenizer.pad_id, tokenizer.unk_id, tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id)] == SPECIALS
    starts = tokenizer.word_starts
    assert starts.shape == (tokenizer.vocab_size,)
    assert all(bool(starts[i]) == (tokenizer.piece(i).startswith("▁") or i < 5) for i in range(tokenizer.vocab_size))
    copy = pickle.loads(pickle.dumps(tokenizer))  # tokenizing worker processes receive it pickled
    assert copy.encode("The Café, 1990, ok") == tokenizer.encode("The Café, 1990, ok")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(a=TEXT, b=TEXT)
def test_ids_equal_transformers_albert_tokenizer(albert_dir, oracle, a, b):
    ours = load_tokenizer(albert_dir)
    if rule_fires(oracle, a, b):  # the rule transformers lacks: below
        return
    assert ours.encode(a) == oracle(a)["input_ids"]
    if b:  # transformers takes an empty second text for none at all
        assert list(ours.encode_pair(a, b)) == pair(oracle, a, b)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=TEXT)
def test_a_number_is_cut_from_the_comma_after_it(albert_dir, oracle, text):
    ours = load_tokenizer(albert_dir)

    def pieces(ids):  # an unknown character reads <unk> on both sides
        return [ours.piece(i) for i in ids]

    def reference(text):
        return pieces(oracle(text, add_special_tokens=False)["input_ids"])

    cut = pieces(ours.tokenize_to_ids(text))
    assert not any(number_comma(p) for p in cut)
    assert "".join(cut) == "".join(reference(text))  # the same characters, cut differently at most
    for piece in reference(text):  # each word-initial number before a comma: spelled as SentencePiece spells it alone
        if number_comma(piece) and piece.startswith("▁"):
            alone = reference(piece[1:-1])
            assert re.search(r"(?<!\S)" + re.escape(" ".join([*alone, ","])) + r"(?!\S)", " ".join(cut))


def test_real_sentences(albert_dir, oracle, datasets_dir):
    lines = [line.strip() for line in (datasets_dir / "wikitext-2" / "test.txt").read_text().splitlines() if line.strip()][:1000]
    ours = load_tokenizer(albert_dir)
    pairs = [(a, b) for a, b in zip(lines[::2], lines[1::2]) if not rule_fires(oracle, a, b)]
    assert len(pairs) > 400
    for a, b in pairs:
        assert list(ours.encode_pair(a, b)) == pair(oracle, a, b)


def test_switches_come_from_tokenizer_config(albert_dir, tmp_path):
    (tmp_path / "spiece.model").write_bytes((albert_dir / "spiece.model").read_bytes())
    (tmp_path / "tokenizer_config.json").write_text('{"do_lower_case": false, "keep_accents": true}')
    tokenizer = load_tokenizer(tmp_path)
    assert tokenizer.prepare("Café  NOËL") == "Café NOËL"
    assert load_tokenizer(albert_dir).prepare("Café  NOËL ``x''\x1cy") == 'cafe noel "x" y'
    tokenizer.save(tmp_path / "copy")
    assert load_tokenizer(tmp_path / "copy").settings() == tokenizer.settings()


@pytest.mark.parametrize("files, message", [
    ({"spiece.model": "not a model"}, "spiece.model"),
    ({"spiece.model": None, "tokenizer_config.json": '{"do_lower_case": "yes"}'}, "do_lower_case must be true or false"),
])
def test_bad_folders_are_one_line_errors(albert_dir, tmp_path, files, message):
    for name, text in files.items():
        if text is None:
            (tmp_path / name).write_bytes((albert_dir / name).read_bytes())
        else:
            (tmp_path / name).write_text(text)
    with pytest.raises(ValueError, match=re.escape(message)) as error:
        load_tokenizer(tmp_path)
    assert "\n" not in str(error.value)


def test_an_albert_without_its_special_pieces_is_refused(tmp_path):
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(["the cat sat on the mat"] * 50), model_writer=model,
                                   vocab_size=20, hard_vocab_limit=False, minloglevel=2)
    (tmp_path / "spiece.model").write_bytes(model.getvalue())
    with pytest.raises(ValueError, match=r"lacks the piece\(s\) <pad> \[CLS\] \[SEP\] \[MASK\]"):
        load_tokenizer(tmp_path)


@pytest.fixture(scope="module")
def hf_albert(albert_dir, tmp_path_factory):
    """A random AlbertForMaskedLM saved with the spiece.model. Its weights are spread wide so that
    the ranking has no near-ties; its logits are then large, so float32 rounding (not the
    tokenizer) moves probabilities in the fifth digit: scores are compared relatively."""
    vocab = spm.SentencePieceProcessor(model_file=str(albert_dir / "spiece.model")).get_piece_size()
    config = transformers.AlbertConfig(vocab_size=vocab, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                                       num_attention_heads=2, intermediate_size=48, max_position_embeddings=64,
                                       initializer_range=0.5)
    torch.manual_seed(0)
    directory = tmp_path_factory.mktemp("hf_albert")
    model = transformers.AlbertForMaskedLM(config).eval()
    model.save_pretrained(directory)
    (directory / "spiece.model").write_bytes((albert_dir / "spiece.model").read_bytes())
    return directory, model


def test_fill_mask_equals_the_transformers_pipeline(hf_albert, oracle):
    directory, model = hf_albert
    texts = ["The small [MASK] sees the red cow near the garden.", "[MASK] café, the [MASK] goat."]
    pipe = transformers.pipeline("fill-mask", model=model, tokenizer=oracle, device="cpu")
    for text, masks in zip(texts, fill_mask(directory, texts, top_k=4)):
        reference = pipe(text, top_k=4)
        reference = [reference] if isinstance(reference[0], dict) else reference  # one mask: not nested
        assert len(masks) == len(reference) == text.count("[MASK]")
        for candidates, expected in zip(masks, reference):
            assert [c.token_id for c in candidates] == [e["token"] for e in expected]
            torch.testing.assert_close(torch.tensor([c.score for c in candidates]),
                                       torch.tensor([e["score"] for e in expected]), atol=0, rtol=1e-3)


def test_init_pretrains_from_a_hugging_face_albert(hf_albert, tmp_path, capsys):
    directory, model = hf_albert
    batch = load_tokenizer(directory).batch(["The big dog, 1990, eats.", "A cat."])
    real = batch["attention_mask"].bool()  # padding's logits are nobody's prediction
    with torch.no_grad():
        expected = model(**batch).logits[real]
        torch.testing.assert_close(from_pretrained(directory, head="mlm").eval()(**batch).logits[real], expected, atol=1e-4, rtol=1e-5)
    corpus = write_corpus(tmp_path / "corpus.txt")
    args = strip_model_flags(tiny_args("albert", corpus, tmp_path / "cache", tmp_path / "out", 2))  # --init brings them
    assert train([*args, "--init", str(directory)]) == 0
    assert f"starting from {directory}" in capsys.readouterr().out
    out = tmp_path / "out"
    assert (out / "spiece.model").read_bytes() == (directory / "spiece.model").read_bytes()  # the run keeps its vocabulary
    assert load_tokenizer(out).encode("The big dog, 1990, eats.") == load_tokenizer(directory).encode("The big dog, 1990, eats.")
    assert from_pretrained(out, head="mlm").config.vocab_size == model.config.vocab_size
