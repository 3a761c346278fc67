"""What each head guessed at the masked positions, with the project's own functions:

    the masked LM    probe.py's mask_probabilities and best_candidates (what fill-mask prints)
    ELECTRA          what the run's ReplacedTokenDetection sampled and its discriminator said
                     (step.py's `seen`), the generator's distribution where it sampled, and
                     probe.py's replaced_probabilities on the text as written (detect's)
    DistilBERT       the teacher's and the student's heads at the masked positions, at T = 1 and at
                     the run's temperature, the run's KnowledgeDistillation's three losses, and
                     kd.py's teacher_layers
"""

from __future__ import annotations

import math

import torch

from ...objectives.kd import teacher_layers
from ..probe import best_candidates, mask_probabilities, replaced_probabilities
from .example import Example
from .session import Session
from .step import Step
from .strip import token

TOP_K = 5


def inputs(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """What an encoder reads of a batch."""
    return {name: batch[name] for name in ("input_ids", "attention_mask", "token_type_ids")}


def mlm_panel(session: Session, example: Example) -> dict | None:
    """At each chosen position: the MLM head's top-k, whether its best guess is the original, the loss there."""
    if session.head != "mlm":
        return None
    probabilities = mask_probabilities(session.model, inputs(example.batch), example.chosen[None])  # [chosen, V]
    positions = example.chosen.nonzero()[:, 0].tolist()
    rows = []
    for position, row, candidates in zip(positions, probabilities, best_candidates(session.tokenizer, probabilities, TOP_K)):
        original = int(example.original[position])
        entry = {"position": position, "shown": token(session, example.batch["input_ids"][0, position]),
                 "top": [{"id": c.token_id, "piece": c.token, "text": c.token if "\ufffd" in c.text else c.text,
                          "prob": c.score} for c in candidates]}  # a byte piece keeps its piece, as token() does
        if not example.yours:
            entry.update(original=token(session, original), right=candidates[0].token_id == original,
                         loss=-math.log(max(float(row[original]), 1e-45)))
        rows.append(entry)
    scored = [row["right"] for row in rows if "right" in row]
    return {"positions": rows, "accuracy": sum(scored) / len(scored) if scored else None}


def electra_panel(session: Session, example: Example, step: Step) -> dict | None:
    """The generator's samples (with its probability for each and its top-k there), the
    discriminator's "replaced?" at every token, and the discriminator on the text as it was written
    (detect's). Where the originals are known: the truth beside each call, the tally of what it
    caught and missed, the two losses. On your [MASK]s the generator fills them, the
    discriminator judges the result, and nobody knows what was hidden."""
    if session.head != "rtd":
        return None
    as_written = replaced_probabilities(session.model, inputs({**example.batch, "input_ids": example.original[None]}))[0]
    tokens = [{"position": i, "original": token(session, t), "p_written": float(p)}
              for i, (t, p) in enumerate(zip(example.original, as_written))]
    answer = {"tokens": tokens, "played": bool(step.seen), "yours": example.yours}
    if step.seen:
        objective = session.pretrainer.objectives["rtd"]
        corrupted, probabilities = step.seen["input_ids"][0], step.seen["logits"][0].float().sigmoid()
        for entry, shown, chosen, p in zip(tokens, corrupted, example.chosen, probabilities):
            entry.update(shown=token(session, shown), sampled=bool(chosen), p_replaced=float(p))
            if not example.yours:
                entry["replaced"] = int(shown) != entry["original"]["id"]
        for entry, choice in zip((t for t in tokens if t["sampled"]), generator_choices(session, objective.generator, example, corrupted)):
            entry["generator"] = choice
        if not example.yours:
            judged = [t for t, r in zip(tokens, example.batch["attention_mask"][0].bool()) if r]
            replaced = [t for t in judged if t["replaced"]]
            originals = [t for t in judged if not t["replaced"]]
            answer["tally"] = {"replaced": len(replaced), "caught": sum(t["p_replaced"] > 0.5 for t in replaced),
                               "originals": len(originals), "false_alarms": sum(t["p_replaced"] > 0.5 for t in originals)}
            answer["losses"] = {"mlm": step.metrics.get("mlm_loss"), "mlm_weight": objective.mlm_weight,
                                "rtd": step.metrics.get("rtd_loss"), "rtd_weight": objective.rtd_weight}
    return answer


def generator_choices(session: Session, generator: torch.nn.Module, example: Example, corrupted: torch.Tensor) -> list[dict]:
    """At each masked position, the generator's distribution (softmax of its logits, which
    gumbel_max_sample draws from): its probability for the token it sampled there, and its top-k."""
    batch, chosen = example.batch, example.chosen[None]
    with torch.no_grad():
        hidden = generator.encoder(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]).last_hidden_state
        probabilities = generator.predict(hidden[chosen]).float().softmax(-1)  # [chosen, V]
    choices = []
    for sample, row in zip(corrupted[chosen[0]].tolist(), probabilities):
        top = row.topk(TOP_K)
        choices.append({"p_sample": float(row[sample]),
                        "top": [{**token(session, i), "prob": float(p)} for p, i in zip(top.values, top.indices)]})
    return choices


def distil_panel(session: Session, example: Example, step: Step) -> dict | None:
    """At each chosen position, the teacher's top-k at T = 1 and the same tokens softened at the
    temperature, beside the student's top-k at the temperature (what the soft-target loss
    compares), with what the rest of the vocabulary holds; the three weighted losses and their
    total; the teacher layers the student began as."""
    if session.pretrainer is None or "kd" not in session.pretrainer.objectives or not example.chosen.any():
        return None
    kd, student = session.pretrainer.objectives["kd"], session.model
    ids, mask, chosen = example.batch["input_ids"], example.batch["attention_mask"], example.chosen[None]
    with torch.no_grad():
        teacher_logits = kd.teacher.predict(kd.teacher.encoder(ids, mask).last_hidden_state[chosen]).float()  # [chosen, V]
        student_logits = student.predict(student.encoder(ids, mask).last_hidden_state[chosen]).float()  # [chosen, V]
    teacher_plain, teacher_soft = teacher_logits.softmax(-1), (teacher_logits / kd.temperature).softmax(-1)
    student_soft = (student_logits / kd.temperature).softmax(-1)
    rows = []
    for position, t1, t, s in zip(chosen[0].nonzero()[:, 0].tolist(), teacher_plain, teacher_soft, student_soft):
        top_teacher, top_student = t1.topk(TOP_K).indices.tolist(), s.topk(TOP_K).indices.tolist()
        rows.append({"position": position, "original": token(session, example.original[position]),
                     "teacher": [{**token(session, i), "plain": float(t1[i]), "soft": float(t[i]), "student": float(s[i])}
                                 for i in top_teacher],
                     "student": [{**token(session, i), "soft": float(s[i])} for i in top_student]})
    depth = (kd.teacher.config.num_layers, student.config.num_layers)
    losses = None
    if step.loss is not None:
        metrics = step.metrics
        losses = {"soft": metrics.get("kd_soft_loss"), "soft_weight": kd.soft_weight, "mlm": metrics.get("mlm_loss"),
                  "mlm_weight": kd.mlm_weight, "cosine": metrics.get("kd_cosine_loss"), "cosine_weight": kd.cosine_weight,
                  "total": step.loss["total"]}
    return {"temperature": kd.temperature, "positions": rows, "losses": losses, "teacher_depth": depth[0],
            "student_depth": depth[1], "teacher_layers": teacher_layers(*depth), "vocabulary": student.config.vocab_size}
