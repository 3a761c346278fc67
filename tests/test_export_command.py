"""`python -m minibert export CHECKPOINT OUT`: the export is read back by transformers before it
becomes OUT, and a wrong one is refused in one line that names what differs, OUT untouched.

The checkpoints are tiny: a bert run of a few steps (the default run's shape: rotary positions,
so it exports as RoFormer) and models built with wide weights (whose outputs depend visibly on
every tensor). A broken name map is made by changing one entry of RoFormer's table in
families.py for the length of a test. What no built-in family holds (the default albert,
electra and distilbert shapes, pre-LN, attention-only sharing, a fine-tuned classifier) exports
as transformers' custom code, loaded in one process where minibert cannot be imported.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import minibert
from minibert import Encoder, MaskedLM, ReplacedTokenDetector
from minibert.__main__ import main
from minibert.corpus.vocabulary import train_tokenizer
from minibert.finetune.checkpoint import load_classifier, save_classifier
from minibert.finetune.kinds.sentence_files import LabelMap
from minibert.heads import SequenceClassifier
from minibert.operations.files import TMP_PREFIX
from minibert.interop.huggingface import custom_code
from minibert.interop.huggingface.export_check import CUSTOM_TOLERANCE, TOLERANCE
from minibert.interop.huggingface.families import ROFORMER
from minibert.tokenizers import load_tokenizer
from minibert.tools.info import describe
from minibert.runs.cli import main as train_main
from tiny_run import tiny_args, wide_config, write_corpus

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
    config = wide_config(tokenizer.vocab_size, variant, **changes)
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


# --- transformers' custom code: the models no built-in family holds ----------------------------

# name -> (variant, model class, changes): the default albert, electra and distilbert runs' shapes,
# pre-LN, attention-only sharing and (below) a fine-tuned classifier
CUSTOM = {
    "albert": ("albert", MaskedLM, {}),  # rotary positions and shared layers: the Quick start's
    "electra": ("electra", ReplacedTokenDetector, {}),  # rotary positions and a replaced-token head
    "distilbert": ("distilbert", MaskedLM, {}),  # rotary positions and no segment embeddings
    "pre-ln": ("bert", MaskedLM, {"norm": "pre"}),
    "attention-sharing": ("bert", Encoder, {"share_layers": "attention"}),
}
# minibert's class -> the Auto class that loads its export, and the class that gives
AUTO = {MaskedLM: ("AutoModelForMaskedLM", "MinibertForMaskedLM"), Encoder: ("AutoModel", "MinibertModel"),
        ReplacedTokenDetector: ("AutoModelForPreTraining", "MinibertForPreTraining"),
        SequenceClassifier: ("AutoModelForSequenceClassification", "MinibertForSequenceClassification")}
TEXTS = ["The small cat sees the dog.", "A [MASK] eats the green fish near the river, and the slow cow hears it.", "Hi."]

# Run where minibert cannot be imported: each folder loaded by its Auto class, its outputs on the
# parent's inputs, and transformers' fill-mask pipeline on the first masked-LM folder.
ELSEWHERE = """
import sys
sys.modules["minibert"] = None  # `import minibert` now raises ImportError: a folder must carry all it runs
import torch, transformers
transformers.logging.set_verbosity_error()
try:
    import minibert
except ImportError:
    importable = False
else:
    importable = True
jobs, results = torch.load(sys.argv[1]), {"minibert importable": importable}
for name, job in jobs.items():
    model = getattr(transformers, job["auto"]).from_pretrained(job["folder"], trust_remote_code=True).eval()
    with torch.no_grad():
        out = model(**job["inputs"])
    results[name] = (type(model).__name__, out.logits if "logits" in out else out.last_hidden_state)
pipe = transformers.pipeline("fill-mask", model=jobs["albert"]["folder"], trust_remote_code=True, device="cpu")
results["fill-mask"] = [[c["token"] for c in pipe(text, top_k=5)] for text in sys.argv[3:]]
torch.save(results, sys.argv[2])
"""


def classifier_checkpoint(corpus, folder: Path) -> Path:
    """A fine-tuned classifier as `python train.py finetune` saves it: mean pooling, three labels."""
    tokenizer = load_tokenizer(wide_model(corpus, folder / "base", "albert"))
    torch.manual_seed(1)
    model = SequenceClassifier(minibert.from_pretrained(folder / "base").config, 3, pooling="mean")
    return save_classifier(model, tokenizer, LabelMap(["negative", "neutral", "positive"]), folder / "classifier")


@pytest.fixture(scope="module")
def custom_exports(corpus, tmp_path_factory):
    """name -> (checkpoint, OUT, what the export printed); name -> (OUT, the minibert model it is
    loaded as, its tokenizer); and what a process without minibert computed from each."""
    root = tmp_path_factory.mktemp("custom")
    checkpoints = {name: wide_model(corpus, root / name, variant, kind, **changes)
                   for name, (variant, kind, changes) in CUSTOM.items()}
    checkpoints["classifier"] = classifier_checkpoint(corpus, root / "fine-tuned")
    exports, loads = {}, {}
    for name, checkpoint in checkpoints.items():
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            assert main(["export", str(checkpoint), str(root / "out" / name)]) == 0
        exports[name] = checkpoint, root / "out" / name, printed.getvalue()
        loads[name] = (root / "out" / name, *ours(checkpoint))
    # AutoModel reads the encoder of a task model's folder (transformers strips the `encoder.` prefix)
    loads["albert's encoder"] = root / "out" / "albert", minibert.from_pretrained(checkpoints["albert"]), loads["albert"][2]
    jobs = {name: {"folder": str(out), "auto": AUTO[type(model)][0], "inputs": inputs(model, tokenizer)}
            for name, (out, model, tokenizer) in loads.items()}
    torch.save(jobs, root / "jobs.pt")
    env = {"PATH": os.environ["PATH"], "HF_MODULES_CACHE": str(root / "modules"), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-I", "-c", ELSEWHERE, root / "jobs.pt", root / "results.pt", *MASKED],
                          cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return exports, loads, torch.load(root / "results.pt")


def ours(checkpoint: Path):
    """The model and tokenizer minibert loads from a checkpoint (a classifier's too)."""
    if (checkpoint / "labels.json").is_file():
        return load_classifier(checkpoint)[:2]
    return minibert.from_pretrained(checkpoint, head=saved_head(checkpoint)), load_tokenizer(checkpoint)


def inputs(model, tokenizer) -> dict:
    """TEXTS as one batch, a third of it padding (the encoder unpads it: kernels/unpad.py runs too),
    with token_type_ids where the model has segments, as the exported tokenizer gives them."""
    batch = tokenizer.batch(TEXTS, max_length=model.config.max_length)
    return {k: v for k, v in batch.items() if k != "token_type_ids" or model.config.type_vocab_size > 1}


def saved_head(checkpoint: Path) -> str | None:
    return json.loads((checkpoint / "config.json").read_text())["minibert"]["head"]


MASKED = ["The big [MASK] chases the red bird.", "A [MASK] sees the goat near the barn."]


def test_what_no_family_holds_exports_as_custom_code_checked_by_transformers(custom_exports, transformers):
    exports, _, _ = custom_exports
    for name, (_, out, printed) in exports.items():
        first, checked = printed.splitlines()[:2]
        assert "(minibert: transformers' custom code, load it with trust_remote_code=True)" in first, name
        assert "(trust_remote_code=True) and AutoTokenizer" in checked, name
        assert float(re.search(r"largest difference (\S+)", printed)[1]) <= CUSTOM_TOLERANCE, name
        assert {"modeling_minibert.py", "configuration_minibert.py", "model.py", "tokenizer.json"} <= set(contents(out))
    assert ": MinibertForSequenceClassification (" in exports["classifier"][2]


def test_each_folder_runs_without_minibert_and_computes_minibert_outputs(custom_exports, transformers):
    _, loads, results = custom_exports
    assert results.pop("minibert importable") is False  # the process really ran without minibert
    for name, (out, model, tokenizer) in loads.items():
        batch = inputs(model, tokenizer)
        with torch.no_grad():
            output = model(**batch)
        want = output.logits if hasattr(output, "logits") else output.last_hidden_state
        architecture, got = results[name]
        assert architecture == AUTO[type(model)][1], name
        rows = slice(None) if name == "classifier" else batch["attention_mask"].bool()
        assert (got - want)[rows].abs().max() <= CUSTOM_TOLERANCE * max(1.0, want[rows].abs().max()), name


def test_the_fill_mask_pipeline_proposes_what_minibert_fill_mask_does(custom_exports, transformers):
    exports, _, results = custom_exports
    checkpoint = exports["albert"][0]
    model, tokenizer = ours(checkpoint)
    expected = [[c.token_id for c in masks[0]] for masks in minibert.fill_mask(model, MASKED, top_k=5, tokenizer=tokenizer)]
    assert results["fill-mask"] == expected


def test_the_folder_needs_only_torch_and_transformers_and_is_read_back_by_minibert(custom_exports, transformers):
    from transformers.dynamic_module_utils import get_imports, get_relative_import_files

    exports, _, _ = custom_exports
    for name, (checkpoint, out, _) in exports.items():
        code = {path.name for path in out.glob("*.py")}
        reached = {Path(f).name for f in get_relative_import_files(out / "modeling_minibert.py")}
        assert reached | {"modeling_minibert.py"} == code, name  # transformers' loader copies every file, and no other
        third_party = {module for f in code for module in get_imports(out / f)} - set(sys.stdlib_module_names)
        assert third_party <= {"torch", "transformers"}, name
        model, _ = ours(checkpoint)
        head = None if name == "classifier" else saved_head(checkpoint)
        back = minibert.from_pretrained(out, head=head)
        mine = model.encoder.state_dict() if name == "classifier" else model.state_dict()
        assert back.config == model.config and all(torch.equal(back.state_dict()[k], v) for k, v in mine.items()), name
        assert describe(out)["family"].startswith("minibert, as transformers' custom code"), name


def test_a_custom_code_export_that_computes_otherwise_is_refused(corpus, transformers, tmp_path, capsys, monkeypatch):
    checkpoint = wide_model(corpus, tmp_path / "albert", "albert")
    written = custom_code.custom_config
    monkeypatch.setattr(custom_code, "custom_config", lambda *args: {**written(*args), "layer_norm_eps": 0.5})
    line = refusal(*export(capsys, checkpoint, tmp_path / "out")[::2])
    assert "MinibertForMaskedLM computes other logits than minibert" in line and "first at the embeddings" in line
    assert not (tmp_path / "out").exists() and no_leftovers(tmp_path)
