"""GLUE's fine-tuning recipes (`--glue-recipe`), and the choice a recipe leaves open, made on training rows.

    electra  (the default) the row of ELECTRA's fine-tuning table for the encoder's width
             (Clark et al., 2020, appendix): Small (H = 256) lr 3e-4, Base (768) 1e-4, Large
             (1024) 5e-5; layer-wise lr decay 0.8 (Large 0.9); no weight decay; batch 32;
             dropout 0.1 on hidden states and attention; 3 epochs, 10 for RTE and STS-B. A
             width takes the row of the widest size not wider than it, so minibert's default
             runs (H = 128) take Small's.
    bert     BERT-base's (Devlin et al., 2019, appendix A.3): lr 2e-5, batch 32, 3 epochs (10
             for RTE and STS-B, as ELECTRA), weight decay 0.01, dropout 0.1, every layer at the
             same lr.
    grid     the BERT miniatures' (Turc et al., 2019, "Well-Read Students Learn Better"): the lr
             chosen per task from {3e-4, 1e-4, 5e-5, 3e-5}, 4 epochs, batch 32 (their batch grid
             is not searched), weight decay 0.01, dropout 0.1 (BERT's fine-tuning code).

Every recipe fine-tunes with dropout 0.1, as all three sources did, whatever the checkpoint was
pretrained with: this project pretrains without dropout (docs/training.md), and a task's few
thousand rows overfit a model that keeps none.

A recipe that leaves the lr open (`grid`) chooses it on the training rows alone, never on dev:
each candidate is trained on the other 90% of the training rows and scored on a held-out 10%
(drawn by seed 0; `TaskData.held_out`), the best score wins (ties: the lower lr), and the
chosen lr is then trained on all the training rows and scored on dev. Any flag given
(--lr, --epochs, --layer-decay, ...) overrides the recipe's value.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from ..config import ModelConfig

LONG_TASKS = ("RTE", "STS-B")  # small training sets: more epochs (ELECTRA's 10)
HELD_OUT = 0.1  # the share of the training rows an open choice is made on
BATCH_SIZE = 32
ELECTRA_ROWS = ((1024, "Large", 5e-5, 0.9), (768, "Base", 1e-4, 0.8), (256, "Small", 3e-4, 0.8))  # (H, size, lr, layer decay)
GRID_LRS = (3e-4, 1e-4, 5e-5, 3e-5)
ELECTRA_SOURCE = "Clark et al. 2020 (ELECTRA), appendix: the fine-tuning hyperparameters table"
BERT_SOURCE = "Devlin et al. 2019 (BERT), appendix A.3; 10 epochs for RTE and STS-B from Clark et al. 2020 (ELECTRA), appendix"
GRID_SOURCE = ("Turc et al. 2019 (Well-Read Students Learn Better), the lr grid and 4 epochs its 24 BERT miniatures were "
               "fine-tuned with")
BERT_RECIPE = dict(lr=2e-5, batch_size=BATCH_SIZE, epochs=3.0, weight_decay=0.01)  # Devlin et al. (2019), appendix A.3
DROPOUT = 0.1  # on hidden states and attention while fine-tuning: ELECTRA's table, BERT's configs
RECIPES = ("electra", "bert", "grid")
RECIPE_FLAGS = ("lr", "layer_decay", "weight_decay", "dropout", "batch_size", "epochs")  # what a recipe sets, each a flag


@dataclass(frozen=True)
class Recipe:
    """One recipe as it applies to one encoder: its values and where they come from."""

    name: str  # a name in RECIPES
    row: str  # which of the source's settings, e.g. "ELECTRA-Small's row (H = 128 takes it)"
    lr: float | None  # None: chosen per task among `lrs` on held-out training rows
    layer_decay: float | None  # None: every layer at the lr
    weight_decay: float
    epochs: float
    long_epochs: float  # RTE's and STS-B's
    source: str
    lrs: tuple[float, ...] = ()

    def values(self, task: str) -> dict:
        """The flags this recipe sets for `task` (a GLUE name); lr None when it is to be chosen."""
        return {"lr": self.lr, "layer_decay": self.layer_decay, "weight_decay": self.weight_decay, "dropout": DROPOUT,
                "batch_size": BATCH_SIZE, "epochs": self.long_epochs if task in LONG_TASKS else self.epochs}

    def describe(self) -> dict:
        """The recipe as glue.json and eval.json record it."""
        return {"name": self.name, "row": self.row, "source": self.source, "lr": self.lr, "lrs": list(self.lrs),
                "layer_decay": self.layer_decay, "weight_decay": self.weight_decay, "dropout": DROPOUT, "batch_size": BATCH_SIZE,
                "epochs": self.epochs, "epochs_rte_stsb": self.long_epochs, "held_out": HELD_OUT if self.lrs else None}

    def line(self, args: argparse.Namespace) -> str:
        """The one line the command prints: the recipe, its values, their source, the flags that override it."""
        lr = (f"lr chosen per task from {{{', '.join(f'{lr:g}' for lr in self.lrs)}}} on a held-out "
              f"{HELD_OUT:.0%} of each task's training rows (seed 0; never dev), then trained on all of them"
              if self.lr is None else f"lr {self.lr:g}")
        decay = f"layer-wise lr decay {self.layer_decay:g}" if self.layer_decay else "no layer-wise lr decay"
        epochs = (f"{self.epochs:g} epochs" if self.epochs == self.long_epochs else
                  f"{self.epochs:g} epochs ({self.long_epochs:g} for {' and '.join(LONG_TASKS)})")
        given = [f"--{name.replace('_', '-')}" for name in RECIPE_FLAGS if getattr(args, name) is not None]
        given += ["--steps"] if args.steps is not None else []
        return (f"recipe {self.name}, {self.row}: {lr}, {decay}, weight decay {self.weight_decay:g}, dropout {DROPOUT:g}, "
                f"batch {BATCH_SIZE}, {epochs}; from {self.source}" + (f"; overridden by {', '.join(given)}" if given else ""))


def recipe_for(name: str, config: ModelConfig) -> Recipe:
    """The recipe `name` (--glue-recipe) for an encoder of `config`'s width."""
    if name == "bert":
        return Recipe("bert", "BERT-base's", BERT_RECIPE["lr"], None, BERT_RECIPE["weight_decay"], BERT_RECIPE["epochs"], 10.0,
                      BERT_SOURCE)
    if name == "grid":
        return Recipe("grid", "the lr grid", None, None, BERT_RECIPE["weight_decay"], 4.0, 4.0, GRID_SOURCE, GRID_LRS)
    if name != "electra":
        raise ValueError(f"--glue-recipe {name!r}: choose among {', '.join(RECIPES)}")
    width = config.hidden_size
    published, size, lr, decay = next((row for row in ELECTRA_ROWS if row[0] <= width), ELECTRA_ROWS[-1])
    takes = "" if width == published else f", H = {width} takes it"
    return Recipe("electra", f"ELECTRA-{size}'s row (H = {published}{takes})", lr, decay, 0.0, 3.0, 10.0, ELECTRA_SOURCE)


def choose(scores: dict[float, float]) -> float:
    """The lr whose held-out score is highest; of equal scores, the lowest lr (the least likely to diverge)."""
    return max(sorted(scores), key=lambda lr: scores[lr])
