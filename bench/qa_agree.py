"""An exported question-answering model, answered by transformers alone: the same answers as minibert's?

Usage: python bench/qa_agree.py EXPORT SQUAD_FILE PREDICTIONS_JSON [--max-len 384] [--doc-stride 128]
           [--max-query-len 64] [--n-best 20] [--max-answer-len 30] [--limit N] [--batch-size 32]

EXPORT is what `python -m minibert export` wrote from a fine-tuned span extractor (a family's
*ForQuestionAnswering); PREDICTIONS_JSON is that fine-tune's (or predict's) predictions.json on
SQUAD_FILE (SQuAD's JSON, or a JSONL of id, question, context). This process never imports minibert: it reads the folder with
AutoTokenizer and AutoModelForQuestionAnswering and answers every question the way transformers'
question-answering pipeline did before transformers 5.3 removed it, with the windows and the
decoding written out below, then prints how many answers equal minibert's and the first that
differ. Exit status 0 when all agree, 1 otherwise.

The steps, as the pipeline and run_squad took them:
- windows: the tokenizer's own pair encoding, truncation="only_second", `stride` tokens of
  overlap (transformers' meaning of stride, minibert's --doc-stride), the question cut at
  --max-query-len tokens;
- each window's passage tokens found by `sequence_ids` == 1, their characters by `offset_mapping`;
- a passage token may start an answer only in the window where it has the most context
  (run_squad's max context: min(left, right) + 0.01 × the window's passage length, the first
  window on ties);
- the best --n-best starts and the best --n-best ends among the passage tokens, every pair with
  end >= start and at most --max-answer-len tokens, scored start + end logit; the best pair over
  the question's windows is the answer: context[start of its first token : end of its last].

Answers are compared with the whitespace at their ends stripped: the offsets of a tokenizer.json
with a SentencePiece layout (Metaspace) count the space that ▁ stands for as part of the token,
where minibert's offsets start at the word; SQuAD's scoring ignores it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch


def squad_questions(path: Path) -> list[dict]:
    """Every question of a SQuAD file (or of a JSONL, one question a line, as the Hugging Face
    datasets write SQuAD): id, question, context."""
    if path.suffix == ".jsonl":
        lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        return [{"id": row["id"], "question": row["question"], "context": row["context"]} for row in lines]
    data = json.loads(path.read_text(encoding="utf-8"))["data"]
    return [{"id": qa["id"], "question": qa["question"], "context": paragraph["context"]}
            for article in data for paragraph in article["paragraphs"] for qa in paragraph["qas"]]


def cut_question(tokenizer, question: str, max_query_len: int) -> str:
    """The question's text up to the end of its max_query_len-th token."""
    question = question.lstrip()
    encoded = tokenizer(question, add_special_tokens=False, return_offsets_mapping=True)
    offsets = encoded["offset_mapping"]
    return question if len(offsets) <= max_query_len else question[:offsets[max_query_len - 1][1]]


def windows_of(tokenizer, question: dict, args) -> list[dict]:
    """One question's windows: the model's inputs and each position's passage characters (None outside it)."""
    encoded = tokenizer(cut_question(tokenizer, question["question"], args.max_query_len), question["context"],
                        truncation="only_second", max_length=args.max_len, stride=args.doc_stride,
                        return_overflowing_tokens=True, return_offsets_mapping=True)
    windows = []
    for i in range(len(encoded["input_ids"])):
        sequence = encoded.sequence_ids(i)
        offsets = [tuple(span) if sequence[t] == 1 else None for t, span in enumerate(encoded["offset_mapping"][i])]
        inputs = {name: encoded[name][i] for name in ("input_ids", "token_type_ids", "attention_mask") if name in encoded}
        windows.append({"inputs": inputs, "offsets": offsets})
    return windows


def logits_of(model, windows: list[dict], batch_size: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each window's (start logits, end logits), the windows read in batches padded on the right."""
    out = []
    for first in range(0, len(windows), batch_size):
        batch = windows[first:first + batch_size]
        length = max(len(w["inputs"]["input_ids"]) for w in batch)
        tensors = {name: torch.tensor([w["inputs"][name] + [0] * (length - len(w["inputs"][name])) for w in batch])
                   for name in batch[0]["inputs"]}
        with torch.no_grad():
            result = model(**tensors)
        for row, w in enumerate(batch):
            n = len(w["inputs"]["input_ids"])
            out.append((result.start_logits[row, :n].numpy(), result.end_logits[row, :n].numpy()))
    return out


def max_context_starts(windows: list[dict]) -> list[set[int]]:
    """Per window, the positions whose passage token has its most context there."""
    best: dict[tuple, tuple[float, int, int]] = {}  # a token -> (score, window, position)
    for w, window in enumerate(windows):
        positions = [t for t, span in enumerate(window["offsets"]) if span is not None]
        if not positions:
            continue
        first, last, seen = positions[0], positions[-1], {}
        for t in positions:
            score = min(t - first, last - t) + 0.01 * len(positions)
            span = window["offsets"][t]
            seen[span] = seen.get(span, -1) + 1
            key = (span, seen[span])  # a token: its characters, and how many before it in the window share them
            if key not in best or score > best[key][0]:
                best[key] = (score, w, t)
    owners = [set() for _ in windows]
    for _, w, t in best.values():
        owners[w].add(t)
    return owners


def answer(question: dict, windows: list[dict], logits: list, args) -> str:
    """The best span over the question's windows, as text of the context ("" when no valid span)."""
    best_score, best_text = -np.inf, ""
    for window, starts_allowed, (start_logits, end_logits) in zip(windows, max_context_starts(windows), logits):
        passage = [t for t, span in enumerate(window["offsets"]) if span is not None]
        starts = sorted(starts_allowed, key=lambda t: -start_logits[t])[:args.n_best]
        ends = sorted(passage, key=lambda t: -end_logits[t])[:args.n_best]
        for s in starts:
            for e in ends:
                if 1 <= e - s + 1 <= args.max_answer_len and start_logits[s] + end_logits[e] > best_score:
                    best_score = float(start_logits[s] + end_logits[e])
                    best_text = question["context"][window["offsets"][s][0]:window["offsets"][e][1]]
    return best_text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("export", type=Path)
    parser.add_argument("squad", type=Path)
    parser.add_argument("predictions", type=Path)
    parser.add_argument("--max-len", type=int, default=384)
    parser.add_argument("--doc-stride", type=int, default=128)
    parser.add_argument("--max-query-len", type=int, default=64)
    parser.add_argument("--n-best", type=int, default=20)
    parser.add_argument("--max-answer-len", type=int, default=30)
    parser.add_argument("--limit", type=int, default=None, help="the first N questions only")
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(args.export)
    model = transformers.AutoModelForQuestionAnswering.from_pretrained(args.export).eval()
    ours = json.loads(args.predictions.read_text(encoding="utf-8"))
    questions = [q for q in squad_questions(args.squad) if q["id"] in ours][:args.limit]
    windows = [windows_of(tokenizer, q, args) for q in questions]
    flat = logits_of(model, [w for ws in windows for w in ws], args.batch_size)
    differ, at = [], 0
    for question, its_windows in zip(questions, windows):
        theirs = answer(question, its_windows, flat[at:at + len(its_windows)], args)
        at += len(its_windows)
        if theirs.strip() != ours[question["id"]].strip():
            differ.append((question["id"], ours[question["id"]], theirs))
    assert "minibert" not in sys.modules, "this check must run without minibert"
    print(f"{len(questions) - len(differ)} of {len(questions)} answers equal minibert's "
          f"({sum(map(len, windows))} windows; {type(model).__name__}, transformers {transformers.__version__}, no minibert imported)")
    for qid, mine, theirs in differ[:5]:
        print(f"  {qid}: minibert {mine!r}, transformers {theirs!r}")
    return 0 if not differ else 1


if __name__ == "__main__":
    sys.exit(main())
