"""FinetuneSettings: everything a fine-tune is configured by, one field per flag of `python train.py finetune`.

    FinetuneSettings   the flags, with their defaults, help texts and checks: one frozen dataclass
    TASKS              the kinds of task (--task): kinds/'s table

One dataclass, as pretraining's `Settings`, so that the command line (cli.py builds its parser
from these fields), `minibert.finetune(...)`'s keywords (api.py), the runs of a sweep (each a
`dataclasses.replace` of the command's settings: its seed, its recipe's lr) and eval.json's
record of a run read one list of fields. A field left None takes the recipe's value
(recipes.py), which `Recipe.applied` fills in for each run.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field

from ..heads import POOLINGS
from ..training.settings import DEVICES, PRECISIONS, flag, option
from .glue.tasks import GLUE_TASKS
from .kinds import KINDS
from .kinds.kind import DEFAULT_ALPHA, DEFAULT_MAX_LEN, DEFAULT_TEMPERATURE
from .kinds.spans import QA_MAX_LEN, Decoding
from .recipes import BATCH_SIZE, DEFAULT_RECIPE, DROPOUT, RECIPES, WARMUP

TASKS = tuple(KINDS)  # --task's kinds (kinds/)
DISTILLATION, RUN_TOOLS = "distillation from a fine-tuned teacher", "evaluation while training, and the run tools pretraining has"
QA = Decoding()  # question answering's defaults
QUESTIONS = "question answering (SQuAD's JSON, or JSONL with question, context and answers)"
NOT_RECORDED = ("overwrite", "resume", "recipe_description")  # how to treat OUT, and the recipe eval.json records under its own key
SWEEP_RUN = ("untrained_seed", "held_out")  # what tells a --glue sweep's runs apart beside the flags: recorded in its runs alone


def choices_of(names) -> str:
    return "{" + ",".join(names) + "}"


def per_run(why: str):
    """A field no flag sets: a value one run of the command is given (`Recipe.applied`, a sweep's runs)."""
    return field(default=None, metadata={"per_run": why})


@dataclass(frozen=True)
class FinetuneSettings:
    init: list[str] | None = option(None, "minibert checkpoint or Hugging Face BERT-family directory (required; --glue takes several, e.g. one per pretraining seed, each into OUT/<folder name>)", metavar="DIR", group=None)
    train: str | None = option(None, "training examples: .tsv (GLUE), .csv or .jsonl; tagged words: .conll or .jsonl", metavar="FILE", group=None)
    dev: str | None = option(None, "held-out examples in the same format, labels from the training set", metavar="FILE", group=None)
    tasks: list[str] | None = option(None, "instead of --train/--dev: task folders, each with one train.* and one dev.* file; each is fine-tuned into OUT/<folder name> and one table is printed", metavar="DIR", group=None)
    glue: str | None = option(None, "instead of --train/--dev: every GLUE task found in GLUE_DIR (GLUE's download layout: CoLA/, SST-2/, MRPC/, STS-B/, QQP/, MNLI/, QNLI/, RTE/, WNLI/) from its own files, with its own metrics and recipe, into OUT/<task>/seed-<n>; prints GLUE's table, writes OUT/glue.json and OUT/submission/", metavar="GLUE_DIR", group=None)
    glue_tasks: list[str] | None = option(None, f"with --glue: only these ({', '.join(GLUE_TASKS)})", metavar="TASK", group=None)
    recipe: str = option(DEFAULT_RECIPE, "the fine-tuning recipe, for every task: electra = lr and layer-wise lr decay by the encoder's width, as ELECTRA's appendix (H < 768: Small's lr 3e-4, 768: 1e-4, 1024: 5e-5), 3 epochs (--glue: 10 for RTE and STS-B), no weight decay; bert = BERT-base's lr 2e-5, 3 epochs; grid (--glue; elsewhere with --lr) = lr chosen per task from 3e-4, 1e-4, 5e-5, 3e-5 on held-out training rows (Turc et al. 2019), never on dev, 4 epochs; question answering takes each family's SQuAD settings (electra: 2 epochs; bert: lr 3e-5, batch 12, 2 epochs; albert, roberta, distilbert: theirs, for question answering alone); each with dropout "
                         f"{DROPOUT:g} and batch {BATCH_SIZE}; a flag given overrides its value (default {DEFAULT_RECIPE}; also accepted as --glue-recipe)", RECIPES, None, choices_of(RECIPES))
    against_untrained: bool = option(False, "with --glue: also fine-tune the untrained twin of each --init (same config, tokenizer and initialisation seed, no training) into OUT/untrained/ and print pretrained - untrained", group=None)
    write_training_text: str | None = option(None, "with --glue: write the training text of its tasks (train.tsv only, labels dropped) as a pretraining corpus, one document per row, and stop (no --init or --out needed; an existing FILE takes --overwrite)", metavar="FILE.txt", group=None)
    seeds: list[int] | None = option(None, "with --glue: fine-tune each task once per seed and report each metric's median and range (default: --seed alone)", metavar="S", group=None)
    max_train_examples: int | None = option(None, "train on at most N examples per task, a random subsample (the same rows for every seed)", metavar="N", group=None)
    text_columns: list[str] | None = option(None, "the text column, or the two of a pair, when a file's are not sentence/sentence1 sentence2/text (a column left unread must be an id or genre; any other is refused); --transfer files too", metavar="COLUMN", group=None)
    out: str | None = option(None, "output directory for the model, eval.json and predictions.tsv (required)", metavar="DIR", group=None)
    task: str = option("auto", "auto = qa for SQuAD's .json and JSONL with question, context and answers; tokens for .conll files and JSONL with \"tokens\"; regression when the training labels are numbers with fractions (STS-B); else classification (default auto)", ("auto", *TASKS), None, choices_of(("auto", *TASKS)))
    steps: int | None = option(None, "optimizer steps (or --epochs)", metavar="N", group=None)
    epochs: float | None = option(None, "passes over the training set (default: the recipe's; or --steps)", metavar="E", group=None)
    batch_size: int | None = option(None, f"examples per step (default: the recipe's, {BATCH_SIZE})", metavar="B", group=None)
    lr: float | None = option(None, "peak learning rate of AdamW (default: the recipe's, 3e-4 for the default runs' width)", metavar="LR", group=None)
    layer_decay: float | None = option(None, "layer-wise lr decay: each encoder layer below the top at D times the lr of the one above, the embeddings lowest (default: the recipe's)", metavar="D", group=None)
    warmup: float | None = option(None, f"linear warm-up as a fraction of the steps (default: the recipe's, {WARMUP:g}; RoBERTa's SQuAD row 0.06, DistilBERT's 0)", metavar="FRACTION", group=None)
    weight_decay: float | None = option(None, "AdamW weight decay, never on biases or LayerNorm (default: the recipe's)", metavar="DECAY", group=None)
    max_len: int | None = option(None, f"tokens per example, specials included (default {DEFAULT_MAX_LEN}, question answering's windows {QA_MAX_LEN}, or the model's limit; rotary models may go beyond it)", metavar="T", group=None)
    dropout: float | None = option(None, f"dropout on hidden states and attention while fine-tuning (default: the recipe's, {DROPOUT:g} as BERT and ELECTRA fine-tuned, whatever the checkpoint was pretrained with)", metavar="P", group=None)
    reference: bool = option(False, "the reference path, to read and debug with: padded batches, naive attention, every layer at every position (same results, slower; see ModelConfig.reference)", group=None)
    pooling: str | None = option(None, "what a sentence task's head reads: cls = the [CLS] token, as BERT; mean = the mean of the last layer over the tokens (default: cls for a checkpoint whose NSP or SOP its run recorded as learned, or a Hugging Face BERT or ALBERT; mean for one pretrained without, or whose sentence task ended short of that; cls when it records neither)", POOLINGS, None, choices_of(POOLINGS))
    teacher: str | None = option(None, "a model fine-tuned on this task (train.py finetune's output, or a Hugging Face *ForSequenceClassification folder), with its own tokenizer: the student learns from its class distribution as well as the labels (regression: from its score); question answering: a span model fine-tuned on SQuAD data with the student's tokenizer, whose start and end distributions the student learns", metavar="DIR", group=DISTILLATION)
    alpha: float | None = option(None, f"weight of the teacher's soft targets; 1 - A goes to the labels (default {DEFAULT_ALPHA:g})", metavar="A", group=DISTILLATION)
    temperature: float | None = option(None, f"softens both distributions before they are compared (default {DEFAULT_TEMPERATURE:g}; classification and question answering)", metavar="T", group=DISTILLATION)
    transfer: str | None = option(None, "unlabelled texts the teacher labels for the student: .txt (one per line) or a task file (.tsv, .csv, .jsonl; a label column is ignored); these rows take the soft loss alone", metavar="FILE", group=DISTILLATION)
    max_query_len: int = option(QA.max_query_len, f"question answering: the question cut at Q tokens (default {QA.max_query_len})", metavar="Q", group=QUESTIONS)
    doc_stride: int = option(QA.doc_stride, f"question answering: a passage longer than a window is read in windows that overlap by S tokens: the overlap, as transformers' stride, not google-research's step between window starts (default {QA.doc_stride})", metavar="S", group=QUESTIONS)
    n_best: int = option(QA.n_best, f"question answering: the N most likely starts and ends of each window are paired into candidate answers, and nbest_predictions.json lists the N best (default {QA.n_best})", metavar="N", group=QUESTIONS)
    max_answer_len: int = option(QA.max_answer_len, f"question answering: an answer spans at most L tokens (default {QA.max_answer_len})", metavar="L", group=QUESTIONS)
    null_threshold: float = option(QA.null_threshold, f"question answering on SQuAD 2.0 data: answer \"\" when the no-answer score beats the best span's by more than this (default {QA.null_threshold:g})", metavar="X", group=QUESTIONS)
    seed: int = option(0, "seed of the head's initialisation, data order and dropout (default 0)", metavar="S", group=None)
    device: str = option("auto", "auto = cuda when available, else cpu; mps = Apple GPUs", DEVICES, None, choices_of(DEVICES))
    precision: str = option("auto", "auto = bf16 autocast on a CUDA GPU or a CPU that has native bf16 (avx512_bf16, AMX), else fp32; fp16 (CUDA only, loss scaling) for GPUs without bf16 such as the T4 (default auto)", PRECISIONS, None, choices_of(PRECISIONS))
    skip_nonfinite: bool = option(False, "skip (and count) steps whose loss or gradient is NaN/Inf instead of stopping", group=None)
    eval_every: int | str | None = option(None, "score dev every N steps (or every epoch) and at the end, and keep the model of the best score by the task's own metric (default: dev scored once, at the end; the last model kept)", metavar="N|epoch", group=RUN_TOOLS)
    patience: int | None = option(None, "with --eval-every: stop after K evaluations in a row without a better score", metavar="K", group=RUN_TOOLS)
    resume: bool = option(False, "go on from the newest checkpoint in --out (written at each evaluation, else each epoch) with the same flags, as if never stopped", group=RUN_TOOLS)
    grad_accum: int = option(1, "micro-steps whose gradients make one step of --batch-size examples (default 1)", metavar="A", group=RUN_TOOLS)
    compile: bool = option(False, "torch.compile the encoder's layers, as pretraining's --compile", group=RUN_TOOLS)
    overwrite: bool = option(False, "replace a model already in --out, or the --write-training-text FILE", group=None)

    # --- what one run of the command is given, no flag --------------------------------------------
    recipe_description: dict | None = per_run("the recipe as eval.json records it (Recipe.describe)")
    untrained_seed: int | None = per_run("a --glue sweep's untrained twin: its initialisation seed")
    held_out: float | None = per_run("a --glue sweep's lr choice: the share of the training rows it is scored on")

    def replace(self, **changes) -> FinetuneSettings:
        return dataclasses.replace(self, **changes)

    def check(self) -> None:
        """Fail before anything is loaded on values that cannot work."""
        if self.write_training_text and not self.glue:
            raise ValueError("--write-training-text writes the training text of GLUE's tasks; add --glue GLUE_DIR")
        missing = [name for name in ("init", "out") if getattr(self, name) is None and not self.write_training_text]
        if missing:
            raise ValueError(f"the following arguments are required: {', '.join('--' + name for name in missing)}")
        if self.init and len(self.init) > 1 and not self.glue:
            raise ValueError("several --init checkpoints are a --glue sweep's (one per pretraining seed); give one checkpoint")
        if self.tasks and (self.train or self.dev):
            raise ValueError("--tasks takes the train and dev files from each folder; drop --train and --dev, or --tasks")
        if self.glue:
            self.check_glue()
        elif not self.tasks and not (self.train and self.dev):
            raise ValueError("name the data: --train FILE --dev FILE, or --tasks DIR [DIR ...] (folders with train.* and dev.*), "
                             "or --glue GLUE_DIR")
        for name in ("seeds", "glue_tasks", "against_untrained"):
            if getattr(self, name) not in (None, False) and not self.glue:
                raise ValueError(f"--{flag(name)} is a setting of --glue; add --glue GLUE_DIR or drop it")
        if self.recipe == "grid" and self.lr is None and not self.glue:
            raise ValueError("--recipe grid chooses each GLUE task's lr on held-out training rows, which --glue does; "
                             "add --lr LR, or take --recipe electra or bert")
        self.check_values()
        self.check_distillation()

    def check_values(self) -> None:
        """Each flag's value on its own: a name among its choices, a number in its range."""
        for each in dataclasses.fields(self):  # the choices each field's flag offers (its metadata)
            choices, value = each.metadata.get("choices"), getattr(self, each.name)
            if choices is not None and value not in choices and not (value is None and each.default is None):  # None: not given
                raise ValueError(f"--{flag(each.name)} must be one of {', '.join(choices)}; got {value!r}")
        if self.steps is not None and self.epochs is not None:
            raise ValueError("--epochs is not allowed with --steps: a run is as long as one of them says; drop one")
        if self.patience is not None and self.eval_every is None:
            raise ValueError("--patience counts evaluations while training; add --eval-every N (or epoch)")
        if self.eval_every is not None and self.eval_every != "epoch" and not (isinstance(self.eval_every, int) and self.eval_every > 0):
            raise ValueError(f"--eval-every takes a positive number of steps or 'epoch', got {self.eval_every!r}")
        if self.text_columns is not None and not 1 <= len(self.text_columns) <= 2:
            raise ValueError(f"--text-columns names one text column or the two of a pair, got {len(self.text_columns)}")
        for name in ("steps", "epochs", "batch_size", "lr", "max_len", "max_train_examples", "patience", "grad_accum", "max_query_len",
                     "n_best", "max_answer_len"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"--{flag(name)} must be positive, got {value}")
        if self.doc_stride < 0:
            raise ValueError(f"--doc-stride is the overlap of two windows in tokens, 0 or more; got {self.doc_stride}")
        if self.warmup is not None and not 0.0 <= self.warmup <= 1.0:
            raise ValueError(f"--warmup is a fraction of the steps, between 0 and 1; got {self.warmup}")
        if self.weight_decay is not None and self.weight_decay < 0:
            raise ValueError(f"--weight-decay must not be negative, got {self.weight_decay}")
        if self.layer_decay is not None and not 0.0 < self.layer_decay <= 1.0:
            raise ValueError(f"--layer-decay is the factor from one layer's lr to the next one down, in (0, 1]; got {self.layer_decay}")
        if self.dropout is not None and not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"--dropout is a probability in [0, 1), got {self.dropout}")

    def check_glue(self) -> None:
        """--glue reads GLUE's own files with their own columns and labels: flags for other data do not apply."""
        given = [name for name in ("train", "dev", "tasks", "text_columns", "teacher") if getattr(self, name) is not None]
        if given:
            raise ValueError(f"--glue reads each task's files and columns from GLUE_DIR; drop --{flag(given[0])}")
        if self.task != "auto":
            raise ValueError("--glue knows each task's kind (STS-B is regression, the others classification); drop --task")

    def check_distillation(self) -> None:
        """The --teacher flags: each needs the teacher, and the teacher one task."""
        if not self.teacher:
            given = [name for name in ("alpha", "temperature", "transfer") if getattr(self, name) is not None]
            if given:
                raise ValueError(f"--{given[0]} is a setting of distillation; add --teacher DIR (a model fine-tuned on the task)")
            return
        if self.tasks:
            raise ValueError("--teacher is fine-tuned on one task; use it with --train/--dev, not --tasks")
        if self.alpha is not None and not 0.0 <= self.alpha <= 1.0:
            raise ValueError(f"--alpha weighs the teacher against the labels, between 0 and 1; got {self.alpha}")
        if self.temperature is not None and not self.temperature > 0:
            raise ValueError(f"--temperature must be positive (1 = the teacher's own distribution, 2 = the default); got {self.temperature}")

    def recorded(self) -> dict:
        """The settings of a run as eval.json records them under `args` (and a checkpoint, to
        check a --resume against): every flag but those that only say how to treat OUT, and a
        --glue sweep's own values in its runs; as JSON reads them back, so that a sweep compares
        a run's record with the settings it would run now (glue/sweep.py:finished_run)."""
        values = {item.name: getattr(self, item.name) for item in dataclasses.fields(self) if item.name not in NOT_RECORDED
                  and (self.glue or item.name not in SWEEP_RUN)}
        return json.loads(json.dumps(values, default=str))


FLAGS = [item for item in dataclasses.fields(FinetuneSettings) if "per_run" not in item.metadata]  # one flag each
