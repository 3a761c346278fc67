"""Models minibert pretrained itself, exported with save_pretrained(format="hf"): transformers'
AutoTokenizer gives our tokenizer's ids on real text, and its model classes our logits.

The tokenizer files are checked against our SentencePiece tokenizer on real English (the Python
manual that the default corpus is made of; wikitext-2 too where the shared datasets are present)
and on generated strings with odd whitespace, NFKC-folded and unseen characters and special
tokens. Every variant is then trained for a few steps of a tiny model and exported: rotary models
as RoFormer, the others with learned positions as their own family.
"""

import json
from collections import Counter
from pathlib import Path

import pydoc_data.topics
import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings, strategies as st

import minibert
from minibert import MaskedLM, ModelConfig, ReplacedTokenDetector
from minibert.corpus.default_corpus import prose_paragraph
from minibert.corpus.vocabulary import train_tokenizer
from minibert.interop.tokenizers.json_export import hugging_face_files
from minibert.tokenizers import SentencePieceTokenizer, load_tokenizer
from minibert.objectives.kd import student_config
from minibert.tools.probe import masked_ids
from minibert.runs.cli import main
from minibert.variants import VARIANTS
from tiny_run import tiny_args, write_corpus

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()


def manual_paragraphs() -> list[str]:
    """The prose of the Python manual's topics: the first documents of the default corpus."""
    topics = pydoc_data.topics.topics
    paragraphs = (prose_paragraph(block) for name in sorted(topics) for block in topics[name].split("\n\n"))
    return [p for p in paragraphs if p is not None]


@pytest.fixture(scope="module")
def real_tokenizer(tmp_path_factory):
    """A unigram vocabulary learned from half of the manual; the other half is held out."""
    root = tmp_path_factory.mktemp("real")
    paragraphs = manual_paragraphs()
    corpus = root / "manual.txt"
    corpus.write_text("\n\n".join(paragraphs[::2]) + "\n", encoding="utf-8")
    ours = train_tokenizer(corpus, vocab_size=2000, cache_dir=root / "cache", max_sentences=3000)
    for name, value in hugging_face_files(ours.model_proto).items():
        (root / name).write_text(json.dumps(value), encoding="utf-8")
    return ours, transformers.AutoTokenizer.from_pretrained(root), paragraphs[1::2]


def tied(ours: list[int], theirs: list[int], tokenizer) -> bool:
    """Different ids that are the same pieces in another order, spelling the same text: two
    segmentations with exactly the same score, a tie each library breaks its own way."""
    spell = lambda ids: "".join(tokenizer.piece(i) for i in ids)  # noqa: E731
    return Counter(ours) == Counter(theirs) and spell(ours) == spell(theirs)


def assert_same_ids(texts: list[str], ours, theirs) -> None:
    """Identical ids on every text but exact ties, which must stay rare (one line in 40,000 measured)."""
    ties = 0
    for text in texts:
        want, got = ours.encode(text), theirs(text)["input_ids"]
        if got != want:
            assert tied(want, got, ours), f"{text!r}: {got} != {want}"
            ties += 1
    assert ties <= max(1, len(texts) // 1000), f"{ties} ties in {len(texts)} texts"


def test_exported_tokenizer_gives_our_ids_on_the_default_corpus(real_tokenizer):
    ours, theirs, held_out = real_tokenizer
    assert len(held_out) > 500
    assert_same_ids(held_out, ours, theirs)
    for a, b in zip(held_out[:50], held_out[1:51]):
        ids, segments = ours.encode_pair(a, b)
        encoded = theirs(a, b)
        assert (encoded["input_ids"], encoded["token_type_ids"]) == (ids, segments)
    for text in held_out[:200]:
        ids = ours.encode(text)
        assert theirs.decode(ids, skip_special_tokens=True) == ours.decode(ids)


def test_exported_tokenizer_gives_our_ids_on_wikitext(real_tokenizer, datasets_dir):
    ours, theirs, _ = real_tokenizer
    lines = [line for line in (datasets_dir / "wikitext-2" / "valid.txt").read_text(encoding="utf-8").splitlines() if line.strip()]
    assert_same_ids(lines, ours, theirs)


PIECES = ["a", "b", "the", "cat", "7", " ", "  ", "\t", "\n", "é", "e\u0301", "ﬁ", "Ｆ", "①", "☃", "🤗", "中", ".",
          "[MASK]", "[CLS]", "[SEP]"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(st.sampled_from(PIECES), max_size=12))
def test_exported_tokenizer_on_whitespace_unicode_and_special_tokens(real_tokenizer, parts):
    """NFKC folding (ﬁ, Ｆ, ①), byte fallback for unseen characters (☃, 🤗), stripped and
    collapsed whitespace, and [CLS] [SEP] [MASK] matched inside the text, as SentencePiece does
    (a [MASK] absorbing the space before it)."""
    ours, theirs, _ = real_tokenizer
    text = "".join(parts)
    assume(text.strip() not in ("[CLS]", "[SEP]"))  # the one documented difference
    want, got = ours.encode(text), theirs(text)["input_ids"]
    assert got == want or tied(want, got, ours), (text, got, want)


MASKED = [
    "Return a new [MASK] with the same elements.",  # mid-sentence
    "[MASK] a new list with the same elements.",  # the first word
    "The function returns a new [MASK].",  # before punctuation
    "A [MASK] of the [MASK] is returned,  unless\tthe [MASK]:",  # several masks, odd whitespace
    "Call it[MASK]then.",  # no space around the mask
]


def test_the_exported_tokenizer_reads_masks_as_minibert_fill_mask_does(real_tokenizer, tmp_path):
    """transformers' fill-mask pipeline on an export proposes minibert's tokens: the mask takes the
    space before it (no piece of its own), the text after it reads on as in the whole text."""
    ours, _, _ = real_tokenizer
    config = ModelConfig(**{**VARIANTS["roberta"].model, "vocab_size": ours.vocab_size, "hidden_size": 32,
                            "num_heads": 2, "intermediate_size": 64, "num_layers": 2, "max_positions": 64,
                            "initializer_range": 0.5})  # wide weights: no near-ties in the ranking
    torch.manual_seed(0)
    model = MaskedLM(config).eval()
    exported = minibert.save_pretrained(model, tmp_path / "hf", format="hf", tokenizer=ours)
    pipe = transformers.pipeline("fill-mask", model=str(exported), tokenizer=str(exported), device="cpu")
    # each token's text ("string" for ▁string; bytes, specials) as the pipeline's, but for the byte
    # <0x20>: a space, which the exported decoder strips as if it were the ▁ that prefixed the text
    every = [i for i in range(ours.vocab_size) if ours.piece(i) != "<0x20>"]
    assert [ours.token_text(i) for i in every] == [pipe.tokenizer.decode([i]) for i in every]
    space = ours.tokenize_to_ids("a [MASK]")
    assert space == [ours.tokenize_to_ids("a")[0], ours.mask_id]  # ▁a [MASK]: no ▁ of its own
    assert ours.tokenize_to_ids("a [MASK].")[-1] == ours.tokenize_to_ids("a.")[-1]  # "." reads on, no ▁.
    for text, masks in zip(MASKED, minibert.fill_mask(model, MASKED, top_k=5, tokenizer=ours)):
        assert pipe.tokenizer(text)["input_ids"] == ours.join(masked_ids(ours, text))[0], text
        reference = pipe(text, top_k=5)
        reference = [reference] if isinstance(reference[0], dict) else reference  # one mask: not nested
        assert len(masks) == len(reference) == text.count("[MASK]")
        for candidates, expected in zip(masks, reference):
            assert [c.token_id for c in candidates] == [e["token"] for e in expected], text
            assert [c.text for c in candidates] == [e["token_str"] for e in expected], text  # "string", not "▁string"
            torch.testing.assert_close(torch.tensor([c.score for c in candidates]),
                                       torch.tensor([e["score"] for e in expected]), atol=1e-5, rtol=0)


# --- a few steps of every variant, exported ----------------------------------------------------

LEARNED = ("--position-encoding", "learned")
# variant -> (flags, the family it exports as). RoFormer has no shared layers (ALBERT), no
# replaced-token head (ELECTRA) and always segment embeddings (DistilBERT has none): those
# variants export with learned positions, and with rotary ones they are refused (below).
RUNS = {
    "bert": ((), "roformer"),
    "roberta": ((), "roformer"),
    "albert": (LEARNED, "albert"),
    "distilbert": ((), "distilbert"),  # from a teacher with learned positions
    "electra": (LEARNED, "electra"),
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("animals")
    return write_corpus(root / "animals.txt"), root / "cache"


def train(variant, corpus, out, *extra):
    text, cache = corpus
    assert main(tiny_args(variant, text, cache, out, 4, "--eval-every", "4", "--save-every", "4", *extra)) == 0
    return out


@pytest.fixture(scope="module")
def learned_teacher(corpus, tmp_path_factory):
    return train("bert", corpus, tmp_path_factory.mktemp("teacher"), *LEARNED)


@pytest.mark.parametrize("variant", list(RUNS))
def test_a_pretrained_model_exports_with_its_tokenizer(variant, corpus, learned_teacher, tmp_path):
    flags, family = RUNS[variant]
    teacher = ("--teacher", str(learned_teacher)) if variant == "distilbert" else ()
    out = train(variant, corpus, tmp_path / "run", *flags, *teacher)
    head = VARIANTS[variant].head
    model, tokenizer = minibert.from_pretrained(out, head=head), load_tokenizer(out)
    exported = minibert.save_pretrained(model, tmp_path / "hf", format="hf", tokenizer=tokenizer)

    assert sorted(p.name for p in exported.iterdir()) == sorted(  # and no temporary files
        ["config.json", "model.safetensors", "special_tokens_map.json", "tokenizer.json", "tokenizer.model", "tokenizer_config.json"])
    assert transformers.AutoConfig.from_pretrained(exported).model_type == family
    theirs = transformers.AutoTokenizer.from_pretrained(exported)
    reference_class = transformers.ElectraForPreTraining if head == "rtd" else transformers.AutoModelForMaskedLM
    reference = reference_class.from_pretrained(exported).eval()

    texts = manual_paragraphs()[:6]
    batch = tokenizer.batch(texts, max_length=model.config.max_length)
    encoded = theirs(texts, padding=True, truncation=True, return_tensors="pt")
    assert sorted(encoded) == sorted(k for k in batch if k != "token_type_ids" or model.config.type_vocab_size > 1)
    for key, value in encoded.items():
        assert torch.equal(value, batch[key]), key
    with torch.no_grad():
        want, got = model(**batch).logits, reference(**encoded).logits
    real = batch["attention_mask"].bool()
    error = ((got - want)[real].abs().max() / want[real].abs().max()).item()
    assert error < 1e-5, f"logits: relative error {error:.2e}"
    with torch.no_grad():  # a pair runs too: no segment id the model has no embedding for (RoBERTa has one)
        reference(**theirs(texts[0], texts[1], truncation=True, return_tensors="pt"))

    back = minibert.from_pretrained(exported, head=head)  # and home again, unchanged
    for name, value in model.state_dict().items():
        assert torch.equal(back.state_dict()[name], value), name


def rotary_default(variant: str) -> ModelConfig:
    """The architecture a variant trains by default (rotary positions), at a tiny vocabulary."""
    config = ModelConfig(**{**VARIANTS[variant].model, "vocab_size": 400, "max_positions": 32})
    return student_config(ModelConfig(**{**VARIANTS["bert"].model, "vocab_size": 400})) if variant == "distilbert" else config


@pytest.mark.parametrize("variant, reason", [
    ("albert", "roformer does not share layers"),
    ("electra", "roformer has no 'rtd' head"),
    ("distilbert", "roformer has segment embeddings"),
])
def test_rotary_variants_roformer_cannot_hold_are_refused_naming_the_fix(variant, reason, tmp_path):
    config = rotary_default(variant)
    assert config.position_encoding == "rotary"
    model = ReplacedTokenDetector(config) if VARIANTS[variant].head == "rtd" else MaskedLM(config)
    with pytest.raises(ValueError, match=f"{reason}; train with --position-encoding learned") as refused:
        minibert.save_pretrained(model, tmp_path, format="hf")
    assert "\n" not in str(refused.value)
    assert not any(Path(tmp_path).iterdir())


def test_a_bpe_tokenizer_is_refused_before_anything_is_written(corpus, tmp_path):
    text, cache = corpus
    bpe = train_tokenizer(text, vocab_size=400, model_type="bpe", cache_dir=cache)
    model = MaskedLM(ModelConfig(**{**VARIANTS["bert"].model, "vocab_size": bpe.vocab_size, "max_positions": 32}))
    with pytest.raises(ValueError, match="only a unigram SentencePiece model .*model_type='unigram'"):
        minibert.save_pretrained(model, tmp_path / "hf", format="hf", tokenizer=bpe)
    assert not (tmp_path / "hf").exists()
