"""The fused vocabulary cross-entropy (heads.py) equals the plain one: loss, logits and all gradients."""

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from minibert.heads import LinearCrossEntropy

linear_cross_entropy = LinearCrossEntropy.apply


def make_inputs(n, e, v, seed, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    features = torch.randn(n, e, generator=g, dtype=dtype).requires_grad_()
    weight = torch.randn(v, e, generator=g, dtype=dtype).requires_grad_()
    bias = torch.randn(v, generator=g, dtype=dtype).requires_grad_()
    targets = torch.randint(0, v, (n,), generator=g)
    return features, weight, bias, targets


def plain(features, weight, bias, targets, scale=1.0):
    logits = F.linear(features, weight, bias)
    loss = F.cross_entropy(logits, targets)
    (loss * scale).backward()
    return loss, logits


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 12), e=st.integers(1, 9), v=st.integers(2, 40),
       scale=st.sampled_from([1.0, 0.5, 3.0]), seed=st.integers(0, 2**16))
def test_matches_plain_cross_entropy(n, e, v, scale, seed):
    ours_inputs = make_inputs(n, e, v, seed)
    ref_inputs = make_inputs(n, e, v, seed)
    loss, logits = linear_cross_entropy(*ours_inputs)
    (loss * scale).backward()
    ref_loss, ref_logits = plain(*ref_inputs, scale=scale)
    torch.testing.assert_close(loss, ref_loss)
    torch.testing.assert_close(logits, ref_logits.detach())
    assert not logits.requires_grad
    for ours, ref in zip(ours_inputs[:3], ref_inputs[:3]):
        torch.testing.assert_close(ours.grad, ref.grad)


def test_repeated_targets_accumulate():
    """Several rows with the same target: the one-hot correction must add up, not overwrite."""
    features, weight, bias, _ = make_inputs(6, 4, 10, seed=1)
    targets = torch.tensor([3, 3, 3, 7, 7, 0])
    ref = [t.detach().clone().requires_grad_() for t in (features, weight, bias)]
    linear_cross_entropy(features, weight, bias, targets)[0].backward()
    plain(*ref, targets)
    for ours, theirs in zip((features, weight, bias), ref):
        torch.testing.assert_close(ours.grad, theirs.grad)


def test_only_the_inputs_that_need_it_get_a_gradient():
    features, weight, bias, targets = make_inputs(5, 3, 11, seed=2)
    weight.requires_grad_(False)
    bias.requires_grad_(False)
    linear_cross_entropy(features, weight, bias, targets)[0].backward()
    assert features.grad is not None and weight.grad is None and bias.grad is None


def test_no_gradient_work_without_grad():
    features, weight, bias, targets = make_inputs(5, 3, 11, seed=3)
    with torch.no_grad():
        loss, _ = linear_cross_entropy(features, weight, bias, targets)
    assert not loss.requires_grad
    torch.testing.assert_close(loss, F.cross_entropy(F.linear(features, weight, bias), targets).detach())


def test_tied_weight_gradient_adds_to_other_uses():
    """The decoder weight is also the input embedding table: both gradients must sum."""
    features, weight, bias, targets = make_inputs(4, 3, 9, seed=4)
    ids = torch.tensor([1, 5, 5, 8])
    ref_weight = weight.detach().clone().requires_grad_()
    ref_bias = bias.detach().clone().requires_grad_()
    (linear_cross_entropy(features.detach() + F.embedding(ids, weight), weight, bias, targets)[0]).backward()
    F.cross_entropy(F.linear(features.detach() + F.embedding(ids, ref_weight), ref_weight, ref_bias), targets).backward()
    torch.testing.assert_close(weight.grad, ref_weight.grad)


@pytest.mark.parametrize("dtype", [torch.bfloat16])
def test_autocast_runs_matmuls_in_low_precision(dtype):
    features, weight, bias, targets = make_inputs(16, 32, 100, seed=5, dtype=torch.float32)
    with torch.autocast("cpu", dtype=dtype):
        loss, logits = linear_cross_entropy(features, weight, bias, targets)
    loss.backward()
    assert logits.dtype == dtype and loss.dtype == torch.float32
    assert features.grad.dtype == weight.grad.dtype == bias.grad.dtype == torch.float32
    ref_inputs = [t.detach().clone().requires_grad_() for t in (features, weight, bias)]
    ref_loss, _ = plain(*ref_inputs, targets)
    torch.testing.assert_close(loss, ref_loss, rtol=2e-2, atol=2e-2)
    for ours, ref in zip((features, weight, bias), ref_inputs):
        torch.testing.assert_close(ours.grad, ref.grad, rtol=5e-2, atol=5e-3)
