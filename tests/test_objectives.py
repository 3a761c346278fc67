"""The objectives' math on hand-sized cases: MLM, NSP/SOP, RTD (ELECTRA), KD (DistilBERT)."""

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings, strategies as st

from minibert import MaskedLM, ModelConfig, ReplacedTokenDetector
from minibert.heads import IGNORE_INDEX, detection_loss
from minibert.objectives import Objective
from minibert.objectives.kd import (KnowledgeDistillation, init_student_from_teacher, soft_target_kl, student_config,
                                    teacher_layers)
from minibert.objectives.mlm import MaskedLanguageModeling
from minibert.training.loop import Pretrainer
from minibert.objectives.rtd import ReplacedTokenDetection, generator_config, gumbel_max_sample, replace_masked
from minibert.objectives.sentence import SentencePairTask
from minibert.operations.state import trainable_state
from minibert.training.settings import Settings
from minibert.variants import VARIANTS, build_pretrainer, example_layout, run_objectives, run_architecture, with_layout


# ELECTRA's and DistilBERT's recipes, as their variants give them (the objectives keep no defaults of their own)
RTD = dict(generator_fraction=0.25, mlm_weight=1.0, rtd_weight=VARIANTS["electra"].settings["rtd_weight"], generator=None, tokens="all",
           generator_heads="scaled")
KD = dict(temperature=2.0, soft_weight=5.0, mlm_weight=2.0, cosine_weight=1.0, all_tokens=False)


def tiny(**changes) -> ModelConfig:
    base = dict(vocab_size=50, hidden_size=32, num_layers=2, num_heads=4, intermediate_size=48, max_positions=16,
                hidden_dropout=0.0, attention_dropout=0.0)
    return ModelConfig(**{**base, **changes})


def make_batch(batch=3, seq=10, vocab=50, seed=0, pair=True):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (batch, seq), generator=g)
    mask = torch.ones(batch, seq, dtype=torch.long)
    mask[0, seq - 3:] = 0  # one padded row
    ids = ids.masked_fill(mask == 0, 0)
    labels = torch.full_like(ids, IGNORE_INDEX)
    chosen = (torch.rand(ids.shape, generator=g) < 0.3) & mask.bool()
    chosen[:, 1] = True
    labels[chosen] = ids[chosen]
    masked = ids.masked_fill(chosen, 4)
    out = dict(input_ids=masked, attention_mask=mask, token_type_ids=torch.zeros_like(ids), labels=labels)
    if pair:
        out["sentence_label"] = torch.randint(0, 2, (batch,), generator=g)
    return out


# --- MLM and sentence pairs ---------------------------------------------------------------

def test_mlm_is_cross_entropy_at_labeled_positions_only():
    torch.manual_seed(0)
    model, batch = MaskedLM(tiny()).eval(), make_batch()
    output = model.encoder(batch["input_ids"], batch["attention_mask"])
    loss, metrics = MaskedLanguageModeling(weight=2.0)(model, batch, output)
    full = model.predict(output.last_hidden_state)  # [B, T, V]
    labeled = batch["labels"] != IGNORE_INDEX
    expected = F.cross_entropy(full[labeled], batch["labels"][labeled])
    torch.testing.assert_close(loss, 2.0 * expected)
    torch.testing.assert_close(metrics["mlm_loss"], expected)
    accuracy = (full[labeled].argmax(-1) == batch["labels"][labeled]).float().mean()
    torch.testing.assert_close(metrics["mlm_accuracy"], accuracy)


@pytest.mark.parametrize("changes", [{}, {"embedding_size": 8, "reference": True}])
def test_pretraining_and_the_task_model_take_one_masked_lm_loss(changes):
    """The MLM objective on the pass it shares and `MaskedLM(..., labels=)` in a loop of your own
    reach one loss: the same value and the same gradient, bit for bit (fused or --reference)."""
    torch.manual_seed(0)
    model, batch = MaskedLM(tiny(**changes)).eval(), make_batch(pair=False)
    pretrained, _ = Pretrainer(model, {"mlm": MaskedLanguageModeling(weight=1.0)})(batch)
    pretrained.backward()
    via_objective = [p.grad for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    own = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"], labels=batch["labels"]).loss
    own.backward()
    assert torch.equal(pretrained, own)
    same = lambda a, b: a is b is None or (a is not None and b is not None and torch.equal(a, b))  # the pooler: no gradient
    assert all(same(a, p.grad) for a, p in zip(via_objective, model.parameters()))


@pytest.mark.parametrize("task", ["nsp", "sop"])
def test_sentence_task_is_two_way_cross_entropy_on_the_pooled_vector(task):
    torch.manual_seed(0)
    model, batch = MaskedLM(tiny()).eval(), make_batch()
    output = model.encoder(batch["input_ids"], batch["attention_mask"])
    objective = SentencePairTask(model.config, task, 1.0)
    loss, metrics = objective(model, batch, output)
    expected = F.cross_entropy(objective.head(output.pooler_output), batch["sentence_label"])
    torch.testing.assert_close(loss, expected)
    assert set(metrics) == {f"{task}_loss", f"{task}_accuracy"}


def test_objectives_share_one_encoder_pass():
    model = MaskedLM(tiny())
    pretrainer = Pretrainer(model, {"mlm": MaskedLanguageModeling(1.0), "nsp": SentencePairTask(model.config, "nsp", 1.0)})
    calls = []
    model.encoder.register_forward_hook(lambda *args: calls.append(1))
    loss, metrics = pretrainer(make_batch())
    assert len(calls) == 1 and {"mlm_loss", "nsp_loss"} <= set(metrics)
    assert torch.isfinite(loss)


# --- RTD --------------------------------------------------------------------------------------

def test_replaced_labels_mark_exactly_the_changed_tokens():
    ids = torch.tensor([[2, 4, 7, 4, 3], [2, 9, 4, 3, 0]])  # 4 = [MASK]
    labels = torch.tensor([[-100, 5, -100, 8, -100], [-100, -100, 6, -100, -100]])
    samples = torch.tensor([5, 11, 12])  # row 0: original, replaced; row 1: replaced
    corrupted, replaced = replace_masked(ids, labels, samples)
    assert corrupted.tolist() == [[2, 5, 7, 11, 3], [2, 9, 12, 3, 0]]
    assert replaced.tolist() == [[0, 0, 0, 1, 0], [0, 0, 1, 0, 0]]  # a sample equal to the original is "original"


def test_gumbel_max_draws_from_the_softmax():
    torch.manual_seed(0)
    logits = torch.tensor([1.0, 0.0, -1.0, 2.0]).repeat(20000, 1)
    counts = torch.bincount(gumbel_max_sample(logits), minlength=4).float() / 20000
    torch.testing.assert_close(counts, logits[0].softmax(-1), atol=0.015, rtol=0)


def test_generator_is_a_quarter_and_shares_embeddings():
    config = tiny(hidden_size=64, embedding_size=16)
    discriminator = ReplacedTokenDetector(config)
    rtd = ReplacedTokenDetection(discriminator, **RTD)
    generator = rtd.generator
    assert generator.config.hidden_size == 16 and generator.config.num_heads == 1
    assert generator.encoder.embeddings is discriminator.encoder.embeddings
    assert generator.embedding_table is discriminator.encoder.embeddings.word_embeddings.weight  # tied decoder
    assert generator.encoder.embedding_projection is not discriminator.encoder.embedding_projection
    wide = generator_config(tiny(hidden_size=64), 0.25, "scaled")  # E = 64 > the generator's 16, as in ELECTRA-base
    assert (wide.embedding_size, wide.hidden_size) == (64, 16)


@settings(max_examples=60, deadline=None)
@given(heads=st.integers(1, 16), head_width=st.sampled_from([16, 32, 64, 96]), fraction=st.sampled_from([0.25, 1 / 3, 0.5, 1.0]))
def test_the_generator_heads_follow_their_rule_at_any_size(heads, head_width, fraction):
    """--generator-heads: "scaled" keeps the discriminator's head count times the fraction,
    "64-wide" is ELECTRA's get_generator_config, max(1, hidden // 64); either way the heads divide
    the generator's width, which stays within a head of round(H · fraction). At ELECTRA's published
    sizes (small 256/4 at 1/4, base 768/12 at 1/3, large 1024/16 at 1/4) the two rules agree."""
    config = ModelConfig(hidden_size=heads * head_width, num_heads=heads, intermediate_size=4 * heads * head_width)
    width = round(config.hidden_size * fraction)
    for rule, expected in (("scaled", max(1, round(heads * fraction))), ("64-wide", max(1, width // 64))):
        generator = generator_config(config, fraction, rule)
        assert generator.num_heads == expected and generator.hidden_size % generator.num_heads == 0
        assert width - generator.num_heads < generator.hidden_size <= max(width, generator.num_heads)
    for hidden, heads, fraction in ((256, 4, 0.25), (768, 12, 1 / 3), (1024, 16, 0.25)):
        config = ModelConfig(hidden_size=hidden, num_heads=heads)
        assert generator_config(config, fraction, "scaled") == generator_config(config, fraction, "64-wide")
    assert generator_config(ModelConfig(hidden_size=384, num_heads=12), 0.25, "64-wide").num_heads == 1  # scaled: 3


def test_no_discriminator_gradient_reaches_the_generator_through_the_sample():
    torch.manual_seed(0)
    discriminator = ReplacedTokenDetector(tiny(embedding_size=8))
    rtd = ReplacedTokenDetection(discriminator, **{**RTD, "mlm_weight": 0.0})  # the RTD loss alone
    loss, metrics = rtd(discriminator, make_batch(pair=False))
    loss.backward()
    shared = {id(p) for p in discriminator.parameters()}
    own = [(n, p) for n, p in rtd.generator.named_parameters() if id(p) not in shared]
    assert own and all(p.grad is None or not p.grad.any() for _, p in own)
    assert discriminator.encoder.embeddings.word_embeddings.weight.grad.any()  # shared tables do learn
    assert 0 <= metrics["rtd_accuracy"] <= 1


@pytest.mark.parametrize("tokens", ["all", "masked"])
def test_the_detection_loss_reads_every_token_or_only_the_masked_ones(tokens):
    """ELECTRA learns from every real token; its "ELECTRA 15%" diagnostic from the masked ones only:
    the loss's gradient reaches a token's score exactly when the token is in that set."""
    torch.manual_seed(0)
    discriminator = ReplacedTokenDetector(tiny(embedding_size=8))
    rtd = ReplacedTokenDetection(discriminator, **{**RTD, "mlm_weight": 0.0, "tokens": tokens})
    scores = []

    def keep(module, args, out):  # the scores, with their gradient kept; returns None: the output is unchanged
        out.retain_grad()
        scores.append(out)

    discriminator.head.register_forward_hook(keep)
    batch = make_batch(pair=False)
    loss, metrics = rtd(discriminator, batch)
    loss.backward()
    reached = scores[0].grad != 0  # [B, T]
    expected = batch["attention_mask"].bool() if tokens == "all" else batch["labels"] != IGNORE_INDEX
    assert torch.equal(reached, expected)
    assert 0 <= metrics["rtd_masked_auc"] <= 1


def test_the_discriminators_own_loss_is_the_detection_loss_at_the_real_tokens():
    """`ReplacedTokenDetector(..., labels=)` is the pretraining objective's detection loss at the
    real tokens: the binary CE averaged over the non-padding tokens, bit for bit."""
    torch.manual_seed(0)
    discriminator, batch = ReplacedTokenDetector(tiny()).eval(), make_batch(pair=False)
    replaced = (batch["labels"] != IGNORE_INDEX).long()
    out = discriminator(batch["input_ids"], batch["attention_mask"], labels=replaced)
    assert torch.equal(out.loss, detection_loss(out.logits, replaced, batch["attention_mask"].bool()))
    real = batch["attention_mask"].bool()
    expected = F.binary_cross_entropy_with_logits(out.logits[real], replaced[real].float())
    torch.testing.assert_close(out.loss, expected)


def test_an_unknown_detection_token_set_is_a_clear_error():
    with pytest.raises(ValueError, match="tokens must be one of all, masked"):
        ReplacedTokenDetection(ReplacedTokenDetector(tiny()), **{**RTD, "tokens": "some"})


def test_electra_state_holds_each_shared_tensor_once():
    discriminator = ReplacedTokenDetector(tiny(embedding_size=8))
    pretrainer = Pretrainer(discriminator, {"rtd": ReplacedTokenDetection(discriminator, **RTD)})
    state = trainable_state(pretrainer)
    pointers = [t.data_ptr() for t in state.values()]
    assert len(pointers) == len(set(pointers))
    assert not any(name.startswith("objectives.rtd.generator.encoder.embeddings") for name in state)


# --- KD ---------------------------------------------------------------------------------------

logit_rows = st.lists(st.lists(st.floats(-5, 5), min_size=4, max_size=4), min_size=1, max_size=3)


@settings(max_examples=30, deadline=None)
@given(rows=logit_rows, temperature=st.floats(0.5, 4.0))
def test_soft_loss_is_zero_for_identical_logits(rows, temperature):
    logits = torch.tensor(rows)
    assert soft_target_kl(logits, logits, temperature).abs() < 1e-5


@settings(max_examples=30, deadline=None)
@given(student=logit_rows, temperature=st.floats(0.5, 4.0))
def test_soft_loss_carries_the_t_squared_factor(student, temperature):
    s = torch.tensor(student)
    t = torch.flip(s, dims=[1]) + 0.5
    # Logits scaled by T and softened by T are the original distributions, times T².
    scaled = soft_target_kl(s * temperature, t * temperature, temperature)
    torch.testing.assert_close(scaled, temperature**2 * soft_target_kl(s, t, 1.0), rtol=1e-4, atol=1e-5)
    by_hand = (t.softmax(-1) * (t.log_softmax(-1) - s.log_softmax(-1))).sum(-1).mean()
    torch.testing.assert_close(soft_target_kl(s, t, 1.0), by_hand, rtol=1e-4, atol=1e-6)


def copied_from(student: MaskedLM, teacher: MaskedLM) -> list[int]:
    """For each student depth, the teacher depth whose sublayers hold exactly its weights."""
    def weights(encoder, depth):
        return [tensor for module in encoder.layer(depth) for tensor in module.state_dict().values()]
    return [next((t for t in range(teacher.config.num_layers)
                 if all(torch.equal(a, b) for a, b in zip(weights(student.encoder, s), weights(teacher.encoder, t)))), None)
            for s in range(student.config.num_layers)]


def test_a_student_of_a_twelve_layer_teacher_starts_from_distilberts_layers():
    """The released DistilBERT was initialised from BERT's layers 0, 2, 4, 7, 9, 11 (the
    published script's list; `teacher_layers` says why we follow it). Every other layer
    (0, 2, 4, 6, 8, 10) would leave the teacher's last layer out, and this test would fail.
    A 12-layer teacher because the default 2 -> 1 student takes layer 0 under either rule."""
    torch.manual_seed(0)
    teacher = MaskedLM(tiny(num_layers=12))  # random weights: each layer differs from every other
    config = student_config(teacher.config)
    assert (config.num_layers, config.type_vocab_size, config.pooler) == (6, 0, False)
    student = MaskedLM(config)
    init_student_from_teacher(student, teacher)
    assert copied_from(student, teacher) == [0, 2, 4, 7, 9, 11]
    assert torch.equal(student.embedding_table, teacher.embedding_table)
    assert torch.equal(student.head.transform.weight, teacher.head.transform.weight)
    with pytest.raises(ValueError, match="hidden_size"):
        student_config(teacher.config, hidden_size=64)


@given(teacher=st.integers(1, 24), data=st.data())
def test_the_student_layers_run_evenly_from_the_teachers_first_to_its_last(teacher, data):
    """What the rule promises at any depth: distinct teacher layers in order, the first and
    (for two or more) the last among them, the gaps between them differing by one at most."""
    student = data.draw(st.integers(1, teacher))
    picked = teacher_layers(teacher, student)
    gaps = [b - a for a, b in zip(picked, picked[1:])]
    assert len(picked) == student and picked[0] == 0 and all(gap >= 1 for gap in gaps)
    assert student == 1 or picked[-1] == teacher - 1
    assert not gaps or max(gaps) - min(gaps) <= 1


@pytest.mark.parametrize("all_tokens", [False, True])
def test_kd_is_zero_when_the_student_is_the_teacher(all_tokens):
    torch.manual_seed(0)
    teacher = MaskedLM(tiny())
    student = MaskedLM(student_config(teacher.config, num_layers=2, type_vocab_size=2))
    init_student_from_teacher(student, teacher)
    kd = KnowledgeDistillation(teacher, **{**KD, "all_tokens": all_tokens}).train()
    student.eval()
    batch = make_batch(pair=False)
    loss, metrics = kd(student, batch, student.encoder(batch["input_ids"], batch["attention_mask"]))
    assert metrics["kd_soft_loss"].abs() < 1e-5 and metrics["kd_cosine_loss"].abs() < 1e-5
    torch.testing.assert_close(loss, 2.0 * metrics["mlm_loss"])  # only the hard-target term remains
    assert not kd.teacher.training  # .train() never turns the teacher's dropout on
    loss.backward()
    assert all(p.grad is None for p in teacher.parameters())


def test_kd_soft_targets_read_every_real_token_or_the_masked_ones():
    """--kd-all-tokens (DistilBERT's release, restrict_ce_to_mask off): the soft-target loss is the mean
    KL over every real token; without it, over the masked ones only. Padding never counts."""
    torch.manual_seed(0)
    teacher, student = MaskedLM(tiny()), MaskedLM(tiny(type_vocab_size=0, pooler=False, num_layers=1))
    batch = make_batch(pair=False)
    output = student.encoder(batch["input_ids"], batch["attention_mask"])
    with torch.no_grad():
        hidden = teacher.encoder(batch["input_ids"], batch["attention_mask"]).last_hidden_state
    kl = soft_target_kl(student.predict(output.last_hidden_state).flatten(0, 1), teacher.predict(hidden).flatten(0, 1),
                        2.0, per_row=True).view(batch["input_ids"].shape)  # [B, T]
    for all_tokens, where in ((True, batch["attention_mask"].bool()), (False, batch["labels"] != IGNORE_INDEX)):
        _, metrics = KnowledgeDistillation(teacher, **{**KD, "all_tokens": all_tokens})(student, batch, output)
        torch.testing.assert_close(metrics["kd_soft_loss"], kl[where].mean())


# --- variants ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", [n for n in VARIANTS if n != "distilbert"])
def test_every_variant_builds_and_returns_a_finite_loss(name):
    variant = VARIANTS[name]
    settings_ = variant.default_settings(seq_len=10)
    small = dict(hidden_size=32, num_heads=4, intermediate_size=48, num_layers=2)
    if name in ("albert", "electra"):
        small["embedding_size"] = 8
    config = run_architecture(variant, settings_, small, vocab_size=50, pad_token_id=0)
    pretrainer = build_pretrainer(variant, settings_, config)
    loss, metrics = pretrainer(make_batch(pair=with_layout(variant, settings_).layout != "full_sentences"))
    assert torch.isfinite(loss) and ("rtd_loss" in metrics) == (name == "electra")
    assert math.isfinite(float(metrics["mlm_accuracy"]))


def test_the_examples_follow_the_objectives_so_the_two_cannot_disagree():
    """NSP and SOP are objectives like the others; the example layout is derived from them, and
    a --layout flag (or --nsp, --sop, --no-nsp) swaps the sentence objective itself."""
    assert VARIANTS["bert"].objectives == ("mlm", "nsp") and VARIANTS["albert"].objectives == ("mlm", "sop")
    for name, variant in VARIANTS.items():
        settings_ = with_layout(variant, variant.default_settings())
        objectives = run_objectives(variant, settings_)
        assert objectives == variant.objectives and settings_.layout == example_layout(objectives)
    albert = VARIANTS["albert"]
    assert run_objectives(albert, albert.default_settings(layout="nsp")) == ("mlm", "nsp")
    assert run_objectives(albert, albert.default_settings(layout="full_sentences")) == ("mlm",)
    roberta = VARIANTS["roberta"]
    assert with_layout(roberta, roberta.default_settings(layout="sop")).layout == "sop"
    config = run_architecture(albert, albert.default_settings(seq_len=10), dict(hidden_size=32, num_heads=4, intermediate_size=48,
                              num_layers=2, embedding_size=8), vocab_size=50, pad_token_id=0)
    built = build_pretrainer(albert, albert.default_settings(layout="nsp"), config)
    assert list(built.objectives) == ["mlm", "nsp"]


def test_every_objective_has_the_members_the_pretrainer_reads():
    """Each objective a variant builds (DistilBERT's with a teacher) is an `Objective`; a module
    that lacks one of its members is not."""
    built = []
    for name, variant in VARIANTS.items():
        settings_ = variant.default_settings(seq_len=10)
        if variant.needs_teacher:
            teacher = MaskedLM(tiny())
            built.append(KnowledgeDistillation(teacher, **KD))
            continue
        config = run_architecture(variant, settings_, dict(hidden_size=32, num_heads=4, intermediate_size=48, num_layers=2),
                                  vocab_size=50, pad_token_id=0)
        for layout in ("nsp", "sop", "full_sentences"):
            built += build_pretrainer(variant, settings_.replace(layout=layout), config).objectives.values()
    kinds = {type(objective).__name__ for objective in built}
    assert kinds == {"MaskedLanguageModeling", "SentencePairTask", "ReplacedTokenDetection", "KnowledgeDistillation"}
    for objective in built:
        assert isinstance(objective, Objective), type(objective).__name__
        assert isinstance(objective.shares_pass, bool) and isinstance(objective.reads_pooler, bool)

    class NoPositions(torch.nn.Module):
        shares_pass, reads_pooler = True, False

    assert not isinstance(NoPositions(), Objective)


def test_distilbert_without_teacher_is_a_clear_error():
    variant = VARIANTS["distilbert"]
    with pytest.raises(ValueError, match="--teacher"):
        build_pretrainer(variant, variant.default_settings(), tiny())
    assert isinstance(variant.default_settings(), Settings)


@settings(max_examples=40, deadline=None)
@given(scores=st.lists(st.floats(-5, 5, allow_nan=False, width=32), min_size=2, max_size=40, unique=True), data=st.data())
def test_detection_metrics_match_their_definitions(scores, data):
    from minibert.objectives.rtd import detection_metrics

    replaced = data.draw(st.lists(st.booleans(), min_size=len(scores), max_size=len(scores)))
    got = detection_metrics(torch.tensor(scores), torch.tensor(replaced))
    pos = [s for s, r in zip(scores, replaced) if r]
    neg = [s for s, r in zip(scores, replaced) if not r]
    pairs = [p > n for p in pos for n in neg]
    assert got["rtd_auc"].item() == pytest.approx(sum(pairs) / len(pairs) if pairs else 0.5)
    called = [s > 0 for s in scores]
    hits = sum(c and r for c, r in zip(called, replaced))
    assert got["rtd_precision"].item() == pytest.approx(hits / max(1, sum(called)))
    assert got["rtd_recall"].item() == pytest.approx(hits / max(1, len(pos)))
    assert got["rtd_accuracy"].item() == pytest.approx(sum(c == r for c, r in zip(called, replaced)) / len(scores))
