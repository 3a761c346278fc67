"""Properties of `minibert.data.mask_tokens` (BERT's MLM corruption and its variants)."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from minibert.data import mask_tokens

VOCAB, MASK = 1000, 4
SPECIAL_IDS = (0, 1, 2, 3, 4)


@st.composite
def batches(draw):
    """A random batch: ids >= 5, a random special/padding mask, any leading shape."""
    shape = draw(st.sampled_from([(17,), (3, 24), (2, 3, 11), (1, 64)]))
    seed = draw(st.integers(0, 2**31))
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, VOCAB, shape, generator=g)
    special = torch.rand(shape, generator=g) < draw(st.floats(0.0, 1.0))
    ids[special] = torch.randint(0, 5, (int(special.sum()),), generator=g)  # special positions hold special ids
    options = draw(
        st.fixed_dictionaries(
            {
                "mask_prob": st.floats(0.0, 1.0),
                "replace_probs": st.sampled_from([(0.8, 0.1, 0.1), (0.85, 0.0, 0.15), (0.0, 1.0, 0.0), (1.0, 0.0, 0.0)]),
                "max_span": st.integers(1, 3),
            }
        )
    )
    word_starts = (torch.rand(shape, generator=g) < 0.6) if draw(st.booleans()) else None
    return ids, special, word_starts, options, seed


def run(ids, special, word_starts, options, seed):
    return mask_tokens(ids, special, vocab_size=VOCAB, mask_token_id=MASK, generator=torch.Generator().manual_seed(seed),
                       word_starts=word_starts, special_ids=SPECIAL_IDS, **options)


@settings(max_examples=60, deadline=None)
@given(batches())
def test_selection_invariants(batch):
    ids, special, word_starts, options, seed = batch
    masked, labels = run(*batch)
    selected = labels != -100
    assert masked.shape == labels.shape == ids.shape and masked.dtype == labels.dtype == torch.long
    assert not (selected & special).any(), "a special or padding token was selected"
    assert torch.equal(labels[selected], ids[selected]), "labels must hold the original ids"
    assert torch.equal(masked[~selected], ids[~selected]), "unselected ids must be unchanged"
    replaced = selected & (masked != ids) & (masked != MASK)
    assert not torch.isin(masked[replaced], torch.tensor(SPECIAL_IDS)).any(), "random replacements must avoid special ids"
    if options["replace_probs"][1] == 0.0:
        assert not replaced.any()
    if options["mask_prob"] == 1.0 and options["max_span"] == 1:
        assert torch.equal(selected, ~special), "mask_prob=1 selects every ordinary token"


@settings(max_examples=25, deadline=None)
@given(batches())
def test_seeded_generator_is_deterministic(batch):
    first, second = run(*batch), run(*batch)
    assert torch.equal(first[0], second[0]) and torch.equal(first[1], second[1])


@settings(max_examples=25, deadline=None)
@given(batches())
def test_whole_words_are_masked_together(batch):
    ids, special, _, options, seed = batch
    word_starts = torch.rand(ids.shape, generator=torch.Generator().manual_seed(seed)) < 0.5
    _, labels = run(ids, special, word_starts, options, seed)
    selected = (labels != -100).reshape(-1, ids.shape[-1])
    continuation = ~word_starts.reshape(selected.shape) & ~special.reshape(selected.shape)
    previous_ordinary = ~special.reshape(selected.shape)[:, :-1]
    # a word's later piece is selected exactly when the piece before it is
    inside_word = continuation[:, 1:] & previous_ordinary
    assert torch.equal(selected[:, 1:][inside_word], selected[:, :-1][inside_word])


def sigmas(p: float, n: int, k: float = 6.0) -> float:
    """k standard deviations of a share p measured over n independent draws: the bound a
    correct implementation exceeds about once in 500 million tries at k = 6."""
    return k * (p * (1 - p) / max(n, 1)) ** 0.5


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 2**31), mask_prob=st.floats(0.05, 0.6),
       replace_probs=st.sampled_from([(0.8, 0.1, 0.1), (0.85, 0.0, 0.15), (0.5, 0.25, 0.25), (0.6, 0.4, 0.0), (0.0, 0.0, 1.0)]))
def test_the_rate_and_the_80_10_10_split_hold_on_any_draw(seed, mask_prob, replace_probs):
    """The share of ordinary tokens selected is mask_prob, and the selected ones go to [MASK],
    a random id or stay as they are in the recipe's proportions (BERT's 80/10/10), each within
    6 standard deviations of its binomial count. A random id equal to the original counts as
    unchanged (1 chance in the 995 ordinary ids)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, VOCAB, (128, 512), generator=g)
    special = torch.zeros_like(ids, dtype=torch.bool)
    special[:, 0] = special[:, -1] = True
    special[:, torch.randint(200, 512, (1,), generator=g).item():] = True  # padding
    masked, labels = mask_tokens(ids, special, vocab_size=VOCAB, mask_token_id=MASK, mask_prob=mask_prob,
                                 replace_probs=replace_probs, generator=g, special_ids=SPECIAL_IDS)
    selected = labels != -100
    n_ordinary, n_selected = int((~special).sum()), int(selected.sum())
    assert abs(n_selected / n_ordinary - mask_prob) <= sigmas(mask_prob, n_ordinary)
    to_mask, to_random, unchanged = replace_probs
    unchanged += to_random / (VOCAB - len(SPECIAL_IDS))
    for share, expected in (((masked[selected] == MASK).float().mean(), to_mask),
                            ((masked[selected] == ids[selected]).float().mean(), unchanged)):
        assert abs(float(share) - expected) <= sigmas(expected, n_selected) + 1e-9


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**31), max_span=st.integers(2, 4))
def test_span_lengths_follow_one_over_n_on_any_draw(seed, max_span):
    """ALBERT's n-gram masking: a span of n units is drawn with P(n) = (1/n) / (1 + 1/2 + ... + 1/max_span).
    Masking is sparse (1%) so that spans rarely touch; each share must lie within 5 standard
    deviations of its expected count (about 12,000 spans), plus 0.005 for the spans that touch
    and read as one. P(n) ∝ 1/n^0.8 instead fails it."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, VOCAB, (1000, 2000), generator=g)
    special = torch.zeros_like(ids, dtype=torch.bool)
    _, labels = mask_tokens(ids, special, vocab_size=VOCAB, mask_token_id=MASK, mask_prob=0.01, max_span=max_span, generator=g)
    selected = torch.nn.functional.pad((labels != -100).int(), (1, 1))
    starts = ((selected[:, 1:] - selected[:, :-1]) == 1).nonzero()[:, 1]
    ends = ((selected[:, 1:] - selected[:, :-1]) == -1).nonzero()[:, 1]
    counts = torch.bincount(ends - starts, minlength=max_span + 1).float()
    spans = int(counts[1:].sum())
    harmonic = sum(1 / n for n in range(1, max_span + 1))
    for n in range(1, max_span + 1):
        expected = (1 / n) / harmonic
        assert abs(float(counts[n]) / spans - expected) <= sigmas(expected, spans, k=5) + 0.005, (n, counts)
    assert counts[max_span + 1:].sum() <= 0.02 * spans  # longer runs only where spans touch


def test_overlapping_spans_make_the_rate_a_little_lower():
    fraction, _, _ = statistics(4, max_span=3)
    assert 0.12 < fraction < 0.16


def statistics(seed, **options):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, VOCAB, (256, 512), generator=g)
    special = torch.zeros_like(ids, dtype=torch.bool)
    special[:, 0] = special[:, -1] = True
    special[:, 400:] = True  # padding
    masked, labels = mask_tokens(ids, special, vocab_size=VOCAB, mask_token_id=MASK, generator=g, special_ids=SPECIAL_IDS, **options)
    selected = labels != -100
    return (
        float(selected.sum() / (~special).sum()),
        float((masked[selected] == MASK).float().mean()),
        float((masked[selected] == ids[selected]).float().mean()),
    )


def test_different_generators_give_different_masks():
    ids = torch.randint(5, VOCAB, (8, 64))
    special = torch.zeros_like(ids, dtype=torch.bool)
    a = mask_tokens(ids, special, vocab_size=VOCAB, mask_token_id=MASK, generator=torch.Generator().manual_seed(0))[1]
    b = mask_tokens(ids, special, vocab_size=VOCAB, mask_token_id=MASK, generator=torch.Generator().manual_seed(1))[1]
    assert not torch.equal(a, b)


@pytest.mark.parametrize(
    "options, message",
    [
        ({"mask_prob": 1.5}, "mask_prob"),
        ({"replace_probs": (0.8, 0.1, 0.2)}, "replace_probs"),
        ({"max_span": 0}, "max_span"),
        ({"mask_token_id": VOCAB}, "mask_token_id"),
        ({"special_ids": (VOCAB + 3,)}, "special_ids"),
    ],
)
def test_bad_options_fail_clearly(options, message):
    ids = torch.randint(5, VOCAB, (2, 8))
    kwargs = {"vocab_size": VOCAB, "mask_token_id": MASK, **options}
    with pytest.raises(ValueError, match=message):
        mask_tokens(ids, torch.zeros_like(ids, dtype=torch.bool), **kwargs)


def test_mismatched_shapes_fail_clearly():
    ids = torch.randint(5, VOCAB, (2, 8))
    with pytest.raises(ValueError, match="special_tokens_mask has shape"):
        mask_tokens(ids, torch.zeros(2, 7, dtype=torch.bool), vocab_size=VOCAB, mask_token_id=MASK)
