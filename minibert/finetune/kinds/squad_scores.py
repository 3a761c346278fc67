"""SQuAD's scores: exact match and token F1, by the rules of the official evaluation scripts.

Both compare *normalized* answers: lower-cased, punctuation (string.punctuation) removed, the
articles a/an/the removed as whole words, whitespace collapsed — so "The Broncos." matches
"broncos". F1 counts the tokens (whitespace-split words) shared by prediction and gold; a
question scores its best over its gold answers; the totals are percentages. SQuAD v2.0's
rules throughout (the v1.1 script differs only on answers that normalize to nothing): an
impossible question's gold is [""], so only the empty prediction scores on it, and when
either side has no tokens F1 is exact match.

With `null_odds` (how much more the model believes "no answer" than its best span) v2.0
also reports best_exact/best_f1: the scores at the threshold on the odds that would have been
best, found as the official script does by sweeping the questions in order of their odds.
The main scores are those of the predictions as given (the decoder already applied its
threshold), as the official script scores them for any threshold it applies of 1.0 or below.

The keys are the official scripts' own: v1.1's `exact_match` and `f1`; for v2.0 data or a
model that may answer "" also v2.0's `exact`, `total`, `HasAns_*`, `NoAns_*` and `best_*`
(`exact_match` stays beside `exact`, so that one key reads every run's exact match).
`reanswered_threshold` finds the threshold the official sweep cannot see (it says why).
"""

from __future__ import annotations

import re
import string
from collections import Counter
from typing import Sequence

from .squad import QAExample

ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
PUNCTUATION = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower case, no punctuation, no articles, single spaces (in the official script's order)."""
    text = "".join(ch for ch in text.lower() if ch not in PUNCTUATION)
    return " ".join(ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, gold: str) -> float:
    """1.0 when the two are the same once normalized, else 0.0."""
    return float(normalize_answer(prediction) == normalize_answer(gold))


def token_f1(prediction: str, gold: str) -> float:
    """F1 of the normalized tokens the two share (counted with multiplicity); exact match
    when either has no tokens, so an empty prediction scores 1 only against an empty gold."""
    predicted, true = normalize_answer(prediction).split(), normalize_answer(gold).split()
    if not predicted or not true:
        return float(predicted == true)
    same = sum((Counter(predicted) & Counter(true)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(predicted), same / len(true)
    return 2 * precision * recall / (precision + recall)


def gold_answers(example: QAExample) -> list[str]:
    """The texts a prediction is compared with: the answers that normalize to something, or
    [""] when none do (an impossible question), as the official v2.0 script chooses them."""
    return [text for text, _ in example.answers if normalize_answer(text)] or [""]


def squad_scores(examples: Sequence[QAExample], predictions: dict[str, str], null_odds: dict[str, float] | None = None) -> dict:
    """exact_match and f1 (percentages) and total; with impossible questions among `examples`
    also HasAns_/NoAns_ exact, f1 and total; with `null_odds` also best_exact, best_exact_thresh,
    best_f1, best_f1_thresh. Every example needs a prediction (and odds); others are ignored."""
    if not examples:
        raise ValueError("no questions to score")
    for wanted, what in ((predictions, "prediction"), (null_odds, "null odds")):
        missing = [example.id for example in examples if wanted is not None and example.id not in wanted]
        if missing:
            raise ValueError(f"no {what} for {len(missing)} of {len(examples)} questions (the first: {missing[0]!r}); "
                             f"score the predictions made for these very questions")
    exact, f1 = question_scores(examples, predictions)
    report = totals("", exact, f1, examples)
    if null_odds is not None or any(e.is_impossible for e in examples):  # v2.0: its script's keys too
        report = {"exact": report["exact_match"], **report}
    if any(e.is_impossible for e in examples):
        report |= totals("HasAns_", exact, f1, [e for e in examples if not e.is_impossible])
        report |= totals("NoAns_", exact, f1, [e for e in examples if e.is_impossible])
    if null_odds is not None:
        for name, scores in (("exact", exact), ("f1", f1)):
            report[f"best_{name}"], report[f"best_{name}_thresh"] = best_threshold(examples, predictions, scores, null_odds)
    return report


def question_scores(examples: Sequence[QAExample], predictions: dict[str, str]) -> tuple[dict[str, float], dict[str, float]]:
    """Each question's exact match and F1 (0 to 1), the best over its gold answers."""
    exact = {e.id: max(exact_match(predictions[e.id], gold) for gold in gold_answers(e)) for e in examples}
    f1 = {e.id: max(token_f1(predictions[e.id], gold) for gold in gold_answers(e)) for e in examples}
    return exact, f1


def totals(prefix: str, exact: dict[str, float], f1: dict[str, float], examples: Sequence[QAExample]) -> dict:
    """Mean exact match and F1 over `examples`, as percentages, and their number."""
    if not examples:
        return {}
    main = "exact_match" if not prefix else f"{prefix}exact"
    return {main: 100.0 * sum(exact[e.id] for e in examples) / len(examples),
            f"{prefix}f1": 100.0 * sum(f1[e.id] for e in examples) / len(examples),
            f"{prefix}total": len(examples)}


def best_threshold(examples: Sequence[QAExample], predictions: dict[str, str], scores: dict[str, float],
                   null_odds: dict[str, float]) -> tuple[float, float]:
    """(best score as a percentage, its threshold) over thresholds on the null odds, where
    odds above the threshold predict "no answer", as the official script finds them (`sweep`):
    the threshold is the odds of the last question answered, 0.0 if none beat the start."""
    best, order, answered = sweep(examples, predictions, scores, null_odds)
    return 100.0 * best / len(examples), float(null_odds[order[answered - 1]]) if answered else 0.0


def sweep(examples: Sequence[QAExample], predictions: dict[str, str], scores: dict[str, float],
          null_odds: dict[str, float]) -> tuple[float, list[str], int]:
    """The official sweep: start from every question answered "no answer" (a point per impossible
    question), then answer them one by one in order of rising odds, each adding its score (an
    impossible one answered with text loses its point). Returns the best total, the question ids
    in that order, and how many of them were answered at the best (0: none beat the start)."""
    current = best = sum(e.is_impossible for e in examples)
    answered = 0
    by_id = {e.id: e for e in examples}
    order = sorted(by_id, key=lambda id: null_odds[id])
    for n, id in enumerate(order, start=1):
        if not by_id[id].is_impossible:
            current += scores[id]
        elif predictions[id]:
            current -= 1
        if current > best:
            best, answered = current, n
    return best, order, answered


def reanswered_threshold(examples: Sequence[QAExample], spans: dict[str, str], null_odds: dict[str, float]) -> dict:
    """The --null-threshold that would score best if the questions were answered again with it, and
    those scores: the official sweep over each question's best span `spans` ("" where it has none)
    rather than over the answers given, where a question already answered "" counts as "" at every
    threshold: so a threshold above the one applied is seen too. Each
    threshold is a short number strictly between the odds of the last question it answers and the
    next one's, so that answering again with it answers exactly those questions.
    {"exact", "exact_thresh", "f1", "f1_thresh"}: percentages, and thresholds on the odds."""
    exact, f1 = question_scores(examples, spans)
    found = {}
    for name, scores in (("exact", exact), ("f1", f1)):
        best, order, answered = sweep(examples, spans, scores, null_odds)
        odds = [null_odds[id] for id in order]
        below = odds[answered - 1] if answered else odds[0] - 1.0
        above = odds[answered] if answered < len(odds) else odds[-1] + 1.0
        found[name], found[f"{name}_thresh"] = 100.0 * best / len(examples), between(below, above)
    return found


def between(low: float, high: float) -> float:
    """The number with the fewest significant digits strictly between `low` and `high` (`low`
    itself where there is no room: questions with equal odds are answered together)."""
    middle = (low + high) / 2
    for digits in range(1, 18):
        short = float(f"{middle:.{digits}g}")
        if low < short < high:
            return short
    return float(low)
