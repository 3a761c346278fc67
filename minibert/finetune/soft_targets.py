"""Hinton et al.'s soft-target loss, for fine-tuning: a fine-tuned teacher's answers as a student's targets.

A label says only which class is right. A fine-tuned teacher says how right every class is:
"0.7 positive, 0.3 negative" tells the student that this review is mixed, and which
examples resemble which — the relative probabilities of the wrong classes that Hinton et
al. (2015) called "dark knowledge". Softened by a temperature T > 1 they say more, since
at T = 1 a confident teacher's wrong classes all read close to 0. The loss mixes both targets:

    loss = alpha · T² · KL(softmax(teacher/T) ‖ softmax(student/T)) + (1 − alpha) · CE(student, label)

T² keeps the soft term's gradients on the hard term's scale whatever T is (they shrink as
1/T²), so alpha alone says how much the teacher counts. A row without a label (transfer
text the teacher labels, Tang et al. 2019) has only the teacher to learn from: it takes the
soft term with weight 1. A regression task (a score, STS-B) has no distribution to soften:
the student matches the teacher's score by squared error instead, mixed with the label's
squared error the same way. `train.py finetune --teacher` trains on it (job.py); the
teacher's outputs come from teacher.py.

Pretraining's distillation, DistilBERT's (the same soft term at the masked tokens, plus MLM
and a hidden-state cosine loss), is minibert/objectives/kd.py, which also holds the soft
term `soft_target_kl` used here.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..heads import IGNORE_INDEX
from ..objectives.kd import soft_target_kl


def soft_target_loss(student_logits, teacher_logits, true_labels, temperature: float, alpha: float) -> torch.Tensor:
    """alpha · T² · KL(softmax(teacher/T) ‖ softmax(student/T)) + (1 − alpha) · CE(student, label)
    on class logits [B, C] and labels [B], averaged over the B rows; a row without a label
    (IGNORE_INDEX) takes the soft term alone."""
    soft = soft_target_kl(student_logits, teacher_logits, temperature, per_row=True)  # [B]: T² · KL per row
    labelled = true_labels != IGNORE_INDEX  # [B]
    hard = F.cross_entropy(student_logits.float(), true_labels) if labelled.any() else soft.sum() * 0.0  # CE over the labelled rows
    return mix(soft, hard, labelled, alpha)


def score_target_loss(student_scores, teacher_scores, true_scores, alpha: float) -> torch.Tensor:
    """The same mix for regression, scores [B] (NaN: no label): alpha · (s − teacher)² +
    (1 − alpha) · (s − label)², averaged over the rows."""
    student = student_scores.float()
    soft = (student - teacher_scores.float()).square()  # [B]
    labelled = ~true_scores.isnan()  # [B]
    hard = F.mse_loss(student[labelled], true_scores[labelled].float()) if labelled.any() else soft.sum() * 0.0
    return mix(soft, hard, labelled, alpha)


def mix(soft: torch.Tensor, hard: torch.Tensor, labelled: torch.Tensor, alpha: float) -> torch.Tensor:
    """mean over rows of alpha · soft + (1 − alpha) · hard on labelled rows and soft alone on
    the others; `hard` is already the mean over the labelled rows. Written so that with
    alpha = 0 and every row labelled the result is `hard` bit for bit: label-only fine-tuning."""
    rows = soft.numel()
    weight = torch.where(labelled, alpha, 1.0)  # a row without a label has only the teacher
    return (weight * soft).sum() / rows + (1 - alpha) * hard * (labelled.sum() / rows)


class TaskDistillation(nn.Module):
    """A fine-tuning model and its teacher's cached outputs as the training loop sees them:
    batch -> (loss, metrics), as job.TaskLoss is for labels alone. A batch carries the
    teacher's logits (scores for regression) as `teacher_logits` [B, C]."""

    def __init__(self, model: nn.Module, alpha: float, temperature: float):
        super().__init__()
        self.model, self.alpha, self.temperature = model, alpha, temperature

    def forward(self, batch: dict) -> tuple[torch.Tensor, dict]:
        inputs = {name: value for name, value in batch.items() if name != "teacher_logits"}
        teacher, labels = batch["teacher_logits"], inputs["labels"]
        # Labels make the model run its training forward (a [CLS] head: the last layer at
        # position 0 only), the computation of label-only fine-tuning; its own loss is unused.
        logits = self.model(**inputs).logits  # [B, C]
        if self.model.num_labels == 1:  # regression: [B, 1] -> [B] scores
            loss = score_target_loss(logits.squeeze(-1), teacher.squeeze(-1), labels, self.alpha)
            agree = (logits.squeeze(-1) - teacher.squeeze(-1)).abs().mean()
            return loss, {"teacher_gap": agree.detach()}
        loss = soft_target_loss(logits, teacher, labels, self.temperature, self.alpha)
        agree = (logits.argmax(-1) == teacher.argmax(-1)).float().mean()
        return loss, {"teacher_agreement": agree.detach()}
