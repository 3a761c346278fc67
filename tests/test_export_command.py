"""`python -m minibert export CHECKPOINT OUT`: the export is read back by transformers before it
becomes OUT, and a wrong one is refused in one line that names what differs, OUT untouched.

The checkpoints are tiny: a bert run of a few steps (the default run's shape: rotary positions,
so it exports as RoFormer), a model built with wide weights (whose outputs depend visibly on
every tensor) and the default albert's shape, which no Hugging Face family holds. A broken name
map is made by changing one entry of RoFormer's table in families.py for the length of a test.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import torch

import minibert
from minibert import Encoder, MaskedLM, ModelConfig, ReplacedTokenDetector
from minibert.__main__ import main
from minibert.corpus.vocabulary import train_tokenizer
from minibert.operations.files import TMP_PREFIX
from minibert.objectives.kd import student_config
from minibert.interop.huggingface.export_check import TOLERANCE
from minibert.interop.huggingface.families import ROFORMER
from minibert.runs.cli import main as train_main
from minibert.variants import VARIANTS
from tiny_run import tiny_args, write_corpus

ERROR = "python -m minibert: error: "
QKV = "attention.{i}.fn.qkv"
DOWN = "feed_forward.{i}.fn.down"


@pytest.fixture
def transformers():
    module = pytest.importorskip("transformers")
    module.logging.set_verbosity_error()
    return module


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("animals")
    return write_corpus(root / "animals.txt"), root / "cache"


@pytest.fixture(scope="module")
def bert_run(corpus, tmp_path_factory) -> Path:
    """A few steps of `python train.py --variant bert` at a tiny size: what a user exports."""
    text, cache = corpus
    out = tmp_path_factory.mktemp("bert") / "run"
    assert train_main(tiny_args("bert", text, cache, out, 4, "--eval-every", "4", "--save-every", "4")) == 0
    return out


def wide_model(corpus, folder: Path, variant: str = "bert", kind=MaskedLM, **changes) -> Path:
    """A variant's architecture at a tiny size with wide random weights, saved with a tokenizer
    as a run saves it: its outputs move visibly when any tensor is exchanged for another."""
    text, cache = corpus
    tokenizer = train_tokenizer(text, vocab_size=400, cache_dir=cache)
    tiny = dict(vocab_size=tokenizer.vocab_size, hidden_size=32, num_heads=2, intermediate_size=64, max_positions=40,
                initializer_range=0.5)
    config = ModelConfig(**{**VARIANTS[variant].model, **tiny, **changes})
    if variant == "distilbert":  # a student: its teacher's shape, half the layers, no segments
        config = student_config(ModelConfig(**{**VARIANTS["bert"].model, **tiny, **changes}))
    torch.manual_seed(0)
    return minibert.save_pretrained(kind(config), folder, tokenizer=tokenizer)


@pytest.fixture(scope="module")
def wide_bert(corpus, tmp_path_factory) -> Path:
    return wide_model(corpus, tmp_path_factory.mktemp("wide") / "model")


def export(capsys, *args: str) -> tuple[int, str, str]:
    status = main(["export", *map(str, args)])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def refusal(status: int, err: str) -> str:
    """The one line of a refused command (exit status 2, no traceback), without its prefix."""
    assert status == 2, err
    assert err.startswith(ERROR) and err.count("\n") == 1, err
    return err.removeprefix(ERROR).strip()


def contents(folder: Path) -> dict[str, bytes]:
    """Every file under `folder`, by its path inside it."""
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


def no_leftovers(folder: Path) -> bool:
    return not any(path.name.startswith(TMP_PREFIX) for path in folder.iterdir())


def test_a_bert_run_exports_with_its_check_printed(bert_run, transformers, tmp_path, capsys):
    out = tmp_path / "bert-hf"
    status, printed, err = export(capsys, bert_run, out)
    assert status == 0, err
    lines = printed.splitlines()
    assert lines[0].startswith(f"wrote {out}: RoFormerForMaskedLM (roformer) with its tokenizer")
    assert lines[1].startswith(f"checked with transformers {transformers.__version__}, loaded by AutoModelForMaskedLM")
    assert re.search(r"ids +input_ids, token_type_ids, attention_mask equal", printed)
    assert "roformer.pooler.dense.weight" in printed and "RoFormerForMaskedLM has no pooler" in printed
    difference = float(re.search(r"logits +largest difference (\S+)", printed)[1])
    assert 0 <= difference <= TOLERANCE
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= set(contents(out)) and no_leftovers(tmp_path)
    model = minibert.from_pretrained(bert_run, head="mlm")
    back = minibert.from_pretrained(out, head="mlm")  # and home again, unchanged
    assert all(torch.equal(back.state_dict()[name], value) for name, value in model.state_dict().items())


LEARNED = {"position_encoding": "learned"}


@pytest.mark.parametrize("variant, kind, changes, architecture, unused", [
    ("bert", MaskedLM, LEARNED, "BertForMaskedLM", "bert.pooler.dense"),  # the MLM class has no pooler
    ("bert", Encoder, LEARNED, "BertModel", None),  # the bare encoder keeps it
    ("bert", Encoder, {}, "RoFormerModel", "pooler.dense"),  # a bare model: no prefix
    ("roberta", MaskedLM, {}, "RoFormerForMaskedLM", "roformer.pooler.dense"),
    ("roberta", MaskedLM, LEARNED, "RobertaForMaskedLM", "roberta.pooler.dense"),
    ("albert", MaskedLM, LEARNED, "AlbertForMaskedLM", "albert.pooler"),
    ("electra", ReplacedTokenDetector, LEARNED, "ElectraForPreTraining", None),
    ("distilbert", MaskedLM, LEARNED, "DistilBertForMaskedLM", None),
])
def test_every_family_passes_its_check(corpus, transformers, tmp_path, capsys, variant, kind, changes, architecture, unused):
    checkpoint = wide_model(corpus, tmp_path / "model", variant, kind, **changes)
    status, printed, err = export(capsys, checkpoint, tmp_path / "hf")
    assert status == 0, err
    assert f": {architecture} (" in printed.splitlines()[0]
    weights = re.search(r"weights +(.*)", printed)[1]
    assert weights == "every one read as written" if unused is None else f"{unused}.bias, {unused}.weight left out" in weights
    assert float(re.search(r"largest difference (\S+)", printed)[1]) <= TOLERANCE * 10  # 10: the largest logit's scale at most


def test_a_weight_under_the_wrong_name_is_refused_naming_it(bert_run, transformers, tmp_path, capsys, monkeypatch):
    out = tmp_path / "bert-hf"
    assert export(capsys, bert_run, out)[0] == 0
    before = contents(out)
    right = ROFORMER.backbone[DOWN]
    monkeypatch.setitem(ROFORMER.backbone, DOWN, right + "_renamed")
    line = refusal(*export(capsys, bert_run, out, "--overwrite")[::2])
    assert "RoFormerForMaskedLM does not read the weights as minibert wrote them" in line
    missing, unexpected = line.split("missing (left at random values) ")[1].split("; unexpected (not read) ")
    for layer in range(2):  # both layers' tensors, named where transformers looked and where they were written
        written = f"roformer.{right.format(i=layer)}"
        assert f"'{written}.weight'" in missing and f"'{written}_renamed.weight'" in unexpected
    assert f"{out} left untouched" in line
    assert contents(out) == before and no_leftovers(tmp_path)


def test_tensors_exchanged_for_one_another_are_refused_by_the_outputs(wide_bert, transformers, tmp_path, capsys, monkeypatch):
    query, key, value = ROFORMER.backbone[QKV]
    monkeypatch.setitem(ROFORMER.backbone, QKV, (key, query, value))  # every name loads, into the wrong tensor
    out = tmp_path / "new" / "hf"
    line = refusal(*export(capsys, wide_bert, out)[::2])
    gap = float(re.search(r"largest difference (\S+)", line)[1])
    assert "transformers' RoFormerForMaskedLM computes other logits than minibert" in line and gap > TOLERANCE
    assert re.search(r"first at layer 0, written as 'roformer\.encoder\.layer\.0\.", line)
    assert f"'roformer.{key.format(i=0)}.weight'" in line  # the swapped tensors come first, in the model's order
    assert not out.exists() and no_leftovers(out.parent)


def test_a_model_no_family_holds_gets_the_refusal_save_pretrained_gives(corpus, tmp_path, capsys):
    """The default albert: rotary positions (RoFormer only) and shared layers (ALBERT only)."""
    config = ModelConfig(**{**VARIANTS["albert"].model, "vocab_size": 400, "hidden_size": 32, "num_heads": 2,
                            "intermediate_size": 64, "embedding_size": 16, "max_positions": 32})
    assert (config.position_encoding, config.share_layers) == ("rotary", "all")
    model = MaskedLM(config)
    with pytest.raises(ValueError) as today:
        minibert.save_pretrained(model, tmp_path / "direct", format="hf")
    checkpoint = minibert.save_pretrained(model, tmp_path / "albert")
    assert refusal(*export(capsys, checkpoint, tmp_path / "out")[::2]) == str(today.value)
    assert not (tmp_path / "out").exists() and no_leftovers(tmp_path)


def test_without_transformers_the_export_says_the_check_was_skipped(bert_run, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)  # `import transformers` now raises ImportError
    out = tmp_path / "bert-hf"
    status, printed, err = export(capsys, bert_run, out)
    assert status == 0, err
    assert printed.splitlines()[-1].startswith("check skipped: transformers is not installed")
    assert "pip install transformers" in printed and "checked with" not in printed
    assert (out / "model.safetensors").is_file() and (out / "tokenizer.json").is_file()


def test_out_is_never_clobbered(bert_run, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)  # these refusals come before any check
    out = tmp_path / "hf"
    assert export(capsys, bert_run, out)[0] == 0
    kept = contents(out)
    line = refusal(*export(capsys, bert_run, out)[::2])
    assert line == f"{out} already holds a model; pass --overwrite to replace it, or choose another OUT"
    assert contents(out) == kept

    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    assert "holds 'notes.txt', which an export does not write" in refusal(*export(capsys, bert_run, other)[::2])
    (out / "notes.txt").write_text("mine")
    assert "'notes.txt'" in refusal(*export(capsys, bert_run, out, "--overwrite")[::2])
    assert (other / "notes.txt").read_text() == (out / "notes.txt").read_text() == "mine"
    (out / "notes.txt").unlink()

    run_files = contents(bert_run)  # a training run holds a model, and its checkpoints beside it
    assert "'checkpoints'" in refusal(*export(capsys, out, bert_run, "--overwrite")[::2])
    assert "would replace the checkpoint being exported" in refusal(*export(capsys, bert_run, bert_run, "--overwrite")[::2])
    assert "would replace the checkpoint" in refusal(*export(capsys, bert_run, bert_run.parent, "--overwrite")[::2])
    assert contents(bert_run) == run_files

    (tmp_path / "file").write_text("x")
    assert refusal(*export(capsys, bert_run, tmp_path / "file")[::2]) == f"OUT {tmp_path / 'file'} is a file; choose a folder"

    assert export(capsys, bert_run, out, "--overwrite")[0] == 0  # a model folder, replaced as asked
    (tmp_path / "empty").mkdir()
    assert export(capsys, bert_run, tmp_path / "empty")[0] == 0  # an empty folder is no model to keep
    assert no_leftovers(tmp_path)
