"""The explorer's answer for a question-answering model: one question about one passage, read
and answered as `python -m minibert predict` answers it, with the numbers in between.

Every number comes from the fine-tune's own code (finetune/kinds/spans.py and what it calls):

    the windows      windows.py's question_windows, with the model's reading (its checkpoint's:
                     --max-len, --max-query-len, --doc-stride)
    the logits       spans.py's window_logits: one start and one end logit per position
    the decoding     spans.py's decode_windows (span_decoding.py's decode_spans) on those very
                     logits, and its chosen answer (spans.py's chosen, as predict reports it)

The page's probabilities are each window's softmax over its own positions, as the span head's
loss reads them (heads.py: span_loss): the start of the answer is one position of the window,
[CLS] included (where a window that does not hold the answer points). The n-best list's
probabilities are decode_spans' own: a softmax over the list's scores.
"""

from __future__ import annotations

from pathlib import Path

import torch

from ...finetune.kinds.spans import Decoding, chosen, decode_windows, qa_max_len, window_logits
from ...finetune.kinds.squad import QAExample, SquadData
from ...finetune.kinds.windows import Window, question_windows
from .code_ran import CODE
from .session import Session

MAX_PASSAGE_TOKENS = 2000  # a passage of a few pages, cut into a handful of windows: the page stays quick to answer
BATCH_WINDOWS = 16  # windows per forward pass
QUESTION_ID = "explore"


def reading_limits(session: Session) -> dict:
    """What the page says beside its boxes: how the model reads a question and a passage, in tokens."""
    decoding = Decoding.of(session.reading)
    return {"max_len": qa_max_len(session.reading.get("max_len"), session.model.config), "max_query_len": decoding.max_query_len,
            "doc_stride": decoding.doc_stride, "n_best": decoding.n_best, "max_answer_len": decoding.max_answer_len,
            "null_threshold": decoding.null_threshold, "with_null": bool(session.reading.get("with_null")),
            "max_passage_tokens": MAX_PASSAGE_TOKENS}


def ask(session: Session, question: str | None, passage: str | None) -> dict:
    """The answer panel for one question about one passage: its windows, each window's start and
    end probabilities over the passage's tokens, the n-best list, the chosen span (and, for a
    model fine-tuned on SQuAD 2.0, the null score and the decision)."""
    if session.reading is None:
        raise ValueError(f"{session.directory} is not a question-answering model: type a text to mask instead")
    question, passage = (question or "").strip(), passage or ""
    if not question:
        raise ValueError("the question is empty: type a question about the passage")
    if not passage.strip():
        raise ValueError("the passage is empty: paste the text the answer is to be found in")
    limits = reading_limits(session)
    tokenizer = session.tokenizer
    asked = tokenizer.tokenize_to_ids(question)
    if len(asked) > limits["max_query_len"]:
        raise ValueError(f"the question is {len(asked)} tokens; this model reads at most {limits['max_query_len']} "
                         f"(its fine-tune's --max-query-len): shorten it")
    ids, spans = tokenizer.tokenize_with_offsets(passage)
    if not ids:
        raise ValueError("the passage has no tokens: paste some text")
    if len(ids) > MAX_PASSAGE_TOKENS:
        raise ValueError(f"the passage is {len(ids):,} tokens; the explorer takes at most {MAX_PASSAGE_TOKENS:,}: shorten it")
    examples = SquadData(Path("<explore>"), [QAExample(QUESTION_ID, "", question, passage, [])])
    with session.lock:
        windows, _ = question_windows(tokenizer, examples, limits["max_len"], limits["max_query_len"], limits["doc_stride"],
                                      labelled=False)
        start_logits, end_logits = window_logits(session.model, tokenizer, windows, BATCH_WINDOWS, torch.device("cpu"))
        decoded = decode_windows(examples, windows, start_logits, end_logits, Decoding.of(session.reading),
                                 with_null=limits["with_null"])
    found = chosen(decoded, QUESTION_ID)
    nbest = [{**entry, "window": picked_from(windows, start_logits, entry)} for entry in decoded.nbest[QUESTION_ID]]
    answer = {"text": found.text, "start": found.start, "end": found.start + len(found.text) if found.start >= 0 else -1,
              "probability": found.score, "window": next((e["window"] for e in nbest if e["text"] == found.text
                                                          and e["start"] == found.start), None)}
    return {
        "question": {"text": question, "tokens": len(asked)},
        "passage": {"text": passage, "tokens": [{"start": s, "end": e, "piece": tokenizer.piece(i)} for i, (s, e) in zip(ids, spans)]},
        "limits": limits,
        "windows": window_panel(windows, spans, start_logits, end_logits),
        "answer": answer,
        "nbest": nbest,
        "null": null_panel(decoded, nbest, limits) if limits["with_null"] else None,
        "code": {part: CODE[f"qa_{part}"] for part in ("windows", "logits", "nbest", "null")},
    }


def window_panel(windows: list[Window], spans: list[tuple[int, int]], start_logits: torch.Tensor,
                 end_logits: torch.Tensor) -> list[dict]:
    """Per window: the passage tokens it holds (first, last, and the overlap with the window
    before), [CLS]'s start and end probability, and each passage token's, softmax over the
    window's own positions (window_logits pads a shorter window with zeros: left out here)."""
    answer, first = [], 0
    for number, window in enumerate(windows):
        length = len(window.input_ids)
        start_p, end_p = start_logits[number, :length].softmax(-1), end_logits[number, :length].softmax(-1)
        inside = [position for position, span in enumerate(window.offsets) if span is not None]
        held = [window.offsets[position] for position in inside]
        question = [position for position, span in enumerate(window.offsets) if span is None and position > 0]  # and separators
        first = next(at for at in range(first, len(spans)) if spans[at:at + len(held)] == held)  # where cut put it
        previous = answer[-1] if answer else None
        answer.append({
            "number": number, "length": length, "first": first, "last": first + len(held) - 1,
            "overlap": 0 if previous is None else max(0, previous["last"] - first + 1),
            "cls": {"start": float(start_p[0]), "end": float(end_p[0])},
            "others": {"start": float(start_p[question].sum()), "end": float(end_p[question].sum())},
            "start": [float(p) for p in start_p[inside]], "end": [float(p) for p in end_p[inside]],
            "start_logits": [float(x) for x in start_logits[number, inside]],
            "end_logits": [float(x) for x in end_logits[number, inside]],
        })
    return answer


def picked_from(windows: list[Window], start_logits: torch.Tensor, entry: dict) -> int | None:
    """The window an n-best span was decoded from: the one whose token at the span's first
    character has the span's start logit (None for the null entry, "no answer")."""
    if entry.get("start") is None:
        return None
    for number, window in enumerate(windows):
        for position, span in enumerate(window.offsets):
            if span is not None and span[0] == entry["start"] and float(start_logits[number, position]) == entry["start_logit"]:
                return number
    return None


def null_panel(decoded, nbest: list[dict], limits: dict) -> dict:
    """SQuAD 2.0's decision, from decode_spans' numbers: the null score ([CLS]'s start + end
    logit, from the window lowest in it), the best span's score, their difference (the null
    odds) against --null-threshold."""
    null = next(entry for entry in nbest if entry.get("start") is None)
    odds = decoded.null_odds[QUESTION_ID]
    spans = [entry for entry in nbest if entry.get("start") is not None]
    return {"score": null["score"], "start_logit": null["start_logit"], "end_logit": null["end_logit"],
            "best_span_score": spans[0]["score"] if spans else None, "odds": odds if spans else None,
            "threshold": limits["null_threshold"], "answered": decoded.predictions[QUESTION_ID] != ""}
