"""`python -m minibert export` of a fine-tuned model: transformers' own class of its family
wherever one computes minibert's head exactly (interop/huggingface/task_heads.py), custom code
saying why where none does, and a model card written from what fine-tuning recorded. A span
extractor (question answering) becomes each family's *ForQuestionAnswering, or custom code.

The classifiers are tiny, with wide random weights (their logits move visibly when any tensor
is wrong), saved as `python train.py finetune` saves them; one is fine-tuned for a few steps
for its eval.json. A process where minibert cannot be imported loads every built-in export
without trust_remote_code and runs transformers' pipelines on it.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import minibert
from minibert import ModelConfig
from minibert.__main__ import main
from minibert.corpus.vocabulary import train_tokenizer
from minibert.finetune import main as finetune_main
from minibert.finetune.checkpoint import load_classifier, save_classifier
from minibert.finetune.kinds.sentence_files import LabelMap
from minibert.heads import SequenceClassifier, SpanExtractor, TokenClassifier
from minibert.interop import huggingface
from minibert.interop.huggingface import export as export_module
from minibert.interop.huggingface.families import ELECTRA, FAMILIES
from minibert.interop.huggingface.task_heads import in_family_layout, misfit
from tiny_run import wide_config, write_corpus

LEARNED = {"position_encoding": "learned"}
# name -> (variant, ModelConfig changes, outputs, model class, the class transformers loads it as)
BUILT_IN = {
    "bert": ("bert", LEARNED, 3, SequenceClassifier, "BertForSequenceClassification"),  # pooler, then a Linear
    "roberta": ("roberta", LEARNED, 2, SequenceClassifier, "RobertaForSequenceClassification"),  # our pooler is its dense
    "albert": ("albert", LEARNED, 3, SequenceClassifier, "AlbertForSequenceClassification"),
    "electra": ("electra", LEARNED, 1, SequenceClassifier, "ElectraForSequenceClassification"),  # a regression, GELU
    "distilbert": ("distilbert", LEARNED, 3, SequenceClassifier, "DistilBertForSequenceClassification"),  # ReLU
    "roformer": ("bert", {"pooler": False}, 2, SequenceClassifier, "RoFormerForSequenceClassification"),
    "tagger": ("electra", LEARNED, 4, TokenClassifier, "BertForTokenClassification"),
}
TEXTS = ["The small cat sees the dog.", "A big cow eats the green fish near the river, and the slow goat hears it.", "Hi."]
PIPELINE_TOLERANCE = 1e-5

# Run where minibert cannot be imported: each folder as a user loads it, without trust_remote_code.
ELSEWHERE = """
import sys
sys.modules["minibert"] = None
import torch, transformers
transformers.logging.set_verbosity_error()
jobs, results = torch.load(sys.argv[1]), {}
for name, job in jobs.items():
    auto = "AutoModelForTokenClassification" if job["tokens"] else "AutoModelForSequenceClassification"
    model = getattr(transformers, auto).from_pretrained(job["folder"]).eval()
    with torch.no_grad():
        logits = model(**job["inputs"]).logits
    task = "token-classification" if job["tokens"] else "text-classification"
    pipe = transformers.pipeline(task, model=job["folder"], device="cpu")
    results[name] = (type(model).__name__, logits, None if job["tokens"] else pipe(job["texts"], truncation=True))
torch.save(results, sys.argv[2])
"""


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    root = tmp_path_factory.mktemp("animals")
    return train_tokenizer(write_corpus(root / "animals.txt"), vocab_size=400, cache_dir=root / "cache")


def classifier(tokenizer, folder: Path, variant: str, changes: dict, outputs: int, kind=SequenceClassifier, **options) -> Path:
    """A fine-tuned model of a variant's architecture at a tiny size, with wide random weights."""
    torch.manual_seed(0)
    model = kind(wide_config(tokenizer.vocab_size, variant, **changes), outputs, **options)
    labels = None if outputs == 1 else LabelMap([f"class {i}" for i in range(outputs)])
    return save_classifier(model, tokenizer, labels, folder)


def export(checkpoint: Path, out: Path) -> tuple[int, str]:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        status = main(["export", str(checkpoint), str(out)])
    return status, printed.getvalue()


def inputs(model, tokenizer) -> dict:
    batch = tokenizer.batch(TEXTS, max_length=model.config.max_length)
    return {k: v for k, v in batch.items() if k != "token_type_ids" or model.config.type_vocab_size > 1}


@pytest.fixture(scope="module")
def built_in(tokenizer, tmp_path_factory):
    """name -> (checkpoint, what the export printed), and what a process without minibert computed."""
    pytest.importorskip("transformers")
    root = tmp_path_factory.mktemp("classifiers")
    exports, jobs = {}, {}
    for name, (variant, changes, outputs, kind, _) in BUILT_IN.items():
        checkpoint = classifier(tokenizer, root / "fine-tuned" / name, variant, changes, outputs, kind)
        status, printed = export(checkpoint, root / name)
        assert status == 0, printed
        model = load_classifier(checkpoint).model
        exports[name] = checkpoint, printed
        jobs[name] = {"folder": str(root / name), "tokens": kind is TokenClassifier, "inputs": inputs(model, tokenizer),
                      "texts": TEXTS}
    torch.save(jobs, root / "jobs.pt")
    env = {"PATH": os.environ["PATH"], "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-I", "-c", ELSEWHERE, root / "jobs.pt", root / "results.pt"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return exports, torch.load(root / "results.pt")


def test_each_family_exports_its_fine_tuned_heads_as_its_own_class(built_in):
    exports, results = built_in
    for name, (checkpoint, printed) in exports.items():
        architecture = BUILT_IN[name][-1]
        first = printed.splitlines()[0]
        assert f": {architecture} (" in first and "custom code" not in first and "README.md" in first, name
        config = json.loads((checkpoint.parent.parent / name / "config.json").read_text())
        assert config["architectures"] == [architecture] and "auto_map" not in config, name
        labels = load_classifier(checkpoint).labels
        if labels is None:
            assert config["problem_type"] == "regression" and config["id2label"] == {"0": "LABEL_0"}
        else:
            assert config["id2label"] == {str(i): label for i, label in enumerate(labels.names)}, name
        assert results[name][0] == architecture, name


def test_without_minibert_transformers_computes_minibert_logits_and_pipeline_predictions(built_in, tokenizer):
    exports, results = built_in
    for name, (checkpoint, _) in exports.items():
        model, _, labels = load_classifier(checkpoint)
        with torch.no_grad():
            want = model(**inputs(model, tokenizer)).logits
        _, got, predictions = results[name]
        rows = slice(None) if want.dim() == 2 else inputs(model, tokenizer)["attention_mask"].bool()
        assert (got - want)[rows].abs().max() <= 1e-4 * max(1.0, want[rows].abs().max()), name
        if predictions is None:  # a tagger
            continue
        for row, prediction in enumerate(predictions):
            if labels is None:  # a regression's score, as it is
                assert prediction["score"] == pytest.approx(want[row, 0].item(), abs=PIPELINE_TOLERANCE), name
            else:
                probabilities = want[row].softmax(-1)
                assert prediction["label"] == labels.names[probabilities.argmax()], name
                assert prediction["score"] == pytest.approx(probabilities.max().item(), abs=PIPELINE_TOLERANCE), name
        assert "pipeline text-classification: minibert's labels" in exports[name][1], name


@pytest.mark.parametrize("family", ["roberta", "electra", "distilbert", "roformer"])
def test_the_heads_rewritten_for_a_family_compute_minibert_logits(tokenizer, tmp_path, family):
    """The rewritten head alone, without transformers: RoBERTa's holds our pooler, the others
    our Linear through act(z) − act(−z) = z (a sign or a row wrong, and the logits differ)."""
    variant, changes, outputs, _, _ = BUILT_IN[family]
    model = load_classifier(classifier(tokenizer, tmp_path / "classifier", variant, changes, max(outputs, 3))).model
    written = in_family_layout(model, FAMILIES[family], "classifier")
    first = torch.randn(5, model.config.hidden_size) * 4
    pooled = torch.tanh(model.encoder.pooler(first)) if model.config.pooler else first
    with torch.no_grad():
        assert torch.allclose(written.head(first), model.head.classifier(pooled), atol=1e-5)


def test_what_no_built_in_head_computes_is_custom_code_saying_why(tokenizer, tmp_path):
    pytest.importorskip("transformers")
    cases = {  # our head -> why no built-in class computes it
        "mean": (("bert", LEARNED, 2), {"pooling": "mean"}, "mean pooling (--pooling mean) fits none"),
        "rotary pooler": (("bert", {}, 2), {}, "RoFormerForSequenceClassification reads the first token through gelu"),
        "roberta without pooler": (("roberta", {**LEARNED, "pooler": False}, 2), {}, "reads a pooler"),
    }
    for name, (shape, options, why) in cases.items():
        status, printed = export(classifier(tokenizer, tmp_path / name, *shape, **options), tmp_path / f"{name} hf")
        assert status == 0, printed
        first = printed.splitlines()[0]
        assert ": MinibertForSequenceClassification (minibert: transformers' custom code" in first, name
        assert f"; no built-in class: " in first and why in first, name
    wide = load_classifier(classifier(tokenizer, tmp_path / "wide", "electra", LEARNED, 17)).model  # 34 rows > 32
    assert "17 labels as 34 rows of its dense layer, which has 32" in misfit(wide, ELECTRA, "classifier")


def test_an_export_whose_pipeline_predicts_other_labels_is_refused(tokenizer, tmp_path, capsys, monkeypatch):
    pytest.importorskip("transformers")
    checkpoint = classifier(tokenizer, tmp_path / "bert", "bert", LEARNED, 3)
    written = huggingface.label_fields
    monkeypatch.setattr(huggingface, "label_fields", lambda model, labels: written(model, labels[::-1]))
    assert main(["export", str(checkpoint), str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "transformers' text-classification pipeline predicts" in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_the_model_card_says_what_fine_tuning_recorded(tokenizer, tmp_path):
    base = minibert.save_pretrained(minibert.Encoder(ModelConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_heads=2,
                                                                 intermediate_size=64, max_positions=40, **LEARNED)),
                                    tmp_path / "base", tokenizer=tokenizer)
    rows = [{"text": f"the {w} cat sees the dog", "label": w} for w in ("small", "big") * 8]
    for split in ("train", "dev"):
        (tmp_path / f"{split}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    sweep = tmp_path / "sweep" / "task"
    for seed in (0, 1):
        assert finetune_main(["--init", str(base), "--train", str(tmp_path / "train.jsonl"), "--dev", str(tmp_path / "dev.jsonl"),
                              "--out", str(sweep / f"seed-{seed}"), "--steps", "2", "--batch-size", "4", "--seed", str(seed),
                              "--lr", "1e-3", "--device", "cpu"]) == 0
    status, printed = export(sweep / "seed-1", tmp_path / "hf")
    assert status == 0, printed
    card = (tmp_path / "hf" / "README.md").read_text()
    report = json.loads((sweep / "seed-1" / "eval.json").read_text())
    assert "pipeline_tag: text-classification" in card and "BertForSequenceClassification, fine-tuned with minibert" in card
    here = f"…/{tmp_path.name}"  # absolute paths as their last two parts: a published card names no folders of this machine
    assert str(tmp_path) not in card
    assert f"`{here}/base`" in card and f"trained on `{here}/train.jsonl`" in card and "2 classes: big, small" in card
    assert "| seed | accuracy | f1 | mcc |\n" in card  # the scores alone: no kept_step, no positive_label
    assert "The electra recipe: ELECTRA-Small's row" in card and "{'name'" not in card  # in words, not a dict
    assert f"| 1 (this model) | {report['accuracy']:.4f} |" in card and "| 0 | " in card  # both seeds of the sweep
    assert f"--init {here}/base " in card and "--lr 0.001" in card and "--seed 1" in card and "--steps 2" in card
    assert "python -m minibert export …/task/seed-1 hf" in card and "## Intended use and limits" in card


# --- question answering: a span extractor's start and end logits ---------------------------------

# name -> (variant, ModelConfig changes, the class transformers loads it as)
SPANS = {
    "bert": ("bert", LEARNED, "BertForQuestionAnswering"),  # its pooler travels, unused, as BertForMaskedLM's does
    "roberta": ("roberta", LEARNED, "RobertaForQuestionAnswering"),
    "albert": ("albert", LEARNED, "AlbertForQuestionAnswering"),
    "electra": ("electra", {**LEARNED, "embedding_size": 16}, "ElectraForQuestionAnswering"),  # BERT has no projection
    "distilbert": ("distilbert", LEARNED, "DistilBertForQuestionAnswering"),
    "roformer": ("bert", {"pooler": False}, "RoFormerForQuestionAnswering"),
    "custom": ("albert", {}, "MinibertForQuestionAnswering"),  # rotary positions with shared layers: custom code
}
QUESTIONS = ["Who sees the dog?", "What does the cow eat?", "Where?"]
CONTEXTS = ["The small cat sees the dog.", "A big cow eats the green fish near the river.", "Hi."]
QA_EVAL = {"task": "squad", "exact_match": 61.25, "f1": 70.5, "examples": 80, "steps": 100, "seconds": 3.5,
           "args": {"init": "checkpoints/bert", "train": "squad/train.jsonl", "dev": "squad/dev.jsonl", "seed": 0}}


def span_extractor(tokenizer, folder: Path, variant: str, changes: dict) -> Path:
    """A fine-tuned span extractor of a variant's architecture at a tiny size, with wide random weights."""
    torch.manual_seed(0)
    return save_classifier(SpanExtractor(wide_config(tokenizer.vocab_size, variant, **changes)), tokenizer, None, folder)


def question_inputs(model, tokenizer) -> dict:
    batch = tokenizer.batch(QUESTIONS, CONTEXTS, max_length=model.config.max_length)
    return {k: v for k, v in batch.items() if k != "token_type_ids" or model.config.type_vocab_size > 1}


@pytest.fixture(scope="module")
def span_exports(tokenizer, tmp_path_factory):
    """name -> (checkpoint, OUT, what the export printed, minibert's and transformers' start and end logits)."""
    transformers = pytest.importorskip("transformers")
    root = tmp_path_factory.mktemp("span extractors")
    exports = {}
    for name, (variant, changes, _) in SPANS.items():
        checkpoint = span_extractor(tokenizer, root / "fine-tuned" / name, variant, changes)
        if name == "roberta":
            (checkpoint / "eval.json").write_text(json.dumps(QA_EVAL))
        status, printed = export(checkpoint, root / name)
        assert status == 0, printed
        model = load_classifier(checkpoint).model
        # as a user loads it: a built-in family's class without running any code of the folder
        theirs = transformers.AutoModelForQuestionAnswering.from_pretrained(root / name, trust_remote_code=name == "custom")
        batch = question_inputs(model, tokenizer)
        with torch.no_grad():
            want, got = model(**batch), theirs.eval()(**batch)
        pairs = [(want.start_logits, got.start_logits), (want.end_logits, got.end_logits)]
        exports[name] = checkpoint, root / name, printed, type(theirs).__name__, batch["attention_mask"].bool(), pairs
    return exports


def test_each_family_exports_a_span_extractor_as_its_question_answering_class(span_exports):
    for name, (_, out, printed, loaded, _, _) in span_exports.items():
        architecture = SPANS[name][-1]
        config = json.loads((out / "config.json").read_text())
        assert config["architectures"] == [architecture] and loaded == architecture, name
        assert ("auto_map" in config) == (name == "custom"), name
        first = printed.splitlines()[0]
        assert f": {architecture} (" in first and ("custom code" in first) == (name == "custom"), name
        assert "loaded by AutoModelForQuestionAnswering" in printed and "start_logits/end_logits largest difference" in printed, name


def test_transformers_computes_minibert_start_and_end_logits(span_exports):
    for name, (_, _, _, _, real, pairs) in span_exports.items():
        for want, got in pairs:  # the start logits, then the end logits
            assert got.shape == want.shape, name
            assert (got - want)[real].abs().max() <= 1e-4 * max(1.0, want[real].abs().max()), name


def test_an_export_whose_end_logits_differ_is_refused(tokenizer, tmp_path, capsys, monkeypatch):
    """The check compares the end logits too: an end bias written off by one is refused."""
    pytest.importorskip("transformers")
    checkpoint = span_extractor(tokenizer, tmp_path / "bert", "bert", LEARNED)

    def end_moved(model, family, head):
        moved = copy.deepcopy(model)
        with torch.no_grad():
            moved.head.bias[1] += 1.0
        return moved

    monkeypatch.setattr(export_module, "in_family_layout", end_moved)
    assert main(["export", str(checkpoint), str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "BertForQuestionAnswering computes other start_logits/end_logits than minibert" in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def card_example(out: Path) -> str:
    card = (out / "README.md").read_text()
    return card.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_question_answering_card_example_answers_from_the_context(span_exports, monkeypatch):
    """transformers >= 5.3 has no question-answering pipeline: the card's example reads the model
    directly, and gives a span of the context (whatever a random model picks)."""
    for name in ("bert", "custom"):
        _, out, _, _, _, _ = span_exports[name]
        monkeypatch.chdir(out.parent)  # the example names the folder as the Hub would: relative
        example = card_example(out)
        assert ("trust_remote_code=True" in example) == (name == "custom"), name
        scope = {}
        exec(example, scope)
        start, end = scope["offsets"][scope["start"]][0], scope["offsets"][scope["end"]][1]
        assert scope["answer"] == scope["context"][start:end] and scope["answer"], name
        assert scope["inputs"].sequence_ids(0)[scope["start"]] == scope["inputs"].sequence_ids(0)[scope["end"]] == 1, name


def test_the_question_answering_pipeline_reads_the_export(span_exports):
    """Where transformers still has the question-answering pipeline (up to 5.2), it runs on the export."""
    transformers = pytest.importorskip("transformers")
    if "question-answering" not in transformers.pipelines.SUPPORTED_TASKS:
        pytest.skip(f"transformers {transformers.__version__} has no question-answering pipeline (removed in 5.3)")
    _, out, _, _, _, _ = span_exports["bert"]
    answer = transformers.pipeline("question-answering", model=str(out), tokenizer=str(out), device="cpu")
    context = CONTEXTS[1]
    got = answer(question=QUESTIONS[1], context=context)
    assert {"answer", "start", "end", "score"} <= set(got) and got["answer"] == context[got["start"]:got["end"]]


def test_transformers_alone_gives_minibert_answers_from_the_export(span_exports, tmp_path):
    """bench/qa_agree.py answers SQuAD questions from the export in a process without minibert
    (the windows, offsets and decoding of the question-answering pipeline that transformers 5.3
    removed): the same answers as minibert's, over passages read in several windows, with
    words the tokenizer spells in byte pieces."""
    from minibert.finetune.kinds.spans import answered
    from minibert.finetune.kinds.squad import read_squad

    checkpoint, out, _, _, _, _ = span_exports["bert"]
    passage = ("The small cat sees the dog near the river. A big cow eats the green fish. The dog chases the "
               "bird and the horse hears the sheep. Zébra façade naïve: the goat watches the mouse. ")
    questions = [{"id": f"q{i}", "question": question, "answers": [{"text": "cat", "answer_start": 10}]}
                 for i, question in enumerate(["Who sees the dog?", "What does the cow eat?", "Who watches the mouse?"])]
    squad = tmp_path / "dev.json"
    squad.write_text(json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": [
        {"context": passage * 2, "qas": questions}]}]}), encoding="utf-8")
    loaded = load_classifier(checkpoint)
    reading = {**loaded.reading, "doc_stride": 8}  # windows of 40 tokens (all the model has) overlapping by 8
    answers = answered(loaded.model, loaded.tokenizer, reading, read_squad(squad), batch_size=4, max_len=40)
    predictions = tmp_path / "predictions.json"
    predictions.write_text(json.dumps({qid: answer.text for qid, answer in answers.items()}), encoding="utf-8")
    done = subprocess.run([sys.executable, str(Path(__file__).resolve().parents[1] / "bench" / "qa_agree.py"), str(out), str(squad),
                           str(predictions), "--max-len", "40", "--doc-stride", "8"],
                          capture_output=True, text=True, cwd=tmp_path, env={**os.environ, "PYTHONPATH": ""})
    assert done.returncode == 0, done.stdout + done.stderr
    windows = int(done.stdout.split(" windows;")[0].split("(")[-1])
    assert "3 of 3 answers equal minibert's" in done.stdout and windows > 3 and "no minibert imported" in done.stdout


def test_the_question_answering_card_shows_its_exact_match_and_f1(span_exports):
    _, out, _, _, _, _ = span_exports["roberta"]
    card = (out / "README.md").read_text()
    assert "pipeline_tag: question-answering" in card
    assert "RobertaForQuestionAnswering, fine-tuned with minibert for squad: the start and the end of the answer" in card
    assert "| seed | exact_match | f1 |\n" in card and "| 0 | 61.2500 | 70.5000 |" in card and "accuracy" not in card
    assert "80 dev examples" in card and "pass `truncation=True`" not in card and "overlapping windows" in card
    _, bert, _, _, _, _ = span_exports["bert"]
    assert "question answering: the start and the end of the answer in a passage" in (bert / "README.md").read_text()
