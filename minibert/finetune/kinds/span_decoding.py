"""From a span head's start and end logits to answers: SQuAD's n-best decoding, vectorized.

A context longer than a window is read in overlapping windows, each scored on its own. For
each question, as BERT's run_squad.py and transformers' utils_qa.py decode it: the best
`n_best` start tokens and the best `n_best` end tokens of each window (passage tokens only),
every pair with end >= start and at most `max_answer_len` tokens scored start + end logit,
and the best pairs over all the question's windows, mapped back to the characters
context[start of the start token : end of the end token]. The same character span reached
from two windows counts once, with its better score.

A token that sits in two windows is a start only in the window where it has the most context
around it (run_squad's "max context": the window where min(tokens left of it, tokens right
of it) + 0.01 * window's passage length is largest, the first such on ties), so a span is not
picked from a window that cuts it off. Unlike run_squad the top n_best are taken among
passage tokens, not among all tokens and then filtered, so a question token with a high
logit never takes a candidate's place.

SQuAD v2.0 (`allow_null`): "no answer" is the span [CLS]..[CLS] (position 0), scored by its
start + end logit, the lowest over the question's windows (the window most sure there is an
answer speaks for the question). null_odds = null score - best span's score; above
`null_threshold` the answer is "". The n-best list carries the null entry too (text "",
start None), and each entry's probability is the softmax over the list's scores. A question
without a single valid span answers "", and its null odds are its null score less 0, the score
of the "empty" entry run_squad.py and utils_qa.py put in its place (NO_SPAN_SCORE): a finite
number, as null_odds.json must hold for a strict JSON parser.

The work is a few tensor operations over all windows at once (top-k, a [n_best x n_best]
score matrix per window, a sort) and one short Python loop per question; it writes nothing,
so an interrupt leaves no partial output (`write_predictions` publishes files atomically).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import NamedTuple, Sequence

import numpy as np
import torch

from ...operations.files import write_json
from .squad import QAExample

NO_SPAN_SCORE = 0.0  # the best span's score where a question has none: upstream's "empty" entry's (start, end logits 0)


class Decoded(NamedTuple):
    """Answers per question id: the text, its n-best list, and (v2.0) the null odds."""

    predictions: dict[str, str]
    nbest: dict[str, list[dict]]
    null_odds: dict[str, float]  # empty unless decoded with allow_null


def decode_spans(examples: Sequence[QAExample], window_example, offsets, start_logits, end_logits, *, n_best: int = 20,
                 max_answer_len: int = 30, allow_null: bool = False, null_threshold: float = 0.0,
                 max_context: bool = True) -> Decoded:
    """Answers for `examples` from their windows' logits.

    window_example  [W] the index in `examples` of each window's question
    offsets         [W, L, 2] each token's (start, end) characters in the context, -1 for
                    tokens outside it
    start_logits, end_logits  [W, L] (numpy or torch)
    """
    starts, ends = logit_matrix(start_logits), logit_matrix(end_logits)
    windows, length = starts.shape
    if ends.shape != starts.shape:
        raise ValueError(f"start logits are {tuple(starts.shape)} but end logits {tuple(ends.shape)}; give one pair per window")
    spans = offsets_array(offsets, length)
    owner = np.asarray(window_example, dtype=np.int64).reshape(-1)
    if spans.shape[0] != windows or owner.shape[0] != windows:
        raise ValueError(f"{windows} windows of logits, {spans.shape[0]} of offsets and {owner.shape[0]} example indices; "
                         f"give each window all three")
    if windows and (owner.min() < 0 or owner.max() >= len(examples)):
        raise ValueError(f"a window belongs to example {owner.max() if owner.max() >= len(examples) else owner.min()}, "
                         f"but there are {len(examples)} examples")
    unread = np.setdiff1d(np.arange(len(examples)), owner)
    if unread.size:
        raise ValueError(f"question {examples[unread[0]].id!r} has no window ({unread.size} questions have none); "
                         f"decode the windows of every question")
    passage = torch.from_numpy(spans[..., 0] >= 0)
    starts_ok = passage & torch.from_numpy(token_max_context(spans, owner)) if max_context else passage
    candidates = best_pairs(starts, ends, starts_ok, passage, n_best, max_answer_len)
    nulls = null_scores(starts, ends, owner, len(examples)) if allow_null else None
    return assemble(examples, owner, spans, candidates, nulls, n_best, null_threshold)


def logit_matrix(logits) -> torch.Tensor:
    """[W, L] float32 logits."""
    matrix = torch.as_tensor(logits).detach().float().cpu() if torch.is_tensor(logits) else torch.from_numpy(np.asarray(logits, dtype=np.float32))
    if matrix.dim() != 2:
        raise ValueError(f"logits must be one row per window, [windows, length]; got shape {tuple(matrix.shape)}")
    return matrix


def offsets_array(offsets, length: int) -> np.ndarray:
    """[W, length, 2] int64 character offsets, -1 for tokens outside the context."""
    spans = np.asarray(offsets, dtype=np.int64)
    if spans.ndim != 3 or spans.shape[2] != 2 or spans.shape[1] > length:
        raise ValueError(f"offsets must be [windows, length, 2], at most {length} long; got shape {spans.shape}")
    if spans.shape[1] < length:  # offsets stop where the padding begins
        spans = np.concatenate([spans, np.full((spans.shape[0], length - spans.shape[1], 2), -1, dtype=np.int64)], axis=1)
    spans = spans.copy()
    spans[(spans[..., 0] < 0) | (spans[..., 1] < spans[..., 0])] = -1  # anything but a real span is outside the passage
    return spans


def token_max_context(spans: np.ndarray, owner: np.ndarray) -> np.ndarray:
    """[W, L] True where a passage token has its max context in this window (module
    docstring). A token is known across windows by its question, its character span and how
    many tokens before it in the window share that span (the byte pieces of one character, say,
    are several tokens with one span); only questions with several windows need the comparison."""
    passage = spans[..., 0] >= 0
    best = passage.copy()
    shared = np.bincount(owner)[owner] > 1
    if not shared.any():
        return best
    rows = np.flatnonzero(shared)
    inside = passage[rows]
    position = np.arange(spans.shape[1])
    first = np.where(inside, position, spans.shape[1]).min(axis=1, keepdims=True)
    last = np.where(inside, position, -1).max(axis=1, keepdims=True)
    score = np.minimum(position - first, last - position) + 0.01 * inside.sum(axis=1, keepdims=True)
    w, t = np.nonzero(inside)  # window-major: on equal scores the earlier window comes first
    chars = spans[rows[w], t]
    key = np.stack([owner[rows[w]], chars[:, 0], chars[:, 1], same_span_rank(w, chars)], axis=1)
    by_score = np.argsort(-score[w, t], kind="stable")
    _, first_of_key = np.unique(key[by_score], axis=0, return_index=True)
    winners = by_score[first_of_key]
    best[rows] = False
    best[rows[w[winners]], t[winners]] = True
    return best


def same_span_rank(window: np.ndarray, chars: np.ndarray) -> np.ndarray:
    """For tokens listed window by window in position order: how many earlier tokens of the
    same window have the same character span (0 for almost every token)."""
    order = np.lexsort((chars[:, 1], chars[:, 0], window))  # stable: position order within a span
    group = np.stack([window, chars[:, 0], chars[:, 1]], axis=1)[order]
    starts = np.r_[True, (group[1:] != group[:-1]).any(axis=1)]
    index = np.arange(len(order))
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = index - np.maximum.accumulate(np.where(starts, index, 0))
    return rank


class Candidates(NamedTuple):
    """Candidate spans, one row each: window, start and end token, score."""

    window: np.ndarray
    start: np.ndarray
    end: np.ndarray
    score: np.ndarray
    start_logit: np.ndarray
    end_logit: np.ndarray


def best_pairs(starts: torch.Tensor, ends: torch.Tensor, starts_ok: torch.Tensor, passage: torch.Tensor,
               n_best: int, max_answer_len: int) -> Candidates:
    """The n_best best valid (start, end) pairs of every window, from its n_best best starts
    and n_best best ends: a [W, k, k] score matrix, invalid pairs masked to -inf."""
    k = min(n_best, starts.shape[1])
    start_value, start_at = starts.masked_fill(~starts_ok, -math.inf).topk(k, dim=1)
    end_value, end_at = ends.masked_fill(~passage, -math.inf).topk(k, dim=1)
    span = end_at[:, None, :] - start_at[:, :, None] + 1
    score = (start_value[:, :, None] + end_value[:, None, :]).masked_fill((span < 1) | (span > max_answer_len), -math.inf)
    top, pair = score.flatten(1).topk(min(n_best, k * k), dim=1)
    start = start_at.gather(1, pair // k)
    end = end_at.gather(1, pair % k)
    keep = torch.isfinite(top)
    window = torch.arange(starts.shape[0])[:, None].expand_as(top)[keep]
    start, end = start[keep], end[keep]
    return Candidates(window.numpy(), start.numpy(), end.numpy(), top[keep].double().numpy(),
                      starts[window, start].double().numpy(), ends[window, end].double().numpy())


def null_scores(starts: torch.Tensor, ends: torch.Tensor, owner: np.ndarray, count: int) -> list[tuple[float, float, float]]:
    """Per question (score, start logit, end logit) of "no answer": [CLS]'s, from the window where it is lowest."""
    score = (starts[:, 0] + ends[:, 0]).double().tolist()
    lowest: list = [None] * count
    for w, (e, s) in enumerate(zip(owner.tolist(), score)):
        if lowest[e] is None or s < lowest[e][0]:
            lowest[e] = (s, float(starts[w, 0]), float(ends[w, 0]))
    return lowest


def assemble(examples: Sequence[QAExample], owner: np.ndarray, spans: np.ndarray, found: Candidates,
             nulls: list | None, n_best: int, null_threshold: float) -> Decoded:
    """Each question's n-best list from its windows' candidates: best first, each character span once."""
    question = owner[found.window]
    start_char = spans[found.window, found.start, 0]
    end_char = spans[found.window, found.end, 1]
    order = np.lexsort((-found.score, question))  # by question, then best first
    _, first = np.unique(np.stack([question, start_char, end_char], axis=1)[order], axis=0, return_index=True)
    order = order[np.sort(first)]  # each span once, with its best score
    group = question[order]
    rank = np.arange(len(order)) - np.searchsorted(group, group)
    order = order[rank < n_best]
    lists: list[list[dict]] = [[] for _ in examples]
    for e, s, end, score, start_logit, end_logit in zip(question[order].tolist(), start_char[order].tolist(), end_char[order].tolist(),
                                                        found.score[order].tolist(), found.start_logit[order].tolist(), found.end_logit[order].tolist()):
        lists[e].append({"text": examples[e].context[s:end], "start": s, "score": score,
                         "start_logit": start_logit, "end_logit": end_logit})
    predictions, nbest, null_odds = {}, {}, {}
    for e, (example, entries) in enumerate(zip(examples, lists)):
        best = entries[0] if entries else None
        if nulls is not None:
            score, start_logit, end_logit = nulls[e]
            null = {"text": "", "start": None, "score": score, "start_logit": start_logit, "end_logit": end_logit}
            entries = sorted([*entries, null], key=lambda entry: -entry["score"])[:n_best]
            if not any(entry is null for entry in entries):
                entries.append(null)
            null_odds[example.id] = score - (best["score"] if best else NO_SPAN_SCORE)
        top = max(entry["score"] for entry in entries) if entries else 0.0
        weights = [math.exp(entry["score"] - top) for entry in entries]
        total = sum(weights)
        for entry, weight in zip(entries, weights):
            entry["probability"] = weight / total
        answered = best is not None and (nulls is None or null_odds[example.id] <= null_threshold)
        predictions[example.id] = best["text"] if answered else ""
        nbest[example.id] = entries
    return Decoded(predictions, nbest, null_odds)


def best_spans(decoded: Decoded) -> dict[str, str]:
    """Each question's best span, the answer it gives whenever its null odds are within the threshold
    ("" for a question without one): what answering again at another --null-threshold reads."""
    return {qid: next((entry["text"] for entry in entries if entry["start"] is not None), "")
            for qid, entries in decoded.nbest.items()}


def write_predictions(out: str | Path, decoded: Decoded) -> list[Path]:
    """predictions.json ({id: answer}, the layout SQuAD's evaluation scripts read),
    nbest_predictions.json and, when decoded for v2.0, null_odds.json (the scripts'
    --na-prob-file), each published atomically. Returns the paths written."""
    out = Path(out)
    written = [write_json(out / "predictions.json", decoded.predictions),
               write_json(out / "nbest_predictions.json", decoded.nbest)]
    if decoded.null_odds:
        written.append(write_json(out / "null_odds.json", decoded.null_odds))
    return written
