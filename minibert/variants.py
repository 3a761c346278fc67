"""The five families as DATA: a variant = model config + objectives (+ the examples and masks they need).

Nothing in the training loop asks which variant it runs. A variant only chooses values:

    bert        the base (post-LN, as all five); MLM + next sentence prediction; static masking (10 masked copies)
    roberta     BERT's encoder, one segment type; MLM on full sentences; dynamic masking
    albert      factorized embeddings (E < H), all layers shared; MLM + sentence order prediction,
                n-gram masking of whole words
    distilbert  a student with half a teacher's layers, trained to imitate it (soft targets + MLM + cosine)
    electra     small generator + discriminator: replaced token detection on every token

Every value a default run uses is here — its entry below, over what all the default runs
share (`DEFAULT_MODEL`, their model size, and `MASK_PROB`, their masking rate) — or in
Settings' own defaults (training/settings.py); a ModelConfig field named nowhere here keeps
ModelConfig's own value, BERT-base's. The sizes are the DEFAULT RUN's: small enough that
`python train.py --variant V` finishes in a few minutes on one CPU core (a model this narrow
trains on one thread, runs/run.py's `default_threads`; docs/results.md section 7 times runs
of this shape) and visibly learns; `--hidden-size 768 --num-layers 12 ...` (or any
ModelConfig field) scales them up.

The objectives decide the examples: "nsp" or "sop" among them asks for segment pairs of that
kind (`example_layout`), none for packed full sentences; `--layout`, `--nsp`, `--sop` and
`--no-nsp` swap the sentence task (`run_objectives`). Adding a sixth family means one more
entry here; if its idea is new, also one more file in minibert/objectives/, the branch of
`build_pretrainer` that builds it, and the fields of its values in training/settings.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .config import ModelConfig
from .heads import MaskedLM, ReplacedTokenDetector
from .objectives.kd import KnowledgeDistillation, init_student_from_teacher, student_config
from .objectives.mlm import MaskedLanguageModeling
from .training.loop import Pretrainer
from .objectives.rtd import ReplacedTokenDetection
from .objectives.sentence import SENTENCE_TASKS, SentencePairTask
from .training.settings import Settings

# The default runs' encoder: BERT-Tiny's shape (2 layers of width 128, Turc et al. 2019) and an
# 8k SentencePiece vocabulary, with what makes it learn context within minutes on a CPU
# (bench/time_to_quality.py; docs/training.md has the ablation):
#   rotary positions   attention can prefer a token's neighbours from the first step,
#                      instead of first learning a position table;
#   no dropout         a few passes over the corpus cannot overfit; dropout only slows learning.
# None of these is a family's defining switch; CLASSIC below is the published recipe.
DEFAULT_MODEL = dict(vocab_size=8000, hidden_size=128, num_layers=2, num_heads=2, intermediate_size=512,
                     position_encoding="rotary", hidden_dropout=0.0, attention_dropout=0.0)
# The default runs mask 40% of the tokens (ELECTRA's 25%, below), not BERT's 15% (Settings' own
# default): more predictions per forward pass, which the few minutes of a default run need
# (docs/training.md has the ablation). Held-out accuracy is still measured at 15%
# (corpus/pipeline.py, EVAL_MASK_PROB).
MASK_PROB = 0.4

# The published recipe, one set of flags away (shown in --help); docs/training.md measures both.
CLASSIC = "--position-encoding learned --hidden-dropout 0.1 --attention-dropout 0.1 --mask-prob 0.15"


@dataclass(frozen=True)
class Variant:
    name: str
    changes: str  # what this family changes, in one line (README table, --help)
    objectives: tuple[str, ...]  # "mlm", "nsp", "sop", "rtd", "kd": what the run learns from
    model_fields: dict = field(default_factory=dict)  # ModelConfig fields of the default run, over DEFAULT_MODEL
    settings: dict = field(default_factory=dict)  # Settings values of the default run, over MASK_PROB and Settings' defaults

    @property
    def model(self) -> dict:
        """The default run's ModelConfig fields: DEFAULT_MODEL with this variant's changes."""
        return {**DEFAULT_MODEL, **self.model_fields}

    @property
    def head(self) -> str:
        """The kept model's head: the discriminator's for ELECTRA, the MLM head otherwise."""
        return "rtd" if "rtd" in self.objectives else "mlm"

    @property
    def needs_teacher(self) -> bool:
        return "kd" in self.objectives

    def default_settings(self, **overrides) -> Settings:
        """The default run's settings (Settings' defaults, MASK_PROB, this variant's values), then `overrides`."""
        return Settings(variant=self.name, **{"mask_prob": MASK_PROB, **self.settings, **overrides})


VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in (
        Variant(
            "bert", "the base all five share (post-LN); MLM + next sentence prediction; static masking (10 masked copies)",
            objectives=("mlm", "nsp"),
            settings=dict(masking="static", steps=1250),
        ),
        Variant(
            "roberta", "BERT's encoder with one segment type; full-sentence packing, no NSP, dynamic masking",
            objectives=("mlm",), model_fields=dict(type_vocab_size=1, position_offset=1, layer_norm_eps=1e-5),
            settings=dict(masking="dynamic"),
        ),
        Variant(
            "albert", "factorized embeddings (E=64 < H), one layer shared by all depths; SOP; n-gram masking (spans ≤ 3 words)",
            objectives=("mlm", "sop"),
            model_fields=dict(embedding_size=64, share_layers="all", activation="gelu_tanh"),
            # n-gram masking over whole words, as ALBERT's data script does (create_pretraining_data.py:
            # do_whole_word_mask on, n-grams of its word candidates, each word = a ▁ piece and the
            # pieces after it; its script also starts a word at a punctuation piece, and lets an
            # n-gram run on across [SEP], where minibert's span stops: docs/departures.md)
            settings=dict(masking="dynamic", max_span=3, whole_word=True),
        ),
        Variant(
            "distilbert", "student = half a teacher's layers (--teacher): 0, 2, 4, 7, 9, 11 of 12, layer 0 of the default 2; "
                          "5·soft CE (T=2) + 2·MLM + 1·cosine",
            objectives=("kd",),
            settings=dict(masking="dynamic", lr=1e-3, steps=750),
        ),
        Variant(
            "electra", "generator (1/4 width) + discriminator sharing embeddings; 1·MLM + 50·replaced token detection",
            # The paper's recipe: the generator (32 wide) reads the discriminator's 128-wide
            # embeddings through its own E -> H projection. Three changes make detection learn
            # within the default budget (docs/training.md's ELECTRA section has the runs): the paper's peak rate
            # 5e-4, not the 2e-3 that suits MLM; ELECTRA's default run masking 25% (not its
            # paper's 15%): more replaced tokens, more positive examples per batch; and a
            # longer warm-up (15% of the steps, not 6%).
            # rtd_weight 50 (the generator's MLM loss keeps weight 1): the detection loss is one
            # binary choice per token, most of them plainly original, so it is much smaller than
            # the MLM loss over the vocabulary; unweighted, the discriminator would hardly learn.
            # ELECTRA's own λ = 50 (the paper's appendix A; disc_weight = 50.0 in its configure_pretraining.py).
            objectives=("rtd",), model_fields=dict(pooler=False),
            settings=dict(masking="dynamic", mask_prob=0.25, replace_probs=(0.85, 0.0, 0.15), lr=5e-4, warmup=0.15, steps=1100,
                          rtd_weight=50.0),
        ),
    )
}


def run_objectives(variant: Variant, settings: Settings) -> tuple[str, ...]:
    """The run's objectives: the variant's, with the sentence task that `--layout` (or `--nsp`,
    `--sop`, `--no-nsp`) asks for instead of its own, when given."""
    if settings.layout is None:
        return variant.objectives
    others = tuple(name for name in variant.objectives if name not in SENTENCE_TASKS)
    return others + ((settings.layout,) if settings.layout in SENTENCE_TASKS else ())


def example_layout(objectives: tuple[str, ...]) -> str:
    """The examples the objectives need: segment pairs of NSP's or SOP's kind, else packed full sentences."""
    return next((name for name in objectives if name in SENTENCE_TASKS), "full_sentences")


def with_layout(variant: Variant, settings: Settings) -> Settings:
    """The settings with `layout` set from the run's objectives: what the data pipeline cuts
    and run.json records."""
    return settings.replace(layout=example_layout(run_objectives(variant, settings)))


def get_variant(name: str) -> Variant:
    if name not in VARIANTS:
        raise ValueError(f"unknown variant {name!r}; choose one of {', '.join(VARIANTS)}")
    return VARIANTS[name]


def run_architecture(variant: Variant, settings: Settings, overrides: dict, *, vocab_size: int | None = None,
                 pad_token_id: int | None = None, teacher: ModelConfig | None = None) -> ModelConfig:
    """The architecture of this run: the variant's plus the user's overrides; with a `teacher`
    (DistilBERT's), the student's, `student_config` (objectives/kd.py), which build_pretrainer's
    "kd" branch then fills from the teacher's layers. The run prints, records and plans it
    before anything is built, so it is made here with every other run's.

    The tokenizer fixes vocab_size and pad_token_id; max_positions defaults to what
    --seq-len needs. Without a tokenizer yet (vocab_size None) this checks the overrides early.
    """
    if teacher is not None:
        return student_config(teacher, **overrides)
    fields = dict(overrides)
    if vocab_size is not None:
        fields["vocab_size"] = vocab_size  # --vocab-size asked the tokenizer for at most this many
    if pad_token_id is not None:
        if fields.get("pad_token_id", pad_token_id) != pad_token_id:
            raise ValueError(f"--pad-token-id {fields['pad_token_id']} disagrees with the tokenizer's [PAD] id {pad_token_id}; drop the flag")
        fields["pad_token_id"] = pad_token_id
    fields = {**variant.model, **fields}
    fields.setdefault("max_positions", settings.seq_len + fields.get("position_offset", 0))
    config = ModelConfig(**fields)
    layout = example_layout(run_objectives(variant, settings))
    if layout != "full_sentences" and config.type_vocab_size == 1:
        raise ValueError(f"the {layout.upper()} examples mark segment B with segment id 1, but the model has one segment type; "
                         f"pass --type-vocab-size 2 (or 0 for none), or --no-nsp")
    if settings.seq_len > config.max_length:
        raise ValueError(
            f"--seq-len {settings.seq_len} exceeds the {config.max_length} positions of the model "
            f"(--max-positions {config.max_positions}); raise --max-positions or lower --seq-len"
        )
    return config


def build_pretrainer(variant: Variant, settings: Settings, config: ModelConfig, teacher: MaskedLM | None = None,
                     generator: MaskedLM | None = None) -> Pretrainer:
    """The kept model (MaskedLM, or ReplacedTokenDetector for ELECTRA) with its objectives;
    ELECTRA's `generator` is built at --generator-fraction unless a pretrained one is given."""
    model = ReplacedTokenDetector(config) if variant.head == "rtd" else MaskedLM(config)
    objectives = {}
    for name in run_objectives(variant, settings):
        if name == "mlm":
            objectives[name] = MaskedLanguageModeling(settings.mlm_weight)
        elif name in SENTENCE_TASKS:
            objectives[name] = SentencePairTask(config, name, settings.sentence_weight)
        elif name == "rtd":
            objectives[name] = ReplacedTokenDetection(model, settings.generator_fraction, settings.mlm_weight, settings.rtd_weight,
                                                        generator, settings.rtd_tokens, settings.generator_heads)
        elif name == "kd":
            if teacher is None:
                raise ValueError(f"the {variant.name} variant distils a teacher; pass --teacher DIR")
            # `config`, and so `model`, is the student's: run_architecture's student_config(teacher), half
            # the teacher's layers, no segments, no pooler; its weights now come from the teacher's layers
            init_student_from_teacher(model, teacher)
            objectives[name] = KnowledgeDistillation(teacher, settings.kd_temperature, settings.kd_soft_weight,
                                                     settings.kd_mlm_weight, settings.kd_cosine_weight, settings.kd_all_tokens)
        else:
            raise ValueError(f"unknown objective {name!r} in variant {variant.name}")
    return Pretrainer(model, objectives)
