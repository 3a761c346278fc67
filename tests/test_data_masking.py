"""Properties of `minibert.data.Masking` (BERT's MLM corruption and its variants)."""

import math
import re

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from minibert.data import Masking
from minibert.data.masking import IGNORE_INDEX

VOCAB, MASK = 1000, 4
SPECIAL_IDS = (0, 1, 2, 3, 4)
WORD_STARTS = torch.arange(VOCAB) < 500  # ids 5..499 begin a word, 500..999 continue one


def masking(whole_word: bool = False, **options) -> Masking:
    options = {"mask_prob": 0.15, "replace_probs": (0.8, 0.1, 0.1), "max_span": 1, "count": "bernoulli", "smoothing": 0.0, **options}
    return Masking(vocab_size=VOCAB, mask_id=MASK, never_masked=SPECIAL_IDS, never_drawn=SPECIAL_IDS,
                   word_starts=WORD_STARTS if whole_word else None, **options)


def random_ids(shape, generator, special_share: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Ordinary ids (>= 5), with a share of the positions holding a special id instead."""
    ids = torch.randint(5, VOCAB, shape, generator=generator)
    special = torch.rand(shape, generator=generator) < special_share
    ids[special] = torch.randint(0, 5, (int(special.sum()),), generator=generator)
    return ids, special


@st.composite
def batches(draw):
    """A random batch [B, T]: ordinary ids, some special ones, any masking options."""
    shape = draw(st.sampled_from([(1, 17), (3, 24), (6, 11), (1, 64)]))
    seed = draw(st.integers(0, 2**31))
    ids, special = random_ids(shape, torch.Generator().manual_seed(seed), draw(st.floats(0.0, 1.0)))
    options = draw(st.fixed_dictionaries({
        "mask_prob": st.floats(0.0, 1.0),
        "replace_probs": st.sampled_from([(0.8, 0.1, 0.1), (0.85, 0.0, 0.15), (0.0, 1.0, 0.0), (1.0, 0.0, 0.0)]),
        "max_span": st.integers(1, 3),
        "whole_word": st.booleans(),
    }))
    return ids, special, options, seed


def run(ids, options, seed):
    return masking(**options)(ids, torch.Generator().manual_seed(seed))


@settings(max_examples=60, deadline=None)
@given(batches())
def test_selection_invariants(batch):
    ids, special, options, seed = batch
    masked, labels = run(ids, options, seed)
    selected = labels != IGNORE_INDEX
    assert masked.shape == labels.shape == ids.shape and masked.dtype == labels.dtype == torch.long
    assert not (selected & special).any(), "a special or padding token was selected"
    assert torch.equal(labels[selected], ids[selected]), "labels must hold the original ids"
    assert torch.equal(masked[~selected], ids[~selected]), "unselected ids must be unchanged"
    replaced = selected & (masked != ids) & (masked != MASK)
    assert not torch.isin(masked[replaced], torch.tensor(SPECIAL_IDS)).any(), "random replacements must avoid special ids"
    if options["replace_probs"][1] == 0.0:
        assert not replaced.any()
    if options["mask_prob"] == 1.0:
        assert torch.equal(selected, ~special), "mask_prob=1 selects every ordinary token"


@settings(max_examples=25, deadline=None)
@given(batches())
def test_seeded_generator_is_deterministic(batch):
    ids, _, options, seed = batch
    first, second = run(ids, options, seed), run(ids, options, seed)
    assert torch.equal(first[0], second[0]) and torch.equal(first[1], second[1])


@settings(max_examples=25, deadline=None)
@given(batches())
def test_whole_words_are_masked_together(batch):
    ids, special, options, seed = batch
    _, labels = run(ids, {**options, "whole_word": True}, seed)
    selected = labels != IGNORE_INDEX
    continuation = ~WORD_STARTS[ids] & ~special
    # a word's later piece is selected exactly when the piece before it is (an ordinary one)
    inside_word = continuation[:, 1:] & ~special[:, :-1]
    assert torch.equal(selected[:, 1:][inside_word], selected[:, :-1][inside_word])


def sigmas(p: float, n: int, k: float = 6.0) -> float:
    """k standard deviations of a share p measured over n independent draws, and k draws more: the
    bound a correct implementation exceeds about once in 500 million tries at k = 6. The k draws
    are for a share near 0 or 1, where the normal approximation fails: at p = 0.99999 over 10,000
    draws one miss (the 2.6% chance of a correct rule) is 2.7 standard deviations off."""
    return k * (p * (1 - p) / max(n, 1)) ** 0.5 + k / max(n, 1)


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 2**31), mask_prob=st.floats(0.05, 0.6),
       replace_probs=st.sampled_from([(0.8, 0.1, 0.1), (0.85, 0.0, 0.15), (0.5, 0.25, 0.25), (0.6, 0.4, 0.0), (0.0, 0.0, 1.0)]))
def test_the_rate_and_the_80_10_10_split_hold_on_any_draw(seed, mask_prob, replace_probs):
    """BERT's token-level choice (max_span = 1, single tokens): the share of ordinary tokens
    selected is mask_prob, and the selected ones go to [MASK], a random id or stay as they are
    in the recipe's proportions (BERT's 80/10/10), each within 6 standard deviations of its
    binomial count. A random id equal to the original counts as unchanged (1 chance in the
    995 ordinary ids)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, VOCAB, (128, 512), generator=g)
    ids[:, 0], ids[:, -1] = 2, 3
    ids[:, torch.randint(200, 512, (1,), generator=g).item():] = 0  # padding
    special = ids < 5
    masked, labels = masking(mask_prob=mask_prob, replace_probs=replace_probs)(ids, g)
    selected = labels != IGNORE_INDEX
    n_ordinary, n_selected = int((~special).sum()), int(selected.sum())
    assert abs(n_selected / n_ordinary - mask_prob) <= sigmas(mask_prob, n_ordinary)
    to_mask, to_random, unchanged = replace_probs
    unchanged += to_random / (VOCAB - len(SPECIAL_IDS))
    for share, expected in (((masked[selected] == MASK).float().mean(), to_mask),
                            ((masked[selected] == ids[selected]).float().mean(), unchanged)):
        assert abs(float(share) - expected) <= sigmas(expected, n_selected) + 1e-9


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**31), mask_prob=st.floats(0.05, 0.6))
def test_single_tokens_are_chosen_one_by_one(seed, mask_prob):
    """BERT's token-level choice: whether a token is chosen says nothing about its neighbour.
    Among the ordinary tokens right after a chosen one, the share chosen is mask_prob too
    (within 6 standard deviations); spans of tokens would raise it."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, VOCAB, (128, 512), generator=g)
    _, labels = masking(mask_prob=mask_prob)(ids, g)
    selected = labels != IGNORE_INDEX
    after_selected = selected[:, 1:][selected[:, :-1]]
    n = len(after_selected)
    assert abs(float(after_selected.float().mean()) - mask_prob) <= sigmas(mask_prob, n), n


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**31), mask_prob=st.floats(0.05, 0.6), max_span=st.integers(1, 4), whole_word=st.booleans())
def test_spans_cover_mask_prob_of_the_tokens_despite_their_overlaps(seed, mask_prob, max_span, whole_word):
    """ALBERT's n-gram masking (`Masking.choose_spans`: spans, or whole words with max_span = 1):
    the begin rate accounts for overlapping spans (`begin_probability`), so the share selected
    is still mask_prob: within 6 standard deviations of a count of spans (each span moves up to
    max_span tokens together), plus 0.01 for the few units at the start of a segment, which
    fewer spans can reach. mask_prob / E[n] as the begin rate falls short (the test below)."""
    whole_word = whole_word or max_span == 1  # max_span = 1 of single tokens is the token-level choice, tested above
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, VOCAB, (128, 512), generator=g)
    ids[:, 0], ids[:, 255], ids[:, -1] = 2, 3, 3  # [CLS] A [SEP] B [SEP]
    _, labels = masking(mask_prob=mask_prob, max_span=max_span, whole_word=whole_word)(ids, g)
    ordinary = int((ids >= 5).sum())
    share = float((labels != IGNORE_INDEX).sum()) / ordinary
    assert abs(share - mask_prob) <= sigmas(mask_prob, ordinary // (2 * max_span)) + 0.01, share


def test_the_naive_begin_rate_falls_short_for_the_albert_variant():
    """What masking.py's `begin_probability` says without a figure: for the albert variant's spans
    (P(n) ∝ 1/n, n ≤ 3 words) at its masking rate, beginning spans at mask_prob / E[n] covers
    1 - Π_k (1 - q · P(n > k)) of the units, several points short of mask_prob (0.358 at 0.4);
    the rate `begin_probability` solves for covers mask_prob itself."""
    from minibert.data.masking import begin_probability
    from minibert.variants import VARIANTS

    albert = VARIANTS["albert"].default_settings()
    span_probs = masking(mask_prob=albert.mask_prob, max_span=albert.max_span, whole_word=True).span_probs
    longer = span_probs.flip(0).cumsum(0).flip(0).tolist()  # P(n > k)
    mean_length = float((torch.arange(1, albert.max_span + 1) * span_probs).sum())

    def covered(q):
        return 1 - math.prod(1 - q * p for p in longer)

    naive = covered(albert.mask_prob / mean_length)
    assert naive < albert.mask_prob - 0.03, naive
    assert covered(begin_probability(albert.mask_prob, span_probs)) == pytest.approx(albert.mask_prob, abs=1e-12)


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**31), mask_prob=st.floats(0.1, 0.6), max_span=st.integers(2, 4))
def test_a_span_never_reaches_past_a_special_token(seed, mask_prob, max_span):
    """Segments of one token each ([CLS] a [SEP] b [SEP] c ...): a span cannot go on past its
    segment's [SEP], so a token is selected exactly when a span begins at it — the begin rate,
    within 6 standard deviations. A span that ran on into the next segment would select more."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, VOCAB, (256, 512), generator=g)
    ids[:, 0::2] = 3  # every other token a [SEP]
    masks = masking(mask_prob=mask_prob, max_span=max_span)
    _, labels = masks(ids, g)
    ordinary = int((ids >= 5).sum())
    share = float((labels != IGNORE_INDEX).sum()) / ordinary
    assert abs(share - masks.begin_prob) <= sigmas(masks.begin_prob, ordinary), (share, masks.begin_prob)


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**31), max_span=st.integers(2, 4))
def test_span_lengths_follow_one_over_n_on_any_draw(seed, max_span):
    """ALBERT's n-gram masking: a span of n units is drawn with P(n) = (1/n) / (1 + 1/2 + ... + 1/max_span).
    Masking is sparse (1%) so that spans rarely touch; each share must lie within 5 standard
    deviations of its expected count (about 12,000 spans), plus 0.005 for the spans that touch
    and read as one. P(n) ∝ 1/n^0.8 instead fails it."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, VOCAB, (1000, 2000), generator=g)
    _, labels = masking(mask_prob=0.01, max_span=max_span)(ids, g)
    selected = torch.nn.functional.pad((labels != IGNORE_INDEX).int(), (1, 1))
    starts = ((selected[:, 1:] - selected[:, :-1]) == 1).nonzero()[:, 1]
    ends = ((selected[:, 1:] - selected[:, :-1]) == -1).nonzero()[:, 1]
    counts = torch.bincount(ends - starts, minlength=max_span + 1).float()
    spans = int(counts[1:].sum())
    harmonic = sum(1 / n for n in range(1, max_span + 1))
    for n in range(1, max_span + 1):
        expected = (1 / n) / harmonic
        assert abs(float(counts[n]) / spans - expected) <= sigmas(expected, spans, k=5) + 0.005, (n, counts)
    assert counts[max_span + 1:].sum() <= 0.02 * spans  # longer runs only where spans touch


def test_different_generators_give_different_masks():
    ids = torch.randint(5, VOCAB, (8, 64))
    a = masking()(ids, torch.Generator().manual_seed(0))[1]
    b = masking()(ids, torch.Generator().manual_seed(1))[1]
    assert not torch.equal(a, b)


@pytest.mark.parametrize(
    "options, message",
    [
        ({"mask_prob": 1.5}, "mask_prob"),
        ({"replace_probs": (0.8, 0.1, 0.2)}, "replace_probs"),
        ({"max_span": 0}, "max_span"),
        ({"mask_id": VOCAB}, "mask_id"),
        ({"never_drawn": range(VOCAB)}, "every id"),
    ],
)
def test_bad_options_fail_clearly(options, message):
    kwargs = dict(vocab_size=VOCAB, mask_id=MASK, never_masked=SPECIAL_IDS, never_drawn=SPECIAL_IDS, mask_prob=0.15,
                  replace_probs=(0.8, 0.1, 0.1), max_span=1, word_starts=None, count="bernoulli", smoothing=0.0)
    with pytest.raises(ValueError, match=message):
        Masking(**{**kwargs, **options})


# --- the releases' count rules (`Masking.choose_count`) and DistilBERT's smoothing ---------------------

PAD = 0


def counted(count: str, **options) -> Masking:
    return masking(count=count, pad_id=PAD, **options)


@st.composite
def padded_batches(draw):
    """[CLS] ordinary and special ids [SEP], then padding: any lengths, any share of special ids."""
    rows, width = draw(st.integers(1, 6)), draw(st.integers(2, 80))
    seed = draw(st.integers(0, 2**31))
    g = torch.Generator().manual_seed(seed)
    ids, _ = random_ids((rows, width), g, draw(st.floats(0.0, 0.5)))
    ids[ids == PAD] = 1  # a special id inside a sequence is never [PAD]
    lengths = draw(st.lists(st.integers(2, width), min_size=rows, max_size=rows))
    for row, length in enumerate(lengths):
        ids[row, 0], ids[row, length - 1], ids[row, length:] = 2, 3, PAD
    return ids, torch.tensor(lengths), seed


@settings(max_examples=80, deadline=None)
@given(batch=padded_batches(), mask_prob=st.floats(0.0, 1.0), count=st.sampled_from(["round", "stochastic", "batch"]),
       cap=st.one_of(st.none(), st.integers(1, 30)), smoothing=st.sampled_from([0.0, 0.7]))
def test_a_fixed_count_follows_its_release_s_rule_on_any_sequence(batch, mask_prob, count, cap, smoothing):
    """The count of masked positions, for sequences of any length, special ids and padding: n real
    tokens ([CLS] and [SEP] counted, padding not) give min(cap, max(1, round(n·p))) (BERT, ELECTRA),
    floor(n·p) or one more (RoBERTa's probabilistic rounding), ceil(p · the batch's n) over the whole
    batch (DistilBERT); never more than the maskable tokens; never a special or padding position."""
    ids, lengths, seed = batch
    cap = cap if count == "round" else None
    counts = np.random.default_rng(seed).integers(0, 10**6, VOCAB)
    masks = counted(count, mask_prob=mask_prob, max_predictions=cap, smoothing=smoothing,
                    token_counts=counts if smoothing else None)
    masked, labels = masks(ids, torch.Generator().manual_seed(seed))
    chosen = labels != IGNORE_INDEX
    maskable = (ids >= 5).sum(1)
    assert not (chosen & (ids < 5)).any() and torch.equal(labels[chosen], ids[chosen])
    assert torch.equal(masked[~chosen], ids[~chosen])
    if count == "batch":
        assert int(chosen.sum()) == min(int(maskable.sum()), math.ceil(mask_prob * float(lengths.sum())))
        return
    for row, n in enumerate(lengths.tolist()):
        got, room = int(chosen[row].sum()), int(maskable[row])
        if count == "round":
            assert got == min(room, cap or n, max(1, round(n * mask_prob))), (n, got)
        else:
            assert got in (min(room, math.floor(n * mask_prob)), min(room, math.floor(n * mask_prob) + 1)), (n, got)


@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 2**31), length=st.integers(8, 200), mask_prob=st.floats(0.05, 0.6))
def test_probabilistic_rounding_is_right_on_average(seed, length, mask_prob):
    """RoBERTa's floor(n·p + U): one more than floor(n·p) with chance frac(n·p), so the mean count
    is n·p (within 6 standard deviations over 2,000 sequences); plain rounding would miss it."""
    ids = torch.randint(5, VOCAB, (2000, length), generator=torch.Generator().manual_seed(seed))
    _, labels = counted("stochastic", mask_prob=mask_prob)(ids, torch.Generator().manual_seed(seed))
    extra = (labels != IGNORE_INDEX).sum(1).double() - math.floor(length * mask_prob)
    fraction = length * mask_prob - math.floor(length * mask_prob)
    assert set(extra.tolist()) <= {0.0, 1.0}
    assert abs(float(extra.mean()) - fraction) <= sigmas(fraction, len(extra)) + 1e-9


@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 2**31), common=st.integers(10, 10**7), rare=st.integers(0, 9), smoothing=st.floats(0.1, 1.0))
def test_smoothing_draws_a_token_with_chance_proportional_to_count_to_the_minus_alpha(seed, common, rare, smoothing):
    """DistilBERT's mlm_smoothing: [CLS] a b [SEP] with one position to mask, a a token seen `common`
    times and b one seen `rare` times (at least once, as max(count, 1)): b is chosen with chance
    w_b / (w_a + w_b), w = count^-α, within 6 standard deviations over 10,000 sequences; at α = 0
    the choice is even. A rule that ignored the weights, or inverted them, fails it."""
    counts = np.full(VOCAB, 1000)
    counts[10], counts[11] = common, rare
    ids = torch.tensor([[2, 10, 11, 3]]).repeat(10000, 1)
    for alpha in (smoothing, 0.0):
        options = dict(mask_prob=0.25, smoothing=alpha, token_counts=counts if alpha else None)
        _, labels = counted("round", **options)(ids, torch.Generator().manual_seed(seed))
        chosen = labels != IGNORE_INDEX
        assert torch.equal(chosen.sum(1), torch.ones(len(ids), dtype=torch.long))
        w_common, w_rare = common ** -alpha, max(rare, 1) ** -alpha
        expected = w_rare / (w_common + w_rare)
        assert abs(float(chosen[:, 2].float().mean()) - expected) <= sigmas(expected, len(ids)) + 1e-9


def test_smoothing_favours_rare_tokens_in_a_corpus_like_draw():
    """Zipf-like counts, one fixed seed: under α = 0.7 the rarer half of the vocabulary takes a clearly
    larger share of the masked positions than under α = 0 (here 0.37 of them against 0.14, its share of the text)."""
    counts = (1e7 / np.arange(1, VOCAB + 1)).astype(np.int64)  # id k seen about 1e7 / k times
    g = torch.Generator().manual_seed(0)
    ids = torch.multinomial(torch.from_numpy(counts[5:] / counts[5:].sum()).float(), 256 * 128, replacement=True,
                            generator=g).view(256, 128) + 5
    rare = ids >= VOCAB // 2
    shares = []
    for alpha in (0.0, 0.7):
        masks = counted("batch", mask_prob=0.15, smoothing=alpha, token_counts=counts if alpha else None)
        chosen = masks(ids, torch.Generator().manual_seed(1))[1] != IGNORE_INDEX
        shares.append(float((chosen & rare).sum() / chosen.sum()))
    assert shares[1] > shares[0] + 0.15, shares


@pytest.mark.parametrize("options, message", [
    ({"count": "round", "max_span": 3}, "--mask-count round counts single tokens"),
    ({"count": "batch", "whole_word": True}, "drop --max-span and --whole-word"),
    ({"count": "bernoulli", "max_predictions": 20}, "--max-predictions 20 caps the count of --mask-count round"),
    ({"count": "bernoulli", "smoothing": 0.7, "token_counts": np.ones(VOCAB)}, "--mask-smoothing 0.7 weights"),
    ({"count": "batch", "smoothing": 0.7}, "pass token_counts"),
    ({"count": "fixed"}, "--mask-count must be one of"),
])
def test_a_count_rule_that_cannot_apply_is_refused(options, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        masking(**options)


def test_the_command_line_refuses_a_fixed_count_with_spans_in_one_line(capsys):
    from minibert.runs.cli import main

    assert main(["--variant", "albert", "--mask-count", "round", "--plan"]) == 2  # albert masks spans of whole words
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--mask-count round counts single tokens" in err


@pytest.mark.parametrize("smoothing", [float("nan"), float("inf"), -0.5])
def test_a_smoothing_exponent_that_is_not_a_finite_non_negative_number_is_refused(smoothing):
    """NaN passes `smoothing < 0` and would weigh every token by NaN; infinity puts all the weight
    on the rarest token: both are refused as a negative value is."""
    with pytest.raises(ValueError, match=re.escape(f"--mask-smoothing {smoothing} weights which tokens a fixed count draws")):
        masking(count="round", smoothing=smoothing, token_counts=np.ones(VOCAB))


def test_the_command_line_refuses_mask_smoothing_nan_in_one_whole_line(capsys):
    from minibert.runs.cli import main

    assert main(["--variant", "bert", "--mask-count", "round", "--mask-smoothing", "nan", "--plan"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("train.py: error: --mask-smoothing nan weights which tokens a fixed count draws, by count^-A: give a "
                   "finite A >= 0 with --mask-count round, stochastic or batch (DistilBERT's: 0.7 with batch) or drop it")
