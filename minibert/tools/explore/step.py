"""What a training step computes on the example: the run's own objectives (the pretrainer
variants.build_pretrainer built, with the run's newest weights) called on it, and the loss the
step minimises, term by term, as Pretrainer.forward sums it.

Each objective runs where it has something to judge:

    the masked-token objectives   (MLM, ELECTRA's, DistilBERT's) where a token is masked whose
                                  original the page knows: not on the learner's own [MASK]s
    the sentence task             (NSP, SOP) wherever there is a pair, [MASK]s or not; a typed pair
                                  has no label the page can know, so the loss is given under both
    ELECTRA on the learner's      its generator fills them and the discriminator reads the result,
    own [MASK]s                   its own code; its losses would compare with tokens nobody knows,
                                  and are not shown
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from ...data.masking import IGNORE_INDEX
from ...objectives.sentence import SENTENCE_TASKS
from ...training.loop import Pretrainer
from .example import Example, sentence_task
from .session import Session

# Each objective's terms, as it weighs them: (its metric, the attribute holding its weight, the term in words).
LOSS_TERMS = {"mlm": [("mlm_loss", "weight", "masked-LM")],
              "nsp": [("nsp_loss", "weight", "NSP")], "sop": [("sop_loss", "weight", "SOP")],
              "rtd": [("mlm_loss", "mlm_weight", "generator's masked-LM"), ("rtd_loss", "rtd_weight", "replaced-token detection")],
              "kd": [("kd_soft_loss", "soft_weight", "soft targets (T² · KL)"), ("mlm_loss", "mlm_weight", "masked-LM"),
                     ("kd_cosine_loss", "cosine_weight", "hidden-state cosine")]}
SENTENCE_WORDS = {"nsp": ("next: B is the text that followed A", "random: B comes from another document"),
                  "sop": ("in order: A then B, as the document has them", "swapped: B came before A in the document")}


@dataclass
class Step:
    """What the run's objectives said on the example."""

    metrics: dict[str, float] = field(default_factory=dict)  # every objective's metrics (the sentence task's alone on your [MASK]s)
    seen: dict = field(default_factory=dict)  # ELECTRA: what the discriminator read (input_ids) and said (logits)
    loss: dict | None = None  # the loss summed term by term (`loss_terms`); None where nothing is scored


def run_objectives(session: Session, example: Example) -> Step:
    """The run's pretrainer on the example, with the objectives that have something to judge
    (the module's docstring); ELECTRA's generator samples with the example's seed."""
    if session.pretrainer is None:
        return Step()
    pretrainer, task = session.pretrainer, sentence_task(session)
    pair, scored = "sentence_label" in example.batch, bool(example.chosen.any()) and not example.yours
    objectives = {name: objective for name, objective in pretrainer.objectives.items()
                  if (pair if name in SENTENCE_TASKS else scored)}
    batch = example.batch
    if example.yours and "rtd" in pretrainer.objectives:  # the generator fills your [MASK]s: they are its masked positions
        objectives["rtd"] = pretrainer.objectives["rtd"]
        batch = {**batch, "labels": torch.where(example.chosen[None], session.tokenizer.mask_id, IGNORE_INDEX)}
    if not objectives:
        return Step()
    running = Pretrainer(pretrainer.model, objectives).eval()
    total, metrics, seen, returned = call_pretrainer(running, batch, example.seed, watch_model=session.head == "rtd")
    if not scored:  # your [MASK]s: only the sentence task's verdict compares with anything
        return Step({name: value for name, value in metrics.items() if task and name.startswith(task)}, seen)
    loss = loss_terms(running, returned, total)
    if pair and example.typed:  # no label to know: the loss as it would be under the other one too
        other, _, _, returned = call_pretrainer(running, {**batch, "sentence_label": 1 - batch["sentence_label"]}, example.seed)
        term = next(t for t in loss["terms"] if t["objective"] == task)
        term["other_label_value"] = finite(returned[task][1][f"{task}_loss"])
        loss["other_label_total"] = finite(other)
    return Step(metrics, seen, loss)


def call_pretrainer(pretrainer: Pretrainer, batch: dict, seed: int, watch_model: bool = False) -> tuple[float, dict, dict, dict]:
    """One call of `pretrainer` on `batch`, the global generator (ELECTRA's sampling) seeded by
    `seed` and put back after: (the total, the metrics, what the kept model read and said where
    `watch_model`, what each objective returned: its weighted loss and its metrics)."""
    seen, returned = {}, {}

    def watch(module, args, output):
        seen["input_ids"], seen["logits"] = args[0], output.logits

    hooks = [pretrainer.model.register_forward_hook(watch)] if watch_model else []
    for name, objective in pretrainer.objectives.items():
        hooks.append(objective.register_forward_hook(lambda module, args, output, name=name: returned.__setitem__(name, output)))
    try:
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            torch.manual_seed(seed)
            total, metrics = pretrainer(batch)
    finally:
        for hook in hooks:
            hook.remove()
    return float(total), {name: finite(value) for name, value in metrics.items()}, seen, returned


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


def sentence(session: Session, example: Example, metrics: dict) -> dict | None:
    """The sentence task's side of the example. The run's own pair has its label and the head's
    verdict (the objective's accuracy on one example says whether the head agreed, its loss what
    it gave the label). A typed pair, your [MASK]s or not, has no label the page can know, only
    the head's verdict; one segment has no pair to judge (its objectives run without the task)."""
    task = sentence_task(session)
    if task is None:
        return None
    if "sentence_label" not in example.batch:
        return {"task": task, "pair": False}
    answer = {"task": task, "pair": True, "typed": example.typed}
    label = int(example.batch["sentence_label"][0])
    if not example.typed:
        answer.update(label=label, label_words=SENTENCE_WORDS[task][label])
    if metrics.get(f"{task}_accuracy") is not None:
        verdict = label if metrics[f"{task}_accuracy"] == 1.0 else 1 - label
        p_label = math.exp(-metrics[f"{task}_loss"])
        answer.update(verdict=verdict, verdict_words=SENTENCE_WORDS[task][verdict],
                      verdict_probability=p_label if verdict == label else 1 - p_label)
        if not example.typed:
            answer.update(loss=metrics[f"{task}_loss"], probability=p_label)
    return answer
