"""The explorer's answers: one example, masked as the run masks it, and what each part of the
project's code did with it, as JSON for the page.

Every number here comes from calling the project's code, never from a copy of it:

    the batch        PretrainingBatches.batch (a held-out example, or a static copy's stored mask),
                     or the run's Masking on a typed text; the sentence task's verdict and loss
                     from the run's own objective
    the masked LM    probe.py's mask_probabilities and best_candidates (what fill-mask prints)
    ELECTRA          the run's ReplacedTokenDetection on the batch (its sample, the discriminator's
                     scores, its two losses), its generator's distribution where it sampled, and
                     probe.py's replaced_probabilities (detect's)
    DistilBERT       the run's KnowledgeDistillation (its three losses), the teacher's and the
                     student's heads at the masked positions, kd.py's teacher_layers
    attention        attention_maps.py's attention_probabilities (Encoder, output_attentions=True)
    the step's loss  each objective's own return (a hook on each), its terms times their weights,
                     summed as Pretrainer.forward sums them (`loss_terms`)

`CODE` names, per panel, the functions it may name; each answer lists those that ran while it
was computed (`Ran`, a profiler hook on this thread), so a panel never names code that did not run.
"""

from __future__ import annotations

import inspect
import importlib
import math
import re
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import torch

from ...data.dataset import PretrainingBatches
from ...data.masking import IGNORE_INDEX, Masking, drawn_spans
from ...data.static_masks import EXAMPLES_PER_CHUNK, draw_static_masks
from ...objectives.kd import teacher_layers
from ...objectives.sentence import SENTENCE_TASKS
from ..attention_maps import attention_probabilities
from ...training.loop import Pretrainer
from ..probe import MASK_PATTERN, best_candidates, mask_probabilities, masked_ids, replaced_probabilities
from .session import Session, static_mask_states

# What the explorer reads of a typed text: the model reads at most its max_length tokens, and a
# longer text is cut to them (with a note); the characters past this many are not even tokenized.
MAX_TEXT_CHARS = 100_000
TOP_K = 5
PAIR_SEPARATOR = "[SEP]"  # a typed "A [SEP] B" is a segment pair
# A learner types [mask] or [sep] as readily as [MASK] and [SEP]; the explorer reads them alike.
TYPED_MASK = re.compile(MASK_PATTERN.pattern, re.IGNORECASE)
TYPED_SEPARATOR = re.compile(re.escape(PAIR_SEPARATOR), re.IGNORECASE)
SENTENCE_WORDS = {"nsp": ("next: B is the text that followed A", "random: B comes from another document"),
                  "sop": ("in order: A then B, as the document has them", "swapped: B came before A in the document")}
CODE = {  # per panel, the functions it may name, in the order the page lists those that ran
    "batch": ["minibert.data.dataset:PretrainingBatches.batch", "minibert.data.static_masks:StaticMasks.apply",
              "minibert.data.static_masks:draw_static_masks", "minibert.data.masking:Masking.__call__",
              "minibert.data.masking:Masking.choose", "minibert.data.masking:Masking.choose_spans",
              "minibert.data.masking:Masking.choose_count", "minibert.data.masking:Masking.replace",
              "minibert.objectives.sentence:SentencePairTask.forward"],
    "mlm": ["minibert.tools.probe:mask_probabilities", "minibert.tools.probe:best_candidates",
            "minibert.heads:MaskedLM.predict"],
    "electra": ["minibert.objectives.rtd:ReplacedTokenDetection.forward", "minibert.objectives.rtd:gumbel_max_sample",
                "minibert.objectives.rtd:replace_masked", "minibert.heads:MaskedLM.predict", "minibert.tools.probe:replaced_probabilities"],
    "distil": ["minibert.objectives.kd:KnowledgeDistillation.forward", "minibert.objectives.kd:soft_target_kl",
               "minibert.objectives.kd:teacher_layers"],
    "model": ["minibert.model:build_layers", "minibert.model:Encoder.layer", "minibert.tools.info:describe"],
    "attention": ["minibert.tools.attention_maps:attention_probabilities"],
    "run": ["minibert.runs.curves:read_log", "minibert.runs.curves:run_band"],
    # a question-answering model (questions.py)
    "qa_windows": ["minibert.finetune.kinds.windows:question_windows", "minibert.finetune.kinds.windows:cut"],
    "qa_logits": ["minibert.finetune.kinds.spans:window_logits", "minibert.heads:SpanExtractor.forward"],
    "qa_nbest": ["minibert.finetune.kinds.spans:decode_windows", "minibert.finetune.kinds.span_decoding:decode_spans",
                 "minibert.finetune.kinds.span_decoding:token_max_context", "minibert.finetune.kinds.span_decoding:best_pairs",
                 "minibert.finetune.kinds.span_decoding:assemble", "minibert.finetune.kinds.spans:chosen"],
    "qa_null": ["minibert.finetune.kinds.span_decoding:null_scores", "minibert.finetune.kinds.span_decoding:assemble"],
}


def code_object(name: str):
    """The code object of "module:Qualified.name", under any decorator (torch.no_grad)."""
    module_name, qualified = name.split(":")
    target = importlib.import_module(module_name)
    for part in qualified.split("."):
        target = getattr(target, part)
    return inspect.unwrap(target).__code__


class Ran:
    """Which of the functions `CODE` names run while this is open, on this thread, first call first.

    A profiler hook (sys.setprofile: this thread only, so another request's thread is not
    watched) sees every Python call; it keeps those whose code object is one of the named
    functions'. A panel's "the code that did it" is then what did run for that answer: the
    stored-mask functions only where a stored mask is shown, the span drawing only where spans
    were drawn, the sentence task only where it judged a pair."""

    codes: dict | None = None  # code object -> name, built once

    def __init__(self):
        if Ran.codes is None:
            Ran.codes = {code_object(name): name for names in CODE.values() for name in names}
        self.ran: list[str] = []

    def __enter__(self) -> "Ran":
        self.previous = sys.getprofile()
        sys.setprofile(self.watch)
        return self

    def watch(self, frame, event, arg) -> None:
        if event == "call":
            name = self.codes.get(frame.f_code)
            if name is not None and name not in self.ran:
                self.ran.append(name)

    def __exit__(self, *exc) -> None:
        sys.setprofile(self.previous)

    def named(self, panel: str) -> list[str]:
        """The functions of `panel` that ran, in the order CODE lists them."""
        return [name for name in CODE[panel] if name in self.ran]


@dataclass
class Example:
    """One sequence as the model sees it, and what masking did to it."""

    batch: dict[str, torch.Tensor]  # one row: input_ids (masked), attention_mask, token_type_ids, labels, ...
    original: torch.Tensor  # [T] the ids before masking
    chosen: torch.Tensor  # [T] bool: the positions the masking chose (or the learner's [MASK]s)
    source: str  # where the text came from, in words
    yours: bool = False  # the learner wrote the [MASK]s: there is no original to score against
    stored: bool = False  # the mask a static copy stored (BERT's), not one drawn now
    typed: bool = False  # the learner's text, masked now (even in a static run: nothing was stored for it)
    spans: list[tuple[int, int]] | None = None  # the spans the masking drew, (first, last) token (None: not drawn as spans)
    notes: list[str] = field(default_factory=list)  # what was done to the text before the model read it (a cut)


def explore(session: Session, text: str | None, draw: int) -> dict:
    """The answer for one text (None: the run's own) and draw: every panel that applies."""
    if session.reading is not None:
        raise ValueError(f"{session.directory} is a question-answering model: ask it a question about a passage")
    if not isinstance(draw, int) or isinstance(draw, bool) or not 0 <= draw < 10**9:
        raise ValueError(f"draw must be a whole number from 0, got {draw!r}")
    with session.lock, Ran() as ran:
        example = typed_example(session, text, draw) if text and text.strip() else run_example(session, draw)
        metrics, seen, loss = run_objectives(session, example, draw)
        answer = {
            "batch": {**batch_panel(session, example, metrics, draw), "loss": loss},
            "mlm": mlm_panel(session, example),
            "electra": electra_panel(session, example, metrics, seen),
            "distil": distil_panel(session, example, metrics),
            "attention": attention_panel(session, example, seen),
        }
    for panel, shown in answer.items():
        if shown is not None:
            shown["code"] = ran.named(panel)
    return answer


CHOOSE_SPANS = Masking.choose_spans.__code__  # whose frame the span hook reads


@contextmanager
def spans_recorded(masking: Masking):
    """The spans `masking.choose_spans` draws while this is open, one list per call (per row
    (first, last) token positions, data/masking.py:drawn_spans), read off its frame as it
    returns: a profiler hook on this thread, chained to the one watching which code runs (Ran).
    None where the masking draws no spans."""
    if not (masking.max_span > 1 or masking.word_starts is not None):
        yield None
        return
    log, previous = [], sys.getprofile()

    def watch(frame, event, arg) -> None:
        if previous is not None:
            previous(frame, event, arg)
        if event == "return" and frame.f_code is CHOOSE_SPANS and frame.f_locals.get("self") is masking:
            drawn = frame.f_locals
            log.append(drawn_spans(drawn["span"], drawn["unit"], drawn["unit_segment"], drawn["can_mask"]))

    sys.setprofile(watch)
    try:
        yield log
    finally:
        sys.setprofile(previous)


def run_example(session: Session, draw: int) -> Example:
    """The run's own text: a static copy's first example with its stored mask (draw = which copy),
    or the first held-out example with the mask dynamic masking draws in epoch `draw`."""
    data = session.data
    if data is None:
        raise ValueError("the run's corpus is not available here; type a text to look at")
    spans = None
    if session.static:
        rows = session.copy_rows()
        copy = draw % len(rows)
        batch = data.train.batch(0, 0, rows[copy:copy + 1])
        source = f"copy {copy + 1} of {len(rows)}: the first training example of that pass over the corpus, with the mask stored for it"
        spans, same = stored_mask_drawn_again(session, int(rows[copy]), batch)
        if not same:
            source += " (drawing the stored masks again gives another mask here: the cache is older than this code)"
    else:
        held_out = PretrainingBatches(data.eval.examples, session.masking, batch_size=1, static_masks=None,
                                      seed=session.settings.seed, repeat=False)
        with spans_recorded(session.masking) as drawn:
            batch = held_out.batch(draw, 0, np.array([0]))
        spans = drawn[-1][0] if drawn else None
        source = f"the first held-out example, with the mask dynamic masking draws for it in epoch {draw}"
    labels = batch["labels"][0]
    chosen = labels != IGNORE_INDEX
    return Example(batch, torch.where(chosen, labels, batch["input_ids"][0]), chosen, source, stored=session.static, spans=spans)


def stored_mask_drawn_again(session: Session, row: int, batch: dict) -> tuple[list | None, bool]:
    """Draw the static masks again as the run's pipeline drew them before storing them
    (draw_static_masks, the run's masking and seed), for the chunk that holds `row`: the
    functions that made the stored mask run again now, for the batch panel to name, and the
    spans they drew (where the masking draws spans) can be bracketed. The generator's state where
    each copy's chunk begins is found once, at the first copy past the first chunk, unwatched
    (bookkeeping, not this answer's code: session.py's static_mask_states); a redraw then starts
    at its own chunk. Returns (the row's spans or None, whether the drawing matches the stored mask)."""
    train, states = session.data.train, session.mask_states
    chunk = row // EXAMPLES_PER_CHUNK
    if not states:
        states[0] = torch.Generator().manual_seed(train.seed).get_state()
    if chunk not in states:
        with unwatched():
            states.update(static_mask_states(session))
    generator = torch.Generator()
    generator.set_state(states[chunk])
    with spans_recorded(train.masking) as drawn:
        counts, positions, ids = next(draw_static_masks(train.examples, train.masking, seed=train.seed, generator=generator,
                                                        first_chunk=chunk))
    first = chunk * EXAMPLES_PER_CHUNK
    ends = np.cumsum(counts)
    entries = slice(ends[row - first] - counts[row - first], ends[row - first])
    chosen = (batch["labels"][0] != IGNORE_INDEX).nonzero()[:, 0]
    same = (positions[entries].tolist() == chosen.tolist()
            and ids[entries].tolist() == batch["input_ids"][0, chosen].tolist())
    return (drawn[-1][row - first] if drawn and same else None), same


def prepare(session: Session) -> None:
    """Find where each static copy's chunk begins ahead of the first Draw again: `serve` runs this in
    a thread of its own while the learner reads the first answer (answers that come before it ends
    find what they need themselves)."""
    if session.static:
        states = static_mask_states(session)
        with session.lock:
            session.mask_states.update(states)


@contextmanager
def unwatched():
    """No profiler on this thread while open (Ran's, the span hook's): work that is not the answer's."""
    previous = sys.getprofile()
    sys.setprofile(None)
    try:
        yield
    finally:
        sys.setprofile(previous)


def typed_example(session: Session, text: str, draw: int) -> Example:
    """A typed text as one segment, or "A [SEP] B" as a pair, cut to what the model reads (with a
    note); masked by the run's masking (draw = the generator's seed), unless it holds [MASK]s of
    its own: then those are the masks. A pair on an NSP/SOP run gets the label 0 that the sentence
    task's loss needs; the page shows the head's verdict, not that label (`sentence`)."""
    tokenizer, notes = session.tokenizer, []
    if len(text) > MAX_TEXT_CHARS:
        notes.append(f"the text is {len(text):,} characters: the first {MAX_TEXT_CHARS:,} were read")
        text = text[:MAX_TEXT_CHARS]
    text = TYPED_MASK.sub("[MASK]", text)
    yours = bool(MASK_PATTERN.search(text))
    segments = [part.strip() for part in TYPED_SEPARATOR.split(text, 1)]
    pieces = [masked_ids(tokenizer, s) if MASK_PATTERN.search(s) else tokenizer.tokenize_to_ids(s) for s in segments]
    pieces, cut = fitted(tokenizer, pieces, session.encoder.max_length)
    notes += [cut] if cut else []
    ids, types = tokenizer.join(*pieces)
    if session.encoder.config.type_vocab_size < 2:  # one segment type (RoBERTa) or none: B is told apart by its separator only
        types = [0] * len(types)
    batch = tokenizer.pad([(ids, types)])
    if sentence_task(session) is not None and len(pieces) == 2:
        batch["sentence_label"] = torch.zeros(1, dtype=torch.long)
    original = batch["input_ids"][0].clone()
    if yours:
        batch["labels"] = torch.full_like(batch["input_ids"], IGNORE_INDEX)
        return Example(batch, original, original == tokenizer.mask_id, "your text, with your [MASK]s", yours=True,
                       typed=True, notes=notes)
    with spans_recorded(session.masking) as drawn:
        batch["input_ids"], batch["labels"] = session.masking(batch["input_ids"], torch.Generator().manual_seed(draw))
    return Example(batch, original, batch["labels"][0] != IGNORE_INDEX, f"your text, masked by the run's masking (draw {draw})",
                   typed=True, spans=drawn[-1][0] if drawn else None, notes=notes)


def fitted(tokenizer, pieces: list[list[int]], limit: int) -> tuple[list[list[int]], str | None]:
    """The segments cut to the model's `limit` tokens with their special tokens, and what was
    cut, in words (None: nothing). A pair loses tokens from the end of its longer segment, one
    at a time, as the pretraining data trims a pair (BERT's truncate_seq_pair)."""
    room = limit - tokenizer.num_special(pair=len(pieces) == 2)
    lengths = [len(p) for p in pieces]
    if sum(lengths) <= room:
        return pieces, None
    kept = list(lengths)
    while sum(kept) > room:
        longer = max(range(len(kept)), key=lambda i: kept[i])
        kept[longer] -= 1
    said = (f"the first {kept[0]} were kept" if len(kept) == 1
            else f"A was cut to {kept[0]} of its {lengths[0]} and B to {kept[1]} of its {lengths[1]}, the longer first")
    return ([p[:k] for p, k in zip(pieces, kept)],
            f"the text is {sum(lengths):,} tokens; the model reads {limit} with its special tokens: {said}")


def sentence_task(session: Session) -> str | None:
    """"nsp" or "sop" where the run has a sentence task, else None."""
    objectives = session.pretrainer.objectives if session.pretrainer is not None else {}
    return next((name for name in SENTENCE_TASKS if name in objectives), None)


def inputs(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """What an encoder reads of a batch."""
    return {name: batch[name] for name in ("input_ids", "attention_mask", "token_type_ids")}


# Each objective's terms, as it weighs them: (its metric, the attribute holding its weight, the term in words).
LOSS_TERMS = {"mlm": [("mlm_loss", "weight", "masked-LM")],
              "nsp": [("nsp_loss", "weight", "NSP")], "sop": [("sop_loss", "weight", "SOP")],
              "rtd": [("mlm_loss", "mlm_weight", "generator's masked-LM"), ("rtd_loss", "rtd_weight", "replaced-token detection")],
              "kd": [("kd_soft_loss", "soft_weight", "soft targets (T² · KL)"), ("mlm_loss", "mlm_weight", "masked-LM"),
                     ("kd_cosine_loss", "cosine_weight", "hidden-state cosine")]}


def run_objectives(session: Session, example: Example, draw: int) -> tuple[dict[str, float], dict, dict | None]:
    """The run's pretrainer on the example: every objective's metrics (losses, the sentence task's
    accuracy), what ELECTRA's discriminator was shown and said (a hook on the kept model), and the
    loss the step minimises, term by term (`loss_terms`)."""
    if session.pretrainer is None or example.yours or not example.chosen.any():
        return {}, {}, None
    seen, returned = {}, {}

    def watch(module, args, output):
        seen["input_ids"], seen["logits"] = args[0], output.logits

    pretrainer = session.pretrainer
    if "sentence_label" not in example.batch:  # one segment: the sentence task has no pair to judge, and is left out
        objectives = {name: o for name, o in pretrainer.objectives.items() if name not in SENTENCE_TASKS}
        pretrainer = Pretrainer(pretrainer.model, objectives).eval()
    hooks = [pretrainer.model.register_forward_hook(watch)] if session.head == "rtd" else []
    for name, objective in pretrainer.objectives.items():  # what each objective returned: (its weighted loss, its metrics)
        hooks.append(objective.register_forward_hook(lambda module, args, output, name=name: returned.__setitem__(name, output)))
    try:
        torch.manual_seed(draw)  # ELECTRA's generator samples from the global generator
        with torch.no_grad():
            total, metrics = pretrainer(example.batch)
    finally:
        for hook in hooks:
            hook.remove()
    return ({name: finite(value) for name, value in metrics.items()}, seen,
            loss_terms(pretrainer, returned, float(total)))


def loss_terms(pretrainer: Pretrainer, returned: dict, total: float) -> dict:
    """The loss the step minimises for this example, as Pretrainer.forward sums it: each objective's
    terms (weight × its unweighted loss, from the metrics that objective returned), their sum, and the
    total the pretrainer returned, which the sum equals."""
    terms = []
    for name, objective in pretrainer.objectives.items():
        _, metrics = returned[name]
        for metric, weight, words in LOSS_TERMS[name]:
            terms.append({"objective": name, "metric": metric, "words": words, "weight": float(getattr(objective, weight)),
                          "value": finite(metrics[metric])})
    mlm = next((metrics["mlm_accuracy"] for _, metrics in returned.values() if "mlm_accuracy" in metrics), None)
    return {"terms": terms, "total": finite(total), "mlm_accuracy": None if mlm is None else finite(mlm)}


def finite(value) -> float | None:
    """A metric as JSON can carry it (NaN and infinities have no JSON spelling)."""
    value = float(value)
    return value if math.isfinite(value) else None


def token(session: Session, token_id) -> dict:
    """A token's id, its piece, and its text; a byte-fallback piece, a part of a character that
    decodes to U+FFFD alone, keeps its piece ("<0xE2>") as its text."""
    token_id = int(token_id)
    piece, text = session.tokenizer.piece(token_id), session.tokenizer.token_text(token_id)
    return {"id": token_id, "piece": piece, "text": piece if "\ufffd" in text else text}


def fate(session: Session, original: int, shown: int) -> str:
    """What the 80/10/10 rule did at a chosen position, from what the model was shown there."""
    if shown == session.tokenizer.mask_id:
        return "mask"
    return "kept" if shown == original else "random"


def batch_panel(session: Session, example: Example, metrics: dict, draw: int) -> dict:
    """The example token by token: what the model was shown, what masking did where, the spans
    as drawn (each in a lane of its own where spans overlap), the sentence task's verdict."""
    shown, segments = example.batch["input_ids"][0], example.batch["token_type_ids"][0]
    special = session.tokenizer.special_ids
    spans, lanes = [], []  # lanes: where each lane's last span ends
    for number, (first, last) in enumerate(example.spans or [], start=1):
        lane = next((i for i, end in enumerate(lanes) if end < first), len(lanes))
        lanes[lane:lane + 1] = [last]
        spans.append({"number": number, "first": first, "last": last, "lane": lane})
    tokens = []
    for position, (original, seen, segment, chosen) in enumerate(zip(example.original, shown, segments, example.chosen)):
        tokens.append({"position": position, "original": token(session, original), "shown": token(session, seen),
                       "segment": int(segment), "special": int(original) in special,
                       "spans": [s["number"] for s in spans if s["first"] <= position <= s["last"]],
                       "fate": ("yours" if example.yours else fate(session, int(original), int(seen))) if chosen else None})
    masking = session.masking
    kind = "yours" if example.yours else "typed" if example.typed else "static" if example.stored else "dynamic"
    answer = {"source": example.source, "draw": draw, "tokens": tokens, "masking": kind, "run_static": session.static,
              "mask_prob": masking.mask_prob, "replace_probs": list(masking.replace_probs), "notes": example.notes,
              "max_span": masking.max_span, "whole_word": masking.word_starts is not None,
              "spans": spans if example.spans is not None else None, "sentence": sentence(session, example, metrics)}
    if kind == "static":
        copies = len(session.copy_rows())
        answer["copy"], answer["copies"] = draw % copies, copies
    return answer


def sentence(session: Session, example: Example, metrics: dict) -> dict | None:
    """The sentence task's side of the example. The run's own pair has its label and the head's
    verdict (the objective's accuracy on one example says whether the head agreed, its loss what
    it gave the label). A typed pair has no label the page can know, only the head's verdict;
    one segment has no pair to judge (its objectives run without the sentence task)."""
    task = sentence_task(session)
    if task is None:
        return None
    if "sentence_label" not in example.batch:
        return {"task": task, "pair": False}
    answer = {"task": task, "pair": True, "typed": example.typed}
    if not example.typed:
        label = int(example.batch["sentence_label"][0])
        answer.update(label=label, label_words=SENTENCE_WORDS[task][label])
    if metrics.get(f"{task}_accuracy") is not None:
        label = int(example.batch["sentence_label"][0])
        verdict = label if metrics[f"{task}_accuracy"] == 1.0 else 1 - label
        p_label = math.exp(-metrics[f"{task}_loss"])
        answer.update(verdict=verdict, verdict_words=SENTENCE_WORDS[task][verdict],
                      verdict_probability=p_label if verdict == label else 1 - p_label)
        if not example.typed:
            answer.update(loss=metrics[f"{task}_loss"], probability=p_label)
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
                 "top": [{"id": c.token_id, "piece": c.token, "text": c.token if "\ufffd" in c.text else c.text,
                          "prob": c.score} for c in candidates]}  # a byte piece keeps its piece, as token() does
        if not example.yours:
            entry.update(original=token(session, original), right=candidates[0].token_id == original,
                         loss=-math.log(max(float(row[original]), 1e-45)))
        rows.append(entry)
    scored = [row["right"] for row in rows if "right" in row]
    return {"positions": rows, "accuracy": sum(scored) / len(scored) if scored else None}


def electra_panel(session: Session, example: Example, metrics: dict, seen: dict) -> dict | None:
    """The generator's samples (with its probability for each and its top-k there), the
    discriminator's "replaced?" at every token beside the truth, the tally of what it caught and
    missed, the two weighted losses; and the discriminator on the text as it was written (detect's)."""
    if session.head != "rtd":
        return None
    as_written = replaced_probabilities(session.model, inputs({**example.batch, "input_ids": example.original[None]}))[0]
    tokens = [{"position": i, "original": token(session, t), "p_written": float(p)}
              for i, (t, p) in enumerate(zip(example.original, as_written))]
    answer = {"tokens": tokens, "played": bool(seen)}
    if seen:
        objective = session.pretrainer.objectives["rtd"]
        corrupted, probabilities = seen["input_ids"][0], seen["logits"][0].float().sigmoid()
        real = example.batch["attention_mask"][0].bool()
        for entry, shown, chosen, p in zip(tokens, corrupted, example.chosen, probabilities):
            entry.update(shown=token(session, shown), sampled=bool(chosen), p_replaced=float(p),
                         replaced=int(shown) != entry["original"]["id"])
        generator = generator_choices(session, objective.generator, example, corrupted)
        for entry, choice in zip((t for t in tokens if t["sampled"]), generator):
            entry["generator"] = choice
        judged = [t for t, r in zip(tokens, real) if r]
        replaced = [t for t in judged if t["replaced"]]
        originals = [t for t in judged if not t["replaced"]]
        answer["tally"] = {"replaced": len(replaced), "caught": sum(t["p_replaced"] > 0.5 for t in replaced),
                           "originals": len(originals), "false_alarms": sum(t["p_replaced"] > 0.5 for t in originals)}
        answer["losses"] = {"mlm": metrics.get("mlm_loss"), "mlm_weight": objective.mlm_weight, "rtd": metrics.get("rtd_loss"),
                            "rtd_weight": objective.rtd_weight}
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


def distil_panel(session: Session, example: Example, metrics: dict) -> dict | None:
    """At each chosen position, the teacher's top-k at T = 1 and the same tokens softened at the
    temperature, beside the student's top-k at the temperature (what the soft-target loss
    compares); the three weighted losses; the teacher layers the student began as."""
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
    if metrics:
        losses = {"soft": metrics.get("kd_soft_loss"), "soft_weight": kd.soft_weight, "mlm": metrics.get("mlm_loss"),
                  "mlm_weight": kd.mlm_weight, "cosine": metrics.get("kd_cosine_loss"), "cosine_weight": kd.cosine_weight}
    return {"temperature": kd.temperature, "positions": rows, "losses": losses, "teacher_depth": depth[0],
            "student_depth": depth[1], "teacher_layers": teacher_layers(*depth)}


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
            "weights": probabilities.double().mul(1000).round().div(1000).tolist()}  # to 3 places, in one call
