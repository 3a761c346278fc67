"""A user's round of commands on Hugging Face folders of each family (inspect, fill-mask,
continue pretraining, fine-tune, export back): switching among the five families changes only
the folder's name.

For each family a small random checkpoint is saved by transformers with its tokenizer, in
today's layout (`tokenizer.json` + `tokenizer_config.json`, all that transformers 5 writes)
and in the legacy one (`vocab.txt`, `vocab.json` + `merges.txt` or `spiece.model`). Each
folder then goes through the same commands: `python -m minibert info`, `fill-mask` (masked-LM
families; top-k ids equal to transformers' fill-mask pipeline; `detect` for ELECTRA), `python train.py --init DIR`
(continued pretraining) and `python train.py finetune --init DIR ...` for a few steps, and export
back to Hugging Face (ids and logits identical).
"""

from __future__ import annotations

import io
import json
import random
from pathlib import Path

import pytest
import torch

import minibert
from minibert.__main__ import main as minibert_main
from minibert.finetune import main as finetune_main
from minibert.tokenizers import load_tokenizer
from minibert.runs.cli import main as train_main
from tiny_run import strip_model_flags, tiny_args, write_corpus

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")
spm = pytest.importorskip("sentencepiece")
transformers.logging.set_verbosity_error()

FAMILIES = ("bert", "roberta", "albert", "distilbert", "electra")
LAYOUTS = ("today", "legacy")
MASKED_LM = ("bert", "roberta", "albert", "distilbert")  # ELECTRA's discriminator has no MLM head
WORDS = ("the a cat dog bird fish sat ran saw ate on in near under mat park river house big small red green "
         "quick slow happy sad and but then . , ! ?").split()
TINY = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37,
            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def sentences(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS[:-4], k=rng.randint(4, 10))) + rng.choice([" .", " !", " ?"]) for _ in range(n)]


# --- one vocabulary per tokenizer kind, built the way each family's is ----------------------------


def wordpiece_vocab() -> list[str]:
    pieces = sorted({c for w in WORDS for c in w})
    return ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, *(f"##{c}" for c in pieces if f"##{c}" not in WORDS)]


def byte_bpe_files(directory: Path) -> None:
    bpe = tokenizers.ByteLevelBPETokenizer()
    bpe.train_from_iterator(sentences(400, 0), vocab_size=400, min_frequency=1,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>"])
    vocab = json.loads(bpe.to_str())["model"]["vocab"]
    bpe.add_special_tokens(["<mask>"])  # RoBERTa's <mask> is the last id
    bpe.save_model(str(directory))
    vocab["<mask>"] = len(vocab)
    (directory / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False))


def spiece_file(directory: Path) -> None:
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences(400, 0)), model_writer=model, vocab_size=80, model_type="unigram",
        pad_id=0, unk_id=1, bos_id=-1, eos_id=-1, control_symbols=["[CLS]", "[SEP]", "[MASK]"],
        hard_vocab_limit=False, minloglevel=2,
    )
    (directory / "spiece.model").write_bytes(model.getvalue())


def legacy_tokenizer(family: str, directory: Path) -> None:
    """The files of the older ("slow") tokenizers, with no tokenizer.json."""
    if family == "roberta":
        byte_bpe_files(directory)
    elif family == "albert":
        spiece_file(directory)
    else:
        (directory / "vocab.txt").write_text("".join(t + "\n" for t in wordpiece_vocab()))
    settings = {"tokenizer_class": {"roberta": "RobertaTokenizer", "albert": "AlbertTokenizer"}.get(family, "BertTokenizer"),
                "do_lower_case": True}
    if family == "roberta":  # as transformers 4 saved it: <mask> takes the space before it
        settings["mask_token"] = {"__type": "AddedToken", "content": "<mask>", "lstrip": True, "rstrip": False,
                                  "normalized": False, "single_word": False, "special": True}
    (directory / "tokenizer_config.json").write_text(json.dumps(settings))


def oracle_tokenizer(directory: Path):
    """transformers' AutoTokenizer on the folder. A legacy ALBERT folder is converted as
    AutoTokenizer converts it, from spiece.model's pieces, scores and character map (its own
    conversion needs protobuf, which the test environment does not install)."""
    if (directory / "spiece.model").is_file() and not (directory / "tokenizer.json").is_file():
        from minibert.interop.tokenizers.json_export import normalizer_spec

        proto = (directory / "spiece.model").read_bytes()
        sp = spm.SentencePieceProcessor(model_proto=proto)
        vocab = [(sp.id_to_piece(i), sp.get_score(i)) for i in range(sp.get_piece_size())]
        return transformers.AlbertTokenizer(vocab=vocab, _spm_precompiled_charsmap=normalizer_spec(proto)["charsmap"])
    return transformers.AutoTokenizer.from_pretrained(directory)


# --- the checkpoints -------------------------------------------------------------------------------


def hf_model(family: str, vocab_size: int):
    torch.manual_seed(0)
    if family == "bert":
        return transformers.BertForPreTraining(transformers.BertConfig(vocab_size=vocab_size, max_position_embeddings=64, **TINY))
    if family == "roberta":
        return transformers.RobertaForMaskedLM(transformers.RobertaConfig(
            vocab_size=vocab_size, max_position_embeddings=66, type_vocab_size=1, pad_token_id=1, **TINY))
    if family == "albert":
        return transformers.AlbertForPreTraining(transformers.AlbertConfig(
            vocab_size=vocab_size, embedding_size=16, max_position_embeddings=64, **TINY))
    if family == "distilbert":
        return transformers.DistilBertForMaskedLM(transformers.DistilBertConfig(
            vocab_size=vocab_size, dim=32, n_layers=2, n_heads=2, hidden_dim=37, dropout=0.0, attention_dropout=0.0,
            max_position_embeddings=64))
    return transformers.ElectraForPreTraining(transformers.ElectraConfig(
        vocab_size=vocab_size, embedding_size=16, max_position_embeddings=64, **TINY))


@pytest.fixture(scope="module", params=[(f, l) for f in FAMILIES for l in LAYOUTS], ids=lambda p: f"{p[0]}-{p[1]}")
def checkpoint(request, tmp_path_factory) -> tuple[str, str, Path]:
    """(family, layout, folder): a random checkpoint and its tokenizer, as transformers saves them."""
    family, layout = request.param
    legacy = tmp_path_factory.mktemp(f"{family}-legacy-files")
    legacy_tokenizer(family, legacy)
    oracle = oracle_tokenizer(legacy)
    directory = tmp_path_factory.mktemp(f"{family}-{layout}")
    if layout == "today":
        oracle.save_pretrained(directory)
        assert not {"vocab.txt", "vocab.json", "spiece.model"} & {p.name for p in directory.iterdir()}
    else:
        legacy_tokenizer(family, directory)
    hf_model(family, len(oracle)).eval().save_pretrained(directory)
    return family, layout, directory


TEXTS = ["the cat sat on the mat .", "a big dog ran near the river !", "then the small bird saw a fish ?"]
MASKED = ["the cat [MASK] on the mat .", "[MASK] big dog ran near the river !", "then the small bird saw a [MASK] ?"]


def test_ids_equal_transformers(checkpoint):
    family, layout, directory = checkpoint
    ours, oracle = load_tokenizer(directory), oracle_tokenizer(directory)
    for a, b in zip(TEXTS, TEXTS[1:] + TEXTS[:1]):
        assert ours.encode(a) == oracle(a)["input_ids"], (a, family, layout)
        assert ours.encode_pair(a, b)[0] == oracle(a, b)["input_ids"], (a, b, family, layout)


def test_info_names_the_family_and_tokenizer(checkpoint, capsys):
    family, layout, directory = checkpoint
    assert minibert_main(["info", str(directory)]) == 0
    facts = dict(line.split(None, 1) for line in capsys.readouterr().out.splitlines() if line.strip())
    assert facts["family"].startswith(family)
    kind = {"roberta": "byte-level BPE", "albert": "Unigram" if layout == "today" else "SentencePiece"}.get(family, "WordPiece")
    files = {"roberta": "vocab.json + merges.txt", "albert": "spiece.model"}.get(family, "vocab.txt")
    assert facts["tokenizer"] == f"{kind}, {len(oracle_tokenizer(directory))} tokens ({'tokenizer.json' if layout == 'today' else files})"
    backbone = hf_model(family, len(oracle_tokenizer(directory))).base_model
    assert facts["parameters"].startswith(f"{sum(p.numel() for p in backbone.parameters()):,} in the encoder")


def test_fill_mask_agrees_with_the_pipeline_and_detect_with_the_discriminator(checkpoint):
    family, layout, directory = checkpoint
    if family not in MASKED_LM:  # an ELECTRA discriminator: `detect` instead of fill-mask
        oracle, discriminator = oracle_tokenizer(directory), transformers.ElectraForPreTraining.from_pretrained(directory)
        for text, judgements in zip(TEXTS, minibert.detect_replaced(str(directory), TEXTS)):
            ids = oracle(text, return_tensors="pt")
            with torch.no_grad():
                expected = discriminator(**ids).logits[0, 1:-1].sigmoid()  # [CLS] and [SEP] are not shown
            assert [j.token_id for j in judgements] == ids["input_ids"][0, 1:-1].tolist()
            torch.testing.assert_close(torch.tensor([j.probability for j in judgements]), expected, rtol=0, atol=1e-5)
        return
    oracle = oracle_tokenizer(directory)
    texts = [t.replace("[MASK]", oracle.mask_token) for t in MASKED]
    pipe = transformers.pipeline("fill-mask", model=str(directory), tokenizer=oracle, top_k=5, device="cpu")
    ours = minibert.fill_mask(str(directory), texts, top_k=5)
    for text, got in zip(texts, ours):
        expected = pipe(text)
        assert [c.token_id for c in got[0]] == [c["token"] for c in expected], (text, family, layout)


def test_finetune_init_runs_from_the_folder(checkpoint, tmp_path):
    family, layout, directory = checkpoint
    rows = [(s, "positive" if "happy" in s else "negative") for s in sentences(40, 3)]
    for name, part in (("train.tsv", rows[:32]), ("dev.tsv", rows[32:])):
        (tmp_path / name).write_text("sentence\tlabel\n" + "".join(f"{s}\t{l}\n" for s, l in part))
    out = tmp_path / "out"
    assert finetune_main(["--init", str(directory), "--train", str(tmp_path / "train.tsv"), "--dev",
                          str(tmp_path / "dev.tsv"), "--out", str(out), "--device", "cpu", "--steps", "3",
                          "--batch-size", "8", "--max-len", "32"]) == 0
    assert json.loads((out / "eval.json").read_text())["examples"] == 8


# The variant whose objectives suit each family's checkpoint: one-segment models (RoBERTa,
# DistilBERT) take full sentences, not sentence pairs; a DistilBERT student's own variant needs a
# teacher, so it continues as RoBERTa's recipe does.
CONTINUE_AS = {"bert": "bert", "roberta": "roberta", "albert": "albert", "distilbert": "roberta", "electra": "electra"}


def test_continued_pretraining_init_runs_from_the_folder(checkpoint, tmp_path):
    family, layout, directory = checkpoint
    variant = CONTINUE_AS[family]
    args = strip_model_flags(tiny_args(variant, write_corpus(tmp_path / "corpus.txt", documents=12), tmp_path / "cache",
                                       tmp_path / "out", 2))
    assert train_main([*args, "--init", str(directory)]) == 0
    assert load_tokenizer(tmp_path / "out").encode(TEXTS[0]) == load_tokenizer(directory).encode(TEXTS[0])


def test_export_back_to_hugging_face_is_identical(checkpoint, tmp_path):
    family, layout, directory = checkpoint
    head = "mlm" if family in MASKED_LM else "rtd"
    model = minibert.from_pretrained(directory, head=head)
    exported = minibert.save_pretrained(model, tmp_path / "export", format="hf", tokenizer=load_tokenizer(directory),
                                        family=family)
    before, after = oracle_tokenizer(directory), oracle_tokenizer(exported)
    for text in TEXTS:
        assert after(text)["input_ids"] == before(text)["input_ids"]
    auto = transformers.AutoModelForMaskedLM if head == "mlm" else transformers.ElectraForPreTraining
    original, again = auto.from_pretrained(directory).eval(), auto.from_pretrained(exported).eval()
    batch = before(TEXTS, padding=True, return_tensors="pt")
    with torch.no_grad():
        torch.testing.assert_close(again(**batch).logits, original(**batch).logits, rtol=0, atol=1e-5)


def test_a_pre_split_word_reads_as_inside_a_sentence(checkpoint):
    """Tagging tasks come split into words; each word's ids must be those it has inside the
    sentence (RoBERTa's "Ġsat", not "sat"), as transformers gives with is_split_into_words."""
    family, layout, directory = checkpoint
    ours = load_tokenizer(directory)
    oracle = (transformers.AutoTokenizer.from_pretrained(directory, add_prefix_space=True) if family == "roberta"
              else oracle_tokenizer(directory))  # transformers asks for add_prefix_space on split words
    words = TEXTS[1].split()
    expected = oracle(words, is_split_into_words=True, add_special_tokens=False)["input_ids"]
    assert [i for word in words for i in ours.tokenize_word(word)] == expected
