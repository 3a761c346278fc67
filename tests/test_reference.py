"""`--reference`, the reference path: one training step gives the fast path's loss and gradients.

The fast path (SDPA, the last layer only at the positions a loss reads, the fused vocabulary
loss, and unpadding from Encoder.UNPAD_FROM padding on) and the reference path (the padded grid,
the naive attention, every layer at every position, a plain F.cross_entropy) are two ways of
computing the same function; only float rounding may tell them apart. Tolerance, in fp32: the loss to
1e-5 relative, every gradient to atol 1e-5 + rtol 1e-4 (observed differences are ~1e-7).
"""

import pytest
import torch

import torch.nn.functional as F

from minibert.data.masking import IGNORE_INDEX
from minibert.model import Encoder
from minibert.heads import LinearCrossEntropy
from minibert.kernels.unpad import TokenLayout
from minibert.variants import VARIANTS, build_pretrainer, run_architecture

VOCAB = 300


def padded_batch(batch=6, seq=32, seed=0, mask_prob=0.4):
    """Sequences of different lengths (so padding matters), ~40% of the real tokens labelled."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(seq // 4, seq + 1, (batch,), generator=g)
    lengths[0] = seq
    mask = (torch.arange(seq)[None, :] < lengths[:, None]).long()
    ids = torch.randint(5, VOCAB, (batch, seq), generator=g).masked_fill(mask == 0, 0)
    chosen = (torch.rand(ids.shape, generator=g) < mask_prob) & mask.bool()
    chosen[:, 0] = False  # [CLS] is never masked
    chosen[:, 1] = True
    types = (torch.arange(seq)[None, :] >= lengths[:, None] // 2).long() * mask
    return dict(input_ids=ids.masked_fill(chosen, 4), attention_mask=mask, token_type_ids=types,
                labels=torch.where(chosen, ids, IGNORE_INDEX), sentence_label=torch.randint(0, 2, (batch,), generator=g))


def pretrainer_pair(name: str):
    """The variant's default-run pretrainer (at a small vocabulary), fast and reference, same weights."""
    variant = VARIANTS[name]
    settings = variant.default_settings(seq_len=32)
    config = run_architecture(variant, settings, {}, vocab_size=VOCAB, pad_token_id=0)
    torch.manual_seed(0)
    fast = build_pretrainer(variant, settings, config)
    reference = build_pretrainer(variant, settings, config.replace(reference=True))
    reference.load_state_dict(fast.state_dict())
    return fast.train(), reference.train()


def step(pretrainer, batch):
    torch.manual_seed(1)  # ELECTRA's generator samples: the same noise on both paths
    loss, metrics = pretrainer(batch)
    loss.backward()
    return loss, metrics, {name: p.grad for name, p in pretrainer.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("unpad_from", [0.0, 1.0])  # the fast path unpadded, and on the padded grid
@pytest.mark.parametrize("name", ["albert", "bert", "electra"])
def test_one_reference_step_gives_the_fast_paths_loss_and_gradients(name, unpad_from, monkeypatch):
    monkeypatch.setattr(Encoder, "UNPAD_FROM", unpad_from)
    fast, reference = pretrainer_pair(name)
    batch = padded_batch()
    fast_loss, fast_metrics, fast_grads = step(fast, batch)
    ref_loss, ref_metrics, ref_grads = step(reference, batch)
    torch.testing.assert_close(ref_loss, fast_loss, rtol=1e-5, atol=1e-6)
    assert ref_metrics.keys() == fast_metrics.keys()
    assert ref_grads.keys() == fast_grads.keys() and fast_grads
    for name_, grad in fast_grads.items():
        torch.testing.assert_close(ref_grads[name_], grad, atol=1e-5, rtol=1e-4, msg=name_)


def test_the_reference_path_runs_none_of_the_speed_tricks(monkeypatch):
    """Not the same code twice: under --reference the fused loss, SDPA, the sparse last layer and
    unpadding never run, and on the fast path each of them does."""
    fast, reference = pretrainer_pair("albert")

    def trick(*args, **kwargs):
        raise AssertionError("a fast-path trick ran")

    tricks = [(LinearCrossEntropy, "apply"), (TokenLayout, "from_mask"), (F, "scaled_dot_product_attention"),
              (Encoder, "last_layer_at")]
    for owner, name in tricks:
        monkeypatch.setattr(owner, name, trick)
    step(reference, padded_batch())
    for owner, name in tricks:  # each one alone: the fast path runs it
        monkeypatch.undo()
        monkeypatch.setattr(Encoder, "UNPAD_FROM", 0.0)
        monkeypatch.setattr(owner, name, trick)
        with pytest.raises(AssertionError, match="fast-path trick"):
            step(fast, padded_batch())
