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

Question answering distils the same way, DistilBERT's second step of distillation (Sanh et al.,
2019, Table 2's DistilBERT (D): fine-tuned on SQuAD with a SQuAD-tuned BERT as its teacher). A span
head's answer is two distributions over a window's positions, the start's and the end's, so
each is softened and compared, and the two halves averaged as the span loss averages its two
cross-entropies:

    loss = alpha · T² · (KL(start) + KL(end)) / 2 + (1 − alpha) · span loss

as transformers' run_squad_w_distillation.py computes it. Each distribution is over the window's
own positions: a batch's padding is left out of both, so a window's soft targets do not depend
on which windows it was batched with.

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

OUTSIDE = -1e9  # the logit of a position past a window's end: probability 0 at any temperature, never NaN


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


def span_target_loss(start_logits, end_logits, teacher_logits, attention_mask, span_loss, temperature: float,
                     alpha: float) -> torch.Tensor:
    """alpha · T² · (KL(start) + KL(end)) / 2 + (1 − alpha) · `span_loss` (the head's own, already
    the mean over the B windows): logits [B, T], the teacher's [B, 2, T] (start, end), each KL
    over the positions `attention_mask` [B, T] keeps, averaged over the windows."""
    soft = sum(soft_target_kl(student.float().masked_fill(outside, OUTSIDE), teacher.float().masked_fill(outside, OUTSIDE),
                              temperature, per_row=True)
               for student, teacher, outside in ((start_logits, teacher_logits[:, 0], attention_mask == 0),
                                                 (end_logits, teacher_logits[:, 1], attention_mask == 0))) / 2  # [B]
    return mix(soft, span_loss, torch.ones_like(soft, dtype=torch.bool), alpha)


def mix(soft: torch.Tensor, hard: torch.Tensor, labelled: torch.Tensor, alpha: float) -> torch.Tensor:
    """mean over rows of alpha · soft + (1 − alpha) · hard on labelled rows and soft alone on
    the others; `hard` is already the mean over the labelled rows. Written so that with
    alpha = 0 and every row labelled the result is `hard` bit for bit: label-only fine-tuning."""
    rows = soft.numel()
    weight = torch.where(labelled, alpha, 1.0)  # a row without a label has only the teacher
    return (weight * soft).sum() / rows + (1 - alpha) * hard * (labelled.sum() / rows)


class Distillation(nn.Module):
    """A fine-tuning model and its teacher's cached outputs as the training loop sees them:
    batch -> (loss, metrics), as job.TaskLoss is for labels alone. A batch carries the teacher's
    outputs as `teacher_logits`, which the model's own inputs leave out."""

    def __init__(self, model: nn.Module, alpha: float, temperature: float):
        super().__init__()
        self.model, self.alpha, self.temperature = model, alpha, temperature

    def split(self, batch: dict) -> tuple[dict, torch.Tensor]:
        return {name: value for name, value in batch.items() if name != "teacher_logits"}, batch["teacher_logits"]


class TaskDistillation(Distillation):
    """A sentence task's: the teacher's logits (scores for regression) [B, C]."""

    def forward(self, batch: dict) -> tuple[torch.Tensor, dict]:
        inputs, teacher = self.split(batch)
        labels = inputs["labels"]
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


class SpanDistillation(Distillation):
    """A span extractor's: the teacher's start and end logits [B, 2, T]."""

    def forward(self, batch: dict) -> tuple[torch.Tensor, dict]:
        inputs, teacher = self.split(batch)
        out = self.model(**inputs)  # with the gold positions: out.loss is the span loss of label-only fine-tuning
        loss = span_target_loss(out.start_logits, out.end_logits, teacher, inputs["attention_mask"], out.loss,
                                self.temperature, self.alpha)
        outside = inputs["attention_mask"] == 0
        same = [(ours.masked_fill(outside, OUTSIDE).argmax(-1) == theirs.masked_fill(outside, OUTSIDE).argmax(-1))
                for ours, theirs in ((out.start_logits, teacher[:, 0]), (out.end_logits, teacher[:, 1]))]
        return loss, {"teacher_agreement": (same[0] & same[1]).float().mean().detach()}  # both ends the teacher's
