"""The fine-tuning recipes (`--recipe`) every fine-tune runs with, the pooling a checkpoint's
pretraining calls for, and the choice a recipe leaves open, made on training rows.

    electra  (the default) ELECTRA's fine-tuning table (Clark et al., 2020, appendix) by the
             encoder's width: a width takes the row of the widest published size not wider than
             it (ELECTRA_ROWS), so minibert's default runs (H = 128) take Small's
    bert     BERT-base's (Devlin et al., 2019, appendix A.3), every layer at the same lr
    grid     the BERT miniatures' (Turc et al., 2019, "Well-Read Students Learn Better"): the lr
             chosen per task from GRID_LRS, 4 epochs (their batch grid is not searched)

RTE and STS-B, whose training sets are small, take ELECTRA's 10 epochs under electra and bert;
only --glue knows a task by its name. Question answering takes its own row of each recipe, the
settings each family released for SQuAD (SQUAD_ROWS, each with its source), and on SQuAD 2.0 data
(a training file with questions that have no answer) the family's 2.0 row where it published one
(SQUAD2_ROWS; the others gave one row for both, and the line says so). `albert`, `roberta` and
`distilbert` are question answering's alone; `grid` has none (Turc et al. published no SQuAD
settings). A recipe sets no window length: --max-len stays a flag.

Every recipe fine-tunes with dropout 0.1, as all three sources did (ALBERT's SQuAD row aside: its
release fine-tuned with none), whatever the checkpoint was pretrained with: this project pretrains
without dropout (docs/training.md), and a task's few thousand rows overfit a model that keeps none.

A recipe that leaves the lr open (`grid`) chooses it on held-out training rows, never on dev
(glue/sweep.py:choose_lr); only --glue makes that choice (it knows each task's metrics), elsewhere
`grid` takes --lr. A flag given overrides the recipe's value (`Recipe.applied`), and the recipe's
line names it. The pooling (what a sentence task's head reads) follows the checkpoint's
pretraining: `checkpoint_pooling` says why.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from ..config import ModelConfig
from ..objectives.sentence import SENTENCE_TASKS
from ..operations.files import read_json_lines, read_record
from ..operations.tensor_files import CONFIG_FILE
from ..pretrained import FORMAT_KEY
from ..training.settings import flag
from ..operations.outdir import RUN_FILE

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
SQUAD_EPOCHS = 2.0  # ELECTRA's table: "2 for SQuAD"
WARMUP = 0.1  # linear warm-up over this share of the steps: BERT's run_classifier/run_squad, ELECTRA's table
QA_ONLY = ("albert", "roberta", "distilbert")  # recipes with a SQuAD row alone
RECIPES = ("electra", "bert", "grid", *QA_ONLY)
DEFAULT_RECIPE = "electra"
RECIPE_FLAGS = ("lr", "layer_decay", "weight_decay", "dropout", "batch_size", "epochs", "warmup", "pooling")  # what a recipe sets, each a flag
# Hugging Face families by what their published checkpoints were pretrained with: BERT with next
# sentence prediction, ALBERT with sentence order prediction; RoBERTa, DistilBERT and ELECTRA with none
SENTENCE_TASK_OF_FAMILY = {"bert": "next sentence prediction", "albert": "sentence order prediction",
                           "roberta": None, "distilbert": None, "electra": None}


class SquadRow(NamedTuple):
    """One family's published SQuAD fine-tuning settings (layer decay: ELECTRA's, by width)."""

    row: str
    lr: float | None  # None: ELECTRA's, by the width
    weight_decay: float
    batch_size: int
    epochs: float
    windows: int  # the release's max_seq_length (not set by the recipe: --max-len)
    source: str
    dropout: float = DROPOUT
    warmup: float = WARMUP


SQUAD_ROWS = {
    "electra": SquadRow("SQuAD row", None, 0.0, BATCH_SIZE, SQUAD_EPOCHS, 512,
                        "Clark et al. 2020 (ELECTRA), appendix: the fine-tuning hyperparameters table (train epochs 2 for SQuAD); "
                        "google-research/electra configure_finetuning.py:FinetuningConfig (squad: max_seq_length 512, "
                        "num_train_epochs 2.0)"),
    "bert": SquadRow("BERT-base's SQuAD 1.1 row", 3e-5, 0.01, 12, 2.0, 384,
                     "google-research/bert README.md, SQuAD 1.1 with BERT-base (run_squad.py --learning_rate 3e-5 "
                     "--num_train_epochs 2.0 --train_batch_size 12 --max_seq_length 384 --doc_stride 128)"),
    "albert": SquadRow("ALBERT's SQuAD 1.1 row", 5e-5, 0.01, 48, 2.0, 384,
                       "Lan et al. 2020 (ALBERT), Table 14: SQuAD v1.1 lr 5e-5, batch 48, ALBERT dropout 0 (classifier "
                       "dropout 0.1: a span head has none), 3,649 steps (2 epochs), 365 warm-up, max_seq_length 384", dropout=0.0),
    "roberta": SquadRow("RoBERTa-large's SQuAD row", 1.5e-5, 0.01, 48, 2.0, 512,
                        "Liu et al. 2019 (RoBERTa), Table 10: SQuAD lr 1.5e-5, batch 48, weight decay 0.01, 2 epochs, warm-up ratio 0.06",
                        warmup=0.06),
    "distilbert": SquadRow("DistilBERT's SQuAD script", 5e-5, 0.0, 8, 3.0, 384,
                           "huggingface/transformers examples/research_projects/distillation/run_squad_w_distillation.py "
                           "(defaults: learning_rate 5e-5, per_gpu_train_batch_size 8, num_train_epochs 3, weight_decay 0, "
                           "warmup_steps 0, max_seq_length 384)", warmup=0.0),
}
# SQuAD 2.0's own rows, where a family published one (the training file holds questions without an answer)
SQUAD2_ROWS = {
    "bert": SquadRow("BERT-large's SQuAD 2.0 row", 3e-5, 0.01, 24, 2.0, 384,
                     "google-research/bert README.md, SQuAD 2.0 with BERT-large, the only 2.0 row it gives (run_squad.py "
                     "--learning_rate 3e-5 --num_train_epochs 2.0 --train_batch_size 24 --max_seq_length 384 --doc_stride 128 "
                     "--version_2_with_negative)"),
    "albert": SquadRow("ALBERT's SQuAD 2.0 row", 3e-5, 0.01, 48, 3.0, 512,
                       "Lan et al. 2020 (ALBERT), Table 14: SQuAD v2.0 lr 3e-5, batch 48, ALBERT dropout 0, 8,144 steps "
                       "(about 3 epochs of SQuAD 2.0's 130,319 training questions), 814 warm-up, max_seq_length 512; "
                       "google-research/albert's README runs 2.0 at lr 5e-5 for 2 epochs at 384 instead: the paper's row "
                       "is taken, as for 1.1", dropout=0.0),
}
# why a family without a SQuAD 2.0 row of its own takes its one row for 2.0 too
ONE_ROW = {"electra": "configure_finetuning.py gives squad (2.0) and squadv1 one row; its 2.0 answerability classifier is "
                      "not minibert's, whose span head scores \"no answer\" at [CLS]",
           "roberta": "Table 10 gives one row for both versions",
           "distilbert": "the script's --version_2_with_negative changes none of its settings"}
READS = {"cls": "the [CLS] vector", "mean": "the mean of the last layer"}  # each pooling, in words
SENTENCE_LEARNED = 0.85  # the held-out NSP/SOP accuracy from which a run's [CLS] is read (checkpoint_pooling says why)
METRICS = "metrics.jsonl"  # where a run records its held-out evaluations (eval_<task>_accuracy)


class Pooling(NamedTuple):
    """The pooling a checkpoint's pretraining calls for, and why, in words."""

    name: str  # in heads.POOLINGS
    why: str  # what the checkpoint records that decides it


BERT_POOLING = Pooling("cls", f"the checkpoint records no pretraining (no {RUN_FILE}, no Hugging Face model_type): BERT's default")


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
    pooling: Pooling = BERT_POOLING  # the checkpoint's (`checkpoint_pooling`)
    batch_size: int = BATCH_SIZE
    dropout: float = DROPOUT
    windows: int | None = None  # question answering: the release's window length, which --max-len sets
    warmup: float = WARMUP

    def values(self, task: str | None = None, pooled: bool = True) -> dict:
        """The flags this recipe sets for a task: `task` a GLUE name (RTE and STS-B take the long
        epochs) or None (any other: the usual epochs); lr None when it is to be chosen. A head that
        reads every token's own vector (not `pooled`: tagging, question answering) is given no pooling."""
        values = {"lr": self.lr, "layer_decay": self.layer_decay, "weight_decay": self.weight_decay, "dropout": self.dropout,
                  "batch_size": self.batch_size, "epochs": self.long_epochs if task in LONG_TASKS else self.epochs,
                  "warmup": self.warmup}
        return {**values, "pooling": self.pooling.name} if pooled else values

    def describe(self) -> dict:
        """The recipe as glue.json and eval.json record it."""
        described = {"name": self.name, "row": self.row, "source": self.source, "lr": self.lr, "lrs": list(self.lrs),
                     "layer_decay": self.layer_decay, "weight_decay": self.weight_decay, "dropout": self.dropout,
                     "batch_size": self.batch_size, "epochs": self.epochs, "warmup": self.warmup}
        if self.windows is not None:  # a SQuAD row: no RTE, no pooling; the release's windows instead
            return {**described, "release_max_len": self.windows}
        return {**described, "epochs_rte_stsb": self.long_epochs, "held_out": HELD_OUT if self.lrs else None,
                "pooling": self.pooling.name, "pooling_why": self.pooling.why}

    def line(self, overridden: list[str], glue: bool) -> str:
        """The one line the command prints: the recipe, its values, their source, the flags that
        override it (`overridden`); RTE's and STS-B's epochs under --glue (`glue`) alone, the only
        path that knows a task by name."""
        lr = (f"lr chosen per task from {{{', '.join(f'{lr:g}' for lr in self.lrs)}}} on a held-out "
              f"{HELD_OUT:.0%} of each task's training rows (seed 0; never dev), then trained on all of them"
              if self.lr is None else f"lr {self.lr:g}")
        decay = f"layer-wise lr decay {self.layer_decay:g}" if self.layer_decay else "no layer-wise lr decay"
        epochs = (f"{self.epochs:g} epochs" if self.epochs == self.long_epochs or not glue else
                  f"{self.epochs:g} epochs ({self.long_epochs:g} for {' and '.join(LONG_TASKS)})")
        windows = f", windows of {self.windows} tokens as released (a flag the recipe leaves: --max-len {self.windows})" if self.windows else ""
        warmup = "" if self.warmup == WARMUP else f", warm-up {self.warmup:.0%} of the steps"
        return (f"recipe {self.name}, {self.row}: {lr}, {decay}, weight decay {self.weight_decay:g}, dropout {self.dropout:g}, "
                f"batch {self.batch_size}, {epochs}{warmup}{windows}; from {self.source}"
                + (f"; overridden by {', '.join(overridden)}" if overridden else ""))

    def applied(self, settings, values: dict, **changes):
        """`settings` (a FinetuneSettings) as one run takes them: this recipe's `values` wherever the flag
        was not given (--steps stands in for its epochs), with the recipe's name and its description
        (eval.json records both), and the run's own `changes` (its checkpoint, a sweep's seed). One
        method, so that every fine-tune applies a recipe the same way."""
        chosen = {name: value for name, value in values.items() if getattr(settings, name) is None}
        if settings.steps is not None:
            chosen.pop("epochs", None)
        return settings.replace(**chosen, **changes, recipe=self.name, recipe_description=self.describe())

    def pooling_line(self, pooling: str | None) -> str:
        """The line that says what a sentence task's head reads, and why: the checkpoint's pooling, or --pooling's."""
        own = self.pooling
        if pooling is not None:
            return (f"pooling {pooling}: the head reads {READS[pooling]}, as --pooling asks (without it: "
                    f"{own.name}, since {own.why})")
        other = next(name for name in READS if name != own.name)
        return f"pooling {own.name}: the head reads {READS[own.name]}, since {own.why}; --pooling {other} reads {READS[other]}"


def overridden(settings) -> list[str]:
    """The flags given (`settings`: a FinetuneSettings) that override a recipe's value, as its line names them."""
    return [f"--{flag(name)}" for name in (*RECIPE_FLAGS, "steps") if getattr(settings, name) is not None]


def recipe_for(name: str, config: ModelConfig, pooling: Pooling = BERT_POOLING, squad: str | None = None) -> Recipe:
    """The recipe `name` (--recipe) for an encoder of `config`'s width, whose pretraining calls for
    `pooling`; `squad` a SQuAD version ("1.1", "2.0"): its question-answering row (`squad_recipe`)."""
    if name not in RECIPES:
        raise ValueError(f"--recipe {name!r}: choose among {', '.join(RECIPES)}")
    if squad is not None:
        return squad_recipe(name, config, squad)
    if name in QA_ONLY:
        raise ValueError(f"--recipe {name} is {name}'s SQuAD settings, for question answering alone; "
                         f"a sentence or tagging task takes --recipe electra, bert or grid")
    if name == "bert":
        return Recipe("bert", "BERT-base's", BERT_RECIPE["lr"], None, BERT_RECIPE["weight_decay"], BERT_RECIPE["epochs"], 10.0,
                      BERT_SOURCE, pooling=pooling)
    if name == "grid":
        return Recipe("grid", "the lr grid", None, None, BERT_RECIPE["weight_decay"], 4.0, 4.0, GRID_SOURCE, GRID_LRS, pooling)
    size, lr, decay, takes = electra_row(config.hidden_size)
    return Recipe("electra", f"ELECTRA-{size}'s row ({takes})", lr, decay, 0.0, 3.0, 10.0, ELECTRA_SOURCE, pooling=pooling)


def electra_row(width: int) -> tuple[str, float, float, str]:
    """ELECTRA's size for a width (the widest not wider than it; Small below it), its lr and
    layer decay, and in words which width took it."""
    published, size, lr, decay = next((row for row in ELECTRA_ROWS if row[0] <= width), ELECTRA_ROWS[-1])
    return size, lr, decay, f"H = {published}" + ("" if width == published else f", H = {width} takes it")


def squad_recipe(name: str, config: ModelConfig, version: str = "1.1") -> Recipe:
    """A recipe's question-answering row for SQuAD `version` ("2.0": the training file has questions
    without an answer): the family's own 2.0 row where it published one (SQUAD2_ROWS), else its one
    row (SQUAD_ROWS), the line saying why; ELECTRA's lr and layer decay by the width, as for sentence
    tasks, with its SQuAD epochs; the others as their families released them."""
    if name == "grid":
        raise ValueError("--recipe grid is the BERT miniatures' GLUE lr grid; they published no SQuAD settings, so "
                         "question answering takes --recipe electra (the default), bert, albert, roberta or distilbert")
    own = SQUAD2_ROWS.get(name) if version == "2.0" else None
    row = own or SQUAD_ROWS[name]
    lr, decay, label = row.lr, None, row.row
    if name == "electra":
        size, lr, decay, takes = electra_row(config.hidden_size)
        label = f"ELECTRA-{size}'s SQuAD row ({takes})"
    if version == "2.0" and own is None:
        label = f"{label}, for SQuAD 2.0 too ({ONE_ROW[name]})"
    return Recipe(name, label, lr, decay, row.weight_decay, row.epochs, row.epochs, row.source, batch_size=row.batch_size,
                  dropout=row.dropout, windows=row.windows, warmup=row.warmup)


def checkpoint_pooling(init: str | Path) -> Pooling:
    """What a sentence task's head reads by default: [CLS] when the checkpoint's sentence task
    (NSP or SOP) demonstrably trained it, the mean of the last layer when it did not.

    Only a sentence task trains [CLS]: masked-LM never masks it and no other loss reads it, so
    a [CLS] that no sentence task trained holds nothing sentence-level, while every token's
    vector is what masked-LM did train. Having had a sentence task is not enough, though: BERT's
    [CLS] is a sentence vector because its NSP head ended near-perfect on held-out pairs
    (97-98%, Devlin et al. 2019, section 3.1), and ALBERT's SOP head reached 86.5% (Lan et al.
    2020, table 5). A short run's head ends far below those: its [CLS] has not become a
    sentence vector, and a classifier on it fine-tunes worse than one on the mean of the token
    vectors masked-LM did train (bench/pooling.py measures both). So a minibert run reads [CLS]
    only where the last held-out accuracy of its sentence task that metrics.jsonl records
    reaches SENTENCE_LEARNED, set just under the published heads' accuracies and above every
    short run measured; a run that records no held-out evaluation shows nothing learned and
    takes the mean.

    Read from what the folder records: a fine-tuned classifier's own pooling; a minibert run's
    run.json (its layout: nsp, sop or full_sentences) and metrics.jsonl; a Hugging Face folder's
    model_type (SENTENCE_TASK_OF_FAMILY), whose published sentence head was trained to the
    accuracies above, so BERT and ALBERT keep [CLS]. A folder that records none of these takes
    BERT's [CLS], and the line says so."""
    stored = read_record(Path(init) / CONFIG_FILE)
    marker = stored.get(FORMAT_KEY)
    if isinstance(marker, dict) and marker.get("head") == "classifier":
        pooling = marker.get("pooling", "cls")
        return Pooling(pooling, f"the checkpoint is a fine-tuned classifier whose head read {READS[pooling]}")
    settings = read_record(Path(init) / RUN_FILE).get("settings")
    layout = settings.get("layout") if isinstance(settings, dict) else None
    if layout in SENTENCE_TASKS:  # [CLS] where the run's recorded held-out accuracy on its sentence task reaches SENTENCE_LEARNED
        pretrained = f"the checkpoint was pretrained with {layout} ({RUN_FILE}: layout {layout})"
        recorded = sentence_accuracy(Path(init), layout)
        if recorded is None:
            return Pooling("mean", f"{pretrained} but {METRICS} records no held-out {layout} accuracy, so nothing shows its "
                                   f"[CLS] learned a sentence vector")
        accuracy, step = recorded
        where = f"held-out {layout} accuracy {accuracy:.3f} ({METRICS}, step {step})"
        if accuracy >= SENTENCE_LEARNED:
            return Pooling("cls", f"{pretrained} and its {where} reaches {SENTENCE_LEARNED:g}: the sentence task trained [CLS]")
        return Pooling("mean", f"{pretrained} but its {where} is below {SENTENCE_LEARNED:g}, so its [CLS] has not learned a "
                               f"sentence vector")
    if layout is not None:
        return Pooling("mean", f"the checkpoint was pretrained without a sentence task ({RUN_FILE}: layout {layout}), so "
                               f"its [CLS] holds nothing sentence-level")
    family = stored.get("model_type")
    if family in SENTENCE_TASK_OF_FAMILY:
        task = SENTENCE_TASK_OF_FAMILY[family]
        if task:
            return Pooling("cls", f"the checkpoint is Hugging Face {family}, pretrained with {task}, which trains [CLS]")
        return Pooling("mean", f"the checkpoint is Hugging Face {family}, pretrained without a sentence task, so its [CLS] "
                               f"holds nothing sentence-level")
    if family is not None:  # RoFormer, say: a family whose published pretraining SENTENCE_TASK_OF_FAMILY does not record
        return Pooling("cls", f"the checkpoint records no pretraining minibert knows (Hugging Face {family}): BERT's default")
    return BERT_POOLING


def sentence_accuracy(run: Path, task: str) -> tuple[float, int | None] | None:
    """The last held-out accuracy of `task` (nsp or sop) that `run`'s metrics.jsonl records, and
    its step; None when it records none."""
    path, key = Path(run) / METRICS, f"eval_{task}_accuracy"
    records = [record for record in read_json_lines(path) if isinstance(record.get(key), (int, float))] if path.is_file() else []
    return (float(records[-1][key]), records[-1].get("step")) if records else None


def choose(scores: dict[float, float]) -> float:
    """The lr whose held-out score is highest; of equal scores, the lowest lr (the least likely to diverge)."""
    return max(sorted(scores), key=lambda lr: scores[lr])
