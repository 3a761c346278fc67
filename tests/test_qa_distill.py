"""Distillation for question answering: a SQuAD-tuned teacher's softened start and end
distributions mixed with the span loss (DistilBERT's second step), on the student's own windows."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F

from minibert.finetune import main
from minibert.finetune.checkpoint import load_classifier, save_classifier
from minibert.finetune.job import TaskLoss, load_backbone
from minibert.finetune.soft_targets import SpanDistillation
from minibert.finetune.kinds.squad import read_squad
from minibert.finetune.kinds.sentence_files import LabelMap
from minibert.finetune.kinds.windows import question_windows, window_inputs
from minibert.heads import SequenceClassifier, SpanExtractor
from minibert.tokenizers.wordpiece import WordPieceTokenizer

from test_question_answering import QA_FLAGS, WORDS, backbone, finetune_qa, squad_file  # noqa: F401 (a fixture)


@pytest.fixture(scope="module")
def teacher(backbone, tmp_path_factory):  # noqa: F811
    """A span extractor fine-tuned a few steps on the tiny SQuAD file, and that file."""
    folder = tmp_path_factory.mktemp("qa_teacher")
    squad_file(folder / "train.json")
    finetune_qa(backbone, folder / "train.json", folder / "train.json", folder / "teacher", "--steps", "12")
    return folder / "teacher", folder / "train.json"


def hand_kl(student: torch.Tensor, teacher: torch.Tensor, temperature: float) -> torch.Tensor:
    """T² · Σ_i p_i (log p_i − log q_i), p the teacher's softened distribution, q the student's: one window's."""
    p, log_q = (teacher / temperature).softmax(-1), (student / temperature).log_softmax(-1)
    return temperature ** 2 * (p * (p.log() - log_q)).sum()


@pytest.mark.parametrize("alpha, temperature", [(0.5, 2.0), (0.7, 1.0), (1.0, 3.0)])
def test_the_loss_is_the_soft_start_and_end_terms_mixed_with_the_span_loss(backbone, teacher, alpha, temperature):  # noqa: F811
    encoder, tokenizer = load_backbone(backbone)
    windows, _ = question_windows(tokenizer, read_squad(teacher[1]), max_len=32, max_query_len=64, doc_stride=8, labelled=True)
    rows = [0, 1, 5, 9]  # windows of different lengths: the batch is padded
    batch = window_inputs(windows, rows, tokenizer, segments=True, labelled=True)
    lengths = batch["attention_mask"].sum(-1)
    assert len(set(lengths.tolist())) > 1
    torch.manual_seed(0)
    student = SpanExtractor(encoder.config)
    student.encoder.load_state_dict(encoder.state_dict())
    student.eval()  # no dropout: the loss is computed twice alike
    with torch.no_grad():
        taught = load_classifier(teacher[0]).model(**{k: v for k, v in batch.items() if "positions" not in k})
        teacher_logits = 8 * torch.stack([taught.start_logits, taught.end_logits], 1)  # [B, 2, T], sharpened: every term far from 0
        out = student(**batch)
        loss, metrics = SpanDistillation(student, alpha, temperature)({**batch, "teacher_logits": teacher_logits})
    soft = torch.stack([(hand_kl(out.start_logits[b, :n], teacher_logits[b, 0, :n], temperature)
                         + hand_kl(out.end_logits[b, :n], teacher_logits[b, 1, :n], temperature)) / 2
                        for b, n in enumerate(lengths.tolist())]).mean()
    hard = torch.stack([(F.cross_entropy(out.start_logits[b, :n], batch["start_positions"][b])  # over each window's own positions
                         + F.cross_entropy(out.end_logits[b, :n], batch["end_positions"][b])) / 2
                        for b, n in enumerate(lengths.tolist())]).mean()
    assert soft > 0 and loss == pytest.approx((alpha * soft + (1 - alpha) * hard).item(), rel=1e-4)
    assert 0.0 <= metrics["teacher_agreement"] <= 1.0
    # the padding is no part of a window's distributions: garbage there changes nothing
    noisy = teacher_logits.clone()
    noisy[batch["attention_mask"].unsqueeze(1).expand_as(noisy) == 0] = 50.0
    with torch.no_grad():
        again, _ = SpanDistillation(student, alpha, temperature)({**batch, "teacher_logits": noisy})
    assert again == pytest.approx(loss.item(), rel=1e-6)
    # alpha 0 is the plain span loss, bit for bit
    with torch.no_grad():
        plain, _ = TaskLoss(student)(batch)
        zero, _ = SpanDistillation(student, 0.0, temperature)({**batch, "teacher_logits": teacher_logits})
    assert torch.equal(zero, plain)


def test_a_student_distils_from_a_span_teacher_and_alpha_zero_is_plain_fine_tuning(backbone, teacher, tmp_path, capsys):  # noqa: F811
    teacher_dir, train = teacher
    plain = finetune_qa(backbone, train, train, tmp_path / "plain")
    zero = finetune_qa(backbone, train, train, tmp_path / "zero", "--teacher", str(teacher_dir), "--alpha", "0")
    assert zero["train_loss"] == plain["train_loss"] and zero["f1"] == plain["f1"]
    assert (tmp_path / "zero" / "teacher_logits.safetensors").is_file()
    student = finetune_qa(backbone, train, train, tmp_path / "student", "--teacher", str(teacher_dir))
    assert (student["args"]["alpha"], student["args"]["temperature"]) == (0.5, 2.0)
    assert student["train_loss"] != plain["train_loss"]
    assert "start and end logits on" in capsys.readouterr().out


def test_a_teacher_is_refused_in_one_line_unless_it_is_a_span_model_with_the_students_tokenizer(backbone, teacher, tmp_path,  # noqa: F811
                                                                                                capsys):
    teacher_dir, train = teacher
    model = load_classifier(teacher_dir).model
    other = WordPieceTokenizer(WORDS[:5] + WORDS[5:][::-1])  # the same pieces under other ids
    save_classifier(model, other, None, tmp_path / "other_vocab")
    save_classifier(SequenceClassifier(model.config, 2), load_backbone(backbone)[1], LabelMap(["a", "b"]),
                    tmp_path / "classes")
    base = ["--init", str(backbone), "--train", str(train), "--dev", str(train), "--device", "cpu", *QA_FLAGS]
    for folder, said in [("other_vocab", "another tokenizer"), ("classes", "no question-answering model")]:
        assert main([*base, "--teacher", str(tmp_path / folder), "--out", str(tmp_path / f"out_{folder}")]) != 0
        err = capsys.readouterr().err.strip()
        assert said in err and len(err.splitlines()) == 1, err
        assert not (tmp_path / f"out_{folder}" / "model.safetensors").exists()
    (tmp_path / "more.txt").write_text("some more words\n")
    assert main([*base, "--teacher", str(teacher_dir), "--transfer", str(tmp_path / "more.txt"), "--out", str(tmp_path / "t")]) != 0
    assert "--transfer" in capsys.readouterr().err
