"""`python -m minibert info DIR`: one line per fact about a checkpoint folder, checked against the
configs that made it — tiny random Hugging Face models of the five families (saved by
transformers), a RoFormer export, a tiny `train.py` run and a fine-tuned classifier — with the
parameter count equal to transformers' own backbone's; a folder it cannot read is one line and
exit status 2."""

import io
import json
import re

import pytest
import sentencepiece as spm
import torch

import minibert
from minibert import MaskedLM, ModelConfig, SequenceClassifier
from minibert.__main__ import main
from minibert.finetune import save_classifier
from minibert.finetune.kinds.sentence_files import LabelMap
from minibert.tools.info import parameters
from minibert.tokenizers import load_tokenizer
from minibert.runs.cli import main as train
from tiny_run import tiny_args, write_corpus

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

WORDPIECE = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *"the cat dog sat on mat a ran . , ##s ##ing".split()]
SIZES = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48, max_position_embeddings=40)
# family -> (model class, config, tokenizer, heads line)
FAMILIES = {
    "bert": ("BertForPreTraining", transformers.BertConfig(vocab_size=len(WORDPIECE), **SIZES),
             "wordpiece", "masked-LM head, next-sentence prediction (NSP)"),
    "roberta": ("RobertaForMaskedLM", transformers.RobertaConfig(vocab_size=50, type_vocab_size=1, **SIZES),
                None, "masked-LM head"),
    "albert": ("AlbertForPreTraining", transformers.AlbertConfig(vocab_size=50, embedding_size=16, **SIZES),
               "spiece", "masked-LM head, sentence-order prediction (SOP)"),
    "distilbert": ("DistilBertForMaskedLM", transformers.DistilBertConfig(
        vocab_size=len(WORDPIECE), dim=32, n_layers=2, n_heads=4, hidden_dim=48, max_position_embeddings=40),
        "wordpiece", "masked-LM head"),
    "electra": ("ElectraForPreTraining", transformers.ElectraConfig(vocab_size=len(WORDPIECE), embedding_size=16, **SIZES),
                "wordpiece", "replaced-token-detection head"),
}


def info(directory, capsys) -> dict[str, str]:
    """The facts `python -m minibert info` prints, by name."""
    assert main(["info", str(directory)]) == 0
    lines = capsys.readouterr().out.splitlines()
    facts = dict(re.split(r"\s{2,}", line, maxsplit=1) for line in lines)
    assert len(facts) == len(lines) and {"family", "architecture", "parameters", "tokenizer", "heads"} <= set(facts)
    return facts


def spiece(directory, vocab_size: int) -> None:
    """A small spiece.model with ALBERT's special pieces."""
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(write_corpus(directory / "corpus.txt", documents=10).read_text().splitlines()),
        model_writer=model, vocab_size=vocab_size, model_type="unigram", pad_id=0, unk_id=1, bos_id=-1, eos_id=-1,
        control_symbols=["[CLS]", "[SEP]", "[MASK]"], minloglevel=2,
    )
    (directory / "corpus.txt").unlink()
    (directory / "spiece.model").write_bytes(model.getvalue())


@pytest.fixture(scope="module")
def hf_dirs(tmp_path_factory):
    """family -> (folder, the transformers model saved there)."""
    dirs = {}
    for family, (cls, config, tokenizer, _) in FAMILIES.items():
        torch.manual_seed(0)
        model = getattr(transformers, cls)(config)
        directory = tmp_path_factory.mktemp(family)
        model.save_pretrained(directory)
        if tokenizer == "wordpiece":
            (directory / "vocab.txt").write_text("".join(t + "\n" for t in WORDPIECE))
        elif tokenizer == "spiece":
            spiece(directory, config.vocab_size)
        dirs[family] = directory, model
    return dirs


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A tiny `python train.py --variant albert` run."""
    root = tmp_path_factory.mktemp("run")
    corpus = write_corpus(root / "corpus.txt")
    assert train(tiny_args("albert", corpus, root / "cache", root / "albert", 2, "--eval-every", "2", "--save-every", "2")) == 0
    return root / "albert"


@pytest.mark.parametrize("family", list(FAMILIES))
def test_a_hugging_face_folder(family, hf_dirs, capsys):
    directory, model = hf_dirs[family]
    cls, config, tokenizer, heads = FAMILIES[family]
    facts = info(directory, capsys)
    role = " discriminator" if family == "electra" else ""
    assert facts["family"] == f"{family}{role} (Hugging Face format, {cls})"
    c = config.to_dict()
    layers, hidden, heads_, ffn = (c.get(k) or c.get(d) for k, d in [
        ("num_hidden_layers", "n_layers"), ("hidden_size", "dim"), ("num_attention_heads", "n_heads"), ("intermediate_size", "hidden_dim")])
    E = c.get("embedding_size", hidden)
    assert facts["architecture"] == ", ".join([
        f"layers {layers}", f"hidden {hidden}", f"heads {heads_}", f"embedding size {E}" + (f" (projected to {hidden})" if E != hidden else ""),
        f"sharing {'all' if family == 'albert' else 'none'}",
        f"learned positions {c['max_position_embeddings']}" + (f", ids from {c['pad_token_id'] + 1}" if family == "roberta" else ""),
        f"intermediate {ffn}", f"vocabulary {c['vocab_size']}", "post-LN",
    ])
    # the number transformers' own backbone has (pooler included where the checkpoint has one)
    count = sum(p.numel() for p in model.base_model.parameters())
    assert re.fullmatch(rf"{count:,} in the encoder \(embeddings, layers(, pooler)?\); heads not counted", facts["parameters"])
    assert ("pooler" in facts["parameters"]) == (family in ("bert", "albert"))
    expected_tokenizer = {
        "wordpiece": f"WordPiece, {len(WORDPIECE)} tokens (vocab.txt)",
        "spiece": f"SentencePiece, {c['vocab_size']} tokens (spiece.model)",
        None: "none",
    }[tokenizer]
    assert facts["tokenizer"] == expected_tokenizer
    assert facts["heads"] == heads
    assert "exports as" not in facts


def test_an_electra_generator_and_a_task_head(hf_dirs, tmp_path, capsys):
    config = FAMILIES["electra"][1]
    transformers.ElectraForMaskedLM(config).save_pretrained(tmp_path / "generator")
    facts = info(tmp_path / "generator", capsys)
    assert facts["family"] == "electra generator (Hugging Face format, ElectraForMaskedLM)"
    assert facts["heads"] == "masked-LM head"
    labelled = transformers.BertConfig(vocab_size=len(WORDPIECE), num_labels=3, **SIZES)
    transformers.BertForSequenceClassification(labelled).save_pretrained(tmp_path / "classifier")
    facts = info(tmp_path / "classifier", capsys)
    assert facts["heads"] == "classifier (BertForSequenceClassification, 3 labels; minibert does not read it)"


def test_a_minibert_run_and_its_roformer_export(run, tmp_path, capsys):
    facts = info(run, capsys)
    stored = json.loads((run / "config.json").read_text())
    config = ModelConfig.from_dict({k: v for k, v in stored.items() if k != "minibert"})
    encoder = minibert.from_pretrained(run)  # the backbone the loop trains, loaded for real
    assert facts["family"] == "minibert's format, pretrained by python train.py --variant albert"
    assert facts["architecture"] == (
        f"layers 2, hidden 32, heads 2, embedding size 16 (projected to 32), sharing all, rotary positions "
        f"(up to {config.max_length} tokens), intermediate 64, vocabulary {config.vocab_size}, post-LN")
    assert facts["parameters"] == f"{sum(p.numel() for p in encoder.parameters()):,} in the encoder (embeddings, layers, pooler); heads not counted"
    tokenizer = load_tokenizer(run)
    assert facts["tokenizer"] == f"SentencePiece, {tokenizer.vocab_size} tokens (tokenizer.model)"
    assert facts["heads"] == "masked-LM head"
    assert facts["exports as"].startswith("no Hugging Face family (rotary positions export only as roformer, and share_layers='all'")

    model = MaskedLM(ModelConfig(**{**config.to_dict(), "embedding_size": None, "share_layers": "none"}))
    exported = minibert.save_pretrained(model, tmp_path / "roformer", format="hf", tokenizer=tokenizer)
    facts = info(exported, capsys)
    assert facts["family"] == "roformer (Hugging Face format, RoFormerForMaskedLM)"
    assert "rotary positions" in facts["architecture"] and "sharing none" in facts["architecture"]
    backbone = transformers.RoFormerForMaskedLM.from_pretrained(exported).roformer
    count = sum(p.numel() for name, p in backbone.named_parameters() if "embed_positions" not in name)  # frozen angles there
    pooler = 32 * 32 + 32  # ours travels beside RoFormer's backbone, which has none
    assert facts["parameters"].startswith(f"{count + pooler:,} in the encoder (embeddings, layers, pooler)")
    assert facts["heads"] == "masked-LM head"


def test_a_fine_tuned_folder(run, tmp_path, capsys):
    tokenizer, encoder = load_tokenizer(run), minibert.from_pretrained(run)
    classifier = SequenceClassifier(encoder.config, 2)
    save_classifier(classifier, tokenizer, LabelMap(["negative", "positive"]), tmp_path / "sst2")
    facts = info(tmp_path / "sst2", capsys)
    assert facts["family"] == "minibert's format, fine-tuned (python train.py finetune)"
    assert facts["heads"] == "SequenceClassifier with 2 labels (negative, positive), pooling cls"
    assert facts["parameters"] == info(run, capsys)["parameters"]


def test_the_count_is_the_papers(capsys):
    assert parameters(ModelConfig.preset("albert-base")).startswith("11,683,584 in the encoder")
    assert parameters(ModelConfig.preset("bert-base")).startswith("109,482,240 in the encoder")


BAD_FOLDERS = {
    "missing": (None, "no checkpoint directory at"),
    "no config.json": ({}, "no config.json in"),
    "corrupt JSON": ({"config.json": "{not json"}, "config.json is not valid JSON"),
    "unknown model_type": ({"config.json": '{"model_type": "gpt2"}'}, "model_type 'gpt2' is not supported; minibert loads bert, roberta"),
}


@pytest.mark.parametrize("case", list(BAD_FOLDERS))
def test_a_folder_it_cannot_read_is_one_line_and_exit_status_2(case, hf_dirs, tmp_path, capsys):
    files, fragment = BAD_FOLDERS[case]
    directory = tmp_path / "folder"
    if files is not None:
        directory.mkdir()
        (directory / "model.safetensors").write_bytes((hf_dirs["bert"][0] / "model.safetensors").read_bytes())
        for name, text in files.items():
            (directory / name).write_text(text)
    assert main(["info", str(directory)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and "Traceback" not in captured.err
    assert captured.err.startswith("python -m minibert: error: ") and fragment in captured.err, captured.err
