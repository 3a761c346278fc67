"""Task distillation (`finetune --teacher`): Hinton et al.'s soft-target loss, the teacher in either format,
and what the command does with it.

The toy task is test_finetune's: sentences of filler words with one sentiment word. The
teacher is fine-tuned on the same sentences with the labels *swapped*, so a student that
follows the teacher disagrees with the labels everywhere: agreement with the teacher can then
only come from the teacher. It also has its own tokenizer (the vocabulary in another order).
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from minibert import Encoder, ModelConfig, save_pretrained
from minibert.finetune import main
from minibert.finetune.kinds import sentences
from minibert.finetune.kinds.sentence_files import read_texts
from minibert.finetune.teacher import TEACHER_FILE, load_teacher
from minibert.interop.huggingface.classifiers import reference_classifier
from minibert.heads import IGNORE_INDEX
from minibert.finetune.soft_targets import score_target_loss, soft_target_loss
from minibert.tokenizers.wordpiece import WordPieceTokenizer

from test_finetune import FAST, TINY, VOCAB, toy_rows, write_tsv


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# --- the loss -------------------------------------------------------------------------------


def by_hand(student, teacher, labels, temperature, alpha):
    """alpha · T² · KL(softmax(t/T) ‖ softmax(s/T)) + (1 − alpha) · CE written out in float64, row by row."""
    total = 0.0
    for s, t, y in zip(student.double().tolist(), teacher.double().tolist(), labels.tolist()):
        p_t = torch.tensor(t).div(temperature).softmax(0)
        log_p_s = torch.tensor(s).div(temperature).log_softmax(0)
        kl = float((p_t * (p_t.log() - log_p_s)).sum()) * temperature**2
        ce = -float(torch.tensor(s).log_softmax(0)[y]) if y != IGNORE_INDEX else None
        total += kl if ce is None else alpha * kl + (1 - alpha) * ce
    return total / len(labels)


@pytest.mark.parametrize("temperature, alpha", [(1.0, 0.0), (2.0, 0.5), (4.0, 0.9), (0.5, 1.0)])
def test_loss_is_hintons_soft_target_formula_on_fixed_logits(temperature, alpha):
    student = torch.tensor([[2.0, -1.0, 0.5], [0.1, 0.2, 0.3], [-3.0, 1.5, 2.0], [1.0, 1.0, -2.0]])
    teacher = torch.tensor([[1.0, 0.0, -1.0], [3.0, -2.0, 0.0], [0.0, 0.0, 4.0], [-1.0, 2.0, 0.5]])
    labels = torch.tensor([0, 2, 1, 1])
    assert float(soft_target_loss(student, teacher, labels, temperature, alpha)) == pytest.approx(
        by_hand(student, teacher, labels, temperature, alpha), rel=1e-5)
    unlabelled = torch.tensor([0, IGNORE_INDEX, 1, IGNORE_INDEX])  # transfer rows: the soft term alone
    assert float(soft_target_loss(student, teacher, unlabelled, temperature, alpha)) == pytest.approx(
        by_hand(student, teacher, unlabelled, temperature, alpha), rel=1e-5)


def test_the_loss_vanishes_only_where_the_student_matches_both_targets():
    logits = torch.tensor([[3.0, -3.0], [-2.0, 2.0]])
    assert float(soft_target_loss(logits, logits, torch.full((2,), IGNORE_INDEX), 2.0, 0.5)) == pytest.approx(0.0, abs=1e-7)
    assert float(soft_target_loss(logits, logits.flip(-1), torch.full((2,), IGNORE_INDEX), 2.0, 0.5)) > 1.0


def test_regression_mixes_squared_errors_to_teacher_and_label():
    s, t, y = torch.tensor([1.0, 2.0, 0.0]), torch.tensor([0.0, 2.5, 1.0]), torch.tensor([2.0, math.nan, 0.0])
    expected = (0.3 * 1 + 0.7 * 1 + 0.25 + 0.3 * 1 + 0.7 * 0) / 3  # the NaN row: the teacher's term alone
    assert float(score_target_loss(s, t, y, alpha=0.3)) == pytest.approx(expected)


# --- teachers ---------------------------------------------------------------------------------


REFERENCE = {  # family -> (transformers config class, sequence-classification class, extra config)
    "bert": ("BertConfig", "BertForSequenceClassification", {}),
    "roberta": ("RobertaConfig", "RobertaForSequenceClassification", {"pad_token_id": 1, "max_position_embeddings": 66}),
    "albert": ("AlbertConfig", "AlbertForSequenceClassification", {"embedding_size": 16}),
    "distilbert": ("DistilBertConfig", "DistilBertForSequenceClassification", {}),
    "electra": ("ElectraConfig", "ElectraForSequenceClassification", {"embedding_size": 32}),
    "roformer": ("RoFormerConfig", "RoFormerForSequenceClassification", {"hidden_act": "relu"}),  # its head: the encoder's activation
}


@pytest.mark.parametrize("family", REFERENCE)
def test_a_hugging_face_classifier_of_each_family_gives_its_own_logits(family, tmp_path):
    transformers = pytest.importorskip("transformers")
    config_class, model_class, extra = REFERENCE[family]
    sizes = ({"dim": 32, "n_layers": 2, "n_heads": 2, "hidden_dim": 64} if family == "distilbert" else
             {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64})
    config = getattr(transformers, config_class)(vocab_size=len(VOCAB), num_labels=3, id2label={0: "a", 1: "b", 2: "c"},
                                                 **{"max_position_embeddings": 64, **sizes, **extra})
    torch.manual_seed(0)
    reference = getattr(transformers, model_class)(config).eval()
    reference.save_pretrained(tmp_path)
    ids = torch.randint(5, len(VOCAB), (3, 9), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    model, names = reference_classifier(tmp_path, json.loads((tmp_path / "config.json").read_text()))
    with torch.no_grad():
        ours, theirs = model(ids, mask).logits, reference(input_ids=ids, attention_mask=mask).logits
    assert names == ["a", "b", "c"]
    torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-5)


def test_a_checkpoint_without_a_classification_head_is_refused(tmp_path):
    save_pretrained(Encoder(ModelConfig(**TINY)), tmp_path, tokenizer=WordPieceTokenizer(VOCAB))
    with pytest.raises(ValueError, match="no fine-tuned classifier|sequence-classification head|none of"):
        load_teacher(tmp_path)


# --- the command ------------------------------------------------------------------------------


def swapped(rows):
    return [(text, {"positive": "negative", "negative": "positive"}[label]) for text, label in rows]


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    folder = tmp_path_factory.mktemp("toy")
    train, dev = toy_rows(96, seed=1), toy_rows(40, seed=2)
    return {"train": write_tsv(folder / "train.tsv", ["sentence", "label"], train),
            "dev": write_tsv(folder / "dev.tsv", ["sentence", "label"], dev),
            "swapped": write_tsv(folder / "swapped.tsv", ["sentence", "label"], swapped(train)),
            "transfer": write_tsv(folder / "transfer.tsv", ["sentence", "label"], toy_rows(96, seed=3)),
            "three": write_tsv(folder / "three.tsv", ["sentence", "label"],
                               [(text, str(i % 3)) for i, (text, _) in enumerate(train)])}


@pytest.fixture(scope="module")
def student_dir(tmp_path_factory) -> Path:
    torch.manual_seed(0)
    return save_pretrained(Encoder(ModelConfig(**TINY)), tmp_path_factory.mktemp("student"), tokenizer=WordPieceTokenizer(VOCAB))


@pytest.fixture(scope="module")
def teacher_dir(toy, tmp_path_factory) -> Path:
    """A contrarian teacher: fine-tuned on the swapped labels, with its own vocabulary order."""
    own = VOCAB[:5] + random.Random(0).sample(VOCAB[5:], len(VOCAB) - 5)
    torch.manual_seed(1)
    backbone = save_pretrained(Encoder(ModelConfig(**TINY)), tmp_path_factory.mktemp("teacher-backbone"),
                               tokenizer=WordPieceTokenizer(own))
    out = tmp_path_factory.mktemp("teacher")
    assert run(backbone, toy["swapped"], toy["dev"], out) == 0
    assert json.loads((out / "eval.json").read_text())["accuracy"] <= 0.05  # it learned the swap
    return out


def run(init, train, dev, out, *extra) -> int:
    return main(["--init", str(init), "--train", str(train), "--dev", str(dev), "--out", str(out), "--device", "cpu",
                 *FAST, "--overwrite", *extra])


def predictions(out: Path) -> list[str]:
    return [line.split("\t")[1] for line in (out / "predictions.tsv").read_text().splitlines()[1:]]


def test_alpha_zero_reproduces_label_only_fine_tuning_exactly(student_dir, teacher_dir, toy, tmp_path):
    assert run(student_dir, toy["train"], toy["dev"], tmp_path / "labels") == 0
    assert run(student_dir, toy["train"], toy["dev"], tmp_path / "alpha0", "--teacher", str(teacher_dir), "--alpha", "0") == 0
    plain, distilled = (load_file(tmp_path / name / "model.safetensors") for name in ("labels", "alpha0"))
    assert plain.keys() == distilled.keys()
    assert all(torch.equal(plain[name], distilled[name]) for name in plain)
    assert (tmp_path / "alpha0" / TEACHER_FILE).is_file()


def test_alpha_one_at_temperature_one_follows_the_teacher_on_held_out_rows(student_dir, teacher_dir, toy, tmp_path, monkeypatch):
    out = tmp_path / "follower"
    assert run(student_dir, toy["train"], toy["dev"], out, "--teacher", str(teacher_dir), "--alpha", "1",
               "--temperature", "1", "--transfer", str(toy["transfer"])) == 0
    agree = sum(a == b for a, b in zip(predictions(out), predictions(teacher_dir))) / 40
    assert agree >= 0.95  # the labels say the opposite of the teacher: only the teacher can teach this
    assert json.loads((out / "eval.json").read_text())["accuracy"] <= 0.05
    cached = load_file(out / TEACHER_FILE)["logits"]
    assert cached.shape == (96 + 96, 2)  # training rows, then the transfer rows

    def no_teacher(*args, **kwargs):
        raise AssertionError("the teacher ran again although its outputs were cached")
    monkeypatch.setattr(sentences, "logits_of", no_teacher)
    monkeypatch.setattr(sentences.SentenceKind, "predictions", lambda *args, **kwargs: ([0] * 40, [1.0] * 40))  # the student's own dev pass is not the point
    assert run(student_dir, toy["train"], toy["dev"], out, "--teacher", str(teacher_dir), "--alpha", "1",
               "--temperature", "1", "--transfer", str(toy["transfer"])) == 0


def test_transfer_texts_read_alike_from_txt_and_task_files_with_or_without_labels(toy, tmp_path):
    labelled = read_texts(toy["transfer"])
    lines = tmp_path / "transfer.txt"
    lines.write_text("\n".join(labelled.texts) + "\n\n")
    unlabelled = tmp_path / "bare.jsonl"
    unlabelled.write_text("".join(json.dumps({"sentence": text}) + "\n" for text in labelled.texts))
    for other in (read_texts(lines), read_texts(unlabelled)):
        assert other.texts == labelled.texts and other.pairs is None and set(other.labels) == {""}



def test_transfer_texts_take_the_text_columns_named_for_the_task(tmp_path):
    from minibert.finetune.kinds.sentence_files import Columns
    qnli_like = tmp_path / "transfer.tsv"
    qnli_like.write_text("index\tquestion\tsentence\n0\tWho wrote it?\tShe wrote it.\n1\tWhen?\tIn May.\n")
    with pytest.raises(ValueError, match="question would not be read"):
        read_texts(qnli_like)  # the question is never dropped silently
    pairs = read_texts(qnli_like, Columns(("question", "sentence")))
    assert pairs.texts == ["Who wrote it?", "When?"] and pairs.pairs == ["She wrote it.", "In May."]

BAD = {
    "alpha above 1": (["--alpha", "1.5"], "--alpha"),
    "temperature zero": (["--temperature", "0"], "--temperature"),
    "teacher of three classes": (["three"], "distil from a teacher fine-tuned on this task"),
    "alpha without teacher": (["no teacher", "--alpha", "0.5"], "add --teacher"),
    "transfer of pairs for single texts": (["pairs"], "--transfer"),
    "teacher that is no classifier": (["backbone"], "classif"),
}


@pytest.mark.parametrize("case", BAD)
def test_bad_combinations_are_one_line_errors(case, student_dir, teacher_dir, toy, tmp_path, capsys):
    extra, message = BAD[case]
    teacher = teacher_dir
    if extra[:1] == ["three"]:
        teacher, extra = tmp_path / "three-teacher", []
        assert run(student_dir, toy["three"], toy["three"], teacher, "--steps", "1") == 0
    if extra[:1] == ["backbone"]:
        teacher, extra = student_dir, []
    if extra[:1] == ["pairs"]:
        pairs = write_tsv(tmp_path / "pairs.tsv", ["sentence1", "sentence2"], [("a b", "c d")])
        extra = ["--transfer", str(pairs)]
    capsys.readouterr()
    flags = extra[1:] if extra[:1] == ["no teacher"] else ["--teacher", str(teacher), *extra]
    assert run(student_dir, toy["train"], toy["dev"], tmp_path / "out", *flags) == 2
    error = capsys.readouterr().err.strip()
    assert "\n" not in error and message in error and "Traceback" not in error
    assert not (tmp_path / "out" / "model.safetensors").exists()
