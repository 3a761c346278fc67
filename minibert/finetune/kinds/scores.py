"""Dev-set scores: GLUE's metrics for classification and for regression (STS-B).

    classification  accuracy; with two classes also F1 of the second label and Matthews' correlation
    regression      Pearson's r and Spearman's rho between predicted and gold scores, and the MSE
    tokens          word accuracy; for BIO tags also CoNLL's entity F1

Each is a few lines of torch, in float64, so no statistics package is needed.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch

from .sentence_files import LabelMap


def classification_metrics(predicted: list[int], gold: list[int], labels: LabelMap) -> dict:
    """Accuracy; for two classes also F1 of the second label and Matthews' correlation (GLUE's
    metrics for MRPC/QQP and CoLA). MCC is 0 when a prediction or gold class never occurs."""
    report = {"accuracy": sum(p == g for p, g in zip(predicted, gold)) / len(gold)}
    if len(labels) == 2:
        tp = sum(p == 1 and g == 1 for p, g in zip(predicted, gold))
        tn = sum(p == 0 and g == 0 for p, g in zip(predicted, gold))
        fp = sum(p == 1 and g == 0 for p, g in zip(predicted, gold))
        fn = sum(p == 0 and g == 1 for p, g in zip(predicted, gold))
        denominator = math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
        report["f1"] = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0
        report["mcc"] = (tp * tn - fp * fn) / denominator if denominator else 0.0
        report["positive_label"] = labels.names[1]
    return report


def regression_metrics(predicted: Sequence[float], gold: Sequence[float]) -> dict:
    """STS-B's metrics: Pearson and Spearman correlation, and the mean squared error."""
    error = torch.as_tensor(predicted, dtype=torch.float64) - torch.as_tensor(gold, dtype=torch.float64)
    return {"pearson": pearson(predicted, gold), "spearman": spearman(predicted, gold), "mse": float(error.square().mean())}


def pearson(x: Sequence[float], y: Sequence[float]) -> float:
    """Pearson's r: the cosine of the angle between the two centred vectors, so 1 when y
    is an increasing linear function of x. 0 when either is constant: no line, no correlation."""
    x, y = (torch.as_tensor(v, dtype=torch.float64) for v in (x, y))
    x, y = x - x.mean(), y - y.mean()
    scale = x.norm() * y.norm()
    return float(x @ y / scale) if scale > 0 else 0.0


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rho: Pearson's r of the ranks, so 1 whenever y increases with x, linearly or not."""
    return pearson(ranks(x), ranks(y))


def ranks(values: Sequence[float]) -> torch.Tensor:
    """Rank of each value, 1 for the smallest; tied values share the mean of their ranks
    ([10, 20, 20, 30] -> [1, 2.5, 2.5, 4]), as Spearman's rho defines them."""
    values = torch.as_tensor(values, dtype=torch.float64)
    order = values.argsort()
    _, group, counts = torch.unique(values[order], return_inverse=True, return_counts=True)  # runs of equal values
    last = counts.cumsum(0).double()  # rank of each run's last member
    shared = last - (counts - 1) / 2  # the mean of the run's ranks
    ranked = torch.empty_like(values)
    ranked[order] = shared[group]
    return ranked


def tagging_metrics(predicted: list[list[int]], gold: list[list[int]], labels: LabelMap) -> dict:
    """Accuracy over the words predicted (those within --max-len; `words` counts them); when
    the tags follow the BIO scheme (B-PER, I-PER, O) also the entity F1 of CoNLL-2003: an
    entity counts as found only with its exact span and type."""
    pairs = [(p, g[:len(p)]) for p, g in zip(predicted, gold)]
    words = sum(len(p) for p, _ in pairs)
    report = {"accuracy": sum(a == b for p, g in pairs for a, b in zip(p, g)) / max(1, words), "words": words}
    names = [str(name) for name in labels.names]
    if any(name.startswith(("B-", "I-")) for name in names):
        tp = fp = fn = 0
        for p, g in pairs:
            found, true = entities([names[i] for i in p]), entities([names[i] for i in g])
            tp, fp, fn = tp + len(found & true), fp + len(found - true), fn + len(true - found)
        report["f1"] = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0
    return report


def entities(tags: list[str]) -> set[tuple[int, int, str]]:
    """(start, end, type) of each entity in BIO tags: B-X starts one, I-X continues an open X
    (or starts one, as CoNLL's conlleval reads a stray I-X), any other tag ends it."""
    found, start, kind = set(), None, None
    for i, tag in enumerate([*tags, "O"]):
        prefix, _, name = tag.partition("-")
        continues = prefix == "I" and start is not None and name == kind
        if start is not None and not continues:
            found.add((start, i, kind))
            start = None
        if prefix in ("B", "I") and not continues:
            start, kind = i, name
    return found
