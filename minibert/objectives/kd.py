"""Knowledge distillation (DistilBERT): a half-depth student learns to imitate a teacher.

The student sees the same masked batch as the teacher and is trained on three signals:

    loss = 5.0 · T² · KL(softmax(teacher/T) ‖ softmax(student/T))   soft targets
         + 2.0 · MLM                                                 the usual hard targets
         + 1.0 · (1 − cos(student hidden, teacher hidden))            align the hidden states

The temperature T = 2 softens both distributions so that the teacher's "dark knowledge" —
which wrong tokens it finds plausible — carries signal; the T² factor keeps the soft
loss's gradients on the same scale as the hard loss's whatever T is (Hinton et al.).
The cosine loss is taken over every real (non-padding) token, the MLM loss over the masked
ones. DistilBERT took the soft targets at every real token too (`all_tokens=True`); by
default we take them at the masked tokens only — where the teacher's distribution says
most (elsewhere it mostly repeats the visible token) — which needs only the masked share (`--mask-prob`) of the
vocabulary-sized projections that dominate a small model's cost.

The student starts from the teacher: same width, half the layers, spread from the first to
the last as DistilBERT's release took them (`teacher_layers` says which and why), the
embeddings and the MLM head copied. The teacher is frozen and stays in eval mode (no
dropout) however the surrounding model is switched.

Fine-tuning has its own distillation: Hinton et al.'s soft-target loss from a teacher
fine-tuned on the task, mixed with the labels (`train.py finetune --teacher`), in
minibert/finetune/soft_targets.py; it reuses `soft_target_kl` below.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..config import ModelConfig
from ..data.masking import IGNORE_INDEX
from ..heads import MaskedLM, masked_lm_cross_entropy
from .mlm import mlm_metrics


def soft_target_kl(student_logits, teacher_logits, temperature: float, per_row: bool = False) -> torch.Tensor:
    """T² · KL(softmax(t/T) ‖ softmax(s/T)), averaged over rows (`per_row`: one value per
    row, [N]). Zero when s == t.

    DistilBERT writes this loss as the cross-entropy against the teacher's soft targets; the
    KL divergence is that cross-entropy minus the teacher's entropy, a constant for the
    student, so both give the same gradients — and the KL reads 0 when the student matches."""
    student = F.log_softmax(student_logits.float() / temperature, dim=-1)
    teacher = F.log_softmax(teacher_logits.float() / temperature, dim=-1)
    if per_row:  # [N, C] -> [N]
        return F.kl_div(student, teacher, reduction="none", log_target=True).sum(-1) * temperature**2
    return F.kl_div(student, teacher, reduction="batchmean", log_target=True) * temperature**2


def student_config(teacher: ModelConfig, **overrides) -> ModelConfig:
    """DistilBERT's student: half the teacher's layers, no segment embeddings, no pooler."""
    config = teacher.replace(num_layers=max(1, teacher.num_layers // 2), type_vocab_size=0, pooler=False)
    config = config.replace(**overrides)
    for name in ("vocab_size", "hidden_size", "num_heads", "intermediate_size", "embedding_size", "max_positions"):
        if getattr(config, name) != getattr(teacher, name):
            raise ValueError(
                f"the student copies the teacher's weights, so its {name} must stay {getattr(teacher, name)} "
                f"(got {getattr(config, name)}); drop that override or use another teacher"
            )
    return config


def teacher_layers(teacher_depth: int, student_depth: int) -> list[int]:
    """The teacher layer each student depth starts from: spread evenly from the teacher's first
    layer to its last, so that 12 -> 6 takes 0, 2, 4, 7, 9, 11.

    Why this and not every other layer (0, 2, 4, 6, 8, 10). The paper (Sanh et al. 2019)
    says the student is initialised "by taking one layer out of two"; the released
    distilbert-base-uncased was initialised by transformers' script
    examples/research_projects/distillation/scripts/extract_distilbert.py, which copies the
    teacher layers [0, 2, 4, 7, 9, 11] (its default output file name ends in _0247911.pth,
    and extract.py beside it, for DistilRoBERTa and DistilGPT2, loops over the same list).
    We follow the script: it is what the published model did, and it keeps the teacher's
    last layer last. The MLM head copied beside it and the hidden-state cosine loss both read
    the last layer's output, so the student's last layer starts as the one the head was
    trained to read; every other layer would leave the teacher's last layer out.

    Student depth i of s takes teacher layer round(i · (t − 1) / (s − 1)) of t, which gives the
    script's list for 12 -> 6. A one-layer student cannot keep both ends: it takes layer 0,
    the one that reads the copied embeddings (the default 2 -> 1 run; every other layer
    would take it too)."""
    if student_depth == 1:
        return [0]
    return [round(i * (teacher_depth - 1) / (student_depth - 1)) for i in range(student_depth)]


def init_student_from_teacher(student: MaskedLM, teacher: MaskedLM) -> None:
    """Copy embeddings, MLM head and the teacher layers `teacher_layers` picks."""
    s, t = student.encoder, teacher.encoder
    with torch.no_grad():
        pairs = [(getattr(s.embeddings, n), getattr(t.embeddings, n)) for n in ("word_embeddings", "position_embeddings",
                                                                                 "token_type_embeddings", "norm")]
        pairs += [(getattr(s, n), getattr(t, n)) for n in ("embedding_projection", "final_norm")]
        for mine, theirs in pairs:
            if mine is not None and theirs is not None:  # DistilBERT drops the segment table
                mine.load_state_dict(theirs.state_dict())
        for depth, source in enumerate(teacher_layers(t.config.num_layers, s.config.num_layers)):
            for mine, theirs in zip(s.layer(depth), t.layer(source)):
                mine.load_state_dict(theirs.state_dict())
        student.head.load_state_dict(teacher.head.state_dict())


class KnowledgeDistillation(nn.Module):
    """An `Objective`: DistilBERT's triple loss; owns the frozen teacher."""

    shares_pass = True
    reads_pooler = False

    def __init__(self, teacher: MaskedLM, temperature: float, soft_weight: float, mlm_weight: float,
                 cosine_weight: float, all_tokens: bool):
        super().__init__()
        self.all_tokens = all_tokens
        self.teacher = teacher.eval().requires_grad_(False)
        self.temperature = temperature
        self.soft_weight, self.mlm_weight, self.cosine_weight = soft_weight, mlm_weight, cosine_weight

    def train(self, mode: bool = True):
        super().train(mode)
        self.teacher.eval()  # the teacher's predictions are targets: never with dropout
        return self

    def needed_positions(self, batch):
        return None  # the cosine loss reads every real token

    def forward(self, model, batch, output):
        real, labels = batch["attention_mask"].bool(), batch["labels"]
        soft_positions = real if self.all_tokens else labels != IGNORE_INDEX  # [B, T] bool
        with torch.no_grad():
            teacher_hidden = self.teacher.encoder(batch["input_ids"], batch["attention_mask"]).last_hidden_state
            teacher_logits = self.teacher.predict(teacher_hidden[soft_positions])  # [soft, V]
        student_hidden = output.last_hidden_state  # [B, T, H]
        student_logits = model.predict(student_hidden[soft_positions])  # [soft, V]

        soft = soft_target_kl(student_logits, teacher_logits, self.temperature) if soft_positions.any() else student_logits.sum() * 0.0
        targets = labels[soft_positions]
        masked = targets != IGNORE_INDEX
        mlm = masked_lm_cross_entropy(student_logits[masked], targets[masked])  # the hard targets, as MLM's
        cosine = (1 - F.cosine_similarity(student_hidden[real].float(), teacher_hidden[real].float(), dim=-1)).mean()

        metrics = mlm_metrics(mlm, student_logits[masked], targets[masked])
        metrics.update(kd_soft_loss=soft.detach(), kd_cosine_loss=cosine.detach())
        return self.soft_weight * soft + self.mlm_weight * mlm + self.cosine_weight * cosine, metrics
