"""Each recipe in recipes/ against the released code it aims at, rule by rule.

One table: for every recipe, each rule the release fixes — masking rate, replace probabilities,
count rule, static or dynamic masking and its copies, layout and short-sequence share, sequence
lengths and phases, optimizer, learning rate, betas, ε, weight decay, warm-up, schedule, clipping,
dropout, positions, vocabulary, tokenizer, sizes, the generator's, the distillation's weights,
temperature and token set — with the value the release uses and where it says so (repository,
file and function or flag). The recipe is read as `python train.py @recipes/X.txt` reads it (runs/cli.py's parser,
the variant's defaults underneath: variants.py, with_layout, run_architecture), so a value the
recipe leaves to its variant counts as well.

A rule marked `departs` is one where the recipe parts from its release on purpose: its value must
differ, and the recipe's header comment must name the rule's flag and say why.

The tokenizer is a rule like the others (`tokenizer_kind`: the kind the run trains, or whose
vocabulary it reads), and the header's own words about it are held to the run too: every
recipe that trains its vocabulary says which kind, and no header says a kind is trained that
train.py does not train (`tokenizer_claims`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import inspect
import re

import pytest

from minibert.corpus.pipeline import build_pretraining_data
from minibert.data.masking import default_max_predictions
from minibert.objectives.rtd import generator_config
from minibert.runs import run as run_py
from minibert.runs.cli import parse
from minibert.variants import get_variant, run_architecture, with_layout

RECIPES = Path(__file__).resolve().parents[1] / "recipes"


@dataclass(frozen=True)
class Rule:
    key: str  # a Settings field, "model.<ModelConfig field>", "generator.<field>", "warmup_steps" or "max_predictions"
    value: object  # what the release uses
    source: str  # where the release says so
    departs: str | None = None  # why the recipe parts from it on purpose (its header comment says so too)

    @property
    def flag(self) -> str:
        name = {"warmup_steps": "warmup", "generator.num_heads": "generator_heads",
                "tokenizer_kind": "tokenizer"}.get(self.key, self.key.split(".")[-1])
        return "--" + name.replace("_", "-")


def rules(source: str, prefix: str = "", **values) -> list[Rule]:
    """Several rules with one source: rules(SOURCE, "model.", hidden_size=768) -> Rule("model.hidden_size", 768, SOURCE)."""
    return [Rule(prefix + key, value, source) for key, value in values.items()]


# The tokenizer: the kind of vocabulary a run trains on --data, or where it reads one from. A header
# names a kind as spelled here.
KINDS = ("SentencePiece unigram", "SentencePiece BPE", "WordPiece", "byte-level BPE")
OWN_TOKENIZER = "train.py trains a SentencePiece unigram vocabulary on the corpus; --tokenizer DIR reads the release's own"


def trained_kind() -> str:
    """The kind train.py trains: build_pretraining_data's `tokenizer_model`, which runs/run.py leaves at
    its default (no flag chooses another)."""
    assert "tokenizer_model" not in inspect.getsource(run_py.build_batches), "a run chooses tokenizer_model: read it here"
    model = inspect.signature(build_pretraining_data).parameters["tokenizer_model"].default
    return {"unigram": "SentencePiece unigram", "bpe": "SentencePiece BPE"}[model]


def run_tokenizer(variant, settings) -> str:
    """Where the run's vocabulary comes from, in runs/run.py's `tokenizer_source` order: the teacher's,
    the --init checkpoint's, --tokenizer's, the first phase's (--continue-from), else trained on --data."""
    if variant.needs_teacher:
        return "the teacher's"
    if settings.init:
        return "the --init checkpoint's"
    if settings.tokenizer:
        return "--tokenizer's"
    if settings.continue_from:
        return "the first phase's"
    return trained_kind()


BERT, CPD = "google-research/bert", "create_pretraining_data.py"
OPT = f"{BERT} optimization.py:create_optimizer"
BERT_CONFIG = f"{BERT} modeling.py:BertConfig (bert_config.json of BERT-Base)"
BERT_128 = [
    Rule("mask_prob", 0.15, f"{BERT} {CPD} flags: masked_lm_prob"),
    Rule("replace_probs", (0.8, 0.1, 0.1), f"{BERT} {CPD}:create_masked_lm_predictions"),
    Rule("mask_count", "round", f"{BERT} {CPD}:create_masked_lm_predictions (num_to_predict)"),
    Rule("max_predictions", 20, f"{BERT} README.md (max_predictions_per_seq 20 at max_seq_length 128)"),
    Rule("masking", "static", f"{BERT} {CPD}:create_training_instances (masks written with the examples)"),
    Rule("dupe_factor", None, f"{BERT} {CPD} flags: dupe_factor 10 (minibert's none = 10 under static masking)"),
    Rule("layout", "nsp", f"{BERT} {CPD}:create_instances_from_document"),
    Rule("short_seq_prob", 0.1, f"{BERT} {CPD} flags: short_seq_prob"),
    Rule("seq_len", 128, "BERT paper appendix A.2: 128 tokens for 90% of the steps"),
    Rule("stop_at", 900_000, "BERT paper appendix A.2: the first 90% of the steps"),
    Rule("steps", 1_000_000, "BERT paper appendix A.2"),
    Rule("batch_size", 256, "BERT paper appendix A.2"),
    Rule("optimizer", "adamw", f"{OPT} (AdamWeightDecayOptimizer: decoupled weight decay)"),
    Rule("lr", 1e-4, "BERT paper appendix A.2"),
    *rules(OPT, adam_betas=(0.9, 0.999), adam_eps=1e-6, weight_decay=0.01),
    Rule("warmup_steps", 10_000, f"{BERT} run_pretraining.py flags: num_warmup_steps 10000"),
    Rule("schedule", "linear", f"{OPT} (polynomial_decay, power 1.0)"),
    Rule("clip", 1.0, f"{OPT} (clip_by_global_norm, clip_norm 1.0)"),
    *rules(BERT_CONFIG, "model.", hidden_dropout=0.1, attention_dropout=0.1, max_positions=512, vocab_size=30522,
           hidden_size=768, num_layers=12, num_heads=12, intermediate_size=3072),
    Rule("model.position_encoding", "learned", f"{BERT} modeling.py:embedding_postprocessor"),
    Rule("model.norm", "post", f"{BERT} modeling.py:transformer_model"),
    Rule("model.layer_norm_eps", 1e-12, f"{BERT} modeling.py:layer_norm"),
    Rule("tokenizer_kind", "WordPiece", f"{BERT} tokenization.py:FullTokenizer (BERT-Base uncased's vocab.txt, "
                                        "30,522 pieces, lowercased)", departs=OWN_TOKENIZER),
]
PHASE_2 = {"seq_len": Rule("seq_len", 512, "BERT paper appendix A.2: 512 tokens for the last 10% of the steps"),
           "stop_at": Rule("stop_at", None, "BERT paper appendix A.2: phase 2 runs to the end of the schedule"),
           "max_predictions": Rule("max_predictions", 80, "NVIDIA DeepLearningExamples BERT run_pretraining.sh phase 2 "
                                   "(max_predictions_per_seq 80 at 512; google-research/bert README: 'around "
                                   "max_seq_length * masked_lm_prob')"),
           "tokenizer_kind": Rule("tokenizer_kind", "the first phase's", "BERT paper appendix A.2: phase 2 continues "
                                  "phase 1's model, its vocabulary with it")}
BERT_512 = [PHASE_2.get(rule.key, rule) for rule in BERT_128]

FAIRSEQ, ROBERTA = "facebookresearch/fairseq", "RoBERTa paper Table 9 (the released roberta.base)"
ROBERTA_BASE = [
    Rule("mask_prob", 0.15, f"{FAIRSEQ} fairseq/tasks/masked_lm.py:MaskedLMConfig (mask_prob)"),
    Rule("replace_probs", (0.8, 0.1, 0.1), f"{FAIRSEQ} fairseq/tasks/masked_lm.py:MaskedLMConfig "
                                          "(leave_unmasked_prob 0.1, random_token_prob 0.1)"),
    Rule("mask_count", "stochastic", f"{FAIRSEQ} fairseq/data/mask_tokens_dataset.py:MaskTokensDataset.__getitem__"),
    Rule("masking", "dynamic", f"{FAIRSEQ} fairseq/data/mask_tokens_dataset.py:MaskTokensDataset.__getitem__ "
                               "(seeded by epoch and index); RoBERTa paper section 4.1"),
    Rule("layout", "full_sentences", "RoBERTa paper section 4.2 (FULL-SENTENCES)"),
    Rule("short_seq_prob", 0.0, f"{FAIRSEQ} fairseq/data/token_block_dataset.py:TokenBlockDataset "
                                "(blocks filled to tokens_per_sample)"),
    *rules(ROBERTA, seq_len=512, steps=500_000, batch_size=8192, lr=6e-4, adam_betas=(0.9, 0.98), adam_eps=1e-6,
           weight_decay=0.01, warmup_steps=24_000, schedule="linear", clip=0.0),  # Table 9's gradient clipping 0.0
    Rule("optimizer", "adamw", f"{FAIRSEQ} fairseq/optim/adam.py:Adam (decoupled weight decay)"),
    *rules(ROBERTA, "model.", hidden_dropout=0.1, attention_dropout=0.1, hidden_size=768, num_layers=12, num_heads=12,
           intermediate_size=3072),
    Rule("model.position_encoding", "learned", f"{FAIRSEQ} fairseq/modules/learned_positional_embedding.py"),
    *rules("transformers roberta-base config.json", "model.", type_vocab_size=1, vocab_size=50265, layer_norm_eps=1e-5),
    Rule("tokenizer_kind", "byte-level BPE", f"RoBERTa paper section 4.4 (GPT-2's byte-level BPE, 50K units; {FAIRSEQ} "
                                             "fairseq/data/encoders/gpt2_bpe.py)", departs=OWN_TOKENIZER),
]

ALBERT, ALBERT_OPT = "google-research/albert", "google-research/albert optimization.py:create_optimizer"
ALBERT_CONFIG = "ALBERT albert_base v2 albert_config.json"
ALBERT_BASE = [
    Rule("mask_prob", 0.15, f"{ALBERT} {CPD} flags: masked_lm_prob"),
    Rule("replace_probs", (0.8, 0.1, 0.1), f"{ALBERT} {CPD}:create_masked_lm_predictions"),
    Rule("mask_count", "round", f"{ALBERT} {CPD}:create_masked_lm_predictions (num_to_predict, max_predictions_per_seq 20)",
         departs="minibert draws spans unit by unit; a fixed count is for single tokens"),
    Rule("masking", "static", f"{ALBERT} {CPD}:create_training_instances",
         departs="dynamic masks: RoBERTa section 4.1 found them as good, without 40 copies of the corpus on disk"),
    Rule("max_span", 3, f"{ALBERT} {CPD} flags: ngram 3"),
    Rule("whole_word", True, f"{ALBERT} {CPD} flags: do_whole_word_mask"),
    Rule("layout", "sop", f"{ALBERT} {CPD}:create_instances_from_document (random_next_sentence off)"),
    Rule("short_seq_prob", 0.1, f"{ALBERT} {CPD} flags: short_seq_prob"),
    *rules("ALBERT paper section 4.1", seq_len=512, steps=125_000, batch_size=4096, lr=0.00176),
    Rule("optimizer", "lamb", f"{ALBERT_OPT} (optimizer 'lamb')"),
    *rules(ALBERT_OPT, adam_betas=(0.9, 0.999), adam_eps=1e-6, weight_decay=0.01),
    Rule("warmup_steps", 3125, f"{ALBERT} run_pretraining.py flags: num_warmup_steps 3125"),
    Rule("schedule", "linear", f"{ALBERT_OPT} (polynomial_decay, poly_power 1.0)"),
    Rule("clip", 1.0, f"{ALBERT_OPT} (clip_by_global_norm, clip_norm 1.0)"),
    *rules(ALBERT_CONFIG, "model.", hidden_dropout=0.0, attention_dropout=0.0, max_positions=512, vocab_size=30000,
           embedding_size=128, hidden_size=768, num_layers=12, num_heads=12, intermediate_size=3072),
    Rule("model.position_encoding", "learned", f"{ALBERT} modeling.py:embedding_postprocessor"),
    Rule("model.share_layers", "all", f"{ALBERT} modeling.py:transformer_model (one layer's variables reused)"),
    Rule("model.activation", "gelu_tanh", f"{ALBERT_CONFIG} (hidden_act gelu_new)"),
    Rule("tokenizer_kind", "SentencePiece unigram", f"{ALBERT} README.md (spm_train --model_type=unigram --vocab_size=30000: "
                                                    "30k-clean.model, the release's spiece.model)"),
]

ELECTRA = "google-research/electra"
CONF, HELPERS = f"{ELECTRA} configure_pretraining.py:PretrainingConfig", f"{ELECTRA} pretrain/pretrain_helpers.py:mask"
GENERATOR = f"{ELECTRA} run_pretraining.py:get_generator_config"
SMALL = f"{ELECTRA} model/modeling.py:BertConfig (ELECTRA-Small: paper Table 6)"
ELECTRA_SMALL = [
    # configure_pretraining.py's names: mask_prob, max_seq_length, num_train_steps, train_batch_size, learning_rate,
    # weight_decay_rate, num_warmup_steps, generator_hidden_size, gen_weight, disc_weight
    *rules(CONF, mask_prob=0.15, seq_len=128, steps=1_000_000, batch_size=128, lr=5e-4, weight_decay=0.01,
           warmup_steps=10_000, generator_fraction=0.25, mlm_weight=1.0, rtd_weight=50.0),
    Rule("replace_probs", (0.85, 0.0, 0.15), f"{HELPERS} (85% [MASK], the rest unchanged)"),
    Rule("mask_count", "round", f"{HELPERS} (num_to_predict)"),
    Rule("max_predictions", 19, f"{CONF} (max_predictions_per_seq = int((mask_prob + 0.005) * max_seq_length))"),
    Rule("masking", "dynamic", f"{HELPERS} (masks drawn in the training graph)"),
    Rule("layout", "segments", f"{ELECTRA} build_pretraining_dataset.py:ExampleBuilder._create_example (two segments, "
                               "one 10% of the time, no sentence task)",
         departs="minibert has no layout of segment pairs without a sentence task"),
    Rule("short_seq_prob", 0.05, f"{ELECTRA} build_pretraining_dataset.py:ExampleBuilder._create_example"),
    Rule("optimizer", "adamw", f"{ELECTRA} model/optimization.py:create_optimizer (AdamWeightDecayOptimizer)"),
    *rules(f"{ELECTRA} model/optimization.py:create_optimizer", adam_betas=(0.9, 0.999), adam_eps=1e-6, clip=1.0),
    Rule("schedule", "linear", f"{CONF} (lr_decay_power 1.0)"),
    *rules(SMALL, "model.", hidden_dropout=0.1, attention_dropout=0.1, max_positions=512, hidden_size=256, num_layers=12,
           num_heads=4, intermediate_size=1024),
    Rule("model.position_encoding", "learned", f"{ELECTRA} model/modeling.py:embedding_postprocessor"),
    Rule("model.vocab_size", 30522, f"{CONF} (vocab_size)"),
    Rule("model.embedding_size", 128, f"{CONF} (embedding_size 128 for model_size small)"),
    Rule("model.pooler", False, f"{ELECTRA} run_pretraining.py:PretrainingModel (the discriminator reads every token)"),
    # heads max(1, hidden // 64), FFN 4 × hidden, depth generator_layers 1.0 of the discriminator's
    *rules(GENERATOR, "generator.", hidden_size=64, num_heads=1, intermediate_size=256, num_layers=12),
    Rule("rtd_tokens", "all", f"{ELECTRA} run_pretraining.py:PretrainingModel._get_discriminator_output"),
    Rule("tokenizer_kind", "WordPiece", f"{CONF} (vocab_file: BERT's uncased vocab.txt, read by "
                                        "build_pretraining_dataset.py with tokenization.FullTokenizer)", departs=OWN_TOKENIZER),
]

DISTIL = "transformers examples/research_projects/distillation"
SCRIPT, DISTILLER = f"{DISTIL}/train.py:main", f"{DISTIL}/distiller.py:Distiller"
README = f"{DISTIL}/README.md (the training command)"
DISTILBERT = [
    # train.py's names: mlm_mask_prop, mlm_smoothing (token_probs = max(counts, 1) ** -0.7), temperature,
    # learning_rate, adam_epsilon, weight_decay, warmup_prop, max_grad_norm, max_model_input_size (bert-base's 512)
    *rules(SCRIPT, mask_prob=0.15, mask_smoothing=0.7, kd_temperature=2.0, lr=5e-4, adam_eps=1e-6, weight_decay=0.0,
           warmup=0.05, clip=5.0, seq_len=512),
    Rule("replace_probs", (0.8, 0.1, 0.1), f"{SCRIPT} (word_mask 0.8, word_rand 0.1, word_keep 0.1)"),
    Rule("mask_count", "batch", f"{DISTILLER}.prepare_batch_mlm (n_tgt = ceil(mlm_mask_prop × the batch's tokens))"),
    Rule("masking", "dynamic", f"{DISTILLER}.prepare_batch_mlm (masks drawn for every batch)"),
    Rule("layout", "lines", f"{DISTIL}/scripts/binarized_data.py and lm_seqs_dataset.py:LmSeqsDataset "
                            "(one [CLS] line [SEP] a sequence, long ones split)",
         departs="minibert packs full sentences; it has no layout of one line a sequence"),
    Rule("kd_all_tokens", True, f"{DISTILLER}.step (restrict_ce_to_mask off: the soft targets at every real token)"),
    *rules(f"{README}: alpha_ce 5.0, alpha_mlm 2.0, alpha_cos 1.0", kd_soft_weight=5.0, kd_mlm_weight=2.0, kd_cosine_weight=1.0),
    Rule("batch_size", 4096, "DistilBERT paper section 3 (batches of up to 4K examples)"),
    Rule("optimizer", "adamw", f"{DISTILLER}.__init__ (AdamW)"),
    Rule("adam_betas", (0.9, 0.98), f"{DISTILLER}.__init__ (AdamW betas=(0.9, 0.98))"),
    Rule("schedule", "linear", f"{DISTILLER}.__init__ (get_linear_schedule_with_warmup)"),
    Rule("tokenizer_kind", "the teacher's", f"{DISTIL}/scripts/binarized_data.py (the teacher's tokenizer, "
                                            "bert-base-uncased)"),
]

RELEASES = {"bert-base-128": BERT_128, "bert-base-512": BERT_512, "roberta-base": ROBERTA_BASE,
            "albert-base": ALBERT_BASE, "electra-small": ELECTRA_SMALL, "distilbert": DISTILBERT}


def run_values(argv: list[str]) -> dict[str, object]:
    """Every value of the run `python train.py ARGV` would make: its settings, its model's fields
    (model.X; a distillation's come from its teacher and are not known here), ELECTRA's generator
    (generator.X), the warm-up in steps, the cap of --mask-count round as the run resolves it and
    where its vocabulary comes from (`run_tokenizer`)."""
    settings, overrides, _ = parse(argv)
    variant = get_variant(settings.variant)
    settings.check()
    settings = with_layout(variant, settings)
    values: dict[str, object] = dict(settings.to_dict())
    values["warmup_steps"] = round(settings.warmup * settings.steps)
    cap = settings.max_predictions or default_max_predictions(settings.seq_len, settings.mask_prob)
    values["max_predictions"] = cap if settings.mask_count == "round" else None
    values["tokenizer_kind"] = run_tokenizer(variant, settings)
    if not variant.needs_teacher:
        config = run_architecture(variant, settings, overrides)
        values.update({f"model.{name}": value for name, value in config.to_dict().items()})
        if variant.head == "rtd":
            generator = generator_config(config, settings.generator_fraction, settings.generator_heads)
            values.update({f"generator.{name}": value for name, value in generator.to_dict().items()})
    return values


def same(a, b) -> bool:
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        return isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and a == pytest.approx(b, rel=1e-9, abs=1e-12)
    return a == b


def disagreements(path: Path, rules: list[Rule]) -> list[str]:
    """The rules on which the recipe at `path` and its release part without the table saying so."""
    values = run_values([f"@{path}"])
    header = "\n".join(line for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("#"))
    wrong = []
    for rule in rules:
        value = values[rule.key]
        if rule.departs is None and not same(value, rule.value):
            wrong.append(f"{path.stem}: {rule.key} is {value!r}, the release's is {rule.value!r} ({rule.source}); "
                         f"set {rule.flag}")
        elif rule.departs is not None and same(value, rule.value):
            wrong.append(f"{path.stem}: {rule.key} now agrees with the release: drop its departure from the table")
        elif rule.departs is not None and rule.flag not in header:
            wrong.append(f"{path.stem}: departs from its release in {rule.key} ({rule.departs}); its header must say so, "
                         f"naming {rule.flag}")
    return wrong


# The project's own recipes, aimed at no release: what each buys is measured instead (its page).
OWN = {"learners-hour": "docs/glue-gain.md (python bench/glue_gain.py)"}


def test_every_recipe_has_a_table():
    assert set(RELEASES) | set(OWN) == {path.stem for path in RECIPES.glob("*.txt")} and not set(RELEASES) & set(OWN)


@pytest.mark.parametrize("name", sorted(RELEASES))
def test_each_recipe_agrees_with_its_release_rule_by_rule(name):
    assert not disagreements(RECIPES / f"{name}.txt", RELEASES[name])


@pytest.mark.parametrize("name, line, planted, rule", [
    ("electra-small", "--replace-probs 0.85 0.0 0.15", "--replace-probs 1.0 0.0 0.0", "replace_probs"),
    ("bert-base-128", "--max-predictions 20", "--max-predictions 30", "max_predictions"),
    ("roberta-base", "--mask-count stochastic", "--mask-count round", "mask_count"),
    ("distilbert", "--kd-all-tokens", "", "kd_all_tokens"),
    ("roberta-base", "--adam-betas 0.9 0.98", "--adam-betas 0.9 0.999", "adam_betas"),
    ("albert-base", "--variant albert", "--variant albert --masking static", "masking"),
])
def test_a_planted_wrong_value_is_found(tmp_path, name, line, planted, rule):
    """A recipe written to tmp_path with one value changed: the table names that rule (a departure
    that stops departing is named too)."""
    text = (RECIPES / f"{name}.txt").read_text(encoding="utf-8")
    assert line in text
    path = tmp_path / f"{name}.txt"
    path.write_text(text.replace(line, planted, 1), encoding="utf-8")
    found = disagreements(path, RELEASES[name])
    assert len(found) == 1 and f": {rule} " in found[0], found


def test_a_departure_the_header_does_not_explain_is_found(tmp_path):
    lines = (RECIPES / "albert-base.txt").read_text(encoding="utf-8").splitlines()
    path = tmp_path / "albert-base.txt"
    path.write_text("\n".join(line for line in lines if not (line.startswith("#") and "--masking" in line)) + "\n")
    found = disagreements(path, RELEASES["albert-base"])
    assert any("its header must say so, naming --masking" in line for line in found), found


# What a header says about the tokenizer: "trains a 30,522-piece SentencePiece unigram vocabulary",
# "the byte-level BPE is trained on it" — a verb of training and a kind, within one clause.
TRAINED = r"(?:train|learn)(?:s|ed)?"
KIND = "|".join(re.escape(kind).replace(r"\ ", r"\s+") for kind in KINDS)
CLAIM = re.compile(rf"\b{TRAINED}\b[^.;]*?\b({KIND})\b|\b({KIND})\b[^.;]*?\b(?:is|are)\s+{TRAINED}\b")


def header(path: Path) -> str:
    """The recipe's header comment as one text, its lines joined."""
    return " ".join(line.lstrip("#").strip() for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("#"))


def tokenizer_claims(path: Path) -> list[str]:
    """Where the header's words on the tokenizer and the run disagree: a kind the header says is
    trained that the run does not train, or (a recipe aimed at a release) a trained kind it does not name."""
    run = run_values([f"@{path}"])["tokenizer_kind"]
    said = {" ".join(next(group for group in match.groups() if group).split()) for match in CLAIM.finditer(header(path))}
    does = f"trains a {run} vocabulary" if run in KINDS else f"takes {run} vocabulary"
    wrong = [f"{path.stem}: its header says a {kind} vocabulary is trained; the run {does}" for kind in sorted(said - {run})]
    if run in KINDS and path.stem in RELEASES and run not in said:
        wrong.append(f"{path.stem}: the run {does}; its header must say so (and how to use the release's own: --tokenizer DIR)")
    return wrong


def test_the_tokenizer_kinds_are_the_ones_train_py_knows():
    assert trained_kind() in KINDS
    assert {rule.value for rules in RELEASES.values() for rule in rules if rule.key == "tokenizer_kind"} <= {
        *KINDS, "the teacher's", "the first phase's"}
    assert all(any(rule.key == "tokenizer_kind" for rule in rules) for rules in RELEASES.values()), "a release without a tokenizer rule"


@pytest.mark.parametrize("path", sorted(RECIPES.glob("*.txt")), ids=lambda path: path.stem)
def test_each_recipe_says_which_tokenizer_it_trains(path):
    assert not tokenizer_claims(path)


@pytest.mark.parametrize("name, planted, found", [
    ("roberta-base", "# The 50,265-piece byte-level BPE is trained on it.", "says a byte-level BPE vocabulary is trained"),
    ("electra-small", "# It trains BERT's WordPiece on --data.", "says a WordPiece vocabulary is trained"),
    ("distilbert", "# train.py trains a SentencePiece unigram vocabulary on --data.", "takes the teacher's vocabulary"),
])
def test_a_planted_tokenizer_claim_is_found(tmp_path, name, planted, found):
    """A header that says a kind is trained which the run does not train (train.py trains one kind,
    and a distillation none)."""
    text = (RECIPES / f"{name}.txt").read_text(encoding="utf-8")
    path = tmp_path / f"{name}.txt"
    path.write_text(planted + "\n" + text, encoding="utf-8")
    claims = tokenizer_claims(path)
    assert len(claims) == 1 and found in claims[0], claims


def test_a_header_silent_on_its_trained_tokenizer_is_found(tmp_path):
    lines = (RECIPES / "albert-base.txt").read_text(encoding="utf-8").splitlines()
    path = tmp_path / "albert-base.txt"
    path.write_text("\n".join(line.replace("SentencePiece unigram", "SentencePiece") for line in lines) + "\n", encoding="utf-8")
    claims = tokenizer_claims(path)
    assert len(claims) == 1 and "its header must say so" in claims[0], claims


def test_a_release_tokenizer_the_header_does_not_name_is_found(tmp_path):
    """BERT's WordPiece is a departure: the header must name --tokenizer, the flag that reads it."""
    lines = (RECIPES / "bert-base-128.txt").read_text(encoding="utf-8").splitlines()
    path = tmp_path / "bert-base-128.txt"
    path.write_text("\n".join(line for line in lines if not (line.startswith("#") and "--tokenizer" in line)) + "\n")
    found = disagreements(path, RELEASES["bert-base-128"])
    assert any("tokenizer_kind" in line and "naming --tokenizer" in line for line in found), found
