"""Evaluation while fine-tuning: the dev scores every --eval-every steps, the best model kept, --patience.

    every --eval-every steps (or epoch), and at the end:
        predict dev -> the task's scores (scores.py), `eval_<metric>` in metrics.jsonl
        better by the task's own metric than every evaluation before: keep these weights
        --patience evaluations in a row without a better one: stop the run there
    at the end: the kept weights go back into the model that is saved (transformers'
    load_best_model_at_end); eval.json lists every evaluation and names the step kept

The metric is the task's own: GLUE's for its task (glue/tasks.py: MCC for CoLA, Spearman for
STS-B, accuracy elsewhere), the headline of its kind otherwise (kinds/: `Kind.headline`). Without
--eval-every the one evaluation is at the end and the model kept is the last, BERT's recipe:
keeping the best of several evaluations chooses on dev, and the dev score then reads high.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn
from tqdm import tqdm

from ...training.loop import Progress


class Evaluations:
    """The dev evaluations of one fine-tune, the best of them, and how long since it was bettered.

    `score()` returns (the dev scores, the dev predictions) of the model at that step; under
    torchrun each process predicts a share of dev (operations/distributed.py:in_shards), every process scores
    the gathered predictions, and rank 0's stop decides for all of them.
    """

    def __init__(self, model: nn.Module, score: Callable[[], tuple[dict, object]], metric: str, patience: int | None, dist,
                 last_step: int | None = None):
        self.model, self.score, self.metric, self.patience, self.dist = model, score, metric, patience, dist
        self.last_step = last_step  # the run's last step: the model is not trained after an evaluation there
        self.history: list[dict] = []  # every evaluation: its step and scores
        self.best: dict | None = None  # the best evaluation: step, scores, predictions, weights (CPU)
        self.since_best = 0  # evaluations since the best one

    def __call__(self, record: dict, progress: Progress) -> None:
        """Score dev now (the loop's evaluation at `progress.step`): its numbers into the log `record`,
        a line above the progress bar, the weights kept if they are the best yet; `progress.stopped`
        once --patience evaluations have not bettered it."""
        scores, predicted = self.score()
        self.model.train()  # predicting switched to eval mode: dropout back on
        self.history.append({"step": progress.step, **scores})
        record.update({f"eval_{name}": value for name, value in scores.items() if isinstance(value, float)})
        value = scores[self.metric]
        better = self.best is None or value > self.best["scores"][self.metric]
        if better:
            last = self.last_step is not None and progress.step >= self.last_step  # the model's own weights stay the best's
            self.best = {"step": progress.step, "scores": scores, "predicted": predicted,
                         "weights": None if last else snapshot(self.model)}
            self.since_best = 0
        else:
            self.since_best += 1
        stop = self.patience is not None and self.since_best >= self.patience
        progress.stopped = progress.stopped or self.dist.broadcast_float(float(stop)) > 0
        if self.dist.is_main:
            kept = "best so far" if better else f"best {self.best['scores'][self.metric]:.4f} at step {self.best['step']}"
            ended = f"; no better in {self.since_best} evaluations: stopping (--patience {self.patience})" if stop else ""
            tqdm.write(f"step {progress.step}: dev {self.metric} {value:.4f} ({kept}){ended}")

    def keep_best(self) -> dict:
        """Put the best evaluation's weights back into the model; return its scores, predictions,
        and what eval.json says of the evaluations."""
        if self.best["weights"] is not None:  # None: the best was the last step's, the model's own weights
            self.model.load_state_dict(self.best["weights"])
        return {**self.best["scores"], "predicted": self.best["predicted"], "kept_step": self.best["step"],
                "selected_by": self.metric, "evaluations": self.history}

    def state_dict(self, step: int) -> dict:
        """What a checkpoint at `step` holds of the evaluations; the best weights only when they are
        not the model's own at that step (the usual case when the last evaluation was the best)."""
        best = None if self.best is None else {**self.best, "weights": None if self.best["step"] == step else self.best["weights"]}
        return {"history": list(self.history), "best": best, "since_best": self.since_best}

    def load_state_dict(self, state: dict) -> None:
        """The evaluations as a checkpoint holds them, the model's weights already restored."""
        self.history, self.since_best, best = list(state["history"]), state["since_best"], state["best"]
        self.best = None if best is None else {**best, "weights": best["weights"] or snapshot(self.model)}


def snapshot(model: nn.Module) -> dict[str, torch.Tensor]:
    """A copy of the model's weights on the CPU, which training will not change."""
    return {name: tensor.detach().cpu().clone() for name, tensor in model.state_dict().items()}
