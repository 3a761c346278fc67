"""The five families as DATA: a variant = model config + example layout + masking + objectives.

Nothing in the training loop asks which variant it runs. A variant only chooses values:

    bert        post-LN encoder, NSP segment pairs, static masking (10 masked copies)
    roberta     BERT's encoder, one segment type; full sentences, no NSP, dynamic masking
    albert      factorized embeddings (E < H), all layers shared, SOP, n-gram masking of whole words
    distilbert  half of a teacher's layers, trained to imitate it (soft targets + MLM + cosine)
    electra     small generator + discriminator: replaced token detection on every token

The model sizes here are the DEFAULT RUN's: small enough that `python train.py --variant V`
finishes in minutes on two CPU cores and visibly learns; `--hidden-size 768 --num-layers 12
...` (or any ModelConfig field) scales them up. The sentence task (NSP/SOP) follows from the
example layout, so `--no-nsp` / `--sop` switch it. Adding a sixth family means one more entry
here and, if its idea is new, one more file in minibert/objectives/.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .config import ModelConfig
from .heads import MaskedLM, ReplacedTokenDetector
from .objectives import (KnowledgeDistillation, MaskedLanguageModeling, Pretrainer, ReplacedTokenDetection,
                         SentencePairTask)
from .objectives.kd import init_student_from_teacher, student_config
from .training.settings import Settings

# The default run's encoder: BERT-Tiny's shape (2 layers of width 128, Turc et al. 2019) and an
# 8k SentencePiece vocabulary, with what makes it learn context within minutes on a CPU
# (measured in bench/time_to_quality.py; docs/training.md has the ablation):
#   rotary positions   attention can prefer a token's neighbours from the first step,
#                      instead of first learning a position table (the largest single gain);
#   no dropout         a few passes over the corpus cannot overfit; dropout only slows learning;
#   40% masking        (MASK_PROB, the default runs' rate) more predictions per forward pass;
#                      held-out accuracy is still measured at BERT's 15%.
# None of these is a family's defining switch. The published recipe is one set of flags away:
# CLASSIC, shown in --help.
SMALL = dict(vocab_size=8000, hidden_size=128, num_layers=2, num_heads=2, intermediate_size=512,
             position_encoding="rotary", hidden_dropout=0.0, attention_dropout=0.0)
CLASSIC = "--position-encoding learned --hidden-dropout 0.1 --attention-dropout 0.1 --mask-prob 0.15"


@dataclass(frozen=True)
class Variant:
    name: str
    changes: str  # what this family changes, in one line (README table, --help)
    objectives: tuple[str, ...]  # besides the sentence task, which the layout implies
    model_fields: dict = field(default_factory=dict)  # ModelConfig fields of the default run
    settings: dict = field(default_factory=dict)  # Settings values of the default run, over Settings' defaults

    @property
    def head(self) -> str:
        """The kept model's head: the discriminator's for ELECTRA, the MLM head otherwise."""
        return "rtd" if "rtd" in self.objectives else "mlm"

    @property
    def needs_teacher(self) -> bool:
        return "kd" in self.objectives

    def default_settings(self, **overrides) -> Settings:
        return Settings(variant=self.name, **{**self.settings, **overrides})


VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in (
        Variant(
            "bert", "post-LN encoder; MLM + next sentence prediction; static masking (10 masked copies)",
            objectives=("mlm",), model_fields=dict(SMALL),
            settings=dict(layout="nsp", masking="static", steps=1250),
        ),
        Variant(
            "roberta", "BERT's encoder with one segment type; full-sentence packing, no NSP, dynamic masking",
            objectives=("mlm",), model_fields=dict(SMALL, type_vocab_size=1, position_offset=1, layer_norm_eps=1e-5),
            settings=dict(layout="full_sentences", masking="dynamic"),
        ),
        Variant(
            "albert", "factorized embeddings (E=64 < H), one layer shared by all depths; SOP; n-gram masking (spans ≤ 3 words)",
            objectives=("mlm",),
            model_fields=dict(SMALL, embedding_size=64, share_layers="all", activation="gelu_tanh"),
            # n-gram masking over whole words, as ALBERT's data script does (create_pretraining_data.py:
            # do_whole_word_mask on, n-grams of its word candidates, each word = a ▁ piece and the
            # pieces after it; its script also starts a word at a punctuation piece)
            settings=dict(layout="sop", masking="dynamic", max_span=3, whole_word=True),
        ),
        Variant(
            "distilbert", "student = half a teacher's layers, first to last (--teacher); 5·soft CE (T=2) + 2·MLM + 1·cosine",
            objectives=("kd",),
            settings=dict(layout="full_sentences", masking="dynamic", lr=1e-3, steps=750),
        ),
        Variant(
            "electra", "generator (1/4 width) + discriminator sharing embeddings; 1·MLM + 50·replaced token detection",
            # The paper's recipe: the generator (32 wide) reads the discriminator's 128-wide
            # embeddings through its own E -> H projection. Three changes make detection learn
            # within the default budget (measured in docs/training.md): the paper's peak rate
            # 5e-4, not the 2e-3 that suits MLM; ELECTRA's default run masking 25% (not its
            # paper's 15%): more replaced tokens, more positive examples per batch; and a
            # longer warm-up (15% of the steps, not 6%).
            objectives=("rtd",), model_fields=dict(SMALL, pooler=False),
            settings=dict(layout="full_sentences", masking="dynamic", mask_prob=0.25, replace_probs=(0.85, 0.0, 0.15),
                          lr=5e-4, warmup=0.15, steps=1100),
        ),
    )
}


def get_variant(name: str) -> Variant:
    if name not in VARIANTS:
        raise ValueError(f"unknown variant {name!r}; choose one of {', '.join(VARIANTS)}")
    return VARIANTS[name]


def run_architecture(variant: Variant, settings: Settings, overrides: dict, *, vocab_size: int | None = None,
                 pad_token_id: int | None = None, teacher: ModelConfig | None = None) -> ModelConfig:
    """The architecture of this run: the variant's (or the teacher's) plus the user's overrides.

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
    fields = {**variant.model_fields, **fields}
    fields.setdefault("max_positions", settings.seq_len + fields.get("position_offset", 0))
    config = ModelConfig(**fields)
    if settings.layout != "full_sentences" and config.type_vocab_size == 1:
        raise ValueError(f"--layout {settings.layout} marks segment B with segment id 1, but the model has one segment type; "
                         f"pass --type-vocab-size 2 (or 0 for none)")
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
    for name in variant.objectives:
        if name == "mlm":
            objectives[name] = MaskedLanguageModeling(settings.mlm_weight)
        elif name == "rtd":
            objectives[name] = ReplacedTokenDetection(model, settings.generator_fraction, settings.mlm_weight, settings.rtd_weight,
                                                        generator, settings.rtd_tokens)
        elif name == "kd":
            if teacher is None:
                raise ValueError(f"the {variant.name} variant distils a teacher; pass --teacher DIR")
            init_student_from_teacher(model, teacher)
            objectives[name] = KnowledgeDistillation(teacher, settings.kd_temperature, settings.kd_soft_weight,
                                                     settings.kd_mlm_weight, settings.kd_cosine_weight, settings.kd_all_tokens)
        else:
            raise ValueError(f"unknown objective {name!r} in variant {variant.name}")
    if settings.layout in ("nsp", "sop"):
        objectives[settings.layout] = SentencePairTask(config, settings.layout, settings.sentence_weight)
    return Pretrainer(model, objectives)
