"""The token strip: the example token by token, what masking did where (each token's fate and
the spans drawn), how the masking rule reads for this draw, and the sentence task's verdict."""

from __future__ import annotations

from .example import Example
from .session import Session
from .step import Step, sentence


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


def batch_panel(session: Session, example: Example, step: Step, draw: int) -> dict:
    """The example token by token: what the model was shown, what masking did where, the spans
    as drawn (each in a lane of its own where spans overlap), the sentence task's verdict, and
    how many tokens this draw chose of how many it could."""
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
              "specials": example.specials, "chosen": int(example.chosen.sum()),
              "maskable": sum(not t["special"] for t in tokens), "segment_types": session.encoder.config.type_vocab_size,
              "max_span": masking.max_span, "whole_word": masking.word_starts is not None,
              "spans": spans if example.spans is not None else None, "sentence": sentence(session, example, step.metrics),
              "loss": step.loss}
    if kind == "static":
        copies = len(session.copy_rows())
        answer["copy"], answer["copies"] = draw % copies, copies
    return answer
