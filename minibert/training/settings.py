"""Settings: everything a pretraining run is configured by besides the architecture, with its default.

    Settings        data, masking, objectives' weights, optimisation, bookkeeping: one dataclass
    LoopSettings    the few of them the training loop reads, which fine-tuning sets too
    the choices     the names a setting may take (LAYOUTS, MASKINGS, PRECISIONS, RTD_TOKENS, ...)

Settings is one flat dataclass, so that the command line, the saved `run.json` and the check
that a `--resume` continues the SAME run all read one list of fields. Each field's `help` is
the text of its command-line flag. A run's values come in three layers, and `python train.py
--print-config` shows which layer each value came from (`minibert/runs/resolved.py`):

    1. these defaults;
    2. minibert/variants.py: the default runs' model (DEFAULT_MODEL) and masking rate
       (MASK_PROB), then the variant's own entry: its objectives, model and settings;
    3. the command line's flags.

No library function below keeps a default of its own for these values: they are passed on.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

from ..data.dataset import MASKINGS
from ..data.examples import LAYOUTS
from ..data.masking import MASK_COUNTS, check_count_options, check_replace_probs
from ..data.static_masks import STATIC_DUPE_FACTOR
from ..objectives.rtd import GENERATOR_HEADS, RTD_TOKENS

DEVICES = ("auto", "cpu", "cuda", "mps")
PRECISIONS = ("auto", "bf16", "fp16", "fp32")  # operations/precision.py: what each name runs
# Settings that say how a run is carried out, not what it computes: they may change between a run
# and its --resume, and they are no difference from a variant's default run. skip_nonfinite is one:
# it acts only on a NaN/Inf step, and --resume --skip-nonfinite is the way on from one.
OPERATIONAL = ("device", "threads", "out", "cache_dir", "eval_every", "eval_batches", "log_every", "save_every", "keep",
               "dist_timeout", "compile", "checkpoint_activations", "report_to", "plan_for", "plan_utilisation", "stop_at",
               "skip_nonfinite")
SCHEDULES = ("linear", "cosine", "wsd")  # training/loop.py: learning_rate
OPTIMIZERS = ("adamw", "lamb")
REPORT_TO = ("none", "tensorboard")
PLAN_FOR = ("here", "h100", "a100", "l4", "t4")  # runs/plan.py: their dense bf16 (T4: fp16) peaks


def option(default, help: str, choices=None, group: str = "training", metavar: str | None = None):
    return field(default=default, metadata={"help": help, "choices": choices, "group": group, "metavar": metavar})


@dataclass
class Settings:
    variant: str = option("albert", "which member of the BERT family to pretrain", group="run")

    # --- data: what the model reads ------------------------------------------------------
    data: list[str] | None = option(None, "corpus files or folders ({formats}); none = the embedded default corpus", group="data", metavar="PATH")
    seq_len: int = option(64, "tokens per example, [CLS] and [SEP] included", group="data")
    layout: str | None = option(None, "the sentence task, and so the examples: NSP segment pairs, SOP segment pairs, or packed full sentences without one (none = the variant's objectives decide)", LAYOUTS, "data")
    short_seq_prob: float = option(0.1, "share of examples cut shorter than --seq-len (BERT: 0.1)", group="data")
    masking: str = option("dynamic", "static = masks drawn once when examples are built (--dupe-factor copies); dynamic = a new mask every time", MASKINGS, "data")
    dupe_factor: int | None = option(None, f"differently-masked copies of the corpus under static masking (none = {STATIC_DUPE_FACTOR} under static masking)", group="data")
    mask_prob: float = option(0.15, "share of tokens masked for prediction while training (BERT: 0.15; held-out accuracy is always measured at 15%)", group="data")
    replace_probs: list[float] = option((0.8, 0.1, 0.1), "what a masked position shows: [MASK], a random token, its own", group="data")
    max_span: int = option(1, "mask spans of up to N units: words with --whole-word, else tokens (ALBERT's n-gram masking: 3 words)", group="data")
    whole_word: bool = option(False, "a masking unit is a whole word (all its pieces together), not a single token", group="data")
    mask_count: str = option("bernoulli", "how many tokens are masked: each on its own with chance --mask-prob (bernoulli), or a fixed count per sequence of its n tokens as a release counts it: round = min(--max-predictions, max(1, round(n x p))) (BERT, ALBERT, ELECTRA), stochastic = floor(n x p + U(0,1)) (RoBERTa's fairseq), batch = ceil(p x the batch's tokens) (DistilBERT)", MASK_COUNTS, "data")
    max_predictions: int | None = option(None, "--mask-count round: at most N masked tokens per sequence (BERT's max_predictions_per_seq; none = 20 per 128 tokens at 15%, scaled to --seq-len and --mask-prob)", group="data", metavar="N")
    mask_smoothing: float = option(0.0, "with a fixed --mask-count: draw the masked tokens with chance proportional to count^-A, their counts in the training corpus (DistilBERT: 0.7, to emphasize rare tokens; 0 = uniform)", group="data", metavar="A")
    cache_dir: str | None = option(None, "where tokenizers and tokenized corpora are cached (none = the repository's data/ folder)", group="data", metavar="DIR")
    text_field: str = option("text", "the JSONL field or Parquet/Arrow column that holds a document's text", group="data", metavar="NAME")
    tokenizer: str | None = option(None, "pretrain with this existing tokenizer (a minibert run's OUT, a folder with vocab.txt, spiece.model, vocab.json + merges.txt or tokenizer.json) instead of training one on the corpus; the model's vocabulary follows it", group="data", metavar="DIR")
    tokenizer_sentences: int = option(50_000, "sentences a trained tokenizer learns from (a seeded sample of the corpus)", group="data")
    dist_timeout: int = option(1800, "under torchrun: seconds a process waits for the others (e.g. for rank 0 to build the data cache) before giving up", group="run")

    # --- objectives: how much each signal counts -----------------------------------------
    mlm_weight: float = option(1.0, "weight of the MLM loss (ELECTRA: of the generator's)", group="objectives")
    sentence_weight: float = option(1.0, "weight of the NSP/SOP loss", group="objectives")
    # rtd_weight: only electra has the loss, and its variant's entry the weight (50) with the reason
    rtd_weight: float | None = option(None, "ELECTRA: weight of the replaced-token-detection loss", group="objectives")
    generator_fraction: float = option(0.25, "ELECTRA: generator width as a fraction of the discriminator's", group="objectives")
    generator_heads: str = option("scaled", "ELECTRA: the generator's attention heads: scaled = round(--num-heads x --generator-fraction), at least 1; 64-wide = max(1, generator width // 64), ELECTRA's get_generator_config (the two agree at ELECTRA's published sizes)", GENERATOR_HEADS, "objectives")
    rtd_tokens: str = option("all", "ELECTRA: the tokens the discriminator's loss reads: all of them (ELECTRA) or only the masked ones (the paper's 'ELECTRA 15%' diagnostic)", RTD_TOKENS, "objectives")
    teacher: str | None = option(None, "DistilBERT: the teacher, a minibert or Hugging Face BERT checkpoint directory", group="objectives", metavar="DIR")
    kd_temperature: float = option(2.0, "DistilBERT: softmax temperature T of the soft targets", group="objectives")
    kd_soft_weight: float = option(5.0, "DistilBERT: weight of the soft cross-entropy (× T²)", group="objectives")
    kd_mlm_weight: float = option(2.0, "DistilBERT: weight of the student's MLM loss", group="objectives")
    kd_cosine_weight: float = option(1.0, "DistilBERT: weight of the hidden-state cosine loss", group="objectives")
    kd_all_tokens: bool = option(False, "DistilBERT: soft targets at every token, as DistilBERT did, not only at the masked ones (vocabulary projections for every token: several times the cost)", group="objectives")

    # --- optimisation ---------------------------------------------------------------------
    steps: int = option(1400, "optimizer steps (ignored with --budget)")
    budget: str | None = option(None, "train for this much wall-clock time instead of --steps (e.g. 90s, 5m, 1h30m): the schedule is stretched to end at the deadline", metavar="DURATION")
    batch_size: int = option(32, "sequences per optimizer step, over all processes and accumulation steps")
    grad_accum: int = option(1, "micro-steps whose gradients make one optimizer step")
    lr: float = option(2e-3, "peak learning rate (AdamW)")
    warmup: float = option(0.06, "linear warm-up, as a fraction of --steps; then the --schedule's decay (linear by default, or cosine or wsd) to --min-lr")
    weight_decay: float = option(0.01, "AdamW weight decay (never on biases and LayerNorm weights)")
    clip: float = option(1.0, "clip the gradient norm to this (0 = no clipping)")
    seed: int = option(0, "seed of every random draw: initialisation, data order, masks, dropout")
    skip_nonfinite: bool = option(False, "skip (and count) steps whose loss or gradient is NaN/Inf instead of stopping")
    precision: str = option("auto", "number format of the matmuls: auto = bf16 autocast on a CUDA GPU that has it, else fp32 (a CPU's native bf16 is left to fine-tuning: its pretraining fell outside the fp32 bands); bf16 and fp32 run anywhere; fp16 (CUDA only, with loss scaling) is for GPUs without bf16 such as the T4", PRECISIONS)

    # --- bookkeeping -------------------------------------------------------------------------
    eval_every: int = option(250, "evaluate on the held-out split every N steps (and at the end)")
    eval_batches: int = option(20, "held-out batches per evaluation")
    log_every: int = option(25, "write a line to OUT/metrics.jsonl every N steps")
    save_every: int = option(500, "write a checkpoint every N steps (and at the end)")
    keep: int = option(3, "checkpoints kept in OUT/checkpoints (older ones are deleted)")
    device: str = option("auto", "where to train: auto = cuda when available, else cpu (mps = Apple GPUs, asked for explicitly)", DEVICES, "run")
    threads: int = option(0, "CPU threads per process (0 = 1 for models narrower than 512, where threads cost more than they save; else the cores divided among the processes)", group="run")
    out: str | None = option(None, "output directory (none = checkpoints/<variant>)", group="run", metavar="DIR")
    init: str | None = option(None, "start from this checkpoint's weights, architecture and tokenizer instead of random weights: a finished run's --out or a Hugging Face model folder (continued pretraining; a second phase with another --seq-len or --batch-size). A new run: with --resume, a checkpoint already in --out wins", group="run", metavar="DIR")
    init_generator: str | None = option(None, "ELECTRA with --init: the generator to continue (an MLM checkpoint, e.g. a run's OUT/generator); none = a fresh one at --generator-fraction", group="run", metavar="DIR")

    # --- at scale: schedules, optimizers, the speed levers, reporting, the plan -----------------
    schedule: str = option("linear", "the learning rate after warm-up: linear decay (BERT), cosine, or wsd = warmup-stable-decay (held at the peak, then a linear decay over the last --wsd-decay of the run; ModernBERT)", SCHEDULES, "at scale")
    min_lr: float = option(0.0, "where the schedule ends: the learning rate's floor", group="at scale")
    wsd_decay: float = option(0.2, "wsd: the final share of the run spent decaying", group="at scale")
    optimizer: str = option("adamw", "adamw, or lamb (ALBERT's: Adam's step rescaled per tensor by ‖weights‖ / ‖update‖)", OPTIMIZERS, "at scale")
    adam_betas: tuple[float, float] = option((0.9, 0.999), "Adam's β1 β2 (RoBERTa: 0.9 0.98), for adamw and lamb", group="at scale")
    adam_eps: float = option(1e-6, "Adam's ε, for adamw and lamb", group="at scale")
    compile: bool = option(False, "torch.compile the layers (each attention and feed-forward sublayer, dynamic shapes); the masked positions' gather, unpadding and the losses stay eager. Compiling takes a minute or more before the first step", group="at scale")
    checkpoint_activations: bool = option(False, "recompute each layer's activations in the backward instead of keeping them: less memory (long sequences, big models) for about a third more compute", group="at scale")
    report_to: str = option("none", "also write the metrics.jsonl records as TensorBoard events in OUT/tensorboard (pip install minibert[tensorboard])", REPORT_TO, "at scale")
    plan_for: str = option("here", "the device the plan's wall time is for: here (the device this run uses) or a named one: h100 (SXM, 989 TFLOP/s bf16), a100 (312), l4 (121), t4 (65, fp16)", PLAN_FOR, "at scale")
    plan_utilisation: float = option(0.4, "the share of the device's peak the plan assumes (good BERT pretraining reaches 30-50%; MosaicBERT ~40% on A100)", group="at scale")
    stop_at: int | None = option(None, "end this part of the run at optimizer step N, its schedule still running over --steps: a two-phase recipe's first phase", group="at scale")
    continue_from: str | None = option(None, "a second phase: continue the run in DIR (weights, optimizer moments, step count and so its schedule) from its newest checkpoint, with new data settings (--seq-len, --batch-size)", group="at scale", metavar="DIR")

    def replace(self, **changes) -> "Settings":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @property
    def budget_seconds(self) -> float | None:
        """--budget in seconds, or None for a run of --steps."""
        return None if self.budget is None else parse_duration(self.budget)

    def check(self) -> None:
        """Fail early, before any data is read, on values that cannot work."""
        for name in ("steps", "batch_size", "grad_accum", "seq_len", "dupe_factor", "max_span", "eval_every",
                     "eval_batches", "log_every", "save_every", "keep", "tokenizer_sentences", "dist_timeout"):
            value = getattr(self, name)
            if value is None and name == "dupe_factor":
                continue
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"--{flag(name)} must be a positive integer, got {value}")
        for name in ("lr", "kd_temperature", "generator_fraction"):
            if not getattr(self, name) > 0:
                raise ValueError(f"--{flag(name)} must be positive, got {getattr(self, name)}")
        for name in ("mask_prob", "short_seq_prob", "warmup"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"--{flag(name)} must be between 0 and 1, got {getattr(self, name)}")
        if not 0.0 < self.mask_prob:
            raise ValueError("--mask-prob must be above 0: with nothing masked there is nothing to learn")
        for name in ("weight_decay", "clip", "threads", "mlm_weight", "sentence_weight", "rtd_weight",
                     "kd_soft_weight", "kd_mlm_weight", "kd_cosine_weight"):
            if getattr(self, name) is not None and getattr(self, name) < 0:
                raise ValueError(f"--{flag(name)} must not be negative, got {getattr(self, name)}")
        for each in dataclasses.fields(self):  # the choices each flag offers: its field's (`option`)
            choices, value = each.metadata.get("choices"), getattr(self, each.name)
            if choices is not None and value not in choices and not (value is None and each.default is None):
                raise ValueError(f"--{flag(each.name)} must be one of {', '.join(choices)}; got {value!r}")
        if self.budget is not None:
            parse_duration(self.budget)
        self.check_at_scale()
        check_replace_probs(self.replace_probs, name="--replace-probs")
        check_count_options(self.mask_count, self.max_predictions, self.mask_smoothing, self.max_span, self.whole_word)


    def check_at_scale(self) -> None:
        if not 0 <= self.min_lr <= self.lr:
            raise ValueError(f"--min-lr {self.min_lr:g} must be between 0 and the peak --lr {self.lr:g}; lower it")
        if not 0 < self.wsd_decay <= 1:
            raise ValueError(f"--wsd-decay must be a share of the run in (0, 1], got {self.wsd_decay}")
        if len(self.adam_betas) != 2 or not all(0 <= beta < 1 for beta in self.adam_betas):
            raise ValueError(f"--adam-betas takes two numbers in [0, 1) (e.g. 0.9 0.98), got {' '.join(map(str, self.adam_betas))}")
        if not self.adam_eps > 0:
            raise ValueError(f"--adam-eps must be positive, got {self.adam_eps}")
        if not 0 < self.plan_utilisation <= 1:
            raise ValueError(f"--plan-utilisation is a share of the peak in (0, 1], got {self.plan_utilisation}")
        if self.stop_at is not None and not 0 < self.stop_at < self.steps:
            raise ValueError(f"--stop-at {self.stop_at} must fall inside the run's --steps {self.steps}; lower it or raise --steps")
        if self.stop_at is not None and self.budget is not None:
            raise ValueError("--stop-at counts steps and --budget time; a phase of a timed run is not supported: drop one")


_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s?)?")


def parse_duration(text: str) -> float:
    """'90s', '90', '5m', '1h30m', '2.5m' -> seconds."""
    match = _DURATION.fullmatch(str(text).strip().lower())
    if not match or not any(match.groups()) or not (seconds := sum(
            float(value or 0) * unit for value, unit in zip(match.groups(), (3600, 60, 1)))) > 0:
        raise ValueError(f"--budget {text!r} is not a positive duration; write it like 90s, 5m or 1h30m")
    return seconds


def flag(name: str) -> str:
    """A field's command-line spelling: seq_len -> seq-len."""
    return name.replace("_", "-")


@dataclass(frozen=True)
class LoopSettings:
    """Everything the loop (and the optimizer it steps) reads of a run, and nothing else.

    Pretraining's `Settings` holds these among its many flags (`LoopSettings.of`);
    fine-tuning sets them from its own few flags, so both run the same step, schedule,
    clipping, NaN policy and metrics log.
    """

    steps: int  # optimizer steps (unless budget_seconds is set)
    lr: float  # peak learning rate
    warmup: float  # share of the run spent warming the learning rate up
    weight_decay: float  # AdamW's, on matrices only
    clip: float  # gradient-norm clip (0 = none)
    seed: int  # the run's seed (fine-tuning's batch order)
    log_every: int  # a metrics.jsonl line every N steps (and at the end)
    eval_every: int  # held-out evaluation every N steps (and at the end)
    save_every: int  # a checkpoint every N steps (and at the end)
    eval_batches: int = 0  # held-out batches per evaluation
    skip_nonfinite: bool = False  # skip (and count) NaN/Inf steps instead of stopping
    budget_seconds: float | None = None  # train for this long instead of `steps`
    out: str | None = None  # where the run's checkpoints are, for the NaN message
    schedule: str = "linear"  # the learning rate after warm-up: a name in SCHEDULES
    min_lr: float = 0.0  # where the schedule ends
    wsd_decay: float = 0.2  # wsd: the final share of the run spent decaying
    stop_at: int | None = None  # end this part of the run at this step (a first phase); the schedule runs over `steps`

    @classmethod
    def of(cls, settings) -> "LoopSettings":
        """The loop's part of a pretraining run's `Settings` (same names)."""
        return cls(**{field.name: getattr(settings, field.name) for field in dataclasses.fields(cls)})
