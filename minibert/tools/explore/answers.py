"""The explorer's answers: one example, masked as the run masks it, and what each part of the
project's code did with it, as JSON for the page.

Every number here comes from calling the project's code, never from a copy of it:

    the batch        PretrainingBatches.batch (a held-out example, or a static copy's stored mask),
                     or the run's Masking on a typed text; the sentence task's verdict and loss
                     from the run's own objective
    the masked LM    probe.py's mask_probabilities and best_candidates (what fill-mask prints)
    ELECTRA          the run's ReplacedTokenDetection on the batch (its sample, the discriminator's
                     scores, its two losses), and probe.py's replaced_probabilities (detect's)
    DistilBERT       the run's KnowledgeDistillation (its three losses), the teacher's and the
                     student's heads at the masked positions, kd.py's teacher_layers
    attention        attention_maps.py's attention_probabilities (Encoder, output_attentions=True)

`CODE` names, per panel, the functions that did the work; the page shows their source.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ...data.dataset import PretrainingBatches
from ...data.masking import IGNORE_INDEX
from ...objectives.kd import teacher_layers
from ...objectives.sentence import SENTENCE_TASKS
from ..attention_maps import attention_probabilities
from ..probe import MASK_PATTERN, best_candidates, mask_probabilities, masked_ids, replaced_probabilities
from .session import Session

MAX_TEXT_CHARS = 2000  # a text longer than a page of prose is refused before it is tokenized
TOP_K = 5
PAIR_SEPARATOR = "[SEP]"  # a typed "A [SEP] B" is a segment pair
SENTENCE_WORDS = {"nsp": ("next: B is the text that followed A", "random: B comes from another document"),
                  "sop": ("in order: A then B, as the document has them", "swapped: B came before A in the document")}
CODE = {
    "batch": ["minibert.data.dataset:PretrainingBatches.batch", "minibert.data.masking:Masking.__call__",
              "minibert.data.masking:Masking.choose_spans", "minibert.data.masking:Masking.replace",
              "minibert.data.static_masks:dupe_factor_passes", "minibert.data.static_masks:StaticMasks.apply",
              "minibert.objectives.sentence:SentencePairTask.forward"],
    "mlm": ["minibert.tools.probe:mask_probabilities", "minibert.tools.probe:best_candidates",
            "minibert.heads:MaskedLM.predict"],
    "electra": ["minibert.objectives.rtd:ReplacedTokenDetection.forward", "minibert.objectives.rtd:gumbel_max_sample",
                "minibert.objectives.rtd:replace_masked", "minibert.tools.probe:replaced_probabilities"],
    "distil": ["minibert.objectives.kd:KnowledgeDistillation.forward", "minibert.objectives.kd:soft_target_kl",
               "minibert.objectives.kd:teacher_layers"],
    "model": ["minibert.model:build_layers", "minibert.model:Encoder.layer", "minibert.tools.info:describe"],
    "attention": ["minibert.tools.attention_maps:attention_probabilities"],
    "run": ["minibert.runs.curves:read_log", "minibert.runs.curves:run_band"],
    # a question-answering model (questions.py)
    "qa_windows": ["minibert.finetune.windows:question_windows", "minibert.finetune.windows:cut"],
    "qa_logits": ["minibert.finetune.answering:window_logits", "minibert.heads:SpanExtractor.forward"],
    "qa_nbest": ["minibert.finetune.answering:decode_windows", "minibert.finetune.span_decoding:decode_spans",
                 "minibert.finetune.span_decoding:token_max_context", "minibert.finetune.span_decoding:best_pairs",
                 "minibert.finetune.span_decoding:assemble", "minibert.finetune.answering:chosen"],
    "qa_null": ["minibert.finetune.span_decoding:null_scores", "minibert.finetune.span_decoding:assemble"],
}


@dataclass
class Example:
    """One sequence as the model sees it, and what masking did to it."""

    batch: dict[str, torch.Tensor]  # one row: input_ids (masked), attention_mask, token_type_ids, labels, ...
    original: torch.Tensor  # [T] the ids before masking
    chosen: torch.Tensor  # [T] bool: the positions the masking chose (or the learner's [MASK]s)
    source: str  # where the text came from, in words
    yours: bool = False  # the learner wrote the [MASK]s: there is no original to score against
    stored: bool = False  # the mask a static copy stored (BERT's), not one drawn now


def explore(session: Session, text: str | None, draw: int) -> dict:
    """The answer for one text (None: the run's own) and draw: every panel that applies."""
    if session.reading is not None:
        raise ValueError(f"{session.directory} is a question-answering model: ask it a question about a passage")
    if text is not None and len(text) > MAX_TEXT_CHARS:
        raise ValueError(f"the text is {len(text):,} characters; the explorer takes at most {MAX_TEXT_CHARS:,}: shorten it")
    if not isinstance(draw, int) or draw < 0:
        raise ValueError(f"draw must be a whole number from 0, got {draw!r}")
    with session.lock:
        example = typed_example(session, text, draw) if text and text.strip() else run_example(session, draw)
        metrics, seen = run_objectives(session, example, draw)
        return {
            "batch": batch_panel(session, example, metrics, draw),
            "mlm": mlm_panel(session, example),
            "electra": electra_panel(session, example, metrics, seen),
            "distil": distil_panel(session, example, metrics),
            "attention": attention_panel(session, example, seen),
        }


def run_example(session: Session, draw: int) -> Example:
    """The run's own text: a static copy's first example with its stored mask (draw = which copy),
    or the first held-out example with the mask dynamic masking draws in epoch `draw`."""
    data = session.data
    if data is None:
        raise ValueError("the run's corpus is not available here; type a text to look at")
    if session.static:
        rows = session.copy_rows()
        copy = draw % len(rows)
        batch = data.train.batch(0, 0, rows[copy:copy + 1])
        source = f"copy {copy + 1} of {len(rows)}: the first training example of that pass over the corpus, with the mask stored for it"
    else:
        held_out = PretrainingBatches(data.eval.examples, session.masking, batch_size=1, static_masks=None,
                                      seed=session.settings.seed, repeat=False)
        batch = held_out.batch(draw, 0, np.array([0]))
        source = f"the first held-out example, with the mask dynamic masking draws for it in epoch {draw}"
    labels = batch["labels"][0]
    chosen = labels != IGNORE_INDEX
    return Example(batch, torch.where(chosen, labels, batch["input_ids"][0]), chosen, source, stored=session.static)


def typed_example(session: Session, text: str, draw: int) -> Example:
    """A typed text as one segment, or "A [SEP] B" as a pair; masked by the run's masking
    (draw = the generator's seed), unless it holds [MASK]s of its own: then those are the masks."""
    tokenizer = session.tokenizer
    yours = bool(MASK_PATTERN.search(text))
    segments = [part.strip() for part in text.split(PAIR_SEPARATOR, 1)]
    pieces = [masked_ids(tokenizer, s) if MASK_PATTERN.search(s) else tokenizer.tokenize_to_ids(s) for s in segments]
    ids, types = tokenizer.join(*pieces)
    limit = session.encoder.max_length
    if len(ids) > limit:
        raise ValueError(f"the text is {len(ids)} tokens with its special tokens; the model reads at most {limit}: shorten it")
    if session.encoder.config.type_vocab_size < 2:  # one segment type (RoBERTa) or none: B is told apart by its separator only
        types = [0] * len(types)
    batch = tokenizer.pad([(ids, types)])
    if session.variant is not None and len(pieces) == 2:
        batch["sentence_label"] = torch.zeros(1, dtype=torch.long)  # as typed: B follows A
    original = batch["input_ids"][0].clone()
    if yours:
        batch["labels"] = torch.full_like(batch["input_ids"], IGNORE_INDEX)
        return Example(batch, original, original == tokenizer.mask_id, "your text, with your [MASK]s", yours=True)
    batch["input_ids"], batch["labels"] = session.masking(batch["input_ids"], torch.Generator().manual_seed(draw))
    return Example(batch, original, batch["labels"][0] != IGNORE_INDEX, f"your text, masked by the run's masking (draw {draw})")


def inputs(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """What an encoder reads of a batch."""
    return {name: batch[name] for name in ("input_ids", "attention_mask", "token_type_ids")}


def run_objectives(session: Session, example: Example, draw: int) -> tuple[dict[str, float], dict]:
    """The run's pretrainer on the example: every objective's metrics (losses, the sentence task's
    accuracy), and what ELECTRA's discriminator was shown and said (a hook on the kept model)."""
    if session.pretrainer is None or example.yours or not example.chosen.any():
        return {}, {}
    seen = {}

    def watch(module, args, output):
        seen["input_ids"], seen["logits"] = args[0], output.logits

    hook = session.pretrainer.model.register_forward_hook(watch) if session.head == "rtd" else None
    try:
        torch.manual_seed(draw)  # ELECTRA's generator samples from the global generator
        with torch.no_grad():
            _, metrics = session.pretrainer(example.batch)
    finally:
        if hook is not None:
            hook.remove()
    return {name: finite(value) for name, value in metrics.items()}, seen


def finite(value) -> float | None:
    """A metric as JSON can carry it (NaN and infinities have no JSON spelling)."""
    value = float(value)
    return value if math.isfinite(value) else None


def token(session: Session, token_id) -> dict:
    token_id = int(token_id)
    return {"id": token_id, "piece": session.tokenizer.piece(token_id), "text": session.tokenizer.token_text(token_id)}


def fate(session: Session, original: int, shown: int) -> str:
    """What the 80/10/10 rule did at a chosen position, from what the model was shown there."""
    if shown == session.tokenizer.mask_id:
        return "mask"
    return "kept" if shown == original else "random"


def batch_panel(session: Session, example: Example, metrics: dict, draw: int) -> dict:
    shown, segments = example.batch["input_ids"][0], example.batch["token_type_ids"][0]
    special = session.tokenizer.special_ids
    tokens, span, spans = [], None, 0
    for position, (original, seen, segment, chosen) in enumerate(zip(example.original, shown, segments, example.chosen)):
        if chosen and span is None:
            spans += 1
        span = spans if chosen else None
        tokens.append({"position": position, "original": token(session, original), "shown": token(session, seen),
                       "segment": int(segment), "special": int(original) in special, "span": span,
                       "fate": ("yours" if example.yours else fate(session, int(original), int(seen))) if chosen else None})
    masking = session.masking
    answer = {"source": example.source, "draw": draw, "tokens": tokens, "code": CODE["batch"],
              "masking": "static" if example.stored else "dynamic",
              "mask_prob": masking.mask_prob, "replace_probs": list(masking.replace_probs),
              "spans": masking.max_span > 1 or masking.word_starts is not None, "sentence": sentence(session, example, metrics)}
    if answer["masking"] == "static":
        copies = len(session.copy_rows())
        answer["copy"], answer["copies"] = draw % copies, copies
    return answer


def sentence(session: Session, example: Example, metrics: dict) -> dict | None:
    """The sentence task's label and the run's head's verdict, from the objective's own metrics:
    its accuracy on one example says whether the head agreed, its loss what it gave the label."""
    task = next((name for name in SENTENCE_TASKS if session.pretrainer is not None and name in session.pretrainer.objectives), None)
    if task is None or "sentence_label" not in example.batch:
        return None
    label = int(example.batch["sentence_label"][0])
    answer = {"task": task, "label": label, "label_words": SENTENCE_WORDS[task][label]}
    if metrics.get(f"{task}_accuracy") is not None:
        verdict = label if metrics[f"{task}_accuracy"] == 1.0 else 1 - label
        answer.update(verdict=verdict, verdict_words=SENTENCE_WORDS[task][verdict], loss=metrics[f"{task}_loss"],
                      probability=math.exp(-metrics[f"{task}_loss"]))
    return answer


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
                 "top": [{"id": c.token_id, "piece": c.token, "text": c.text, "prob": c.score} for c in candidates]}
        if not example.yours:
            entry.update(original=token(session, original), right=candidates[0].token_id == original,
                         loss=-math.log(max(float(row[original]), 1e-45)))
        rows.append(entry)
    return {"positions": rows, "code": CODE["mlm"]}


def electra_panel(session: Session, example: Example, metrics: dict, seen: dict) -> dict | None:
    """The generator's samples, the discriminator's "replaced?" at every token beside the truth,
    the two weighted losses; and the discriminator on the text as it was written (detect's)."""
    if session.head != "rtd":
        return None
    as_written = replaced_probabilities(session.model, inputs({**example.batch, "input_ids": example.original[None]}))[0]
    tokens = [{"position": i, "original": token(session, t), "p_written": float(p)}
              for i, (t, p) in enumerate(zip(example.original, as_written))]
    answer = {"tokens": tokens, "code": CODE["electra"], "played": bool(seen)}
    if seen:
        objective = session.pretrainer.objectives["rtd"]
        corrupted, probabilities = seen["input_ids"][0], seen["logits"][0].float().sigmoid()
        for entry, shown, chosen, p in zip(tokens, corrupted, example.chosen, probabilities):
            entry.update(shown=token(session, shown), sampled=bool(chosen), p_replaced=float(p),
                         replaced=int(shown) != entry["original"]["id"])
        answer["losses"] = {"mlm": metrics.get("mlm_loss"), "mlm_weight": objective.mlm_weight, "rtd": metrics.get("rtd_loss"),
                            "rtd_weight": objective.rtd_weight}
    return answer


def distil_panel(session: Session, example: Example, metrics: dict) -> dict | None:
    """The teacher's and the student's distributions at each chosen position, softened at the
    temperature; the three weighted losses of the batch; the teacher layers the student began as."""
    if session.pretrainer is None or "kd" not in session.pretrainer.objectives or not example.chosen.any():
        return None
    kd, student = session.pretrainer.objectives["kd"], session.model
    ids, mask, chosen = example.batch["input_ids"], example.batch["attention_mask"], example.chosen[None]
    with torch.no_grad():
        teacher_logits = kd.teacher.predict(kd.teacher.encoder(ids, mask).last_hidden_state[chosen])  # [chosen, V]
        student_logits = student.predict(student.encoder(ids, mask).last_hidden_state[chosen])  # [chosen, V]
    teacher_soft = (teacher_logits.float() / kd.temperature).softmax(-1)
    student_soft = (student_logits.float() / kd.temperature).softmax(-1)
    rows = []
    for position, t, s in zip(chosen[0].nonzero()[:, 0].tolist(), teacher_soft, student_soft):
        shown = sorted(set(t.topk(TOP_K).indices.tolist()) | set(s.topk(TOP_K).indices.tolist()), key=lambda i: -float(t[i]))
        rows.append({"position": position, "original": token(session, example.original[position]),
                     "tokens": [{**token(session, i), "teacher": float(t[i]), "student": float(s[i])} for i in shown]})
    depth = (kd.teacher.config.num_layers, student.config.num_layers)
    losses = None
    if metrics:
        losses = {"soft": metrics.get("kd_soft_loss"), "soft_weight": kd.soft_weight, "mlm": metrics.get("mlm_loss"),
                  "mlm_weight": kd.mlm_weight, "cosine": metrics.get("kd_cosine_loss"), "cosine_weight": kd.cosine_weight}
    return {"temperature": kd.temperature, "positions": rows, "losses": losses, "teacher_depth": depth[0],
            "student_depth": depth[1], "teacher_layers": teacher_layers(*depth), "code": CODE["distil"]}


def attention_panel(session: Session, example: Example, seen: dict) -> dict:
    """Every layer's and head's attention over the example as the model saw it [layers][heads][T][T]:
    the masked text, or for ELECTRA's discriminator what it reads, the generator's samples in the
    masked places (`seen`; the text as written when the objectives did not run)."""
    if session.head != "rtd":
        ids, shown = example.batch["input_ids"], "the text as masked"
    elif seen:
        ids, shown = seen["input_ids"], "the text with the generator's samples in the masked places, as the discriminator read it"
    else:
        ids, shown = example.original[None], "the text as written"
    probabilities = attention_probabilities(session.encoder, inputs({**example.batch, "input_ids": ids}))
    return {"tokens": [session.tokenizer.piece(int(i)) for i in ids[0]], "shown": shown,
            "weights": [[[[round(float(w), 3) for w in row] for row in head] for head in layer] for layer in probabilities],
            "code": CODE["attention"]}
