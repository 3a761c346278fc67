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


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fraction_and_80_10_10_split(seed):
    fraction, to_mask, unchanged = statistics(seed)
    assert abs(fraction - 0.15) < 0.01
    assert abs(to_mask - 0.8) < 0.02 and abs(unchanged - 0.1) < 0.02  # the other ~10% are random ids


def test_electra_split_and_span_masking():
    fraction, to_mask, unchanged = statistics(3, replace_probs=(0.85, 0.0, 0.15))
    assert abs(to_mask - 0.85) < 0.02 and abs(unchanged - 0.15) < 0.02 and abs(to_mask + unchanged - 1) < 1e-6
    fraction, _, _ = statistics(4, max_span=3)  # overlapping spans make it a little lower
    assert 0.12 < fraction < 0.16


def test_span_lengths_follow_one_over_n():
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(5, VOCAB, (400, 500), generator=g)
    special = torch.zeros_like(ids, dtype=torch.bool)
    _, labels = mask_tokens(ids, special, vocab_size=VOCAB, mask_token_id=MASK, mask_prob=0.02, max_span=3, generator=g)
    selected = (labels != -100).int()
    # run lengths of selected tokens (sparse, so spans rarely touch): P(n) = (1/n) / (1 + 1/2 + 1/3)
    padded = torch.nn.functional.pad(selected, (1, 1))
    starts = ((padded[:, 1:] - padded[:, :-1]) == 1).nonzero()
    ends = ((padded[:, 1:] - padded[:, :-1]) == -1).nonzero()
    lengths = torch.bincount(ends[:, 1] - starts[:, 1]).float()
    shares = lengths[1:4] / lengths[1:].sum()
    assert torch.allclose(shares, torch.tensor([6 / 11, 3 / 11, 2 / 11]), atol=0.04), shares


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
